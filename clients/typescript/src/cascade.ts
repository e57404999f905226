/** The cascade's local policy (no I/O): the game's own, or the one the service distilled from the model's
 * decisions (GET /v1/policy), so a game gets better without a release. A port of the Python SDK's
 * `npcmind_client/cascade.py`, pinned by the same conformance cases.
 *
 * The service's policy is asked once the manifest's version is known, again every `policyRefreshMs` (with
 * `If-None-Match`: a 304 costs no body) and at once when the manifest version changes. A 200 is loaded for the
 * manifest version the SDK knows; one for another version is never used (said once, none kept, and the
 * manifest asked again: the service may run a new one); a 404 means none yet. By default a game that gave its
 * own `policy` keeps it and fetches nothing; one that gave none uses the service's (its operator opted in by
 * running `distill`); `fetchPolicy` turns fetching on or off either way, and a fetched policy, while one is
 * usable, decides in place of the game's own. */

import { Policy, POLICY_MAX_BYTES, PolicyError } from "./policy.js";
import type { SayOnce } from "./say.js";
import type { Entity, PolicyFunction } from "./types.js";

/** What a game may give as its local policy: a distilled file (`Policy.load`) or a function. */
export type LocalPolicy = Policy | PolicyFunction;

/** A minute: a new policy comes at most every `--distill-every` hours, so sooner finds nothing new; a 304 (no
 * body) a minute costs the service nothing, and a game session of a few minutes still picks up a new one. */
export const DEFAULT_POLICY_REFRESH_MS = 60_000;

const kind = (text: string): string => text.replace(/sha256:[0-9a-f]+|\d+/g, "#");

/** Which local policy decides before the service, and when to ask the service for its own. */
export class Cascade {
  own: LocalPolicy | null;
  readonly fetch: boolean;
  fetched: Policy | null = null;
  manifestVersion: string | null;
  /** A policy for another version came: the manifest may have changed, ask it again. */
  recheckManifest = false;
  private etag: string | null = null;
  private next = Number.NEGATIVE_INFINITY;
  private asking = false;

  constructor(
    private readonly clientId: string,
    policy: LocalPolicy | null,
    fetch: boolean | null,
    private readonly refreshMs: number,
    private readonly say: SayOnce,
    manifestVersion: string | null = null,
    /** The largest policy body read (the transport stops one byte past it). */
    readonly maxBytes: number = POLICY_MAX_BYTES,
  ) {
    this.own = policy;
    this.fetch = fetch ?? policy === null;
    this.manifestVersion = manifestVersion;
  }

  /** The policy that decides now: the service's while one is usable, else the game's own (a `Policy` of the
   * game's only for the manifest version it was distilled for, once that is known). */
  active(): LocalPolicy | null {
    if (this.fetched !== null) return this.fetched;
    const own = this.own;
    if (own instanceof Policy && this.manifestVersion !== null && own.manifestVersion !== this.manifestVersion) {
      this.say.say(
        `own-policy:${this.manifestVersion}`,
        `the game's policy was distilled for manifest version ${own.manifestVersion}, and the service runs ` +
          `${this.manifestVersion}: a policy for another manifest version is never used (distill again)`,
      );
      return null;
    }
    return own;
  }

  /** The active policy's choice for `e` (action, confidence), or null: ask the service. */
  choose(
    e: Entity,
    world: Record<string, unknown>,
    scopeState: Record<string, unknown> | null,
  ): readonly [string, number] | null {
    const policy = this.active();
    if (policy === null) return null;
    if (policy instanceof Policy)
      return policy.choose(e.type, e.observation, e.legalActions, world, scopeState, e.trigger, e.profile);
    return policy(e);
  }

  // --- fetching the service's -------------------------------------------------------------------

  /** Whether GET /v1/policy goes out now (fetching on, the manifest version known, none in flight). */
  due(now: number): boolean {
    return this.fetch && this.manifestVersion !== null && !this.asking && now >= this.next;
  }

  /** The path and the extra headers of GET /v1/policy; the next is due `refreshMs` later. */
  request(now: number): [string, Record<string, string>] {
    this.asking = true;
    this.next = now + this.refreshMs;
    const path = `/v1/policy?client_id=${encodeURIComponent(this.clientId)}`;
    return [path, this.etag !== null ? { "if-none-match": this.etag } : {}];
  }

  /** Take the answer to GET /v1/policy; false for an answer the scheduler deals with (401, 429, 5xx). */
  answered(status: number, body: unknown, headers: Record<string, string>): boolean {
    this.asking = false;
    if (status === 304) return true;
    if (status === 404) {
      this.drop();
      return true;
    }
    if (status !== 200) return false;
    const isDoc =
      typeof body === "object" &&
      body !== null &&
      !Array.isArray(body) &&
      !(body instanceof Uint8Array) &&
      !(body instanceof Policy) &&
      !(body instanceof PolicyError);
    const doc = isDoc ? (body as Record<string, unknown>) : {};
    let loaded: Policy | null = null;
    try {
      // loaded already by the SDK's transport, out of tick() (or why it could not be); raw bytes (at most one
      // byte past maxBytes, read no further) or a parsed object, from a game's own HTTP
      if (body instanceof PolicyError) throw body;
      if (body instanceof Uint8Array && body.length > this.maxBytes)
        throw new PolicyError(
          `GET /v1/policy: the body is larger than ${this.maxBytes.toLocaleString("en-US")} bytes ` +
            "(policyMaxBytes), not read past that",
        );
      loaded =
        body instanceof Policy
          ? body
          : Policy.load(body instanceof Uint8Array ? body : doc, { maxBytes: this.maxBytes });
      if (this.manifestVersion !== null) loaded.check(this.manifestVersion);
      this.fetched = loaded;
      this.etag = headers["etag"] ?? null;
    } catch (e) {
      // a PolicyError, or a file this SDK cannot read at all: never into the game loop
      this.drop();
      const version = loaded !== null ? loaded.manifestVersion : isDoc ? doc["manifest_version"] : undefined;
      this.recheckManifest = (loaded !== null || isDoc) && version !== this.manifestVersion;
      const why = e instanceof PolicyError ? e.message : String(e);
      this.say.say(`policy:${kind(why)}`, `the service's local policy is not used: ${why}`, false);
    }
    return true;
  }

  /** GET /v1/policy got no answer: asked again on its period. */
  failed(): void {
    this.asking = false;
  }

  /** The manifest version the service runs now: on a change the policy for the old one goes, and the
   * service's is asked at once. */
  manifest(version: string | null): void {
    this.recheckManifest = false;
    if (version === null || version === this.manifestVersion) return;
    this.manifestVersion = version;
    this.drop();
    this.next = Number.NEGATIVE_INFINITY;
  }

  private drop(): void {
    this.fetched = null;
    this.etag = null;
  }
}
