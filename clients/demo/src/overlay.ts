/** The panel beside the field: what runs the characters (in words that match what the field shows), the
 * legend with how many characters act on each source now, the SDK's counters, and the tokens spent. */

import type { Stats } from "./brain.js";
import type { Sent } from "./game.js";
import type { ServiceState } from "./service.js";
import { COLOURS, SOURCES, sourceWord } from "./sources.js";
import type { Source } from "./world.js";

const MEANING: Record<Source, (scripted: boolean) => string> = {
  AI: (scripted) => (scripted ? "fixed rules, not a model" : "decided by the model"),
  cached: () => "an answer npcmind reused",
  local: () => "learned, runs in the game",
  native: () => "game code, as a fallback",
};

/** What the characters run while npcmind gives no new decisions: those still holding one keep it until it
 * expires (its TTL), so "every character runs its native AI" is said only once it is true. */
function nativeWords(c: Record<Source, number>): string {
  const held = c.AI + c.cached + c.local;
  if (held === 0) return "every character runs its native AI";
  return `${held} of ${held + c.native} characters still act on earlier decisions until these expire, the other ${c.native} run their native AI`;
}

/** Why the characters decide as they do, in one line a person can act on; `c`: characters by source now. */
export function modeLine(s: ServiceState, c: Record<Source, number>): [string, string] {
  if (s.up === null) return ["starting", "asking npcmind…"];
  if (!s.up) return ["down", `npcmind is not answering (stopped?): ${nativeWords(c)} until it is back.`];
  if (s.provider === "none") {
    return ["none", `No model: ${nativeWords(c)} (fallback unavailable). Turn a model on: OPENAI_API_KEY=sk-... npcmind demo`];
  }
  if (s.model === "scripted") return ["scripted", "Provider: scripted, not a model (npcmind scripted-provider answers by fixed rules)."];
  return ["model", `Model: ${s.provider} ${s.model ?? ""}${s.ready ? "" : ` (not ready: ${s.note})`}`];
}

function setText(el: Element | null, text: string): void {
  if (el && el.textContent !== text) el.textContent = text;
}

/** The legend's rows, made once: a swatch in the source's colour, its word, what it means, a count. */
function legendRows(doc: Document): HTMLElement[] {
  const list = doc.getElementById("legend");
  if (!list) return [];
  if (list.children.length === 0) {
    for (const k of SOURCES) {
      const li = doc.createElement("li");
      li.dataset["source"] = k;
      for (const part of ["swatch", "word", "meaning", "count"]) li.appendChild(doc.createElement("span")).className = part;
      (li.firstElementChild as HTMLElement).style.background = COLOURS[k];
      list.appendChild(li);
    }
  }
  return Array.from(list.children) as HTMLElement[];
}

/** The mode line and the legend, every frame (they must agree with the field as drawn). */
export function showState(doc: Document, s: ServiceState, counts: Record<Source, number>): void {
  const [mode, line] = modeLine(s, counts);
  const el = doc.getElementById("mode");
  if (el) {
    setText(el, line);
    if (el.dataset["mode"] !== mode) el.dataset["mode"] = mode;
  }
  const scripted = s.model === "scripted";
  for (const li of legendRows(doc)) {
    const k = li.dataset["source"] as Source;
    setText(li.querySelector(".word"), sourceWord(k, scripted));
    setText(li.querySelector(".meaning"), MEANING[k](scripted));
    setText(li.querySelector(".count"), String(counts[k]));
  }
}

function fallbacks(st: Stats): string {
  const parts = Object.entries(st.fallbacks).map(([k, v]) => `${k} ${v}`);
  return parts.length ? parts.join(", ") : "none";
}

/** The mean time from a request's send to each entity's decision line: what streaming shortens. */
function streamed(st: Stats, long = false): string {
  if (st.streamedDecisions === 0) return "";
  const mean = Math.round(st.streamedMsTotal / st.streamedDecisions);
  return long ? `; each decision came ${mean} ms after its request on average (streamed)` : `, ${mean} ms each`;
}

/** The counters (four times a second: figures that change every frame cannot be read), one tile each. */
export function showCounters(doc: Document, st: Stats, sent: Sent, s: ServiceState): void {
  const tiles: [string, number, string, string?][] = [
    ["requests", st.requests, `${st.asked} asked${streamed(st)}`, `${st.asked} entities asked${streamed(st, true)}`],
    ["decisions", st.ai, `cache ${st.cached}, policy ${st.local}`],
    ["fallbacks", Object.values(st.fallbacks).reduce((a, b) => a + b, 0), fallbacks(st)],
    ["errors", st.errors, "requests unanswered"],
    ["sent back", sent.events + st.reportsSent, `${sent.events} events, ${st.reportsSent} reports`],
    ["tokens", s.tokensIn + s.tokensOut, `${s.tokensIn} in · ${s.tokensOut} out`, `${s.tokensCached} of the input cached`],
  ];
  const box = doc.getElementById("stats");
  if (!box) return;
  if (box.children.length === 0) {
    for (const [k] of tiles) {
      const tile = box.appendChild(doc.createElement("div"));
      tile.dataset["k"] = k;
      for (const part of ["value", "name", "detail"]) tile.appendChild(doc.createElement("span")).className = part;
    }
  }
  for (const [k, value, detail, more] of tiles) {
    const tile = box.querySelector<HTMLElement>(`[data-k="${k}"]`);
    if (tile && tile.title !== (more ?? detail)) tile.title = more ?? detail; // a pointer reads what is cut
    setText(tile?.querySelector(".value") ?? null, String(value));
    setText(tile?.querySelector(".name") ?? null, k);
    setText(tile?.querySelector(".detail") ?? null, detail);
  }
}
