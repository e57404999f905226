/** Where a character's action came from, as the page shows it: one colour and one word per source, so the
 * field, the legend and the plot cannot disagree about what a colour means. */

import type { Doing, Source } from "./world.js";

/** The sources in the order the legend and the plot list them. */
export const SOURCES: readonly Source[] = ["AI", "cached", "local", "native"];

/** A colour per source (Okabe-Ito, told apart with colour-blindness too), bright on the dark field. */
export const COLOURS: Record<Source, string> = { AI: "#56b4e9", cached: "#cc79a7", local: "#f0e442", native: "#e4572e" };

/** The word for a source: an `AI` decision from the scripted provider was made by rules, not by a model. */
export function sourceWord(source: Source, scripted: boolean): string {
  if (source === "AI") return scripted ? "scripted" : "model";
  return { cached: "cache", local: "policy", native: "native AI" }[source];
}

/** "chase · model", "wander · native AI (unavailable)"; `arrival`: with when its decision came ("· in 412 ms"). */
export function describe(d: Doing, scripted: boolean, arrival = false): string {
  const word = sourceWord(d.source, scripted);
  const when = arrival && d.ms !== null ? ` · in ${Math.round(d.ms)} ms` : "";
  return `${d.action} · ${word}${d.source === "native" && d.code ? ` (${d.code})` : ""}${when}`;
}

/** How many of these characters act on each source now. */
export function countBySource(doings: readonly Doing[]): Record<Source, number> {
  const counts: Record<Source, number> = { AI: 0, cached: 0, local: 0, native: 0 };
  for (const d of doings) counts[d.source] += 1;
  return counts;
}
