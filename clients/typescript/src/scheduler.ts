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
 * Streaming (docs/streaming.md, on by default): a decide answer may come as NDJSON lines, given as they arrive
 * (`chunk`, then `end`); each entity's line is applied the moment it comes (stream.ts).
 * This is a port of the Python SDK's scheduler: the same rules, checked by the same conformance cases. */

import { readDecideResponse } from "./answer.js";
import { isTooLarge } from "./limits.js";
import { Cascade, DEFAULT_POLICY_REFRESH_MS, type LocalPolicy } from "./cascade.js";
import { isObject } from "./errors.js";
import { Outbox, type OutboxHost } from "./outbox.js";
import { POLICY_MAX_BYTES } from "./policy.js";
import { NUMBER, Refusals, retryAfterMs } from "./refusals.js";
import { Roster } from "./roster.js";
import { SayOnce } from "./say.js";
import { Session } from "./session.js";
import { DecisionStream, type StreamHost } from "./stream.js";
import { Timings, deadlineTimeoutMs } from "./timings.js";
import { newStats } from "./types.js";
import type { Entity, FailKind, Logger, OutRequest, Outcome, Stats } from "./types.js";

export const BATCH = 16; // the protocol's limit of entities a decide request
export { DEFAULT_REFRESH_MS, DEFAULT_TTL_MS } from "./timings.js";
export const DEFAULT_DEADLINE_MS = 10_000; // the service's provider deadline, until GET /v1/health tells its own
export const TIMEOUT_MARGIN_MS = 5000; // past the deadline: the service's own work and the network

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
  /** The cascade's local policy: a distilled file (`Policy.load`) or a function; sure choices decide here. */
  policy?: LocalPolicy | null;
  threshold?: number;
  /** Use the service's distilled policy (GET /v1/policy); by default on when no `policy` is given. */
  fetchPolicy?: boolean | null;
  /** How often the service's policy is asked again (ms): 60 s by default. */
  policyRefreshMs?: number;
  /** A fetched policy larger than this (bytes, 16 MiB by default) is not read past it, and not used. */
  policyMaxBytes?: number;
  timeoutMs?: number | null;
  /** Decide requests in flight at most: a wave of refreshes is spread over frames instead of stalling one. */
  maxInFlight?: number;
  /** The manifest when it is known already (what GET /v1/manifest answers as `manifest`); else asked. */
  manifest?: Record<string, unknown> | null;
  /** The version of that manifest (GET /v1/manifest's `version`): the service's policy is fetched for it. */
  manifestVersion?: string | null;
  /** Ask for decide answers as a stream of lines, each entity's decision as soon as the model wrote it
   * (default true); false: today's single JSON answer. */
  stream?: boolean;
  log?: Logger;
}

type Sent =
  | {
      kind: "decide";
      epoch: number;
      legal: Map<string, readonly string[]>;
      /** When it was sent (ms): a streamed line's latency is counted from here. */
      at: number;
      /** Its answer as lines, from the first chunk on (null: none came yet, or not streamed). */
      stream: DecisionStream | null;
    }
  | { kind: "manifest" }
  | { kind: "health" }
  | { kind: "session" }
  | { kind: "policy" };

/** What came back for a request: its status, its JSON (a policy's raw bytes), its headers (lowercase). */
export interface Answered {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

/** One handler per kind of request, each given the request as sent (its own variant of `Sent`). */
type ByKind<A extends unknown[]> = { [K in Sent["kind"]]: (s: Extract<Sent, { kind: K }>, ...args: A) => void };

/** The handler of the request's kind: TypeScript cannot tie a union's member to its key, so it is said once here. */
function dispatch<A extends unknown[]>(table: ByKind<A>, s: Sent): (s: Sent, ...args: A) => void {
  return table[s.kind] as (s: Sent, ...args: A) => void;
}

// over 15 methods: the whole contract between the game, the transport and the service (Python: Scheduler, the same)
/** The decisions core: track entities, call `tick(now)` for the requests to send, give back their answers. */
export class Scheduler {
  readonly stats: Stats = newStats();
  readonly clientId: string;
  /** The per-entity rules: track, event, action, setEpoch go there. */
  readonly roster: Roster;
  /** Which local policy decides first, and fetching the service's. */
  readonly cascade: Cascade;
  world: Record<string, unknown>;
  scope: string | null;
  scopeState: Record<string, unknown> | null;
  private readonly maxInFlight: number;
  private readonly streamed: boolean;
  private readonly said: SayOnce;
  private readonly timeoutGiven: boolean;
  private timeout: number;
  private readonly session: Session | null;
  private readonly outbox: Outbox;
  private readonly refusals: Refusals;
  private readonly sent = new Map<string, Sent>();
  private readonly timings: Timings;
  private refs = 0;
  private decidesInFlight = 0;
  private notBefore = Number.NEGATIVE_INFINITY; // after a 429 or a service that is down

  constructor(options: SchedulerOptions) {
    this.clientId = options.clientId;
    this.world = { ...(options.world ?? {}) };
    this.scope = options.scope ?? null;
    this.scopeState = options.scopeState ?? null;
    this.maxInFlight = options.maxInFlight ?? 4;
    this.streamed = options.stream ?? true;
    this.said = new SayOnce(options.log ?? ((m) => console.warn(`npcmind: ${m}`)));
    this.refusals = new Refusals((key, message, native) => this.warn(key, message, native), this.stats);
    this.cascade = new Cascade(
      this.clientId,
      options.policy ?? null,
      options.fetchPolicy ?? null,
      options.policyRefreshMs ?? DEFAULT_POLICY_REFRESH_MS,
      this.said,
      options.manifestVersion ?? null,
      options.policyMaxBytes ?? POLICY_MAX_BYTES,
    );
    const choose = (e: Entity): readonly [string, number] | null =>
      this.cascade.choose(e, this.world, this.scope !== null ? this.scopeState : null);
    const [threshold, windowMs] = [options.threshold ?? 0.8, options.eventWindowMs ?? 50];
    this.roster = new Roster(options.epoch ?? 0, windowMs, choose, threshold, this.stats, this.said);
    this.timeoutGiven = options.timeoutMs !== undefined && options.timeoutMs !== null;
    this.timeout = options.timeoutMs ?? DEFAULT_DEADLINE_MS + TIMEOUT_MARGIN_MS;
    this.session = options.apiKey ? new Session(options.apiKey) : null;
    this.outbox = new Outbox(this.outboxHost(), options.telemetryMs ?? 500);
    this.timings = new Timings(options.refreshMs ?? null, options.manifest ?? null);
  }

  // --- what the game tells (the per-entity rules are the roster's) ----------------------------

  /** The game's epoch: answers to requests sent under another epoch are dropped. */
  get epoch(): number {
    return this.roster.epoch;
  }

  /** A new scene (level, map): the service resets its population with the next telemetry. */
  setScene(scene: string): void {
    this.outbox.setScene(scene);
  }

  /** An observe-only entity (the player): sent as telemetry, never asked. */
  observe(id: string, type: string, fields: Record<string, unknown>, position: number[] | null = null): void {
    this.outbox.observe(id, type, fields, position);
  }

  /** The entity left the scene (died, despawned): forget it and tell the service. */
  untrack(id: string): void {
    this.refusals.alone.delete(id);
    const tracked = this.roster.entities.delete(id);
    if (this.outbox.forget(id) || tracked) this.outbox.remove(id);
  }

  /** What became of the entity's current AI decision; false when it has none to report. */
  report(id: string, outcome: Outcome, detail: string | null = null): boolean {
    const item = this.roster.report(id, outcome, detail);
    if (item !== null) this.outbox.report(item);
    return item !== null;
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
    return this.roster.entities.size;
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
    const again = this.cascade.recheckManifest;
    if ((!this.timings.known || again) && !this.timings.asked && now >= this.notBefore)
      this.askManifest(out, again);
    if (this.cascade.due(now) && now >= this.notBefore) {
      const [path, extra] = this.cascade.request(now);
      const r = this.make("GET", path, null, [], { ...this.headers(), ...extra });
      this.sent.set(r.ref, { kind: "policy" });
      out.push(r);
    }
    this.roster.population(now);
    if (now < this.notBefore) return out; // the service is down or asked us to wait: keep it all for later
    out.push(...this.outbox.sendTelemetry(now, this.clientId, this.roster.epoch, this.roster.entities.values()));
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

  /** An answer came back for `ref`: applied by the request's kind (`ANSWERED`; telemetry and reports: the outbox). */
  answer(ref: string, status: number, body: unknown, headers: Record<string, string>, now: number): void {
    if (status >= 200 && status < 300 && isTooLarge(body) && this.sent.get(ref)?.kind !== "decide")
      this.warn(`too-large:${ref.replace(/\d+/g, "#")}`, body.error.message); // a decide answer says it itself
    if (this.outbox.owns(ref)) {
      if (this.outbox.answer(ref, status, body)) this.refused(status, body, headers, now);
      return;
    }
    const s = this.take(ref);
    if (s !== undefined) dispatch(this.answered, s)(s, { status, body, headers }, now);
  }

  /** Bytes of a streamed decide answer arrived (200, application/x-ndjson; a string: its UTF-8): the lines they
   * complete are applied now, so an entity's decision is usable before the stream ends. */
  chunk(ref: string, data: Uint8Array | string, now: number): boolean {
    const s = this.sent.get(ref);
    if (s?.kind !== "decide") return false; // not a decide request in flight: nothing of it is read
    if (s.stream === null) {
      for (const id of s.legal.keys()) this.refusals.alone.delete(id); // taken: it may go with the others again
      s.stream = new DecisionStream(this.streamHost(), s.legal, s.epoch, s.at);
    }
    if (s.stream.feed(data, now)) return true;
    this.take(ref); // ended here (MAX_STRAY_LINES): what still comes of it is not read
    this.decidesInFlight--;
    return false;
  }

  /** A streamed decide answer's connection closed: without its last line it was cut, and the entities of it
   * without a line fall back (`unavailable`), while the lines received stand. `failed`: the transport ended it
   * (no line within the timeout, the connection lost), said as `fail` says it. */
  end(ref: string, now: number, failed: FailKind | null = null, detail = ""): void {
    const s = this.sent.get(ref);
    if (s?.kind !== "decide") return;
    this.take(ref);
    this.decidesInFlight--;
    if (failed !== null) this.failed(failed);
    else if (detail !== "") this.warn(`stream-end:${detail.replace(/\d+/g, "#")}`, detail); // stopped at its cap
    (s.stream ?? new DecisionStream(this.streamHost(), s.legal, s.epoch, s.at)).end(now);
  }

  /** A request got no answer (`timeout` or `unreachable`): said once, then undone by its kind (`FAILED`); its
   * entities use their native AI and are retried later. */
  fail(ref: string, kind: FailKind, now: number): void {
    this.failed(kind);
    if (this.outbox.owns(ref)) return this.outbox.failed(ref);
    const s = this.take(ref);
    if (s !== undefined) dispatch(this.failedKinds, s)(s, now);
  }

  private take(ref: string): Sent | undefined {
    const s = this.sent.get(ref);
    this.sent.delete(ref);
    return s;
  }

  /** What an answer does, by the kind of request (Python: `ANSWERED` in scheduler.py). */
  private readonly answered: ByKind<[a: Answered, now: number]> = {
    decide: (s, a, now) => this.applyDecide(s, a.status, a.body, a.headers, now),
    manifest: (_s, a, now) => this.manifestAnswered(a.status, a.body, now),
    health: (_s, a) => this.healthAnswered(a.status, a.body),
    session: (_s, a, now) => this.sessionAnswered(a.status, a.body, now),
    policy: (_s, a, now) => {
      if (!this.cascade.answered(a.status, a.body, a.headers)) this.refused(a.status, a.body, a.headers, now);
    },
  };

  /** What a failure undoes, by the kind of request (Python: `FAILED` in scheduler.py). */
  private readonly failedKinds: ByKind<[now: number]> = {
    decide: (s, now) => {
      this.decidesInFlight--;
      this.stats.errors++;
      this.notBefore = now + 1000;
      this.roster.release(s.legal.keys(), null);
    },
    manifest: (_s, now) => {
      this.timings.asked = false; // asked again on a later tick; the defaults hold meanwhile
      this.notBefore = Math.max(this.notBefore, now + 1000);
    },
    health: () => {},
    session: (_s, now) => {
      if (this.session !== null && !this.session.open) this.notBefore = Math.max(this.notBefore, now + 1000);
      this.session?.failed(now);
    },
    policy: () => this.cascade.failed(),
  };

  // --- scheduling -----------------------------------------------------------------------------

  private askManifest(out: OutRequest[], again: boolean): void {
    if (!this.timeoutGiven && !again) {
      const health = this.make("GET", "/v1/health", null, []);
      this.sent.set(health.ref, { kind: "health" });
      out.push(health);
    }
    const r = this.make("GET", "/v1/manifest", null, []);
    this.timings.asked = true;
    this.sent.set(r.ref, { kind: "manifest" });
    out.push(r);
  }

  /** Send what is due, events first, then the longest waiting; no more requests than `maxInFlight`. */
  private ask(now: number, out: OutRequest[]): void {
    const free = this.maxInFlight - this.decidesInFlight;
    if (free <= 0) return;
    const due: Entity[] = [];
    for (const e of this.roster.entities.values()) if (e.due <= now && !e.inFlight) due.push(e);
    if (due.length === 0) return;
    due.sort((a, b) => Number(a.trigger === null) - Number(b.trigger === null) || a.due - b.due);
    const asked: Entity[] = [];
    let room = free * BATCH; // entities the free requests carry; one sent alone takes a whole request
    for (const e of due) {
      room -= this.refusals.alone.has(e.id) ? BATCH : 1;
      if (room < 0) break; // the rest stay due: next tick
      const [refresh, ttl] = this.timings.of(e.type);
      e.due = now + refresh;
      e.askedAt = now;
      if (this.roster.local(e, now, ttl)) continue;
      asked.push(e);
    }
    const together = asked.filter((e) => !this.refusals.alone.has(e.id));
    for (let i = 0; i < together.length; i += BATCH) this.sendBatch(together.slice(i, i + BATCH), now, out);
    for (const e of asked) if (this.refusals.alone.has(e.id)) this.sendBatch([e], now, out); // so it cannot sink the others
  }

  private sendBatch(batch: Entity[], now: number, out: OutRequest[]): void {
    const body: Record<string, unknown> = {
      client_id: this.clientId,
      epoch: this.roster.epoch,
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
    this.sent.set(r.ref, { kind: "decide", epoch: this.roster.epoch, legal, at: now, stream: null });
    this.decidesInFlight++;
    this.stats.requests++;
    this.stats.asked += legal.size;
    out.push(this.streamed ? { ...r, stream: true } : r);
  }

  // --- answers ----------------------------------------------------------------------------------

  private applyDecide(
    s: Extract<Sent, { kind: "decide" }>,
    status: number,
    body: unknown,
    headers: Record<string, string>,
    now: number,
  ): void {
    this.decidesInFlight--;
    if (status !== 200) {
      this.stats.errors++;
      const types = [...s.legal.keys()].map((id) => [id, this.roster.entities.get(id)?.type ?? "entity"] as const);
      const bad = this.refusals.entities(status, body, new Map(types));
      if (bad !== null) {
        return this.roster.release(s.legal.keys(), now, bad); // the others are asked again at once, without them
      }
      this.refused(status, body, headers, now);
      // a session that ended under us: asked again soon, with a new session
      return this.roster.release(s.legal.keys(), status === 401 && this.session !== null ? now : null);
    }
    for (const id of s.legal.keys()) this.refusals.alone.delete(id); // taken: it may go with the others again
    const answer = readDecideResponse(body, s.legal.size);
    if (typeof answer === "string") {
      this.stats.errors++;
      this.warn("malformed", `the answer to /v1/decide could not be read: ${answer}`);
      return this.roster.release(s.legal.keys(), null);
    }
    if (answer.epoch !== this.roster.epoch || s.epoch !== this.roster.epoch) {
      this.stats.droppedEpoch++;
      return this.roster.release(s.legal.keys(), now); // asked again at once, for the epoch of now
    }
    for (const d of answer.decisions) {
      const e = this.roster.entities.get(d.id);
      const legal = s.legal.get(d.id);
      if (e !== undefined && legal !== undefined) this.roster.use(e, d, legal, now); // else untracked, or not asked
    }
    this.roster.release(s.legal.keys(), null);
  }

  private manifestAnswered(status: number, body: unknown, now: number): void {
    if (!this.timings.read(status, body, this.roster.entities.values())) {
      this.notBefore = Math.max(this.notBefore, now + 1000); // asked again on a later tick; defaults meanwhile
      return;
    }
    this.cascade.manifest(isObject(body) && typeof body["version"] === "string" ? body["version"] : null);
  }

  private healthAnswered(status: number, body: unknown): void {
    const deadline = deadlineTimeoutMs(status, body);
    if (!this.timeoutGiven && deadline !== null) this.timeout = deadline + TIMEOUT_MARGIN_MS;
  }

  private sessionAnswered(status: number, body: unknown, now: number): void {
    const why = this.session?.answer(status, body, now) ?? null;
    if (why === null) return;
    this.warn(`session:${why.replace(NUMBER, "#")}`, why);
    if (!this.session?.open) this.notBefore = Math.max(this.notBefore, now + 1000);
  }

  private refused(status: number, body: unknown, headers: Record<string, string>, now: number): void {
    if (status === 429 || status >= 500) this.notBefore = now + retryAfterMs(headers);
    if (status === 401 && this.session !== null) {
      this.session.expire(); // a new session with the next request
      this.notBefore = Math.max(this.notBefore, now + 250); // not a request a frame if it keeps failing
    }
    this.refusals.said(status, body, this.session !== null);
  }

  private failed(kind: FailKind): void {
    if (kind === "timeout") {
      const why = this.timeoutGiven
        ? "its model may take up to NPCMIND_DEADLINE_MS: leave timeoutMs out to follow it"
        : `${TIMEOUT_MARGIN_MS / 1000} s past its own deadline for the model: it is overloaded or stalled`;
      this.warn("timeout", `npcmind did not answer within ${this.timeout / 1000} s (${why})`);
    } else this.warn("transport", "npcmind is unreachable");
  }

  private warn(key: string, message: string, native = true): void {
    this.said.say(key, message, native);
  }

  // --- requests ---------------------------------------------------------------------------------

  private make(
    method: "GET" | "POST",
    path: string,
    body: Record<string, unknown> | null,
    after: readonly string[],
    headers?: Record<string, string>,
  ): OutRequest {
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
        this.warn(
          `encode:${item.id}`,
          `${item.type} ${JSON.stringify(item.id)} cannot be sent as JSON (${String(exc)}): left out`,
        );
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

  private streamHost(): StreamHost {
    return {
      roster: this.roster,
      stats: this.stats,
      warn: (key, message) => this.warn(key, message),
      cut: (now) => (this.notBefore = now + 1000), // as after a decide request that failed
    };
  }

  private outboxHost(): OutboxHost {
    return {
      post: (path, body, after) => this.post(path, body, after),
      refusals: this.refusals,
      tracked: (id) => this.roster.entities.has(id),
      warn: (key, message, native) => this.warn(key, message, native),
    };
  }
}

/** An entity's wire object: the given fields, and those optional ones that are set. */
function entityItem(e: Entity): Record<string, unknown> {
  const item: Record<string, unknown> = {
    id: e.id,
    type: e.type,
    observation: e.observation,
    legal_actions: e.legalActions,
  };
  if (e.position !== null) item["position"] = e.position;
  if (e.profile !== null) item["profile"] = e.profile;
  if (e.parent !== null) item["parent"] = e.parent;
  if (e.trigger !== null) item["trigger"] = e.trigger;
  return item;
}
