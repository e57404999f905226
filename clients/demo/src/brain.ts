/**
 * The one place the game meets npcmind: the TypeScript SDK's DecideClient (clients/typescript), which keeps
 * the game obligations (epochs, legal actions, expiry, fallbacks, scheduling). The game also shows *why* a
 * character runs its native AI, which the SDK does not tell per entity: this module reads it from the decide
 * answers as they pass through the fetch it gives the SDK, without touching what the SDK decides.
 */

import { DecideClient, type DecideClientOptions } from "../../typescript/src/decide.js";
import type { Choice, Outcome, Stats, TrackOptions } from "../../typescript/src/types.js";

export type { Choice, Outcome, Stats, TrackOptions };

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

/** The SDK's client, and for each entity the code of its last fallback (or `unreachable`, `error 503`). */
export class Brain {
  readonly npc: DecideClient;
  /** Entities whose decide request got no decisions at all (the service unreachable or refusing). */
  unanswered = 0;
  private readonly why = new Map<string, string | null>();

  constructor(serviceUrl: string, clientId: string, options: DecideClientOptions = {}) {
    // no learned policy in a game of minutes (distill needs 100 decisions a type): without this the SDK asks
    // GET /v1/policy every minute, and the browser logs each 404 as a console error
    this.npc = new DecideClient(serviceUrl, clientId, {
      fetchPolicy: false,
      ...options,
      fetch: (input, init) => this.fetch(input, init),
    });
  }

  /** Why the entity has no decision: its last fallback's code, `unreachable`, or null (none known). */
  fallbackOf(id: string): string | null {
    return this.why.get(id) ?? null;
  }

  /** Forget an entity's reason with the entity (a long game spawns many). */
  forget(id: string): void {
    this.why.delete(id);
  }

  private async fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
    const url = input instanceof Request ? input.url : String(input);
    if (!url.endsWith("/v1/decide")) return fetch(input, init);
    const ids = askedIds(init);
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
    } else void this.read(r.clone());
    return r;
  }

  private async read(r: Response): Promise<void> {
    try {
      const body = (await r.json()) as { decisions?: { id: string; source: string; code?: string }[] };
      for (const d of body.decisions ?? []) this.why.set(d.id, d.source === "AI" ? null : (d.code ?? null));
    } catch {
      // not JSON: the SDK says so itself, and its entities run their native AI
    }
  }
}
