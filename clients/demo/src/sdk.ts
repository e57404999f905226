/**
 * A small decision client for the demo, kept until the TypeScript SDK (clients/typescript) lands: it keeps
 * the same game obligations as the Python `DecideClient` (an answer for an old epoch is dropped, an action is
 * re-checked against the legal actions sent and those of now, a decision expires after its ttl_ms, a fallback
 * or an error gives null: run the native AI), with the same method names, so switching is one import.
 */

/** One of the outcomes a report may tell (POST /v1/report). */
export type Outcome = "done" | "failed" | "interrupted" | "rejected";

/** A usable decision for one entity: from the model (`AI`, fresh or cached). */
export interface Choice {
  readonly action: string;
  readonly source: "AI" | "local";
  readonly confidence: number | null;
  /** On the client's clock, in ms. */
  readonly expiresAt: number;
  readonly decisionId: string | null;
  readonly cached: boolean;
  readonly label: string | null;
}

/** What the game may add to an entity beside its observation and legal actions. */
export interface TrackOptions {
  position?: number[] | null;
  profile?: string | null;
  parent?: string | null;
}

/** Counters a game can show in a debug overlay; the tests read them too. */
export interface Stats {
  requests: number;
  asked: number;
  ai: number;
  cached: number;
  local: number;
  fallbacks: Record<string, number>;
  droppedEpoch: number;
  illegal: number;
  errors: number;
  reportsSent: number;
  refused: number;
}

/** How the client is set up; every field has the Python SDK's default. */
export interface ClientOptions {
  world?: Record<string, unknown>;
  scope?: string | null;
  scopeState?: Record<string, unknown> | null;
  epoch?: number;
  eventWindowMs?: number;
  telemetryMs?: number;
  timeoutMs?: number;
  clock?: () => number;
}

interface Tracked {
  id: string;
  type: string;
  observation: Record<string, unknown>;
  legalActions: string[];
  opts: TrackOptions;
  trigger: string | null;
  due: number;
  inFlight: boolean;
  choice: Choice | null;
  why: string | null;
}

const BATCH = 16;
const WORKERS = 4;
const REASK_GAP_MS = 500;
const DEFAULT_TIMING: [number, number] = [4000, 12000];

/** One game's client of an npcmind service: call `tick()` every frame, `action()` per entity. */
export class DecideClient {
  world: Record<string, unknown>;
  scope: string | null;
  scopeState: Record<string, unknown> | null;
  readonly stats: Stats = {
    requests: 0, asked: 0, ai: 0, cached: 0, local: 0, fallbacks: {}, droppedEpoch: 0, illegal: 0, errors: 0,
    reportsSent: 0, refused: 0,
  };
  private _epoch: number;
  private readonly entities = new Map<string, Tracked>();
  private observed: Record<string, unknown>[] = [];
  private removed: string[] = [];
  private reports: Record<string, unknown>[] = [];
  private scene: string | null = null;
  private types = new Map<string, [number, number]>();
  private manifestAsked = false;
  private inFlight = 0;
  private count = 0;
  private lastReask = -Infinity;
  private reaskPending = false;
  private lastTelemetry = -Infinity;
  private notBefore = -Infinity;
  private closed = false;
  private readonly clock: () => number;
  private readonly timeoutGiven: boolean;
  private readonly opts: Required<Pick<ClientOptions, "eventWindowMs" | "telemetryMs" | "timeoutMs">>;

  constructor(private readonly url: string, readonly clientId: string, options: ClientOptions = {}) {
    this.world = options.world ?? {};
    this.scope = options.scope ?? null;
    this.scopeState = options.scopeState ?? null;
    this._epoch = options.epoch ?? 0;
    this.clock = options.clock ?? (() => performance.now());
    this.timeoutGiven = options.timeoutMs !== undefined;
    this.opts = {
      eventWindowMs: options.eventWindowMs ?? 50,
      telemetryMs: options.telemetryMs ?? 500,
      timeoutMs: options.timeoutMs ?? 15000, // until GET /v1/health tells the service's deadline
    };
  }

  /** The game's epoch: answers to requests sent under another epoch are dropped. */
  get epoch(): number {
    return this._epoch;
  }

  set epoch(value: number) {
    if (value === this._epoch) return;
    this._epoch = value;
    const now = this.clock();
    for (const e of this.entities.values()) {
      e.choice = null; // decided for the old state: no longer holds
      e.due = Math.min(e.due, now);
    }
  }

  /** A new scene (level, map): the service resets its population with the next telemetry. */
  setScene(scene: string): void {
    this.scene = scene;
  }

  /** Add an entity that decides, or update what it sees and may do now. */
  track(id: string, type: string, observation: Record<string, unknown>, legalActions: string[], opts: TrackOptions = {}): void {
    const e = this.entities.get(id);
    if (e === undefined) {
      const fresh = { id, type, observation, legalActions, opts, trigger: null, due: this.clock(), inFlight: false };
      this.entities.set(id, { ...fresh, choice: null, why: null });
      return;
    }
    Object.assign(e, { type, observation, legalActions, opts });
  }

  /** An observe-only entity (the player): sent as telemetry, never asked. */
  observe(id: string, type: string, fields: Record<string, unknown>, position?: number[]): void {
    this.observed = this.observed.filter((o) => o["id"] !== id);
    this.observed.push(position ? { id, type, fields, position } : { id, type, fields });
  }

  /** The entity left the scene (died): forget it and tell the service. */
  untrack(id: string): void {
    if (this.entities.delete(id)) this.removed.push(id);
  }

  /** Something happened to the entity (one of its type's events): ask for it at once. */
  event(id: string, trigger: string): boolean {
    const e = this.entities.get(id);
    if (e === undefined) return false;
    e.trigger = trigger;
    e.due = Math.min(e.due, this.clock() + this.opts.eventWindowMs);
    return true;
  }

  /** What became of the entity's current AI decision; sent with the next tick. */
  report(id: string, outcome: Outcome, detail?: string): boolean {
    const decisionId = this.entities.get(id)?.choice?.decisionId;
    if (!decisionId) return false;
    this.reports.push(detail ? { decision_id: decisionId, outcome, detail: detail.slice(0, 200) } : { decision_id: decisionId, outcome });
    return true;
  }

  /** The entity's live decision, or null: run the game's native AI. */
  action(id: string, legalNow?: string[]): Choice | null {
    const e = this.entities.get(id);
    const c = e?.choice;
    if (!e || !c) return null;
    if (this.clock() >= c.expiresAt) {
      e.choice = null;
      e.why = "expired";
      return null;
    }
    return (legalNow ?? e.legalActions).includes(c.action) ? c : null;
  }

  /** Why an entity has no decision: the fallback code, `unreachable`, `expired`, or null when not asked yet. */
  fallbackOf(id: string): string | null {
    return this.entities.get(id)?.why ?? null;
  }

  /** Send what is due. Never blocks, never throws for the network: answers apply as they come. */
  tick(now: number = this.clock()): void {
    if (this.closed) return;
    if (!this.manifestAsked && now >= this.notBefore) this.readManifest();
    if (this.entities.size !== this.count) {
      this.count = this.entities.size;
      this.reaskPending = true;
    }
    if (this.reaskPending && now - this.lastReask >= REASK_GAP_MS) {
      this.reaskPending = false;
      this.lastReask = now;
      for (const e of this.entities.values()) e.due = Math.min(e.due, now);
    }
    if (now < this.notBefore) return; // the service is down or asked us to wait
    if (now - this.lastTelemetry >= this.opts.telemetryMs) this.sendTelemetry(now);
    if (this.reports.length) {
      const reports = this.reports.splice(0, 256);
      this.stats.reportsSent += reports.length;
      void this.call("POST", "/v1/report", { client_id: this.clientId, reports }).catch(() => undefined);
    }
    this.ask(now);
  }

  /** What the model saw in this session's last decide request (GET /v1/prompt); null when nothing yet. */
  async lastPrompt(): Promise<Record<string, unknown> | null> {
    try {
      const [status, body] = await this.call("GET", `/v1/prompt?client_id=${encodeURIComponent(this.clientId)}`, null);
      return status === 200 && typeof body === "object" && body !== null ? (body as Record<string, unknown>) : null;
    } catch {
      return null;
    }
  }

  /** Stop sending; answers still in flight are ignored. */
  close(): void {
    this.closed = true;
  }

  private timing(type: string): [number, number] {
    return this.types.get(type) ?? DEFAULT_TIMING;
  }

  private readManifest(): void {
    this.manifestAsked = true;
    this.call("GET", "/v1/health", null).then(([status, body]) => {
      // a slow model's service waits up to its deadline: wait that long, and a margin, for its answers
      const deadline = (body as { deadline_ms?: unknown }).deadline_ms;
      if (status === 200 && typeof deadline === "number" && deadline > 0 && !this.timeoutGiven) this.opts.timeoutMs = deadline + 5000;
      return this.call("GET", "/v1/manifest", null);
    }).then(([status, body]) => {
      const m = (body as { manifest?: { defaults?: Record<string, number>; types?: Record<string, Record<string, number>> } }).manifest;
      if (status !== 200 || !m) throw new Error(`manifest: ${status}`);
      const d = m.defaults ?? {};
      for (const [name, t] of Object.entries(m.types ?? {})) {
        this.types.set(name, [t["refresh_ms"] ?? d["refresh_ms"] ?? 4000, t["ttl_ms"] ?? d["ttl_ms"] ?? 12000]);
      }
    }).catch(() => {
      this.manifestAsked = false; // asked again a second later; the defaults hold meanwhile
      this.notBefore = Math.max(this.notBefore, this.clock() + 1000);
    });
  }

  private ask(now: number): void {
    const due = [...this.entities.values()].filter((e) => e.due <= now && !e.inFlight);
    due.sort((a, b) => Number(a.trigger === null) - Number(b.trigger === null) || a.due - b.due);
    while (due.length && this.inFlight < WORKERS) this.send(due.splice(0, BATCH), now);
  }

  private send(batch: Tracked[], now: number): void {
    const entities = batch.map((e) => {
      const item: Record<string, unknown> = { id: e.id, type: e.type, observation: { ...e.observation }, legal_actions: [...e.legalActions] };
      for (const k of ["position", "profile", "parent"] as const) if (e.opts[k] != null) item[k] = e.opts[k];
      if (e.trigger) item["trigger"] = e.trigger;
      e.due = now + this.timing(e.type)[0];
      e.inFlight = true;
      e.trigger = null;
      return item;
    });
    const legal = new Map(batch.map((e) => [e.id, [...e.legalActions]]));
    const body: Record<string, unknown> = { client_id: this.clientId, epoch: this._epoch, world: { ...this.world }, entities };
    if (this.scope !== null) body["scope"] = this.scope;
    if (this.scope !== null && this.scopeState !== null) body["scope_state"] = { ...this.scopeState };
    const epoch = this._epoch;
    this.stats.requests += 1;
    this.stats.asked += batch.length;
    this.inFlight += 1;
    this.call("POST", "/v1/decide", body)
      .then(([status, answer]) => this.apply(status, answer, epoch, legal))
      .catch(() => this.failed(legal, "unreachable"))
      .finally(() => {
        this.inFlight -= 1;
      });
  }

  private apply(status: number, answer: unknown, epoch: number, legal: Map<string, string[]>): void {
    if (status !== 200) {
      this.stats.errors += 1;
      if (status === 429 || status >= 500) this.notBefore = this.clock() + 1000;
      this.release(legal, `error ${status}`);
      return;
    }
    const a = answer as { epoch?: number; decisions?: Record<string, unknown>[] };
    if (a.epoch !== this._epoch || epoch !== this._epoch) {
      this.stats.droppedEpoch += 1;
      this.release(legal, null, this.clock()); // asked again at once, for the epoch of now
      return;
    }
    const now = this.clock();
    for (const d of a.decisions ?? []) {
      const e = this.entities.get(String(d["id"]));
      const sent = legal.get(String(d["id"]));
      if (!e || !sent) continue;
      e.inFlight = false;
      if (d["source"] === "AI" && sent.includes(String(d["action"]))) {
        this.stats.ai += 1;
        this.stats.cached += d["cached"] ? 1 : 0;
        e.choice = {
          action: String(d["action"]), source: "AI", confidence: (d["confidence"] as number | undefined) ?? null,
          expiresAt: now + Number(d["ttl_ms"]), decisionId: (d["decision_id"] as string | undefined) ?? null,
          cached: Boolean(d["cached"]), label: (d["label"] as string | undefined) ?? null,
        };
        e.why = null;
      } else {
        const code = d["source"] === "AI" ? "illegal" : String(d["code"]);
        if (code === "illegal") this.stats.illegal += 1;
        else this.stats.fallbacks[code] = (this.stats.fallbacks[code] ?? 0) + 1;
        e.choice = null;
        e.why = code;
      }
    }
    this.release(legal, null);
  }

  private failed(legal: Map<string, string[]>, why: string): void {
    this.stats.errors += 1;
    this.notBefore = this.clock() + 1000;
    this.release(legal, why);
  }

  private release(legal: Map<string, string[]>, why: string | null, due?: number): void {
    for (const id of legal.keys()) {
      const e = this.entities.get(id);
      if (!e || !e.inFlight) continue;
      e.inFlight = false;
      if (due !== undefined) e.due = Math.min(e.due, due);
      if (why !== null) {
        e.why = why;
        e.choice = null; // an error: native AI until the next answer
      }
    }
  }

  private sendTelemetry(now: number): void {
    const items: Record<string, unknown>[] = [...this.entities.values()].map((e) => {
      const item: Record<string, unknown> = { id: e.id, type: e.type, fields: { ...e.observation } };
      if (e.opts.position) item["position"] = e.opts.position;
      if (e.opts.parent) item["parent"] = e.opts.parent;
      return item;
    });
    items.push(...this.observed);
    if (!items.length && !this.removed.length && this.scene === null) return;
    this.lastTelemetry = now;
    const body: Record<string, unknown> = { client_id: this.clientId, epoch: this._epoch, entities: items, removed: this.removed };
    if (this.scene !== null) body["scene"] = this.scene;
    this.observed = [];
    this.removed = [];
    this.scene = null;
    void this.call("POST", "/v1/telemetry", body).catch(() => undefined);
  }

  private async call(method: "GET" | "POST", path: string, body: Record<string, unknown> | null): Promise<[number, unknown]> {
    const init: RequestInit = { method, signal: AbortSignal.timeout(this.opts.timeoutMs) };
    if (body !== null) {
      init.body = JSON.stringify(body);
      init.headers = { "content-type": "application/json" };
    }
    const r = await fetch(this.url + path, init);
    let payload: unknown = null;
    try {
      payload = await r.json();
    } catch {
      payload = null;
    }
    return [r.status, payload];
  }
}
