// The TypeScript half of bench/policy_bench.py (run by it): node policy_bench.mjs POLICY_JS BIG_JSON SMALL_JSON
import { readFileSync } from "node:fs";
const { Policy } = await import(process.argv[2]);
const t = (f, n = 1) => { const s = performance.now(); for (let i = 0; i < n; i++) f(); return (performance.now() - s) / n; };
const refuse = (s) => { try { Policy.load(s); } catch {} };
const shapes = {
  "escaped quotes (the finding)": (n) => '{"format":"npcmind-policy","format_version":1,"x":"' + '\\"'.repeat(n / 2),
  quotes: (n) => '{"x":[' + '"'.repeat(n) + "]}",
  brackets: (n) => "[" + "[],".repeat(Math.floor(n / 3)) + "[]]",
};
console.log("TypeScript SDK (Node " + process.version + ")");
for (const [name, shape] of Object.entries(shapes)) {
  const [a, b, c, d] = [64 * 1024, 128 * 1024, 8 * 2 ** 20, 16 * 2 ** 20 - 4096].map((n) => { const s = shape(n); refuse(s); return t(() => refuse(s), n > 1e6 ? 3 : 50); });
  console.log(`  refuse ${name}: 64 KB ${a.toFixed(2)} ms, 128 KB ${b.toFixed(2)} ms (x${(b / a).toFixed(2)}); 8 MiB ${(c / 1e3).toFixed(2)} s, 16 MiB ${(d / 1e3).toFixed(2)} s (x${(d / c).toFixed(2)})`);
}
const bigText = readFileSync(process.argv[3], "utf8");
const small = Policy.load(readFileSync(process.argv[4], "utf8"));
const lt = t(() => Policy.load(bigText));
const p = Policy.load(bigText);
const obs = { hp_fraction: 0.3, distance_to_player: 50, sees_player: true, current_action: "idle" };
const legal = ["idle", "wander", "chase", "flee"];
t(() => small.choose("bee", obs, legal), 100000); t(() => p.choose("bee", obs, legal), 100000);
const s = t(() => small.choose("bee", obs, legal), 200000), b = t(() => p.choose("bee", obs, legal), 200000);
const wide = Object.fromEntries(Array.from({ length: 8 }, (_, i) => ["f" + i, 0.5]));
const all = Array.from({ length: 256 }, (_, i) => "a" + i);
const w = t(() => p.choose("widest", wide, all), 5000);
console.log(`  a valid ${(bigText.length / 2 ** 20).toFixed(1)} MiB policy: loaded in ${(lt / 1e3).toFixed(2)} s`);
console.log(`  choose on the bee: small file ${(s * 1e3).toFixed(2)} us, 16 MiB file ${(b * 1e3).toFixed(2)} us (x${(b / s).toFixed(2)})`);
console.log(`  choose on the widest type allowed (32 trees, 256 actions all legal): ${(w * 1e3).toFixed(0)} us`);
