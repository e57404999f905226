// tick() with 1,000 tracked entities, in the game loop's own thread: the steady state (nothing due) and a tick
// where a refresh wave is due (requests built and handed to fetch). No service is needed: fetch is a stub
// that never answers, so only the SDK's own work is timed. Prints one JSON line; bench/tick_bench.py runs it.
// Run: npm run build && node bench/tick.mjs [entities] [rounds]
import { DecideClient } from "../dist/src/index.js";

const N = Number(process.argv[2] ?? 1000);
const ROUNDS = Number(process.argv[3] ?? 2000);
const never = () => new Promise(() => {}); // requests stay in flight: the bench times tick(), not the network
const manifest = { types: { bee: { refresh_ms: 4000, ttl_ms: 12000 } } };
const obs = { hp_fraction: 0.5, distance_to_player: 90, sees_player: true, current_action: "chase" };
const legal = ["idle", "wander", "chase", "flee"];

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
}

function client(maxInFlight) {
  let now = 0;
  const c = new DecideClient("http://127.0.0.1:9", "bench", { fetch: never, manifest, maxInFlight, timeoutMs: 1e9, clock: () => now, log: () => {} });
  for (let i = 0; i < N; i++) c.track(`e${i}`, "bee", obs, legal);
  return { c, at: (t) => (now = t) };
}

function steady() {
  const { c, at } = client(4);
  at(0);
  c.tick(0); // the first wave goes out; the rest are spread over later frames
  for (let t = 16; t < 4000; t += 16) c.tick(t); // every entity asked once; none due again before 4000 ms
  const times = [];
  for (let i = 0; i < ROUNDS; i++) {
    const t = 4000 - 1 - (ROUNDS - i) * 0.001;
    const start = performance.now();
    c.tick(t);
    times.push(performance.now() - start);
  }
  return times.sort((a, b) => a - b);
}

function wave() {
  const times = [];
  for (let i = 0; i < Math.max(20, ROUNDS / 50); i++) {
    const { c } = client(1_000_000); // every due entity goes out in this one tick: the worst frame
    const start = performance.now();
    c.tick(0);
    times.push(performance.now() - start);
  }
  return times.sort((a, b) => a - b);
}

const s = steady();
const w = wave();
const r = (x) => Math.round(x * 10000) / 10000;
console.log(JSON.stringify({ lang: "typescript", entities: N, steady_p50_ms: r(percentile(s, 50)), steady_p99_ms: r(percentile(s, 99)), wave_p50_ms: r(percentile(w, 50)), wave_p99_ms: r(percentile(w, 99)) }));
