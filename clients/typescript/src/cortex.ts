/** A Cortex on any OpenAI-compatible chat server (llama.cpp, Ollama, vLLM, LM Studio, hosted APIs), with fetch. */

import { isObject, NpcMindError } from "./errors.js";
import { MAX_MODEL_BYTES, textCapped, TooLargeError } from "./limits.js";
import type { Cortex, PromptConstraints } from "./npc.js";
import { errorText, firstNotRefused, refusedParameter } from "./params.js";
import type { Logger } from "./types.js";

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
function errorCode(answer: unknown): string | null {
  const error = isObject(answer) ? answer["error"] : null;
  const found = isObject(error) ? error["code"] || error["type"] : null;
  return typeof found === "string" && found ? found : null;
}

/** What the constraints ask that a model may refuse (OpenAI's reasoning models refuse all but the limit's other
 * name): dropped, or the limit renamed, and asked again, instead of failing every NPC turn. */
const OPTIONAL = ["temperature", "stop", "max_tokens", "max_completion_tokens"] as const;

/** Chat completions at `baseUrl` (e.g. http://127.0.0.1:8000/v1). A parameter the model refuses (a 400 naming
 * it) is left out from then on and the call asked again, as the Python SDK's cortex does. */
export class OpenAICortex implements Cortex {
  private readonly base: string;
  /** Parameters this model refused: no longer sent. */
  readonly refused = new Set<string>();

  /** `log`: where a refused parameter is said (once each); console.warn otherwise. */
  constructor(
    baseUrl: string,
    readonly model = "local",
    private readonly apiKey: string | null = null,
    private readonly fetchFn: typeof fetch = (input, init) => globalThis.fetch(input, init),
    private readonly log: Logger = (m) => console.warn(`npcmind: ${m}`),
  ) {
    this.base = baseUrl.replace(/\/+$/, "");
    this.url = `${this.base}/chat/completions`;
  }

  /** The address every request goes to, named by every CortexError. */
  readonly url: string;

  async complete(prompt: string, constraints: PromptConstraints): Promise<string> {
    for (;;) {
      // at most once more per optional parameter: each is refused only once
      const body = this.body(prompt, constraints);
      const [status, text] = await this.post(body);
      if (status < 400) return this.content(text, status);
      let answer: unknown = null;
      try {
        answer = JSON.parse(text);
      } catch {
        answer = null;
      }
      const name = refusedParameter(status, answer, Object.keys(body), OPTIONAL);
      if (name === null) {
        const why = `the cortex answered HTTP ${status}: ${errorText(text, answer)}`;
        throw new CortexError(why, this.url, { status, code: errorCode(answer) });
      }
      this.refused.add(name);
      const said = text.slice(0, 200);
      this.log(`the cortex model ${this.model} refused ${JSON.stringify(name)}; it is no longer sent: ${said}`);
    }
  }

  private body(prompt: string, constraints: PromptConstraints): Record<string, unknown> {
    const body: Record<string, unknown> = { model: this.model, messages: [{ role: "user", content: prompt }] };
    if (constraints.maxTokens != null) {
      const limit = firstNotRefused(["max_tokens", "max_completion_tokens"], this.refused);
      if (limit !== null) body[limit] = constraints.maxTokens;
    }
    if (constraints.temperature != null && !this.refused.has("temperature"))
      body["temperature"] = constraints.temperature;
    if (constraints.stop?.length && !this.refused.has("stop")) body["stop"] = constraints.stop;
    return body;
  }

  /** POST /chat/completions: its status and body, read no further than MAX_MODEL_BYTES; a CortexError past
   * that, or when the model cannot be reached. */
  private async post(body: Record<string, unknown>): Promise<[number, string]> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.apiKey) headers["authorization"] = `Bearer ${this.apiKey}`;
    let res: Response;
    try {
      res = await this.fetchFn(this.url, { method: "POST", headers, body: JSON.stringify(body) });
    } catch (e) {
      throw new CortexError(`cannot reach the cortex: ${String(e)}`, this.url);
    }
    try {
      return [res.status, await textCapped(res, MAX_MODEL_BYTES, "POST /chat/completions", "MAX_MODEL_BYTES")];
    } catch (e) {
      const why = e instanceof TooLargeError ? e.message : `the cortex's answer broke off: ${String(e)}`;
      throw new CortexError(why, this.url, { status: res.status, code: e instanceof TooLargeError ? e.code : null });
    }
  }

  private content(text: string, status: number): string {
    try {
      return String(JSON.parse(text).choices[0].message.content ?? "");
    } catch {
      throw new CortexError("the cortex answered without choices[0].message.content", this.url, { status });
    }
  }
}
