/** Parameters an OpenAI-compatible model refuses: found in its error answer, so the cortex stops sending them
 * (a port of the Python SDK's `npcmind_client.params`, the same rules).
 *
 * OpenAI's reasoning models refuse `temperature`, `stop` and `max_tokens` (they take `max_completion_tokens`);
 * servers and proxies differ on others. A call that only refines its request with such a parameter drops it
 * and asks again rather than fail. An error answer is also put in one readable line (`errorText`). */

import { isObject } from "./errors.js";

const REFUSAL_WORDS = [
  "support",
  "unrecognized",
  "unknown",
  "extra",
  "not permitted",
  "not allowed",
  "input should be",
];

/** The parameter of `optional` and `sent` that an error answer says the model does not take, or null.
 *
 * OpenAI names it in `error.param` of a 400; other servers (vLLM, llama.cpp, proxies) only in the message, some
 * with a 422; llama-cpp-python's server answers its request validation errors with a 500. */
export function refusedParameter(
  status: number,
  body: unknown,
  sent: Iterable<string>,
  optional: readonly string[],
): string | null {
  if (![400, 422, 500].includes(status) || !isObject(body)) return null;
  const text = JSON.stringify(body);
  if (status === 500 && !text.includes("validation error")) return null; // the server's own failure
  const given = new Set(sent);
  const candidates = optional.filter((n) => given.has(n));
  const error = body["error"];
  const param = isObject(error) ? error["param"] : undefined;
  if (typeof param === "string") return candidates.includes(param) ? param : null;
  const lower = text.toLowerCase();
  if (!REFUSAL_WORDS.some((w) => lower.includes(w))) return null;
  let first: [number, string] | null = null;
  for (const name of candidates) {
    const at = text.search(new RegExp(`(?<!\\w)${name}(?!\\w)`)); // names are plain words: nothing to escape
    if (at >= 0 && (first === null || at < first[0] || (at === first[0] && name < first[1]))) first = [at, name];
  }
  return first === null ? null : first[1];
}

/** The first of `names` the model has not refused: a server knows one of the token limit's two names. */
export function firstNotRefused(names: readonly string[], refused: ReadonlySet<string>): string | null {
  return names.find((n) => !refused.has(n)) ?? null;
}

/** An error body in one line a game developer can act on: an API's own message, or what the page was. */
export function errorText(raw: string, answer: unknown): string {
  const error = isObject(answer) ? answer["error"] : undefined;
  const message = isObject(error) ? error["message"] : typeof error === "string" ? error : undefined;
  const text = message ? String(message) : raw;
  if (answer === null && text.trimStart().startsWith("<"))
    return "an HTML page, not an API's answer: the base URL is likely not the API's (it usually ends in /v1)";
  return text.split(/\s+/).filter(Boolean).join(" ").slice(0, 200) || "(no body)";
}
