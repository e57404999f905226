// tick() of a game (60 frames a second, 100 bees) against a hostile npcmind: bench/amplify/sdk_python.py's
// server, in its own process (a policy of eight 100,000-digit numbers every 200 ms, decide streams of
// 60,000-digit confidences that never end, a 600 MB body for every telemetry and report). Prints one JSON
// line: tick()'s p50, p99 and max, the p99 and max from one frame's start to the next (what holds the game
// between its ticks too), the peak memory, and what the SDK said once each.
// Run: python bench/amplify/sdk_typescript.py --tick (it starts the server), or node bench/hostile.mjs URL [s]
import { DecideClient } from "../dist/src/index.js";

const url = process.argv[2];
const seconds = Number(process.argv[3] ?? "10");
const said = [];
const c = new DecideClient(url, "hostile-bench", {
  epoch: 1,
  manifest: { types: { bee: { refresh_ms: 1000, ttl_ms: 60_000 } } },
  manifestVersion: "v1",
  timeoutMs: 60_000,
  policyRefreshMs: 200,
  telemetryMs: 200,
  log: (m) => said.push(m.slice(0, 90)),
});
for (let i = 0; i < 100; i++) c.track(`b${i}`, "bee", { hp: 1 }, ["flee", "chase"]);
const samples = [];
const gaps = []; // from one frame's start to the next: what holds the game between its ticks too
let peak = 0;
const end = performance.now() + seconds * 1000;
let last = performance.now();
while (performance.now() < end) {
  const t0 = performance.now();
  gaps.push(t0 - last);
  last = t0;
  c.tick();
  const took = performance.now() - t0;
  samples.push(took);
  peak = Math.max(peak, process.memoryUsage().rss);
  await new Promise((r) => setTimeout(r, Math.max(0, 1000 / 60 - took)));
}
c.close();
samples.sort((a, b) => a - b);
const apart = gaps.slice(1).sort((a, b) => a - b);
const round = (x) => Math.round(x * 1000) / 1000;
console.log(
  JSON.stringify({
    sdk: "typescript",
    ticks: samples.length,
    p50_ms: round(samples[Math.floor(samples.length / 2)]),
    p99_ms: round(samples[Math.floor(samples.length * 0.99) - 1]),
    max_ms: round(samples[samples.length - 1]),
    frame_p99_ms: round(apart[Math.floor(apart.length * 0.99) - 1]),
    frame_max_ms: round(apart[apart.length - 1]),
    peak_rss_mb: Math.round(peak / 1e5) / 10,
    streams_cut: c.stats.streamsCut,
    requests: c.stats.requests,
    said,
  }),
);
process.exit(0);
