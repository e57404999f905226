/** The per-entity rules (no I/O): tracking, events, the epoch, population changes, cascade, and applying a
 * decision to the entity it names; the scheduler keeps the requests and answers. */

import type { AIDecision, FallbackDecision } from "./answer.js";
import type { SayOnce } from "./say.js";
import { OUTCOMES } from "./types.js";
import type { Choice, Entity, Outcome, Stats, TrackOptions } from "./types.js";

/** The cascade's choice for an entity (action, confidence), or null: the service decides. */
export type Chooser = (entity: Entity) => readonly [string, number] | null;

export const REASK_GAP_MS = 500; // a change of population re-asks everyone, at most this often
const NUMBER = /\d+(?:\.\d+)?/g; // the figures in a reason: not a new kind of reason

/** The entities of one game, on the scheduler's clock (ms). */
export class Roster {
  readonly entities = new Map<string, Entity>();
  epoch: number;
  readonly choose: Chooser;
  threshold: number;
  private windowEnd = Number.NEGATIVE_INFINITY; // events until then go out together, when it ends
  private count = 0;
  private lastReask = Number.NEGATIVE_INFINITY;
  private reaskPending = false;

  constructor(
    epoch: number,
    private readonly windowMs: number,
    choose: Chooser,
    threshold: number,
    private readonly stats: Stats,
    private readonly say: SayOnce,
  ) {
    this.epoch = epoch;
    this.choose = choose;
    this.threshold = threshold;
  }

  /** Add an entity that decides, or update what it sees and may do now (not asked again for that alone:
   * on its refresh, on an event, or when the population changes). */
  track(
    id: string,
    type: string,
    observation: Record<string, unknown>,
    legalActions: string[],
    options: TrackOptions,
    now: number,
  ): void {
    const e = this.entities.get(id);
    const position = options.position ?? null;
    const profile = options.profile ?? null;
    const parent = options.parent ?? null;
    const state = options.state ?? null;
    if (e === undefined) {
      const fresh = {
        trigger: null,
        due: now,
        askedAt: Number.NEGATIVE_INFINITY,
        inFlight: false,
        choice: null,
        changed: true,
      };
      this.entities.set(id, { id, type, observation, legalActions, position, profile, parent, state, ...fresh });
      return;
    }
    if (e.type !== type) {
      e.choice = null;
      e.due = now;
    }
    // kept by reference (this runs for every entity of every frame); copied when a request is built
    e.type = type;
    e.observation = observation;
    e.legalActions = legalActions;
    e.position = position;
    e.profile = profile;
    e.parent = parent;
    e.state = state;
    e.changed = true;
  }

  /** Something happened to the entity: asked when the event window it opened or joined ends. False (said
   * once) for an entity not tracked: a game loop must not crash on the order of two calls. */
  event(id: string, trigger: string, now: number): boolean {
    const e = this.entities.get(id);
    if (e === undefined) {
      this.say.say(
        `event:${trigger}`,
        `event(${JSON.stringify(id)}, ${JSON.stringify(trigger)}) for an entity not tracked: ignored`,
        false,
      );
      return false;
    }
    e.trigger = trigger;
    if (now >= this.windowEnd) this.windowEnd = now + this.windowMs; // the first event of a moment opens a window
    e.due = Math.min(e.due, this.windowEnd); // the next ones join it: they go together when it ends
    return true;
  }

  /** The report item for the entity's current AI decision, or null: it has none, or the outcome is unknown. */
  report(id: string, outcome: Outcome, detail: string | null): Record<string, unknown> | null {
    if (!OUTCOMES.includes(outcome)) {
      // one wrong outcome would get the whole batch of reports refused
      const why = `report(${JSON.stringify(id)}, ${JSON.stringify(outcome)}): the outcome must be one of ${OUTCOMES.join(", ")}; not sent`;
      this.say.say(`outcome:${String(outcome)}`, why, false);
      return null;
    }
    const decisionId = this.entities.get(id)?.choice?.decisionId;
    if (decisionId === undefined || decisionId === null) return null;
    const item: Record<string, unknown> = { decision_id: decisionId, outcome };
    if (detail) item["detail"] = detail.slice(0, 200);
    return item;
  }

  /** The entity's live decision, or null: run the game's native AI. Checked against `legalNow`, else the
   * legal actions last tracked. */
  action(id: string, legalNow: readonly string[] | null, now: number): Choice | null {
    const e = this.entities.get(id);
    const c = e?.choice;
    if (e === undefined || c === null || c === undefined) return null;
    if (now >= c.expiresAt) {
      e.choice = null;
      return null;
    }
    return (legalNow ?? e.legalActions).includes(c.action) ? c : null;
  }

  /** A new epoch: what was decided for the old state no longer holds, and everyone is asked again. */
  setEpoch(value: number, now: number): void {
    if (value === this.epoch) return;
    this.epoch = value;
    for (const e of this.entities.values()) {
      e.choice = null;
      e.due = Math.min(e.due, now);
    }
  }

  /** When the number of entities changed, everyone is due now (at most every 500 ms). */
  population(now: number): void {
    if (this.entities.size !== this.count) {
      this.count = this.entities.size;
      this.reaskPending = true;
    }
    if (this.reaskPending && now - this.lastReask >= REASK_GAP_MS) {
      this.reaskPending = false;
      this.lastReask = now;
      for (const e of this.entities.values()) e.due = Math.min(e.due, now);
    }
  }

  /** Cascade: whether the local policy is sure enough of `e` to decide it here (none, or one that gives null
   * for it: the service decides). */
  local(e: Entity, now: number, ttl: number): boolean {
    let got: readonly [string, number] | null = null;
    try {
      got = this.choose(e);
    } catch (exc) {
      // a broken policy must not stop the game: the service decides instead
      this.say.say(
        "policy",
        `the local policy failed for ${JSON.stringify(e.id)} (said once; the service decides instead): ${String(exc)}`,
        false,
      );
      return false;
    }
    if (got === null) return false;
    const [action, confidence] = got;
    if (confidence < this.threshold || !e.legalActions.includes(action)) return false;
    e.choice = {
      action,
      source: "local",
      confidence,
      expiresAt: now + ttl,
      decisionId: null,
      cached: false,
      label: null,
    };
    e.trigger = null;
    this.stats.local++;
    return true;
  }

  /** One decision of an answer, for the entity it names; `legal`: the legal actions sent with it. */
  use(e: Entity, d: AIDecision | FallbackDecision, legal: readonly string[], now: number): void {
    e.inFlight = false;
    if (d.source === "AI") {
      if (!legal.includes(d.action)) {
        this.stats.illegal++;
        e.choice = null;
        return;
      }
      this.stats.ai++;
      if (d.cached) this.stats.cached++;
      const { action, confidence, decision_id: decisionId, cached, label } = d;
      e.choice = { action, source: "AI", confidence, expiresAt: now + d.ttl_ms, decisionId, cached, label };
      return;
    }
    this.stats.fallbacks[d.code] = (this.stats.fallbacks[d.code] ?? 0) + 1;
    e.choice = null;
    if (d.code === "budget")
      this.say.say(`budget:${e.type}`, `${e.type} ${JSON.stringify(e.id)} is over its token budget: ${d.reason}`);
    else if (d.code === "unavailable" || d.code === "busy") {
      // the service's state, not the entity's: said once ("wait 0.9 s more" is not new at every ask)
      this.say.say(`${d.code}:${d.reason.replace(NUMBER, "#")}`, `npcmind fell back with '${d.code}': ${d.reason}`);
    }
  }

  /** The entities of an answered or failed request may be asked again: at `due`, or else on their next
   * refresh (the seed's reaction to `unavailable` and `busy`); those in `keep` on their refresh. */
  release(ids: Iterable<string>, due: number | null, keep: ReadonlyMap<string, string> = new Map()): void {
    for (const id of ids) {
      const e = this.entities.get(id);
      if (e === undefined || !e.inFlight) continue;
      e.inFlight = false;
      if (due !== null && !keep.has(id)) e.due = Math.min(e.due, due);
    }
  }
}
