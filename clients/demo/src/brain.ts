/**
 * The one place the game meets npcmind: the TypeScript SDK's DecideClient (clients/typescript), which keeps
 * the game obligations (epochs, legal actions, expiry, fallbacks, scheduling) and streams its decide answers
 * (docs/streaming.md). The game also shows *why* a character runs its native AI, and *when* its decision came,
 * which the SDK does not tell per entity: this module reads both from the decide answers as they pass through
 * the fetch it gives the SDK (a stream line by line, as the SDK reads it), without touching what it decides.
 */

import { DecideClient, type DecideClientOptions } from "../../typescript/src/decide.js";
import { Lines } from "../../typescript/src/lines.js";
import type { Choice, Outcome, Stats, TrackOptions } from "../../typescript/src/types.js";

export type { Choice, Outcome, Stats, TrackOptions };

const POLICY_EVERY_MS = 1000; // asked of the service only once the demo says one is published (else a 404 here)

/** The ids of a decide request's body, when it was sent as JSON text. */
function askedIds(init: RequestInit | undefined): string[] {
  if (typeof init?.body !== "string") return [];
  try {
    const body = JSON.parse(init.body) as { entities?: { id: string }[] };
    return (body.entities ?? []).map((e) => e.id);
  } catch {
    return [];
  }
}

/** A line's JSON, or null. */
function parse(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return null;
  }
}

/** The SDK's client, and for each entity the code of its last fallback (or `unreachable`, `error 503`). */
export class Brain {
  readonly npc: DecideClient;
  /** Entities whose decide request got no decision (the service unreachable or refusing, or its stream cut). */
  unanswered = 0;
  private readonly why = new Map<string, string | null>();
  private readonly arrived = new Map<string, number>(); // ms from its request's send to its decision's line

  /** `published`: whether npcmind demo says it published a policy for this client (GET /demo/state). */
  constructor(serviceUrl: string, clientId: string, private readonly published: () => boolean, options: DecideClientOptions = {}) {
    // the policy the demo learns as it plays, asked every few seconds (the SDK's default: a minute) so that
    // it takes over soon after each round publishes it
    this.npc = new DecideClient(serviceUrl, clientId, {
      fetchPolicy: true,
      policyRefreshMs: POLICY_EVERY_MS,
      ...options,
      fetch: (input, init) => this.fetch(input, init),
    });
  }

  /** Why the entity has no decision: its last fallback's code, `unreachable`, or null (none known). */
  fallbackOf(id: string): string | null {
    return this.why.get(id) ?? null;
  }

  /** How long after its request was sent the entity's last decision arrived (ms), or null: none yet. */
  arrivalOf(id: string): number | null {
    return this.arrived.get(id) ?? null;
  }

  /** Forget an entity's reason with the entity (a long game spawns many). */
  forget(id: string): void {
    this.why.delete(id);
    this.arrived.delete(id);
  }

  private async fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
    const url = input instanceof Request ? input.url : String(input);
    // none published yet: the service's answer would be a 404, which the browser logs as an error every time
    if (url.includes("/v1/policy?") && !this.published()) return new Response(null, { status: 404 });
    if (!url.endsWith("/v1/decide")) return fetch(input, init);
    const ids = askedIds(init);
    const sent = performance.now();
    let r: Response;
    try {
      r = await fetch(input, init);
    } catch (e) {
      for (const id of ids) this.why.set(id, "unreachable");
      this.unanswered += ids.length;
      throw e;
    }
    if (!r.ok) {
      for (const id of ids) this.why.set(id, `error ${r.status}`);
      this.unanswered += ids.length;
    } else if (r.headers.get("content-type")?.startsWith("application/x-ndjson") && r.body !== null)
      void this.stream(r.clone(), ids, sent);
    else void this.read(r.clone(), sent);
    return r;
  }

  private decided(d: unknown, sent: number): string | null {
    if (typeof d !== "object" || d === null || !("id" in d) || typeof d.id !== "string") return null;
    const { id, source, code } = d as { id: string; source?: string; code?: string };
    this.why.set(id, source === "AI" ? null : (code ?? null));
    this.arrived.set(id, performance.now() - sent);
    return id;
  }

  private async read(r: Response, sent: number): Promise<void> {
    try {
      const body = (await r.json()) as { decisions?: unknown[] };
      for (const d of body.decisions ?? []) this.decided(d, sent);
    } catch {
      // not JSON: the SDK says so itself, and its entities run their native AI
    }
  }

  /** A streamed answer, a line at a time as it arrives; cut before its last line, the entities without one
   * lost their answer with the connection (the SDK gives them its `unavailable` fallback). */
  private async stream(r: Response, ids: string[], sent: number): Promise<void> {
    const lines = new Lines();
    const got = new Set<string>();
    let whole = false;
    try {
      const reader = (r.body as ReadableStream<Uint8Array>).getReader();
      for (let part = await reader.read(); !part.done; part = await reader.read()) {
        for (const line of lines.feed(part.value)) {
          const d = parse(line);
          if (d !== null && typeof d === "object" && "a2g" in d) whole = true;
          else if (d !== null && typeof d === "object" && "source" in d) got.add(this.decided(d, sent) ?? "");
        }
      }
    } catch {
      // the connection lost mid-stream: told below
    }
    if (whole) return;
    const lost = ids.filter((id) => !got.has(id));
    for (const id of lost) this.why.set(id, "unreachable");
    this.unanswered += lost.length;
  }
}
