/** Reading a /v1/decide answer: checked against the protocol before anything of it reaches the game. */

import { isObject } from "./errors.js";
import { MAX_STRAY_LINES } from "./limits.js";
import type { components } from "./wire.js";

export type AIDecision = components["schemas"]["AIDecision"];
export type FallbackDecision = components["schemas"]["FallbackDecision"];
export type DecideResponse = components["schemas"]["DecideResponse"];
/** The last line of a streamed answer: what an unstreamed answer carries besides `decisions`. */
export type StreamEnd = components["schemas"]["DecideEnd"];

const CODES = new Set(["budget", "busy", "invalid_choice", "refused", "unavailable"]);
const AI_FIELDS: [string, string][] = [
  ["id", "string"],
  ["action", "string"],
  ["label", "string"],
  ["ttl_ms", "number"],
  ["decision_id", "string"],
  ["cached", "boolean"],
];

/** The protocol's bound on ttl_ms and the like: a double holds every integer up to it. */
const MAX_INTEGER = 2 ** 53 - 1;

/** A ttl_ms's problem: within the protocol's bound (Infinity would be a decision that never expires). */
function ttlProblem(ttl: unknown, at: string): string | null {
  if (typeof ttl !== "number" || !Number.isInteger(ttl)) return `${at}.ttl_ms: must be an integer`;
  return Math.abs(ttl) <= MAX_INTEGER ? null : `${at}.ttl_ms: out of range (at most ${MAX_INTEGER})`;
}

/** One decision's problem, or null when it has the protocol's shape. */
function decisionProblem(d: unknown, at: string): string | null {
  if (!isObject(d)) return `${at}: not an object`;
  if (d["source"] === "AI") {
    for (const [name, kind] of AI_FIELDS) if (typeof d[name] !== kind) return `${at}.${name}: must be a ${kind}`;
    const confidence = d["confidence"];
    if (confidence !== null && (typeof confidence !== "number" || !Number.isFinite(confidence)))
      return `${at}.confidence: must be a finite number`; // 1e400 parses as Infinity
    return ttlProblem(d["ttl_ms"], at);
  }
  if (d["source"] === "FALLBACK") {
    if (typeof d["id"] !== "string") return `${at}.id: must be a string`;
    if (!CODES.has(String(d["code"]))) return `${at}.code: not a known fallback code`;
    if (typeof d["reason"] !== "string") return `${at}.reason: must be a string`;
    return d["ttl_ms"] === undefined ? null : ttlProblem(d["ttl_ms"], at);
  }
  return `${at}.source: must be AI or FALLBACK`;
}

/** The answer, or what is wrong with it (not npcmind, or another protocol version: never into the game).
 * `asked`: the entities the request carried, one decision each, and MAX_STRAY_LINES more at most (ids not
 * asked, repeats): an answer with more is refused before any is read (bounded work in the game's tick). */
export function readDecideResponse(body: unknown, asked: number | null = null): DecideResponse | string {
  if (!isObject(body)) return "not a JSON object";
  const error = body["error"];
  if (!("epoch" in body) && isObject(error)) return String(error["message"] ?? "an error, with a 200");
  if (typeof body["epoch"] !== "number") return "epoch: must be a number";
  const decisions = body["decisions"];
  if (!Array.isArray(decisions)) return "decisions: must be an array";
  if (asked !== null && decisions.length > asked + MAX_STRAY_LINES)
    return (
      `decisions: ${decisions.length.toLocaleString("en-US")} decisions for ${asked} entities asked (one each, ` +
      `and at most ${MAX_STRAY_LINES} more: MAX_STRAY_LINES)`
    );
  for (let i = 0; i < decisions.length; i++) {
    const problem = decisionProblem(decisions[i], `decisions[${i}]`);
    if (problem !== null) return problem;
  }
  return body as unknown as DecideResponse;
}

/** One line of a streamed answer (docs/streaming.md): a decision (it has `source`), the last line (it has
 * `a2g`), or what is wrong with it, checked like a whole answer's decisions before it reaches the game. */
export function readStreamLine(line: string): { decision: AIDecision | FallbackDecision } | { end: StreamEnd } | string {
  let d: unknown;
  try {
    d = JSON.parse(line);
  } catch {
    return `not JSON: ${line.slice(0, 80)}`;
  }
  if (isObject(d) && "source" in d) {
    const problem = decisionProblem(d, "line");
    return problem ?? { decision: d as unknown as AIDecision | FallbackDecision };
  }
  if (!isObject(d) || typeof d["a2g"] !== "string") return "line: neither a decision (source) nor the last line (a2g)";
  if (typeof d["epoch"] !== "number") return "line.epoch: must be a number";
  if (typeof d["latency_ms"] !== "number") return "line.latency_ms: must be a number";
  return { end: d as unknown as StreamEnd };
}
