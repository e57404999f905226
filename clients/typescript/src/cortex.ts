/** A Cortex on any OpenAI-compatible chat server (llama.cpp, Ollama, vLLM, LM Studio, hosted APIs), with fetch. */

import { isObject, NpcMindError } from "./errors.js";
import { MAX_MODEL_BYTES, textCapped, TooLargeError } from "./limits.js";
import type { Cortex, PromptConstraints } from "./npc.js";

/** Inference failed: the server is down, answered an error, or nothing usable; the message and `url` name the
 * address tried, so a wrong port or path is seen in the first line of the error; `status` and `code` are the
 * model server's (its HTTP status, its error body's `code` or `type`). */
export class CortexError extends NpcMindError {
  override name = "CortexError";

  /** `url`: optional, so a game's own Cortex may throw it with a message alone. */
  constructor(
    message: string,
    readonly url: string | null = null,
    options: { status?: number | null; code?: string | null } = {},
  ) {
    super(url === null ? message : `${message} (${url})`, options);
  }
}

/** The error code of an OpenAI-style error answer (`error.code`, else `error.type`), if it has one. */
function errorCode(text: string): string | null {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return null;
  }
  const error = isObject(body) ? body["error"] : null;
  const found = isObject(error) ? error["code"] || error["type"] : null;
  return typeof found === "string" && found ? found : null;
}

/** Chat completions at `baseUrl` (e.g. http://127.0.0.1:8000/v1). */
export class OpenAICortex implements Cortex {
  private readonly base: string;

  constructor(
    baseUrl: string,
    readonly model = "local",
    private readonly apiKey: string | null = null,
    private readonly fetchFn: typeof fetch = (input, init) => globalThis.fetch(input, init),
  ) {
    this.base = baseUrl.replace(/\/+$/, "");
    this.url = `${this.base}/chat/completions`;
  }

  /** The address every request goes to, named by every CortexError. */
  readonly url: string;

  async complete(prompt: string, constraints: PromptConstraints): Promise<string> {
    const body: Record<string, unknown> = { model: this.model, messages: [{ role: "user", content: prompt }] };
    if (constraints.maxTokens != null) body["max_tokens"] = constraints.maxTokens;
    if (constraints.temperature != null) body["temperature"] = constraints.temperature;
    if (constraints.stop?.length) body["stop"] = constraints.stop;
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.apiKey) headers["authorization"] = `Bearer ${this.apiKey}`;
    let res: Response;
    try {
      res = await this.fetchFn(this.url, {
        method: "POST",
        headers,
        body: JSON.stringify(body),
      });
    } catch (e) {
      throw new CortexError(`cannot reach the cortex: ${String(e)}`, this.url);
    }
    let text: string;
    try {
      text = await textCapped(res, MAX_MODEL_BYTES, "POST /chat/completions", "MAX_MODEL_BYTES");
    } catch (e) {
      const why = e instanceof TooLargeError ? e.message : `the cortex's answer broke off: ${String(e)}`;
      throw new CortexError(why, this.url, { status: res.status, code: e instanceof TooLargeError ? e.code : null });
    }
    if (!res.ok) {
      const why = `the cortex answered HTTP ${res.status}: ${text.slice(0, 200)}`;
      throw new CortexError(why, this.url, { status: res.status, code: errorCode(text) });
    }
    try {
      return String(JSON.parse(text).choices[0].message.content ?? "");
    } catch {
      throw new CortexError("the cortex answered without choices[0].message.content", this.url, { status: res.status });
    }
  }
}
