/** Each type's refresh and decision life, from the service's manifest (GET /v1/manifest), and the service's
 * provider deadline (GET /v1/health): a client that kept its own would re-ask too often or give up too soon.
 * The Python SDK's `timings.py`, the same names (ms throughout here, as there). */

import { isObject } from "./errors.js";

export const DEFAULT_REFRESH_MS = 4000;
export const DEFAULT_TTL_MS = 12000;

/** What the timings read of a tracked entity: when it was asked, and when it is due. */
export interface Asked {
  readonly type: string;
  readonly askedAt: number;
  due: number;
}

/** Refresh and ttl per type (ms); the defaults hold until the manifest is known. */
export class Timings {
  private types: Map<string, [number, number]> | null = null; // type -> [refresh_ms, ttl_ms]
  /** GET /v1/manifest is out. */
  asked = false;

  /** `refreshMs`: the game's own, over every type's; `manifest`: when it is known already. */
  constructor(
    private readonly refreshMs: number | null,
    manifest: Record<string, unknown> | null,
  ) {
    if (manifest) this.load(manifest);
  }

  /** Whether a manifest was read. */
  get known(): boolean {
    return this.types !== null;
  }

  /** The type's refresh and ttl, in ms. */
  of(type: string): [number, number] {
    const [refresh, ttl] = this.types?.get(type) ?? [DEFAULT_REFRESH_MS, DEFAULT_TTL_MS];
    return [this.refreshMs ?? refresh, ttl];
  }

  /** Take the answer to GET /v1/manifest; false when it holds none (asked again later). Entities asked before
   * it came are due again on their type's refresh. */
  read(status: number, body: unknown, entities: Iterable<Asked>): boolean {
    this.asked = false;
    const data = status === 200 && isObject(body) ? body["manifest"] : null;
    if (!isObject(data)) return false;
    this.load(data);
    for (const e of entities) e.due = Math.min(e.due, e.askedAt + this.of(e.type)[0]);
    return true;
  }

  private load(data: Record<string, unknown>): void {
    const defaults = isObject(data["defaults"]) ? data["defaults"] : {};
    const types = isObject(data["types"]) ? data["types"] : {};
    this.types = new Map();
    const refresh = ms(defaults["refresh_ms"], DEFAULT_REFRESH_MS);
    const ttl = ms(defaults["ttl_ms"], DEFAULT_TTL_MS);
    for (const [name, t] of Object.entries(types)) {
      const one = isObject(t) ? t : {};
      this.types.set(name, [ms(one["refresh_ms"], refresh), ms(one["ttl_ms"], ttl)]);
    }
  }
}

/** The manifest's bound on ttl_ms and the like (every integer up to it is exact in a double). */
const MAX_MS = 2 ** 53 - 1;

/** A positive whole number of ms from the manifest, else `fallback`: a string, NaN or an infinity from a broken
 * or hostile service never becomes a refresh that is never due (Python: `_ms`, the same). */
function ms(value: unknown, fallback: number): number {
  return typeof value === "number" && value > 0 && value <= MAX_MS ? Math.trunc(value) : fallback;
}

/** The service's provider deadline in ms, from a GET /v1/health answer, or null (an older service). Python:
 * `deadline_timeout`, in seconds. */
export function deadlineTimeoutMs(status: number, body: unknown): number | null {
  const deadline = status === 200 && isObject(body) ? body["deadline_ms"] : null;
  return typeof deadline === "number" && deadline > 0 && deadline <= MAX_MS ? deadline : null;
}
