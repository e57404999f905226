/** Dialogue NPCs: the step loop of POST /npcs/{npcId}/process, the game supplying recall and inference.
 * The service is the mind (next step, prompt, judging, signing); the game is the body (state, memories,
 * inference). Nothing of an outcome is applied before its Ed25519 signature verified with WebCrypto; with
 * `checkSignatures: false` nothing is verified here, so nothing is applied: a game server checks the outcome
 * (`forServer()`) and the game applies its `memories` and `stateTransform` once the server said yes. */

import {
  errorLine,
  InvalidInputError,
  isObject,
  ProtocolError,
  serviceError,
  SignatureError,
  UnreachableError,
} from "./errors.js";
import { MAX_KEYS_BYTES, MAX_STEP_BYTES, textCapped, TooLargeError } from "./limits.js";
import { canonical, NotCanonical } from "./jcs.js";
import { signedPayload, verify } from "./signing.js";
import type { components } from "./wire.js";

export type PromptConstraints = components["schemas"]["PromptConstraints"];
export type MemoryType = components["schemas"]["MemoryStoreInstruction"]["type"];
export const MAX_CALLS = 8;

/** A memory the game recalled for the observation, with how similar it is (0..1). */
export interface RecalledMemory {
  text: string;
  type: MemoryType;
  importance: number;
  similarity: number;
}

/** A memory the service asks the game to keep. */
export interface NewMemory {
  text: string;
  type: MemoryType;
  importance: number;
}

/** What the game knows of one NPC. */
export interface NpcRecord {
  npcId: string;
  persona: string;
  data: Record<string, unknown>;
  state: Record<string, unknown>;
}

/** The game's memory of its NPCs: who they are, what they recall, and where a verified outcome is kept. */
export interface NpcMemory {
  get(npcId: string): NpcRecord | null | Promise<NpcRecord | null>;
  recall(npcId: string, query: string, limit: number, threshold: number): RecalledMemory[] | Promise<RecalledMemory[]>;
  /** Keep the memories and merge the state patch (JSON merge patch), both or neither; the new state. */
  apply(
    npcId: string,
    memories: NewMemory[],
    stateTransform: Record<string, unknown>,
  ): Record<string, unknown> | Promise<Record<string, unknown>>;
}

/** Whatever runs inference on the game's side (a local model, a hosted API). */
export interface Cortex {
  complete(prompt: string, constraints: PromptConstraints): string | Promise<string>;
}

/** What the game gets back: the line, the action, whether the signature was checked here (`verified`) and the
 * outcome applied (`applied`), and what a game server checks when the check is left to it. */
export interface NpcOutcome {
  npcId: string;
  valid: boolean;
  dialogue: string;
  action: Record<string, unknown> | null;
  /** The merged state when applied, the NPC's state as it was otherwise. */
  state: Record<string, unknown>;
  /** How many memories were kept (0 when nothing was applied). */
  remembered: number;
  audit: Record<string, unknown>;
  steps: string[];
  /** The service's signature was checked here (`NpcMind.checksSignatures`). */
  verified: boolean;
  /** Verified here, then kept in the NpcMemory (memories kept, state merged). */
  applied: boolean;
  /** What a valid outcome asks the game to keep, and its JSON merge patch of the NPC's state. */
  memories: NewMemory[];
  stateTransform: Record<string, unknown>;
  /** `kid.base64url`; null for an invalid outcome. */
  signature: string | null;
  /** The canonical JSON (RFC 8785) the signature covers; its UTF-8 bytes are what was signed. */
  signedPayload: string | null;
  /** The Finalize instruction and the tape exactly as the service returned them. */
  finalize: Record<string, unknown>;
  tape: Record<string, unknown>;
  /** The JSON a game server checks, `{"npcId", "finalize", "tape"}` (C#'s `ForServer()`), for
   * `verify(finalize.signature, await signedPayload(npcId, finalize, tape), keys)`. */
  forServer(): string;
}

/** How an NpcMind reaches the service. */
export interface NpcMindOptions {
  /** A hosted service's session token. */
  token?: string | null;
  fetch?: typeof fetch;
  timeoutMs?: number;
  /** The service's public keys (kid -> base64url, as GET /v1/keys lists them), pinned: outcomes are then checked
   * with these alone and GET /v1/keys is never asked for them. Absent or null: the keys the service lists, worth
   * what the connection to it is (https). */
  keys?: Readonly<Record<string, string>> | ReadonlyMap<string, string> | null;
  /** Check each valid outcome's signature here and apply it (the default, true); false leaves the check to a game
   * server: nothing is verified here, so nothing is applied. */
  checkSignatures?: boolean;
}

type Json = Record<string, unknown>;

/** Talks to an npcmind service for the NPCs of one game. */
export class NpcMind {
  private readonly base: string;
  private readonly fetchFn: typeof fetch;
  private keys = new Map<string, string>();
  private readonly pinned: ReadonlyMap<string, string> | null;
  /** Whether outcomes are checked (and then applied) here (`NpcMindOptions.checkSignatures`). */
  readonly checksSignatures: boolean;

  constructor(
    serviceUrl: string,
    readonly cortex: Cortex,
    readonly memory: NpcMemory,
    private readonly options: NpcMindOptions = {},
  ) {
    if (!/^https?:\/\/[^/]/.test(serviceUrl))
      throw new TypeError(`serviceUrl: ${JSON.stringify(serviceUrl)} is not an http(s) URL`);
    this.base = serviceUrl.replace(/\/+$/, "");
    this.fetchFn = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.pinned = pinnedKeys(options.keys ?? null);
    const check = options.checkSignatures ?? true;
    if (typeof check !== "boolean")
      throw new TypeError(`checkSignatures: must be true or false, not ${describe(check)}`);
    this.checksSignatures = check;
  }

  /** The service's signing keys (kid -> base64url), fetched once from GET /v1/keys. */
  async publicKeys(refresh = false): Promise<ReadonlyMap<string, string>> {
    if (!refresh && this.keys.size > 0) return this.keys;
    const { status, body } = await this.request("GET", "/v1/keys", undefined, MAX_KEYS_BYTES, "MAX_KEYS_BYTES");
    const keys = isObject(body) && Array.isArray(body["keys"]) ? body["keys"] : null;
    if (status !== 200) throw serviceError(status, body, "GET /v1/keys");
    if (keys === null) throw new ProtocolError(`GET /v1/keys answered without keys: ${errorLine(body, "")}`, { status });
    this.keys = new Map(keys.filter(isObject).map((k) => [String(k["kid"]), String(k["public_key"])]));
    return this.keys;
  }

  /** Run the loop for one observation; a valid outcome whose signature verifies is applied to the memory (its
   * memories kept and its state merged, both or neither); one that does not verify is a SignatureError, nothing
   * applied. With `checkSignatures: false` nothing is verified, so nothing is applied. */
  async process(
    npcId: string,
    observation: string,
    context: Json = {},
    ruleset: string | null = null,
  ): Promise<NpcOutcome> {
    if (!npcId || npcId.includes("/"))
      throw new InvalidInputError(`npcId: ${JSON.stringify(npcId)} must be non-empty text without '/'`);
    const rec = await this.memory.get(npcId);
    if (rec === null)
      throw new InvalidInputError(`unknown NPC ${JSON.stringify(npcId)}: the game's memory has no record of it`);
    let tape: Json = { observation, npcState: rec.state, memories: [], context };
    if (ruleset) tape["rulesetId"] = ruleset;
    let last: Json | null = null;
    const steps: string[] = [];
    for (let i = 0; i < MAX_CALLS; i++) {
      const [instruction, next] = await this.step(npcId, tape, last);
      tape = next; // sent back as received, unknown fields (the step token) included
      const kind = String(instruction["type"]);
      steps.push(kind);
      if (kind === "Finalize") {
        const [outcome, payload] = await this.outcome(npcId, instruction, tape, steps);
        return this.apply(await this.checked(outcome, payload));
      }
      last = await this.result(rec, kind, instruction);
    }
    throw new ProtocolError(`no Finalize after ${MAX_CALLS} calls`);
  }

  private async result(rec: NpcRecord, kind: string, instruction: Json): Promise<Json> {
    if (kind === "IdentifyActor") {
      return { type: "IdentifyActorResult", actor: { npcId: rec.npcId, persona: rec.persona, data: rec.data } };
    }
    if (kind === "QueryVector") {
      const found = await this.memory.recall(
        rec.npcId,
        String(instruction["query"]),
        Number(instruction["limit"]),
        Number(instruction["threshold"]),
      );
      return {
        type: "QueryVectorResult",
        memories: found.map(({ text, type, importance, similarity }) => ({ text, type, importance, similarity })),
      };
    }
    if (kind === "ExecuteInference") {
      const constraints = (instruction["constraints"] ?? {}) as PromptConstraints;
      return {
        type: "ExecuteInferenceResult",
        generatedOutput: await this.cortex.complete(String(instruction["prompt"]), constraints),
      };
    }
    throw new ProtocolError(`unknown instruction ${JSON.stringify(kind)}`);
  }

  private async step(npcId: string, tape: Json, last: Json | null): Promise<[Json, Json]> {
    const { status, body } = await this.request("POST", `/npcs/${encodeURIComponent(npcId)}/process`, {
      tape,
      lastResult: last,
    }, MAX_STEP_BYTES, "MAX_STEP_BYTES");
    if (status !== 200) throw serviceError(status, body, `POST /npcs/${encodeURIComponent(npcId)}/process`);
    const instruction = isObject(body) ? body["instruction"] : null;
    const next = isObject(body) ? body["tape"] : null;
    if (!isObject(instruction) || !isObject(next) || typeof instruction["type"] !== "string") {
      throw new ProtocolError(
        `the service answered 200 without an instruction and tape: ${JSON.stringify(body).slice(0, 200)}`,
        { status },
      );
    }
    return [instruction, next];
  }

  /** The outcome as the service gave it, nothing verified nor applied yet, and for a valid one what its signature
   * covers (its canonical text is `signedPayload`). */
  private async outcome(npcId: string, fin: Json, tape: Json, steps: string[]): Promise<[NpcOutcome, Json | null]> {
    const rec = await this.memory.get(npcId);
    const out: NpcOutcome = {
      npcId,
      valid: fin["valid"] === true,
      dialogue: String(fin["dialogue"] ?? ""),
      action: null,
      state: rec?.state ?? {},
      remembered: 0,
      audit: isObject(fin["ruleAudit"]) ? fin["ruleAudit"] : {},
      steps,
      verified: false,
      applied: false,
      memories: [],
      stateTransform: {},
      signature: null,
      signedPayload: null,
      finalize: fin,
      tape,
      forServer: () => JSON.stringify({ npcId, finalize: fin, tape }),
    };
    if (!out.valid) return [out, null];
    out.action = isObject(fin["action"]) ? fin["action"] : null;
    const store = (Array.isArray(fin["memoryStore"]) ? fin["memoryStore"] : []) as NewMemory[];
    out.memories = store.map(({ text, type, importance }) => ({ text, type, importance }));
    out.stateTransform = isObject(fin["stateTransform"]) ? fin["stateTransform"] : {};
    out.signature = typeof fin["signature"] === "string" && fin["signature"] !== "" ? fin["signature"] : null;
    if (out.signature === null)
      throw new SignatureError("the service sent a valid outcome without a signature: nothing can check it");
    try {
      const payload = await signedPayload(npcId, fin, tape);
      out.signedPayload = canonical(payload);
      return [out, payload];
    } catch (e) {
      if (e instanceof NotCanonical)
        throw new SignatureError(`the outcome cannot be verified: its tape has no canonical form (${e.message})`);
      throw e;
    }
  }

  /** A valid outcome's signature checked here (unless `checkSignatures` is false); one that does not verify is
   * refused, nothing applied. */
  private async checked(out: NpcOutcome, payload: Json | null): Promise<NpcOutcome> {
    if (payload === null || !this.checksSignatures) return out;
    if (!(await this.verifies(out.signature ?? "", payload)))
      throw new SignatureError("the outcome's signature does not verify: nothing was applied");
    out.verified = true;
    return out;
  }

  /** A valid outcome verified here, applied to the memory (both or neither: the memory's contract); any other as
   * it is. */
  private async apply(out: NpcOutcome): Promise<NpcOutcome> {
    if (!out.valid || !out.verified) return out;
    out.state = await this.memory.apply(out.npcId, out.memories, out.stateTransform);
    out.applied = true;
    out.remembered = out.memories.length;
    return out;
  }

  /** Whether the outcome's signature verifies: with the pinned keys alone, else with the service's (asked again
   * once, for a key rotated since they were fetched). */
  private async verifies(signature: string, payload: Json): Promise<boolean> {
    if (this.pinned !== null) return verify(signature, payload, this.pinned);
    return (
      (await verify(signature, payload, await this.publicKeys())) ||
      (await verify(signature, payload, await this.publicKeys(true)))
    );
  }

  /** One call to the service: its status and JSON, read no further than `cap` (an error's than
   * MAX_ERROR_BYTES); a body past its cap is a TooLargeError, a service that cannot be reached (or an answer
   * that broke off) an UnreachableError. */
  private async request(
    method: "GET" | "POST",
    path: string,
    body: unknown,
    cap: number,
    name: string,
  ): Promise<{ status: number; body: unknown }> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.options.token) headers["authorization"] = `Bearer ${this.options.token}`;
    const init: RequestInit = { method, headers, signal: AbortSignal.timeout(this.options.timeoutMs ?? 30_000) };
    if (body !== undefined) init.body = JSON.stringify(body);
    let res: Response;
    try {
      res = await this.fetchFn(this.base + path, init);
    } catch (e) {
      throw new UnreachableError(
        `cannot reach the npcmind service at ${this.base}: ${String(e)} (is \`npcmind serve\` running there?)`,
      );
    }
    let text: string;
    try {
      text = await textCapped(res, cap, `${method} ${path}`, name);
    } catch (e) {
      if (e instanceof TooLargeError) throw new TooLargeError(e.message, { status: res.status });
      throw new UnreachableError(`${method} ${path}: the answer broke off: ${String(e)}`);
    }
    try {
      return { status: res.status, body: JSON.parse(text) };
    } catch {
      return { status: res.status, body: { error: { message: text.slice(0, 200) } } };
    }
  }
}

/** The keys a game pins, checked when it gives them (a TypeError naming `keys`): each kid a non-empty text
 * without '.', each key the base64url of 32 bytes (an Ed25519 public key); at least one, or every outcome would
 * be refused. */
function pinnedKeys(keys: NpcMindOptions["keys"]): ReadonlyMap<string, string> | null {
  if (keys === null || keys === undefined) return null;
  if (typeof keys !== "object" || Array.isArray(keys))
    throw new TypeError(`keys: must map each kid to its base64url public key, not be ${describe(keys)}`);
  const entries: [unknown, unknown][] = keys instanceof Map ? [...keys.entries()] : Object.entries(keys);
  if (entries.length === 0)
    throw new TypeError("keys: pin at least one key (kid -> base64url public key), or give null");
  const pinned = new Map<string, string>();
  for (const [kid, key] of entries) {
    if (typeof kid !== "string" || kid === "" || kid.includes("."))
      throw new TypeError(`keys: a kid must be a non-empty text without '.', not ${describe(kid)}`);
    if (typeof key !== "string" || !/^[A-Za-z0-9_-]{43}$/.test(key))
      throw new TypeError(
        `keys[${JSON.stringify(kid.slice(0, 80))}]: not the base64url of an Ed25519 public key (43 characters)`,
      );
    pinned.set(kid, key);
  }
  return pinned;
}

/** A value in an error message: a short text as itself, anything else by its kind. */
function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.slice(0, 80));
  return value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`;
}

/** RFC 7396 JSON merge patch: how a Finalize's `stateTransform` changes the NPC's state. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const out: Json = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}
