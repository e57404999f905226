// tick() with 1,000 tracked entities, on the game loop's thread, in the shape bench/tick_bench.py prints:
// steady: a tick with nothing due (every entity decided, no refresh, no telemetry yet): what every frame costs;
//         DecideClient.tick() itself, its fetch a stub that answers at once (the network is not timed).
// wave:   a tick where every entity is due at once (a new epoch, or a refresh wave): the scheduler sorts the
//         1,000, picks 64 (4 requests in flight of 16) and builds and encodes those requests (after 100 waves
//         unmeasured: V8 compiles the hot paths first, as in a game's first seconds).
// Run: npm run build && node bench/tick.mjs [--ticks 5000]
import { DecideClient, Scheduler } from "../dist/src/index.js";

const N = 1000;
const at = process.argv.indexOf("--ticks");
const TICKS = at > 0 ? Number(process.argv[at + 1]) : 5000;
const OBS = { hp_fraction: 0.5, distance_to_player: 40.0, sees_player: true, current_action: "wander" };
const LEGAL = ["idle", "wander", "chase", "flee"];
const manifest = { types: { bee: { refresh_ms: 4000, ttl_ms: 12000 } } };

/** A fetch that answers every decide request at once with an AI decision for each entity. */
async function answering(_url, init) {
  const body = JSON.parse(init.body ?? "{}");
  const decisions = (body.world ? body.entities : []).map((e) => ({
    source: "AI",
    id: e.id,
    action: "flee",
    label: "Flee",
    confidence: 0.9,
    ttl_ms: 12000,
    decision_id: `d-${e.id}`,
    cached: false,
  }));
  return new Response(JSON.stringify({ a2g: "0.1", epoch: 0, latency_ms: 1, decisions }), { status: 200 });
}

function percentiles(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const mid = s.length / 2;
  const p50 = s.length % 2 ? s[Math.floor(mid)] : (s[mid - 1] + s[mid]) / 2;
  return [p50, s[Math.floor(s.length * 0.99) - 1]];
}

async function steady() {
  let now = 0;
  const c = new DecideClient("http://127.0.0.1:9", "bench", {
    fetch: answering,
    manifest,
    timeoutMs: 60_000,
    clock: () => now,
    log: () => {},
  });
  for (let i = 0; i < N; i++) c.track(`e${i}`, "bee", OBS, LEGAL, { position: [i, 0] });
  while (c.stats.ai < N) {
    c.tick();
    await new Promise((r) => setTimeout(r, 0));
  }
  c.tick(); // the last answers applied
  now = 100; // within the refresh and the telemetry period: nothing due
  const times = [];
  for (let i = 0; i < TICKS; i++) {
    const t0 = performance.now();
    c.tick();
    times.push(performance.now() - t0);
  }
  if (c.stats.requests !== Math.ceil(N / 16)) throw new Error(`the steady state sent a request (${c.stats.requests})`);
  c.close();
  return percentiles(times);
}

function wave() {
  const s = new Scheduler({ clientId: "bench", manifest, timeoutMs: 60_000, log: () => {} });
  for (let i = 0; i < N; i++) s.roster.track(`e${i}`, "bee", OBS, LEGAL, { position: [i, 0] }, 0);
  const times = [];
  const empty = { a2g: "0.1", epoch: 0, latency_ms: 1, decisions: [] };
  const warm = 100; // V8 compiles the hot paths over the first waves (a game's first seconds): not counted
  for (let k = 0; k < warm + Math.max(TICKS / 10, 50); k++) {
    const now = 5000 + k;
    s.roster.setEpoch(k + 1, now); // every entity due now
    const t0 = performance.now();
    const sent = s.tick(now); // built and encoded (JSON text) in the tick
    if (k >= warm) times.push(performance.now() - t0);
    for (const r of sent) s.answer(r.ref, 200, empty, {}, now);
  }
  return percentiles(times);
}

const [sp50, sp99] = await steady();
const [wp50, wp99] = wave();
console.log(
  JSON.stringify({
    lang: "typescript",
    entities: N,
    steady_p50_ms: sp50,
    steady_p99_ms: sp99,
    wave_p50_ms: wp50,
    wave_p99_ms: wp99,
  }),
);
