/** Telemetry and reports (no I/O): what the game told, sent as the service's population and outcomes. */

import type { Refusals } from "./refusals.js";
import type { Entity, OutRequest } from "./types.js";

export const TELEMETRY_BATCH = 1000;
export const REPORTS_A_REQUEST = 256;
export const MAX_QUEUED_REPORTS = 10_000; // held while the service is unreachable; beyond it the oldest tenth goes

/** How the outbox makes a request (the scheduler's refs, headers and encoding) and tells what it met. */
export interface OutboxHost {
  post(path: string, body: Record<string, unknown>, after?: readonly string[]): OutRequest | null;
  /** Entities the service refused as malformed: sent alone from now on (the scheduler's). */
  readonly refusals: Refusals;
  /** Whether an entity decides (tracked): those are released from going alone by /v1/decide. */
  tracked(id: string): boolean;
  warn(key: string, message: string, native: boolean): void;
}

type Sent = { kind: "telemetry"; body: Record<string, unknown> } | { kind: "report" };
type Item = Record<string, unknown> & { id: string; type: string };

/** Queues telemetry (changed entities only, scene and removals with the first part) and reports. */
export class Outbox {
  private observed = new Map<string, Item>();
  private removed: string[] = [];
  private scene: string | null = null;
  private reports: Record<string, unknown>[] = [];
  private batch = TELEMETRY_BATCH; // halved on a 413: observations too rich for the body limit
  private sent = new Map<string, Sent>();
  private newest: string[] = []; // refs of the newest telemetry tick: a decide request waits for them
  private again: Record<string, unknown>[] = []; // bodies to send again: halved, or without a refused entity
  private last = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly host: OutboxHost,
    private readonly everyMs: number,
  ) {}

  /** An observe-only entity (the player): sent as telemetry, never asked. */
  observe(id: string, type: string, fields: Record<string, unknown>, position: number[] | null): void {
    const item: Item = { id, type, fields };
    if (position !== null) item["position"] = position;
    this.observed.set(id, item);
  }

  /** Forget an observed entity; whether it was one. */
  forget(id: string): boolean {
    return this.observed.delete(id);
  }

  /** An entity left: the service hears it with the next telemetry. */
  remove(id: string): void {
    this.removed.push(id);
  }

  /** A new scene: the service resets its population with the next telemetry. */
  setScene(scene: string): void {
    this.scene = scene;
  }

  /** Queue a report; the oldest tenth goes when the service has been away too long. */
  report(item: Record<string, unknown>): void {
    if (this.reports.length >= MAX_QUEUED_REPORTS) {
      this.reports.splice(0, MAX_QUEUED_REPORTS / 10);
      this.host.warn(
        "reports-dropped",
        `more than ${MAX_QUEUED_REPORTS} reports wait for npcmind: the oldest are dropped`,
        false,
      );
    }
    this.reports.push(item);
  }

  /** Reports still waiting to be sent. */
  get queuedReports(): number {
    return this.reports.length;
  }

  /** One request of queued reports (at most 256), or none; how many it carries. */
  sendReports(clientId: string): { request: OutRequest | null; count: number } {
    if (this.reports.length === 0) return { request: null, count: 0 };
    const reports = this.reports.splice(0, REPORTS_A_REQUEST);
    const request = this.host.post("/v1/report", { client_id: clientId, reports });
    if (request !== null) this.sent.set(request.ref, { kind: "report" });
    return { request, count: reports.length };
  }

  /** The telemetry due now: bodies to send again first (halved, or without a refused entity), then, every
   * `telemetryMs`, the changed entities, the observed ones, the removals and the scene (none when nothing is new). */
  sendTelemetry(now: number, clientId: string, epoch: number, entities: Iterable<Entity>): OutRequest[] {
    const again = this.again;
    this.again = [];
    const bodies = this.telemetry(now, clientId, epoch, entities);
    if (bodies.length > 0) this.newest = [];
    const out: OutRequest[] = [];
    for (const body of [...again, ...bodies]) this.push(body, out);
    return out;
  }

  private telemetry(
    now: number,
    clientId: string,
    epoch: number,
    entities: Iterable<Entity>,
  ): Record<string, unknown>[] {
    if (now - this.last < this.everyMs) return [];
    const items: Item[] = [];
    for (const e of entities) {
      if (!e.changed) continue;
      e.changed = false;
      const item: Item = { id: e.id, type: e.type, fields: e.observation };
      if (e.position !== null) item["position"] = e.position;
      if (e.state !== null) item["state"] = e.state;
      if (e.parent !== null) item["parent"] = e.parent;
      items.push(item);
    }
    items.push(...this.observed.values());
    if (items.length === 0 && this.removed.length === 0 && this.scene === null) return [];
    this.last = now;
    const alone = items.filter((i) => this.host.refusals.alone.has(i.id));
    const together = items.filter((i) => !this.host.refusals.alone.has(i.id));
    const bodies: Record<string, unknown>[] = [];
    let first: Record<string, unknown> = this.scene !== null ? { scene: this.scene } : {};
    for (let i = 0; i < Math.max(together.length, 1); i += this.batch) {
      const body: Record<string, unknown> = {
        client_id: clientId,
        epoch,
        entities: together.slice(i, i + this.batch),
        ...first,
      };
      if (i === 0) body["removed"] = this.removed;
      bodies.push(body);
      first = {};
    }
    if (alone.length > 0) bodies.push({ client_id: clientId, epoch, entities: alone }); // cannot sink the others
    this.observed.clear();
    this.removed = [];
    this.scene = null;
    return bodies;
  }

  /** Refs of the newest telemetry still unanswered: a decide request goes after them. */
  pendingTelemetry(): string[] {
    return this.newest.filter((ref) => this.sent.has(ref));
  }

  /** Whether a request is the outbox's. */
  owns(ref: string): boolean {
    return this.sent.has(ref);
  }

  /** An answer to one of the outbox's requests; true when the service refused the request as a whole (the
   * scheduler then backs off as for any refusal). What goes again goes with the next telemetry. */
  answer(ref: string, status: number, body: unknown): boolean {
    const sent = this.sent.get(ref);
    this.sent.delete(ref);
    if (sent?.kind === "telemetry" && status === 200) this.taken(sent.body);
    if (sent === undefined || sent.kind === "report" || status === 200) return status !== 200;
    const items = sent.body["entities"] as Item[];
    if (status === 413 && items.length > 1) {
      // rich observations: fewer entities a request, from now on too, and this one again in two
      const half = Math.floor(items.length / 2);
      this.batch = Math.max(1, Math.min(this.batch, half));
      this.again.push({ ...sent.body, entities: items.slice(0, half) });
      const { scene: _scene, removed: _removed, ...rest } = sent.body; // those went with the first
      this.again.push({ ...rest, entities: items.slice(half) });
      return false;
    }
    const bad = this.host.refusals.entities(status, body, new Map(items.map((i) => [i.id, i.type])));
    if (bad === null) return true;
    const kept: Record<string, unknown> = { ...sent.body, entities: items.filter((i) => !bad.has(i.id)) };
    if ((kept["entities"] as Item[]).length > 0 || (kept["removed"] as string[] | undefined)?.length || kept["scene"]) {
      this.again.push(kept);
    }
    return false;
  }

  /** A request that got no answer is forgotten (telemetry is sent again when the entities change). */
  failed(ref: string): void {
    this.sent.delete(ref);
  }

  private taken(body: Record<string, unknown>): void {
    // an observed entity taken: it may go with the others again (one that decides: by /v1/decide)
    const alone = this.host.refusals.alone;
    for (const item of body["entities"] as Item[]) if (!this.host.tracked(item.id)) alone.delete(item.id);
  }

  private push(body: Record<string, unknown>, out: OutRequest[]): void {
    const request = this.host.post("/v1/telemetry", body);
    if (request === null) return;
    this.sent.set(request.ref, { kind: "telemetry", body });
    this.newest.push(request.ref);
    out.push(request);
  }
}
