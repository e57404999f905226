/** What the SDK reads of the service at most, in one place (README "Limits"): a hostile or broken server (a
 * proxy's page, a 600 MB error, an endless stream) costs the game a bounded read and a clear error, never its
 * memory or its frame. Every body is read in chunks and counted: a Content-Length is never trusted alone.
 * (Python: `limits.py`, the same caps.) */

import { NpcMindError } from "./errors.js";

/** A JSON answer: a decide answer of 16 decisions is ~10 kB, a manifest less. */
export const MAX_ANSWER_BYTES = 1024 * 1024;
/** GET /v1/manifest: the operator's whole manifest (64 types of 64 fields). */
export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
/** An error answer (any status but 2xx and 304): only its message is read. */
export const MAX_ERROR_BYTES = 64 * 1024;
/** A streamed decide answer as a whole: 17 lines of at most 64 KiB each. */
export const MAX_STREAM_BYTES = 2 * 1024 * 1024;
/** Lines of a stream (or decisions of an answer) that answer no entity it asked: ids not asked, repeats. */
export const MAX_STRAY_LINES = 16;
/** GET /v1/prompt (`lastPrompt`): the prompt and the model's answer. */
export const MAX_PROMPT_BYTES = 4 * 1024 * 1024;
/** A dialogue step (POST /npcs/{id}/process): its tape and instruction. */
export const MAX_STEP_BYTES = 4 * 1024 * 1024;
/** GET /v1/keys: a few public keys. */
export const MAX_KEYS_BYTES = 64 * 1024;
/** A cortex's (the game's local model's) answer: as the service's providers read theirs. */
export const MAX_MODEL_BYTES = 8 * 1024 * 1024;
/** Streamed bytes a `tick()` applies at most; the rest waits for the next frame. */
export const TICK_STREAM_BYTES = 256 * 1024;
/** What a chunk of a stream counts for at least: a trickle of tiny chunks is bounded too. */
export const MIN_CHUNK_BYTES = 1024;
/** The error code of an answer the SDK stopped reading at its cap. */
export const TOO_LARGE = "answer_too_large";

/** A body past its cap: reading stopped there (the message names the cap); `code` `answer_too_large`. */
export class TooLargeError extends NpcMindError {
  override name = "TooLargeError";

  /** The code is the one every reader of errors gives a body read no further than its cap. */
  constructor(message: string, options: { status?: number | null } = {}) {
    super(message, { status: options.status ?? null, code: TOO_LARGE });
  }
}

/** The message of a body read no further than its cap. */
export function tooLarge(what: string, cap: number, name: string): string {
  return `${what}: the answer passed ${cap.toLocaleString("en-US")} bytes (${name}, the SDK's cap): not read past that`;
}

/** The service's error shape for an answer the SDK stopped reading: every reader of errors says it. */
export function tooLargeBody(message: string): { error: { code: string; message: string } } {
  return { error: { code: TOO_LARGE, message } };
}

/** Whether an answer is the transport's error for a body past its cap. */
export function isTooLarge(body: unknown): body is { error: { code: string; message: string } } {
  if (typeof body !== "object" || body === null) return false;
  const error = (body as Record<string, unknown>)["error"];
  return typeof error === "object" && error !== null && (error as Record<string, unknown>)["code"] === TOO_LARGE;
}

/** A response's body read chunk by chunk and counted (as fetch gives it, decompressed), TooLargeError once it
 * passes `cap`: the rest is cancelled, never downloaded. */
export async function readCapped(res: Response, cap: number, what: string, name: string): Promise<Uint8Array> {
  if (res.body === null) return new Uint8Array(0);
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > cap) {
      await reader.cancel().catch(() => undefined);
      throw new TooLargeError(tooLarge(what, cap, name));
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** A response's text read within `cap` (an error's within MAX_ERROR_BYTES): TooLargeError past it. */
export async function textCapped(res: Response, cap: number, what: string, name: string): Promise<string> {
  const [limit, label] = res.status >= 200 && res.status < 300 ? [cap, name] : [MAX_ERROR_BYTES, "MAX_ERROR_BYTES"];
  return new TextDecoder().decode(await readCapped(res, limit, what, label));
}
