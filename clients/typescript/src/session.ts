/** A hosted service's session (no I/O): opened with the api key, renewed at 90% of its life, reopened on a 401. */

import { errorLine, isObject } from "./errors.js";

export const RENEW_RETRY_MS = 30_000; // a renewal the service refused is tried again after this, with the old token

/** The session token a hosted client sends, and when to ask for the next one. */
export class Session {
  private token: string | null = null;
  private renewAt = Number.POSITIVE_INFINITY; // on the client's clock
  /** The ref of the POST /v1/session in flight, if any. */
  pending: string | null = null;

  constructor(readonly apiKey: string) {}

  /** Whether requests may go: a token is held (an old one while it is renewed). */
  get open(): boolean {
    return this.token !== null;
  }

  /** Whether requests may be made: a token held, or one asked for (they wait for it). */
  get ready(): boolean {
    return this.token !== null || this.pending !== null;
  }

  /** The session request the others must wait for: the first one (a renewal goes on with the old token). */
  awaited(): string[] {
    return this.pending !== null && this.token === null ? [this.pending] : [];
  }

  /** Whether to ask for a session now: none yet, or the token near its expiry (not a 401 and a lost request). */
  due(now: number): boolean {
    return this.pending === null && (this.token === null || now >= this.renewAt);
  }

  /** The headers of the session request itself: the api key. */
  keyHeaders(): Record<string, string> {
    return { authorization: `Bearer ${this.apiKey}` };
  }

  /** The headers of every other request; while the first token is asked for, `Bearer @<ref>`: the transport
   * puts in the `session_token` the answer to request `ref` brings. */
  headers(): Record<string, string> {
    if (this.token !== null) return { authorization: `Bearer ${this.token}` };
    return this.pending !== null ? { authorization: `Bearer @${this.pending}` } : {};
  }

  /** The session request's answer; the reason when it was refused. */
  answer(status: number, body: unknown, now: number): string | null {
    this.pending = null;
    const token = sessionToken(status, body);
    if (token === null || !isObject(body)) {
      if (this.token !== null) this.renewAt = now + RENEW_RETRY_MS; // a tenth of its life left: go on with it
      return `npcmind did not open a session (POST /v1/session answered ${status}: ${errorLine(body, "(no session_token)")})`;
    }
    const ttl = body["expires_in_s"];
    this.token = token;
    this.renewAt = typeof ttl === "number" ? now + 0.9 * ttl * 1000 : Number.POSITIVE_INFINITY;
    return null;
  }

  /** The session request got no answer. */
  failed(now: number): void {
    this.pending = null;
    if (this.token !== null) this.renewAt = now + RENEW_RETRY_MS;
  }

  /** The service said the session ended (a 401): a new one before the next request. */
  expire(): void {
    this.token = null;
    this.renewAt = Number.POSITIVE_INFINITY;
  }
}

/** The token a POST /v1/session answer brings, or null: read here alone, by the session and by the transport
 * (which puts it in the requests made while it was asked for, before the game's next tick applies it). */
export function sessionToken(status: number, body: unknown): string | null {
  const token = status === 200 && isObject(body) ? body["session_token"] : null;
  return typeof token === "string" && token !== "" ? token : null;
}
