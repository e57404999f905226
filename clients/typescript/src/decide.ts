/** The game-facing decision client: the scheduler's rules, the outbox, and `fetch`, applied in the game loop.
 *
 * A game calls `tick()` once a frame and `action(id, legalNow)` for each entity; null means "run your native
 * AI". The network never blocks the loop and never throws into it: fetch promises resolve into a queue, and
 * their answers are applied inside `tick()`, like the Python SDK's worker threads. */

import type { LocalPolicy } from "./cascade.js";
import { isObject } from "./errors.js";
import { type Policy, POLICY_MAX_BYTES } from "./policy.js";
import { Scheduler, type SchedulerOptions } from "./scheduler.js";
import { isTooLarge, MAX_PROMPT_BYTES, MIN_CHUNK_BYTES, TICK_STREAM_BYTES } from "./limits.js";
import { type Settled, Transport } from "./transport.js";
import type { Choice, Logger, OutRequest, Outcome, Stats, TrackOptions } from "./types.js";

/** How a DecideClient is set up: the scheduler's options, and where its time and HTTP come from. */
export interface DecideClientOptions extends Omit<SchedulerOptions, "clientId"> {
  /** Injectable fetch (a proxy, a test); the global one otherwise. */
  fetch?: typeof fetch;
  /** The game's clock in ms; performance.now() otherwise. */
  clock?: () => number;
  log?: Logger;
}

/** What a value is, for a setter's error (never the value itself: it may be large). */
function kindOf(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`;
}

// over 15 methods: the game-facing API, one method or accessor per thing a game does (Python: DecideClient, the same)
/** One game's client of an npcmind service: call `tick()` every frame, `action()` per entity. */
export class DecideClient {
  private readonly core: Scheduler;
  private readonly transport: Transport;
  private readonly clock: () => number;
  private closed = false;
  private backlog: Settled[] = []; // what came and waits for a tick with room (TICK_STREAM_BYTES)
  private readonly stopped = new Set<string>(); // streams the scheduler ended: what still comes of them is dropped

  constructor(serviceUrl: string, clientId: string, options: DecideClientOptions = {}) {
    if (!/^https?:\/\/[^/]/.test(serviceUrl)) {
      throw new TypeError(
        `serviceUrl: ${JSON.stringify(serviceUrl)} is not an http(s) URL (e.g. http://127.0.0.1:8080)`,
      );
    }
    if (!clientId) throw new TypeError("clientId: must be a non-empty string (the game's name for itself)");
    this.core = new Scheduler({ ...options, clientId });
    this.clock = options.clock ?? (() => performance.now());
    const transport = {
      baseUrl: serviceUrl,
      timeoutMs: () => this.core.timeoutMs,
      policyMaxBytes: options.policyMaxBytes ?? POLICY_MAX_BYTES,
    };
    this.transport = new Transport(options.fetch ? { ...transport, fetch: options.fetch } : transport);
  }

  /** The game's epoch: answers to requests sent under another epoch are dropped. */
  get epoch(): number {
    return this.core.epoch;
  }

  set epoch(value: number) {
    this.core.roster.setEpoch(value, this.clock());
  }

  /** Counters for a debug overlay. */
  get stats(): Stats {
    return this.core.stats;
  }

  /** The game's own local policy (a `Policy` or a function); it may be changed as the game goes. */
  get policy(): LocalPolicy | null {
    return this.core.cascade.own;
  }

  set policy(value: LocalPolicy | null) {
    this.core.cascade.own = value;
  }

  /** The service's distilled policy in use (fetched from GET /v1/policy), or null: none yet, fetching off, or
   * the service's is for another manifest version. */
  get servicePolicy(): Policy | null {
    return this.core.cascade.fetched;
  }

  /** The world the service sees beside the entities: change its fields, or set a new one, as the game goes. */
  get world(): Record<string, unknown> {
    return this.core.world;
  }

  set world(value: Record<string, unknown>) {
    if (!isObject(value)) throw new TypeError(`world: must be an object, not ${kindOf(value)}`);
    this.core.world = value;
  }

  /** The manifest's scope the game is in (a boss fight), or null; it may change as the game goes: the next
   * decide request carries it, and the local policy sees its state from then on. */
  get scope(): string | null {
    return this.core.scope;
  }

  set scope(value: string | null) {
    if (value !== null && typeof value !== "string")
      throw new TypeError(`scope: must be a scope's name or null, not ${kindOf(value)}`);
    this.core.scope = value;
  }

  /** The scope's state, sent with the scope (and given to the local policy while a scope is set). */
  get scopeState(): Record<string, unknown> | null {
    return this.core.scopeState;
  }

  set scopeState(value: Record<string, unknown> | null) {
    if (value !== null && !isObject(value))
      throw new TypeError(`scopeState: must be an object or null, not ${kindOf(value)}`);
    this.core.scopeState = value;
  }

  /** How sure the local policy must be to decide an entity here (the cascade); the next choice uses it. */
  get threshold(): number {
    return this.core.roster.threshold;
  }

  set threshold(value: number) {
    if (typeof value !== "number" || !Number.isFinite(value)) {
      const shown = typeof value === "number" ? String(value) : kindOf(value);
      throw new TypeError(`threshold: must be a finite number, not ${shown}`);
    }
    this.core.roster.threshold = value;
  }

  /** How long a request may take before its entities use their native AI. */
  get timeoutMs(): number {
    return this.core.timeoutMs;
  }

  /** A new scene (level, map): the service resets its population with the next telemetry. */
  setScene(scene: string): void {
    this.core.setScene(scene);
  }

  /** Add an entity that decides, or update what it sees and may do now. */
  track(
    id: string,
    type: string,
    observation: Record<string, unknown>,
    legalActions: string[],
    options: TrackOptions = {},
  ): void {
    this.core.roster.track(id, type, observation, legalActions, options, this.clock());
  }

  /** An observe-only entity (the player): sent as telemetry, never asked. */
  observe(id: string, type: string, fields: Record<string, unknown>, position: number[] | null = null): void {
    this.core.observe(id, type, fields, position);
  }

  /** The entity left the scene: forget it and tell the service. */
  untrack(id: string): void {
    this.core.untrack(id);
  }

  /** Something happened to the entity: ask for it at once; false for one not tracked. */
  event(id: string, trigger: string): boolean {
    return this.core.roster.event(id, trigger, this.clock());
  }

  /** What became of the entity's current AI decision; sent with the next tick. */
  report(id: string, outcome: Outcome, detail: string | null = null): boolean {
    return this.core.report(id, outcome, detail);
  }

  /** The entity's live decision, or null: run the game's native AI. */
  action(id: string, legalNow: readonly string[] | null = null): Choice | null {
    return this.core.roster.action(id, legalNow, this.clock());
  }

  /** Apply the answers that came in, then send what is due. Never blocks, never throws for the network. */
  tick(now?: number): void {
    if (this.closed) return; // a frame after close(): nothing to send, nothing to throw
    const at = now ?? this.clock();
    this.apply(at);
    this.send(this.core.tick(at));
  }

  /** Send the queued reports, wait until every request sent so far has answered (or `timeoutMs` passed),
   * and apply the answers: for turn-based games, tests, and before `close()`. True if nothing is in flight. */
  async wait(timeoutMs = 10_000): Promise<boolean> {
    if (!this.closed) this.send(this.core.flushReports());
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    await Promise.race([this.transport.idle(), late]);
    clearTimeout(timer);
    this.apply(this.clock(), Number.POSITIVE_INFINITY); // a blocking call: what came is applied whole
    return this.transport.inFlight === 0 && this.core.inFlight === 0;
  }

  /** What the model saw in this client's last decide request and what it answered (GET /v1/prompt), for a
   * debug overlay; null when there is nothing yet or the service cannot say. It never throws. */
  async lastPrompt(): Promise<Record<string, unknown> | null> {
    const path = `/v1/prompt?client_id=${encodeURIComponent(this.core.clientId)}`;
    const got = await this.transport.call("GET", path, this.core.headers(), MAX_PROMPT_BYTES, "MAX_PROMPT_BYTES");
    if ("fail" in got || got.status !== 200 || typeof got.body !== "object" || got.body === null) return null;
    if (isTooLarge(got.body)) return null; // past MAX_PROMPT_BYTES: not read further
    return got.body as Record<string, unknown>;
  }

  /** Stop without waiting for answers (a game that quits must not hang); call `wait()` first to keep them. */
  close(): void {
    this.closed = true;
    this.transport.close();
  }

  /** Apply what came, in order, up to TICK_STREAM_BYTES of streamed bytes a tick (the rest waits for the next
   * frame, so a flood of lines never holds one); what comes of a stream the scheduler ended is dropped. */
  private apply(now: number, room = TICK_STREAM_BYTES): void {
    for (const s of this.transport.drain()) this.backlog.push(s);
    let at = 0;
    for (; at < this.backlog.length && room > 0; at++) {
      const s = this.backlog[at] as Settled;
      if ("chunk" in s || "end" in s) {
        if (this.stopped.has(s.ref)) {
          if ("end" in s) this.stopped.delete(s.ref);
          continue;
        }
      }
      if ("fail" in s) this.core.fail(s.ref, s.fail, now);
      else if ("chunk" in s) {
        room -= Math.max(s.chunk.length, MIN_CHUNK_BYTES);
        if (!this.core.chunk(s.ref, s.chunk, now)) {
          this.stopped.add(s.ref);
          this.transport.stop(s.ref);
        }
      } else if ("end" in s) this.core.end(s.ref, now, s.failed, s.failed === null ? s.error : "");
      else this.core.answer(s.ref, s.status, s.body, s.headers, now);
    }
    this.backlog = this.backlog.slice(at);
  }

  private send(requests: OutRequest[]): void {
    for (const r of requests) this.transport.send(r);
  }
}
