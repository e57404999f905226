/** The panel beside the field: what runs the bees, the SDK's counters, the tokens spent, and the link to
 * the page of what the model saw. */

import type { Stats } from "./brain.js";
import type { Sent } from "./game.js";
import type { ServiceState } from "./service.js";

/** Why the bees decide as they do, in one line a person can act on. */
export function modeLine(s: ServiceState): [string, string] {
  if (s.up === null) return ["starting", "asking npcmind…"];
  if (!s.up) return ["down", "npcmind is not answering (stopped?): every bee runs its native AI until it is back."];
  if (s.provider === "none") {
    return ["none", "No model: every bee runs its native AI (fallback unavailable). Turn a model on: OPENAI_API_KEY=sk-... npcmind demo"];
  }
  if (s.model === "scripted") return ["scripted", "Provider: scripted, not a model (npcmind scripted-provider answers by fixed rules)."];
  return ["model", `Model: ${s.provider} ${s.model ?? ""}${s.ready ? "" : ` (not ready: ${s.note})`}`];
}

function fallbacks(st: Stats): string {
  const parts = Object.entries(st.fallbacks).map(([k, v]) => `${k} ${v}`);
  return parts.length ? parts.join(", ") : "none";
}

/** Write the panel (a few text nodes, four times a second). */
export function showOverlay(doc: Document, st: Stats, sent: Sent, s: ServiceState): void {
  const [mode, line] = modeLine(s);
  const el = doc.getElementById("mode");
  if (el) {
    el.textContent = line;
    el.dataset["mode"] = mode;
  }
  const rows: [string, string][] = [
    ["requests", String(st.requests)],
    ["entities asked", String(st.asked)],
    ["AI decisions", `${st.ai} (cached ${st.cached})`],
    ["local", String(st.local)],
    ["fallbacks", fallbacks(st)],
    ["errors", String(st.errors)],
    ["events sent", String(sent.events)],
    ["reports sent", String(st.reportsSent)],
    ["tokens", `${s.tokensIn} in (${s.tokensCached} cached), ${s.tokensOut} out`],
  ];
  const table = doc.getElementById("stats");
  if (table) table.textContent = rows.map(([k, v]) => `${k.padEnd(15)} ${v}`).join("\n");
}
