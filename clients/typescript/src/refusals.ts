/** How the SDK reads a refusal: a 422 whose problems all lie in named entities costs only those entities (each is
 * named once and sent alone until the service takes it); any other refusal is said once, with its fix. The Python
 * SDK's `refusals.py`, the same names (`retryAfterMs`: Python's `retry_after_ms`). */

import { errorLine, readError } from "./errors.js";
import type { Stats } from "./types.js";

const ENTITY_PATH = /^entities\[(\d+)\]\.?/;
export const NUMBER = /\d+(?:\.\d+)?/g; // the figures in a reason (seconds left, sizes): not a new kind of reason

/** Says a line once per key (the scheduler's SayOnce); `native`: the entities concerned use their native AI. */
export type Say = (key: string, message: string, native?: boolean) => void;

/** The entities the service refused (id -> why), and the lines that say a refusal once. */
export class Refusals {
  /** Entity id -> why the service refused it: sent alone until taken. */
  readonly alone = new Map<string, string>();

  constructor(
    private readonly say: Say,
    private readonly stats: Stats,
  ) {}

  /** The entities of a 422 whose every problem lies in one of the request's entities (`sent`: id -> type, in the
   * request's order), each with why, named once and sent alone from now on; null otherwise. */
  entities(status: number, body: unknown, sent: ReadonlyMap<string, string>): Map<string, string> | null {
    const found = refusedEntities(status, body, [...sent.keys()]);
    for (const [id, why] of found ?? []) {
      this.stats.refused++;
      this.alone.set(id, why);
      const said = `npcmind refused ${sent.get(id) ?? "entity"} ${JSON.stringify(id)} (${why}): the others go on without it, and it is sent alone until the service takes it`;
      this.say(`refused:${id}:${why}`, said);
    }
    return found;
  }

  /** Say a refusal of the whole request once (a countdown in its text is not a new refusal). */
  said(status: number, body: unknown, hosted: boolean): void {
    let msg = `npcmind answered ${status} ${readError(body).code}: ${errorLine(body, "")}`;
    if (status === 401 && !hosted) msg += " (the service runs the hosted profile: give DecideClient its apiKey)";
    this.say(`${status}:${msg.replace(NUMBER, "#")}`, msg);
  }
}

/** A Retry-After past an hour waits an hour: 1e400 seconds would be never again. */
export const MAX_RETRY_AFTER_S = 3600;

/** How long a 429 or 5xx asks us to wait (its Retry-After in seconds, at most MAX_RETRY_AFTER_S), in ms; else a
 * second. */
export function retryAfterMs(headers: Record<string, string>): number {
  const retry = headers["retry-after"];
  return retry !== undefined && /^\d+(\.\d+)?$/.test(retry) ? Math.min(Number(retry), MAX_RETRY_AFTER_S) * 1000 : 1000;
}

/** The entities of a 422 whose every problem lies in one of the request's entities (`sent`: their ids in the
 * request's order), each with why; null when a problem lies in the whole request (world, scope, a field). */
export function refusedEntities(status: number, body: unknown, sent: readonly string[]): Map<string, string> | null {
  const details = status === 422 ? readError(body).details : [];
  if (details.length === 0) return null;
  const why = new Map<string, string[]>();
  for (const d of details) {
    const m = ENTITY_PATH.exec(d.path);
    const id = m ? sent[Number(m[1])] : undefined;
    if (m === null || id === undefined) return null;
    const problems = why.get(id) ?? [];
    problems.push(`${d.path.slice(m[0].length) || "entity"}: ${d.message}`);
    why.set(id, problems);
  }
  return new Map([...why].map(([id, problems]) => [id, problems.join("; ")]));
}
