/** The decision scheduler (no I/O, no clock): what to ask /v1/decide and when, and what its answers mean.
 *
 * Every method that depends on time is given `now` (ms on the game's clock). It keeps the seed's game
 * obligations: an answer for an old epoch is dropped, an action is re-checked against the legal actions
 * sent (and those of now), a decision expires after its `ttl_ms`, every fallback or error gives null (the
 * game's native AI, never an invented action). Scheduling (spec section 10): an event is asked at once with
 * the events of the next `eventWindowMs`; others every `refresh_ms` of their type; a change of population
 * re-asks everyone, at most every 500 ms; 16 entities a request. Cascade: with a policy, entities it is sure
 * about take the local action and only the rest go to the service. A 422 whose problems all lie in named
 * entities sends the others again at once, and each of those alone from then on until the service takes it.
 * This is a port of the Python SDK's scheduler: the same rules, checked by the same conformance cases. */

import { readDecideResponse, type DecideResponse } from "./answer.js";
import { errorLine, isObject, readError, refusedEntities } from "./errors.js";
import { Outbox, type OutboxHost } from "./outbox.js";
import { Session } from "./session.js";
import { newStats, OUTCOMES } from "./types.js";
import type { Choice, Entity, FailKind, Logger, OutRequest, Outcome, Policy, Stats, TrackOptions } from "./types.js";

export const BATCH = 16; // the protocol's limit of entities a decide request
export const REASK_GAP_MS = 500; // a change of population re-asks everyone, at most this often
export const DEFAULT_REFRESH_MS = 4000;
export const DEFAULT_TTL_MS = 12000;
export const DEFAULT_DEADLINE_MS = 10_000; // the service's provider deadline, until GET /v1/health tells its own
export const TIMEOUT_MARGIN_MS = 5000; // past the deadline: the service's own work and the network
const NUMBER = /\d+(?:\.\d+)?/g; // the figures in a reason: not a new kind of reason

/** How a scheduler is set up; the defaults are the Python SDK's. */
export interface SchedulerOptions {
  clientId: string;
  epoch?: number;
  world?: Record<string, unknown>;
  scope?: string | null;
  scopeState?: Record<string, unknown> | null;
  apiKey?: string | null;
  refreshMs?: number | null;
  eventWindowMs?: number;
  telemetryMs?: number;
  policy?: Policy | null;
  threshold?: number;
  timeoutMs?: number | null;
  /** Decide requests in flight at most: a wave of refreshes is spread over frames instead of stalling one. */
  maxInFlight?: number;
  /** The manifest when it is known already (what GET /v1/manifest answers as `manifest`); else asked. */
  manifest?: Record<string, unknown> | null;
  log?: Logger;
}

type Sent =
  | { kind: "decide"; epoch: number; legal: Map<string, readonly string[]> }
  | { kind: "manifest" }
  | { kind: "health" }
  | { kind: "session" };

/** The decisions core: track entities, call `tick(now)` for the requests to send, give back their answers. */
export class Scheduler {
  readonly stats: Stats = newStats();
  readonly clientId: string;
  world: Record<string, unknown>;
  scope: string | null;
  scopeState: Record<string, unknown> | null;
  policy: Policy | null;
  threshold: number;
  private currentEpoch: number;
  private readonly refreshMs: number | null;
  private readonly windowMs: number;
  private readonly maxInFlight: number;
  private readonly log: Logger;
  private readonly timeoutGiven: boolean;
  private timeout: number;
  private readonly session: Session | null;
  private readonly outbox: Outbox;
  private readonly entities = new Map<string, Entity>();
  private readonly alone = new Map<string, string>(); // entity id -> why the service refused it
  private readonly sent = new Map<string, Sent>();
  private types: Map<string, [number, number]> | null = null; // type -> [refresh_ms, ttl_ms]
  private manifestRef: string | null = null;
  private refs = 0;
  private decidesInFlight = 0;
  private count = 0;
  private lastReask = Number.NEGATIVE_INFINITY;
  private reaskPending = false;
  private windowEnd = Number.NEGATIVE_INFINITY; // events until then go out together, when it ends
  private notBefore = Number.NEGATIVE_INFINITY; // after a 429 or a service that is down
  private readonly warned = new Set<string>();

  constructor(options: SchedulerOptions) {
    this.clientId = options.clientId;
    this.world = { ...(options.world ?? {}) };
    this.scope = options.scope ?? null;
    this.scopeState = options.scopeState ?? null;
    this.policy = options.policy ?? null;
    this.threshold = options.threshold ?? 0.8;
    this.currentEpoch = options.epoch ?? 0;
    this.refreshMs = options.refreshMs ?? null;
    this.windowMs = options.eventWindowMs ?? 50;
    this.maxInFlight = options.maxInFlight ?? 4;
    this.log = options.log ?? ((m) => console.warn(`npcmind: ${m}`));
    this.timeoutGiven = options.timeoutMs !== undefined && options.timeoutMs !== null;
    this.timeout = options.timeoutMs ?? DEFAULT_DEADLINE_MS + TIMEOUT_MARGIN_MS;
    this.session = options.apiKey ? new Session(options.apiKey) : null;
    this.outbox = new Outbox(this.outboxHost(), options.telemetryMs ?? 500);
    if (options.manifest) this.readManifest(options.manifest);
  }

  // --- what the game tells --------------------------------------------------------------------

  /** The game's epoch: answers to requests sent under another epoch are dropped. */
  get epoch(): number {
    return this.currentEpoch;
  }

  /** A new epoch: what was decided for the old state no longer holds, and everyone is asked again. */
  setEpoch(value: number, now: number): void {
    if (value === this.currentEpoch) return;
    this.currentEpoch = value;
    for (const e of this.entities.values()) {
      e.choice = null;
      e.due = Math.min(e.due, now);
    }
  }

  /** A new scene (level, map): the service resets its population with the next telemetry. */
  setScene(scene: string): void {
    this.outbox.setScene(scene);
  }

  /** Add an entity that decides, or update what it sees and may do now (not asked again for that alone). */
  track(
    id: string,
    type: string,
    observation: Record<string, unknown>,
    legalActions: string[],
    options: TrackOptions,
    now: number,
  ): void {
    const e = this.entities.get(id);
    const extra = {
      position: options.position ?? null,
      profile: options.profile ?? null,
      parent: options.parent ?? null,
      state: options.state ?? null,
    };
    if (e === undefined) {
      const fresh = { trigger: null, due: now, askedAt: Number.NEGATIVE_INFINITY, inFlight: false, choice: null };
      this.entities.set(id, { id, type, observation, legalActions, ...extra, ...fresh, changed: true });
      return;
    }
    if (e.type !== type) {
      e.choice = null;
      e.due = now;
    }
    // kept by reference (this runs for every entity of every frame); copied when a request is built
    Object.assign(e, { type, observation, legalActions, changed: true }, extra);
  }

  /** An observe-only entity (the player): sent as telemetry, never asked. */
  observe(id: string, type: string, fields: Record<string, unknown>, position: number[] | null = null): void {
    this.outbox.observe(id, type, fields, position);
  }

  /** The entity left the scene (died, despawned): forget it and tell the service. */
  untrack(id: string): void {
    this.alone.delete(id);
    const tracked = this.entities.delete(id);
    if (this.outbox.forget(id) || tracked) this.outbox.remove(id);
  }

  /** Something happened to the entity: ask for it at once. False (said once) for an entity not tracked. */
  event(id: string, trigger: string, now: number): boolean {
    const e = this.entities.get(id);
    if (e === undefined) {
      this.warn(`event:${trigger}`, `event(${JSON.stringify(id)}, ${JSON.stringify(trigger)}) for an entity not tracked: ignored`, false);
      return false;
    }
    e.trigger = trigger;
    if (now >= this.windowEnd) this.windowEnd = now + this.windowMs; // the first event of a moment opens a window
    e.due = Math.min(e.due, this.windowEnd); // the next ones join it: they go together when it ends
    return true;
  }

  /** What became of the entity's current AI decision; false when it has none to report. */
  report(id: string, outcome: Outcome, detail: string | null = null): boolean {
    if (!OUTCOMES.includes(outcome)) {
      const why = `report(${JSON.stringify(id)}, ${JSON.stringify(outcome)}): the outcome must be one of ${OUTCOMES.join(", ")}; not sent`;
      this.warn(`outcome:${String(outcome)}`, why, false);
      return false;
    }
    const decisionId = this.entities.get(id)?.choice?.decisionId;
    if (decisionId === undefined || decisionId === null) return false;
    const item: Record<string, unknown> = { decision_id: decisionId, outcome };
    if (detail) item["detail"] = detail.slice(0, 200);
    this.outbox.report(item);
    return true;
  }

  // --- what the game asks ---------------------------------------------------------------------

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

  /** How long a request may take: the one given, else the service's deadline plus 5 s once it told it. */
  get timeoutMs(): number {
    return this.timeout;
  }

  /** Requests sent and not yet answered. */
  get inFlight(): number {
    return this.sent.size;
  }

  /** Entities tracked (that decide). */
  get size(): number {
    return this.entities.size;
  }

  /** The headers a request of this client carries (a hosted session's token). */
  headers(): Record<string, string> {
    return this.session?.headers() ?? {};
  }

  /** What is due now, in the order to send: session, manifest, telemetry, reports, decisions. */
  tick(now: number): OutRequest[] {
    const out: OutRequest[] = [];
    if (this.session !== null && this.session.due(now) && now >= this.notBefore) {
      const r = this.make("POST", "/v1/session", { client_id: this.clientId }, [], this.session.keyHeaders());
      this.session.pending = r.ref;
      this.sent.set(r.ref, { kind: "session" });
      out.push(r);
    }
    if (this.session !== null && !this.session.ready) return out; // nothing goes without a token, or one asked for
    if (this.types === null && this.manifestRef === null && now >= this.notBefore) this.askManifest(out);
    if (this.entities.size !== this.count) {
      this.count = this.entities.size;
      this.reaskPending = true;
    }
    if (this.reaskPending && now - this.lastReask >= REASK_GAP_MS) {
      this.reaskPending = false;
      this.lastReask = now;
      for (const e of this.entities.values()) e.due = Math.min(e.due, now);
    }
    if (now < this.notBefore) return out; // the service is down or asked us to wait: keep it all for later
    out.push(...this.outbox.sendTelemetry(now, this.clientId, this.currentEpoch, this.entities.values()));
    const reports = this.outbox.sendReports(this.clientId);
    if (reports.request !== null) out.push(reports.request);
    this.stats.reportsSent += reports.count;
    this.ask(now, out);
    return out;
  }

  /** Send every queued report now (before closing, or for a turn-based game). */
  flushReports(): OutRequest[] {
    const out: OutRequest[] = [];
    while (this.outbox.queuedReports > 0) {
      const { request, count } = this.outbox.sendReports(this.clientId);
      this.stats.reportsSent += count;
      if (request !== null) out.push(request);
    }
    return out;
  }

  /** An answer came back for `ref`. */
  answer(ref: string, status: number, body: unknown, headers: Record<string, string>, now: number): void {
    if (this.outbox.owns(ref)) {
      if (this.outbox.answer(ref, status, body)) this.refused(status, body, headers, now);
      return;
    }
    const s = this.sent.get(ref);
    if (s === undefined) return;
    this.sent.delete(ref);
    if (s.kind === "decide") this.applyDecide(s, status, body, headers, now);
    else if (s.kind === "manifest") this.manifestAnswered(status, body, now);
    else if (s.kind === "health") this.healthAnswered(status, body);
    else if (s.kind === "session") this.sessionAnswered(status, body, now);
  }

  /** A request got no answer (`timeout` or `unreachable`): its entities use their native AI; retried later. */
  fail(ref: string, kind: FailKind, now: number): void {
    this.failed(kind);
    if (this.outbox.owns(ref)) return this.outbox.failed(ref);
    const s = this.sent.get(ref);
    if (s === undefined) return;
    this.sent.delete(ref);
    if (s.kind === "decide") {
      this.decidesInFlight--;
      this.stats.errors++;
      this.notBefore = now + 1000;
      this.release(s.legal, null);
    } else if (s.kind === "manifest") {
      this.manifestRef = null; // asked again on a later tick; the defaults hold meanwhile
      this.notBefore = Math.max(this.notBefore, now + 1000);
    } else if (s.kind === "session") {
      if (this.session !== null && !this.session.open) this.notBefore = Math.max(this.notBefore, now + 1000);
      this.session?.failed(now);
    }
  }

  // --- scheduling -----------------------------------------------------------------------------

  private timing(type: string): [number, number] {
    const [refresh, ttl] = this.types?.get(type) ?? [DEFAULT_REFRESH_MS, DEFAULT_TTL_MS];
    return [this.refreshMs ?? refresh, ttl];
  }

  private askManifest(out: OutRequest[]): void {
    if (!this.timeoutGiven) {
      const health = this.make("GET", "/v1/health", null, []);
      this.sent.set(health.ref, { kind: "health" });
      out.push(health);
    }
    const r = this.make("GET", "/v1/manifest", null, []);
    this.manifestRef = r.ref;
    this.sent.set(r.ref, { kind: "manifest" });
    out.push(r);
  }

  /** Send what is due, events first, then the longest waiting; no more requests than `maxInFlight`. */
  private ask(now: number, out: OutRequest[]): void {
    const free = this.maxInFlight - this.decidesInFlight;
    if (free <= 0) return;
    const due: Entity[] = [];
    for (const e of this.entities.values()) if (e.due <= now && !e.inFlight) due.push(e);
    if (due.length === 0) return;
    due.sort((a, b) => Number(a.trigger === null) - Number(b.trigger === null) || a.due - b.due);
    const asked: Entity[] = [];
    let room = free * BATCH; // entities the free requests carry; one sent alone takes a whole request
    for (const e of due) {
      room -= this.alone.has(e.id) ? BATCH : 1;
      if (room < 0) break; // the rest stay due: next tick
      const [refresh, ttl] = this.timing(e.type);
      e.due = now + refresh;
      e.askedAt = now;
      if (this.decidedLocally(e, now, ttl)) continue;
      asked.push(e);
    }
    const together = asked.filter((e) => !this.alone.has(e.id));
    for (let i = 0; i < together.length; i += BATCH) this.sendBatch(together.slice(i, i + BATCH), out);
    for (const e of asked) if (this.alone.has(e.id)) this.sendBatch([e], out); // so it cannot sink the others
  }

  /** Cascade: the local policy's action when it is sure enough and the action legal. */
  private decidedLocally(e: Entity, now: number, ttl: number): boolean {
    if (this.policy === null) return false;
    let action = "";
    let confidence = 0;
    try {
      [action, confidence] = this.policy(e);
    } catch (exc) {
      this.warn(`policy:${(exc as Error)?.name}`, `the local policy failed for ${JSON.stringify(e.id)} (said once; the service decides instead): ${String(exc)}`, false);
    }
    if (confidence < this.threshold || !e.legalActions.includes(action)) return false;
    e.choice = { action, source: "local", confidence, expiresAt: now + ttl, decisionId: null, cached: false, label: null };
    e.trigger = null;
    this.stats.local++;
    return true;
  }

  private sendBatch(batch: Entity[], out: OutRequest[]): void {
    const body: Record<string, unknown> = {
      client_id: this.clientId,
      epoch: this.currentEpoch,
      world: this.world,
      entities: batch.map(entityItem),
    };
    if (this.scope !== null) {
      body["scope"] = this.scope;
      if (this.scopeState !== null) body["scope_state"] = this.scopeState;
    }
    const after = this.outbox.pendingTelemetry(); // its prompt shows the scene as the game last told it
    for (const [ref, sent] of this.sent) if (sent.kind === "health" || sent.kind === "manifest") after.push(ref); // timings
    const r = this.post("/v1/decide", body, after);
    if (r === null) return;
    const kept = new Set((r.body?.["entities"] as { id: string }[]).map((i) => i.id));
    const legal = new Map<string, readonly string[]>();
    for (const e of batch) {
      if (!kept.has(e.id)) continue;
      e.inFlight = true;
      e.trigger = null;
      legal.set(e.id, [...e.legalActions]);
    }
    this.sent.set(r.ref, { kind: "decide", epoch: this.currentEpoch, legal });
    this.decidesInFlight++;
    this.stats.requests++;
    this.stats.asked += legal.size;
    out.push(r);
  }

  // --- answers ----------------------------------------------------------------------------------

  private applyDecide(s: Extract<Sent, { kind: "decide" }>, status: number, body: unknown, headers: Record<string, string>, now: number): void {
    this.decidesInFlight--;
    if (status !== 200) {
      this.stats.errors++;
      const bad = refusedEntities(status, body, [...s.legal.keys()]);
      if (bad !== null) {
        this.entitiesRefused(bad, new Map([...s.legal.keys()].map((id) => [id, this.entities.get(id)?.type ?? "entity"])));
        return this.release(s.legal, now, bad); // the others are asked again at once, without them
      }
      this.refused(status, body, headers, now);
      // a session that ended under us: asked again soon, with a new session
      return this.release(s.legal, status === 401 && this.session !== null ? now : null);
    }
    for (const id of s.legal.keys()) this.alone.delete(id); // taken: it may go with the others again
    const answer = readDecideResponse(body);
    if (typeof answer === "string") {
      this.stats.errors++;
      this.warn("malformed", `the answer to /v1/decide could not be read: ${answer}`);
      return this.release(s.legal, null);
    }
    if (answer.epoch !== this.currentEpoch || s.epoch !== this.currentEpoch) {
      this.stats.droppedEpoch++;
      return this.release(s.legal, now); // asked again at once, for the epoch of now
    }
    this.applyDecisions(answer, s.legal, now);
    this.release(s.legal, null);
  }

  private applyDecisions(answer: DecideResponse, legal: Map<string, readonly string[]>, now: number): void {
    for (const d of answer.decisions) {
      const e = this.entities.get(d.id);
      const sentLegal = legal.get(d.id);
      if (e === undefined || sentLegal === undefined) continue; // untracked meanwhile, or not asked
      e.inFlight = false;
      if (d.source === "AI") {
        if (!sentLegal.includes(d.action)) {
          this.stats.illegal++;
          e.choice = null;
          continue;
        }
        this.stats.ai++;
        if (d.cached) this.stats.cached++;
        const expiresAt = now + d.ttl_ms;
        e.choice = { action: d.action, source: "AI", confidence: d.confidence, expiresAt, decisionId: d.decision_id, cached: d.cached, label: d.label };
        continue;
      }
      this.stats.fallbacks[d.code] = (this.stats.fallbacks[d.code] ?? 0) + 1;
      e.choice = null;
      if (d.code === "budget") this.warn(`budget:${e.type}`, `${e.type} ${JSON.stringify(e.id)} is over its token budget: ${d.reason}`);
      else if (d.code === "unavailable" || d.code === "busy") {
        // the service's state, not the entity's: said once ("wait 0.9 s more" is not new at every ask)
        this.warn(`${d.code}:${d.reason.replace(NUMBER, "#")}`, `npcmind fell back with '${d.code}': ${d.reason}`);
      }
    }
  }

  /** The entities of an answered or failed request may be asked again: at `due`, or else on their next
   * refresh (the seed's reaction to `unavailable` and `busy`); those in `keep` on their refresh. */
  private release(legal: Map<string, readonly string[]>, due: number | null, keep: Map<string, string> = new Map()): void {
    for (const id of legal.keys()) {
      const e = this.entities.get(id);
      if (e === undefined || !e.inFlight) continue;
      e.inFlight = false;
      if (due !== null && !keep.has(id)) e.due = Math.min(e.due, due);
    }
  }

  private entitiesRefused(found: Map<string, string>, types: Map<string, string>): void {
    for (const [id, why] of found) {
      this.stats.refused++;
      this.alone.set(id, why);
      const said = `npcmind refused ${types.get(id) ?? "entity"} ${JSON.stringify(id)} (${why}): the others go on without it, and it is sent alone until the service takes it`;
      this.warn(`refused:${id}:${why}`, said);
    }
  }

  private manifestAnswered(status: number, body: unknown, now: number): void {
    const data = status === 200 && isObject(body) ? body["manifest"] : null;
    if (!isObject(data)) {
      this.manifestRef = null; // asked again on a later tick; the defaults hold meanwhile
      this.notBefore = Math.max(this.notBefore, now + 1000);
      return;
    }
    this.manifestRef = null;
    this.readManifest(data);
    for (const e of this.entities.values()) e.due = Math.min(e.due, e.askedAt + this.timing(e.type)[0]);
  }

  private readManifest(data: Record<string, unknown>): void {
    const defaults = isObject(data["defaults"]) ? data["defaults"] : {};
    const types = isObject(data["types"]) ? data["types"] : {};
    this.types = new Map();
    for (const [name, t] of Object.entries(types)) {
      const one = isObject(t) ? t : {};
      const refresh = Number(one["refresh_ms"] || defaults["refresh_ms"] || DEFAULT_REFRESH_MS);
      const ttl = Number(one["ttl_ms"] || defaults["ttl_ms"] || DEFAULT_TTL_MS);
      this.types.set(name, [refresh, ttl]);
    }
  }

  private healthAnswered(status: number, body: unknown): void {
    const deadline = status === 200 && isObject(body) ? body["deadline_ms"] : null;
    if (!this.timeoutGiven && typeof deadline === "number" && deadline > 0) this.timeout = deadline + TIMEOUT_MARGIN_MS;
  }

  private sessionAnswered(status: number, body: unknown, now: number): void {
    const why = this.session?.answer(status, body, now) ?? null;
    if (why === null) return;
    this.warn(`session:${why.replace(NUMBER, "#")}`, why);
    if (!this.session?.open) this.notBefore = Math.max(this.notBefore, now + 1000);
  }

  private refused(status: number, body: unknown, headers: Record<string, string>, now: number): void {
    let msg = `npcmind answered ${status} ${readError(body).code}: ${errorLine(body, "")}`;
    if (status === 401 && this.session === null) msg += " (the service runs the hosted profile: give DecideClient its apiKey)";
    if (status === 429 || status >= 500) {
      const retry = headers["retry-after"];
      const wait = retry !== undefined && /^\d+(\.\d+)?$/.test(retry) ? Number(retry) * 1000 : 1000;
      this.notBefore = now + wait;
    }
    if (status === 401 && this.session !== null) {
      this.session.expire(); // a new session with the next request
      this.notBefore = Math.max(this.notBefore, now + 250); // not a request a frame if it keeps failing
    }
    this.warn(`${status}:${msg.replace(NUMBER, "#")}`, msg);
  }

  private failed(kind: FailKind): void {
    if (kind === "timeout") {
      const why = this.timeoutGiven
        ? "its model may take up to NPCMIND_DEADLINE_MS: leave timeoutMs out to follow it"
        : `${TIMEOUT_MARGIN_MS / 1000} s past its own deadline for the model: it is overloaded or stalled`;
      this.warn("timeout", `npcmind did not answer within ${this.timeout / 1000} s (${why})`);
    } else this.warn("transport", "npcmind is unreachable");
  }

  /** Say a problem once; `native`: it leaves entities to the game's own AI, and the line says so. */
  private warn(key: string, message: string, native = true): void {
    if (this.warned.has(key)) return;
    if (this.warned.size >= 1000) this.warned.clear();
    this.warned.add(key);
    this.log(native ? `${message} (the entities concerned use their native AI)` : message);
  }

  // --- requests ---------------------------------------------------------------------------------

  private make(method: "GET" | "POST", path: string, body: Record<string, unknown> | null, after: readonly string[], headers?: Record<string, string>): OutRequest {
    const json = body === null ? null : JSON.stringify(body); // first: a body that is not JSON takes no ref
    const ref = `r${++this.refs}`;
    const waits = path === "/v1/session" ? [] : [...(this.session?.awaited() ?? []), ...after];
    return { ref, method, path, headers: headers ?? this.headers(), body, json, after: waits };
  }

  /** A POST whose body is made now (a snapshot: the game may change its objects from the next frame on); an
   * entity that is not JSON is left out and named once; null when nothing is left to send. */
  private post(path: string, body: Record<string, unknown>, after: readonly string[] = []): OutRequest | null {
    try {
      return this.make("POST", path, body, after);
    } catch {
      // one entity holds what JSON cannot carry (a BigInt, a cycle): the others still go
    }
    const entities = Array.isArray(body["entities"]) ? (body["entities"] as { id: string; type: string }[]) : [];
    body["entities"] = entities.filter((item) => {
      try {
        JSON.stringify(item);
        return true;
      } catch (exc) {
        this.warn(`encode:${item.id}`, `${item.type} ${JSON.stringify(item.id)} cannot be sent as JSON (${String(exc)}): left out`);
        return false;
      }
    });
    const removed = body["removed"] as string[] | undefined;
    if ((body["entities"] as unknown[]).length === 0 && !removed?.length && !body["scene"]) return null;
    try {
      return this.make("POST", path, body, after);
    } catch (exc) {
      this.warn(`encode:${String(exc)}`, `a request cannot be sent as JSON (${String(exc)}): skipped`);
      return null;
    }
  }

  private outboxHost(): OutboxHost {
    return {
      post: (path, body, after) => this.post(path, body, after),
      refused: (found, types) => this.entitiesRefused(found, types),
      alone: this.alone,
      tracked: (id) => this.entities.has(id),
      warn: (key, message, native) => this.warn(key, message, native),
    };
  }
}

/** An entity's wire object: the given fields, and those optional ones that are set. */
function entityItem(e: Entity): Record<string, unknown> {
  const item: Record<string, unknown> = { id: e.id, type: e.type, observation: e.observation, legal_actions: e.legalActions };
  if (e.position !== null) item["position"] = e.position;
  if (e.profile !== null) item["profile"] = e.profile;
  if (e.parent !== null) item["parent"] = e.parent;
  if (e.trigger !== null) item["trigger"] = e.trigger;
  return item;
}
