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
  if (s.cut) return ["cut", "The model is cut: the cache and the learned policy answer what they can, the rest runs its native AI."];
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
    ["decisions", st.ai, `cache ${st.cached} of these; policy ${st.local} more`, `the service's AI decisions, ${st.cached} of them from its cache; ${st.local} more made in the game by the learned policy`],
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

/** What the page's decisions cost against a naive game that makes one model call a character each time one
 * needs a decision (every decision the SDK asked of the service or took from the policy): its calls, and its
 * input tokens at the static prefix plus what a decided entity added on average to the real calls (a lower
 * bound: a call of one also sends the shared scene once). */
export interface Cost {
  calls: number;
  naiveCalls: number;
  tokens: number;
  naiveTokens: number | null; // null until a fresh decision tells what an entity costs
}

/** The cost now, from the SDK's counters and the service's. */
export function costOf(st: Stats, s: ServiceState): Cost {
  const naiveCalls = st.asked + st.local;
  const fresh = st.ai - st.cached;
  let naiveTokens: number | null = null;
  if (s.staticTokens !== null && fresh > 0 && s.callsOk > 0) {
    const perEntity = Math.max(0, s.tokensIn - s.callsOk * s.staticTokens) / fresh;
    naiveTokens = Math.round(naiveCalls * (s.staticTokens + perEntity));
  }
  return { calls: s.calls, naiveCalls, tokens: s.tokensIn, naiveTokens };
}

const short = (n: number): string => (n >= 10_000 ? `${Math.round(n / 1000)}k` : n.toLocaleString("en-US"));

/** The cost strip: per row npcmind's figure, the naive one, and a bar of their ratio. */
export function showCost(doc: Document, c: Cost): void {
  const rows: [string, number, number | null][] = [
    ["model calls", c.calls, c.naiveCalls],
    ["input tokens", c.tokens, c.naiveTokens],
  ];
  const box = doc.getElementById("cost");
  if (!box) return;
  if (box.children.length === 0) {
    for (const [k] of rows) {
      const row = box.appendChild(doc.createElement("div"));
      row.dataset["k"] = k;
      for (const part of ["name", "value", "naive", "bar"]) row.appendChild(doc.createElement("span")).className = part;
      row.querySelector(".bar")?.appendChild(doc.createElement("i"));
    }
  }
  for (const [k, value, naive] of rows) {
    const row = box.querySelector<HTMLElement>(`[data-k="${k}"]`);
    const share = naive ? Math.min(1, value / naive) : null;
    setText(row?.querySelector(".name") ?? null, k);
    setText(row?.querySelector(".value") ?? null, short(value));
    setText(row?.querySelector(".naive") ?? null, naive === null ? "naive: —" : `naive ${short(naive)} · ${share === null ? "—" : `${Math.round(share * 100)}%`}`);
    const bar = row?.querySelector<HTMLElement>(".bar i");
    if (bar) bar.style.width = `${Math.round((share ?? 0) * 100)}%`;
  }
}

/** The learned policy's line: learning, or which types it decides and how well it agrees with the model. */
export function learnedWords(s: ServiceState, local: number): string {
  if (s.learnEvery === null) return "No learning (npcmind demo --no-learn, or without the distill extra).";
  if (s.policy === null) return `Learning: npcmind demo distils a policy from the model's decisions every ${s.learnEvery} s (100 a type).`;
  const types = Object.entries(s.policy.types).map(([t, v]) => `${t} (${v.trained_on} decisions, ${Math.round(v.agreement * 100)}% agree)`);
  return `Learned policy for ${types.join(", ")}: ${local} decisions made in the game, no call.`;
}
