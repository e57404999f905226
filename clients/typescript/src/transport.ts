/** Executes the core's requests with `fetch` (browsers and Node 20+): the only I/O of the decision SDK.
 * Answers are not applied here: they wait in a queue that the game loop drains inside `tick()`. A streamed
 * decide answer (docs/streaming.md) is queued chunk by chunk as it arrives, so each line reaches the game at
 * the next frame rather than with the whole answer. */

import {
  MAX_ANSWER_BYTES,
  MAX_MANIFEST_BYTES,
  MAX_STREAM_BYTES,
  MIN_CHUNK_BYTES,
  textCapped,
  tooLarge,
  TooLargeError,
  tooLargeBody,
} from "./limits.js";
import { Policy, POLICY_MAX_BYTES, PolicyError } from "./policy.js";
import { sessionToken } from "./session.js";
import type { FailKind, OutRequest } from "./types.js";

export const GZIP_FROM = 16 * 1024; // bodies from this size are sent gzip-compressed (a large scene's telemetry)
export const NDJSON = "application/x-ndjson"; // a streamed decide answer: one JSON document a line

/** What became of one request: an answer, or why there was none; for a streamed answer, its bytes as they
 * came (`chunk`: the scheduler assembles its lines, they may cut anything), then its end (`end`: the
 * connection closed; `failed`: what cut it, when something did). */
export type Settled =
  | Reply
  | { ref: string; chunk: Uint8Array }
  | { ref: string; end: true; failed: FailKind | null; error: string };

/** One whole answer, or why there was none. */
export type Reply =
  | { ref: string; status: number; body: unknown; headers: Record<string, string> }
  | { ref: string; fail: FailKind; error: string };

/** How the transport reaches the service. */
export interface TransportOptions {
  baseUrl: string;
  /** Injectable (tests, a proxy, a game engine's own HTTP); the global fetch otherwise. */
  fetch?: typeof fetch;
  /** Read when a request goes: the service's deadline is learnt after the first requests were made. */
  timeoutMs: () => number;
  /** GET /v1/policy's body is read no further than one byte past this (16 MiB by default). */
  policyMaxBytes?: number;
}

/** Sends requests, each after those it waits for, and queues what became of them. */
export class Transport {
  private readonly base: string;
  private readonly fetchFn: typeof fetch;
  private readonly running = new Map<string, Promise<void>>();
  private readonly controllers = new Set<AbortController>();
  private readonly streams = new Map<string, AbortController>(); // a streamed request's, to stop reading it
  private readonly stopped = new Set<string>(); // streams the scheduler ended: read no further
  private queue: Settled[] = [];
  private readonly tokens = new Map<string, string | null>(); // session request ref -> the token it brought
  private closed = false;

  constructor(private readonly options: TransportOptions) {
    this.base = options.baseUrl.replace(/\/+$/, "");
    this.fetchFn = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  /** Start a request; what becomes of it is queued. */
  send(request: OutRequest): void {
    const waits = request.after.map((ref) => this.running.get(ref)).filter((p) => p !== undefined);
    const run = Promise.allSettled(waits)
      .then(() => this.execute(request))
      .then((settled) => {
        if (settled !== null) this.push(settled);
      })
      .finally(() => this.running.delete(request.ref));
    this.running.set(request.ref, run);
  }

  /** What came back since the last call, in the order it came. */
  drain(): Settled[] {
    const out = this.queue;
    this.queue = [];
    return out;
  }

  /** Requests still running. */
  get inFlight(): number {
    return this.running.size;
  }

  /** Resolves once every request sent so far has settled. */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.values()]);
  }

  /** One request outside the core (a debug view): its status and JSON body, read within `cap`. */
  async call(
    method: "GET" | "POST",
    path: string,
    headers: Record<string, string>,
    cap = MAX_ANSWER_BYTES,
    name = "MAX_ANSWER_BYTES",
  ): Promise<Reply> {
    const request = { ref: "call", method, path, headers, body: null, json: null, after: [] };
    const got = await this.execute(request, cap, name);
    return got ?? { ref: "call", fail: "unreachable", error: "a stream where one answer was expected" };
  }

  /** Read no more of request `ref`'s stream (the scheduler ended it): its connection is aborted, and its reader
   * cancelled at its next chunk (a game's own `fetch` may not heed the abort). */
  stop(ref: string): void {
    const controller = this.streams.get(ref);
    if (controller === undefined) return; // over already
    this.stopped.add(ref);
    controller.abort();
  }

  /** Abort what runs and drop what would come: a game that quits must not hang on a slow service. */
  close(): void {
    this.closed = true;
    for (const c of this.controllers) c.abort();
    this.queue = [];
  }

  private push(settled: Settled): void {
    if (!this.closed) this.queue.push(settled);
  }

  /** A streamed answer's bytes queued as they arrive, then its end; a connection lost in the middle, or no
   * bytes within the timeout, ends it too: the scheduler keeps the lines received, the rest fall back. */
  private async stream(ref: string, body: ReadableStream<Uint8Array>, timer: Timer, what: string): Promise<void> {
    const reader = body.getReader();
    let failed: FailKind | null = null;
    let error = "";
    let size = 0;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        timer.arm(); // the timeout runs between chunks: a long answer that keeps coming is not cut
        if (this.stopped.has(ref)) {
          await reader.cancel().catch(() => undefined);
          break;
        }
        size += Math.max(value.length, MIN_CHUNK_BYTES); // at most 2,048 chunks however small
        if (size > MAX_STREAM_BYTES) {
          error = tooLarge(`${what}, a stream`, MAX_STREAM_BYTES, "MAX_STREAM_BYTES");
          await reader.cancel().catch(() => undefined); // no further: the rest is never downloaded
          break;
        }
        if (value.length > 0) this.push({ ref, chunk: value });
      }
    } catch (exc) {
      failed = timer.fired ? "timeout" : "unreachable";
      error = String(exc);
    }
    this.stopped.delete(ref);
    this.push({ ref, end: true, failed, error });
  }

  /** GET /v1/policy's answer: a 200 read no further than one byte past `policyMaxBytes` and loaded here, out
   * of the game's `tick()` (the `Policy`, or the `PolicyError` saying why it cannot be used); any other
   * status its JSON, within MAX_ERROR_BYTES. */
  private async policy(res: Response): Promise<unknown> {
    if (res.status !== 200) return this.read(res, "GET /v1/policy", MAX_ANSWER_BYTES, "MAX_ANSWER_BYTES");
    const max = this.options.policyMaxBytes ?? POLICY_MAX_BYTES;
    const bytes = await capped(res, max);
    if (bytes.length > max)
      return new PolicyError(
        `GET /v1/policy: the body is larger than ${max.toLocaleString("en-US")} bytes (policyMaxBytes), ` +
          "not read past that",
      );
    try {
      return Policy.load(bytes, { maxBytes: max });
    } catch (e) {
      return e instanceof PolicyError ? e : new PolicyError(String(e));
    }
  }

  /** A whole answer's JSON read within `cap` (an error's within MAX_ERROR_BYTES); past it, the error shape
   * naming the cap, so every reader of errors says it. */
  private async read(res: Response, what: string, cap: number, name: string): Promise<unknown> {
    try {
      return parse(await textCapped(res, cap, what, name));
    } catch (e) {
      if (e instanceof TooLargeError) return tooLargeBody(e.message);
      throw e;
    }
  }

  /** The request's headers, with the token of the session it waited for (`Bearer @<ref>`); null when that
   * session brought none (the request is then answered 401 here, never sent with "@r9"). */
  private authorized(given: Record<string, string>): Record<string, string> | null {
    const headers: Record<string, string> = { ...given };
    const awaited = /^Bearer @(\S+)$/.exec(headers["authorization"] ?? "");
    if (awaited?.[1] === undefined) return headers;
    const token = this.tokens.get(awaited[1]);
    if (!token) return null;
    headers["authorization"] = `Bearer ${token}`;
    return headers;
  }

  /** The request's answer, or null when it came as a stream (queued piece by piece meanwhile). */
  private async execute(r: OutRequest, cap = MAX_ANSWER_BYTES, name = "MAX_ANSWER_BYTES"): Promise<Reply | null> {
    const controller = new AbortController();
    this.controllers.add(controller);
    if (r.stream === true) this.streams.set(r.ref, controller);
    const timer = new Timer(this.options.timeoutMs(), () => controller.abort());
    try {
      const headers = this.authorized(r.headers);
      if (headers === null)
        return {
          ref: r.ref,
          status: 401,
          body: { error: { code: "unauthorized", message: "no session was opened" } },
          headers: {},
        };
      let body: BodyInit | undefined;
      if (r.json !== null) {
        headers["content-type"] = "application/json";
        body = r.json.length >= GZIP_FROM ? await gzip(r.json) : r.json;
        if (typeof body !== "string") headers["content-encoding"] = "gzip";
      }
      if (r.stream === true) headers["accept"] = NDJSON;
      const what = `${r.method} ${r.path.split("?")[0] ?? r.path}`;
      const res = await this.fetchFn(this.base + r.path, {
        method: r.method,
        headers,
        body,
        signal: controller.signal,
      });
      const answered: Record<string, string> = {};
      res.headers.forEach((v, k) => (answered[k.toLowerCase()] = v));
      if (r.stream === true && res.status === 200 && res.body !== null && isNdjson(answered["content-type"])) {
        await this.stream(r.ref, res.body, timer, what);
        return null;
      }
      if (r.path.startsWith("/v1/policy"))
        return { ref: r.ref, status: res.status, body: await this.policy(res), headers: answered };
      const [limit, label] = r.path === "/v1/manifest" ? [MAX_MANIFEST_BYTES, "MAX_MANIFEST_BYTES"] : [cap, name];
      const answer = await this.read(res, what, limit, label);
      if (r.path === "/v1/session") {
        this.tokens.set(r.ref, sessionToken(res.status, answer));
        if (this.tokens.size > 8) this.tokens.delete(this.tokens.keys().next().value as string); // old sessions
      }
      return { ref: r.ref, status: res.status, body: answer, headers: answered };
    } catch (exc) {
      return { ref: r.ref, fail: timer.fired ? "timeout" : "unreachable", error: String(exc) };
    } finally {
      timer.stop();
      this.controllers.delete(controller);
      this.streams.delete(r.ref);
    }
  }
}

/** A request's timeout: it aborts the request once `ms` pass without `arm()` (a stream re-arms it per chunk). */
class Timer {
  fired = false;
  private handle: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly ms: number,
    private readonly abort: () => void,
  ) {
    this.arm();
  }

  /** Start the wait again from now. */
  arm(): void {
    clearTimeout(this.handle);
    this.handle = setTimeout(() => {
      this.fired = true;
      this.abort();
    }, this.ms);
  }

  /** No abort from now on: the request is over. */
  stop(): void {
    clearTimeout(this.handle);
  }
}

/** Whether a content type is NDJSON: an old service, or an error, answers plain JSON instead. */
function isNdjson(type: string | undefined): boolean {
  return (type ?? "").split(";")[0]?.trim().toLowerCase() === NDJSON;
}

/** A body streamed and read no further than one byte past `max` (after decompression, as fetch gives it): a
 * 200 of GET /v1/policy is those raw bytes, for the cascade to load or refuse as too large. */
export async function capped(res: Response, max: number): Promise<Uint8Array> {
  if (res.body === null) return new Uint8Array(0);
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.length;
    if (size > max) {
      await reader.cancel(); // no further: the rest is never downloaded
      break;
    }
  }
  const out = new Uint8Array(Math.min(size, max + 1));
  let at = 0;
  for (const c of chunks) {
    const part = c.subarray(0, out.length - at);
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** An answer's JSON, or its text as an error message when it has none (a proxy's page). */
function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { error: { message: text.slice(0, 200) } };
  }
}

/** gzip with the platform's CompressionStream (browsers and Node 18+); the text as is where there is none. */
async function gzip(text: string): Promise<BodyInit> {
  if (typeof CompressionStream === "undefined") return text;
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
