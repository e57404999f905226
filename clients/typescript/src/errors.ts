/** Reading the service's error answers: one reader for every failure the SDK meets. */

/** One problem of a 422, by path. */
export interface Problem {
  readonly path: string;
  readonly message: string;
}

/** An error answer as its code, message and problems; empty parts for a body that is none (a proxy's page). */
export function readError(body: unknown): { code: string; message: string; details: Problem[] } {
  const err = isObject(body) && isObject(body["error"]) ? body["error"] : {};
  const found = err["details"];
  const details = Array.isArray(found)
    ? found.filter(isObject).map((d) => ({ path: String(d["path"] ?? ""), message: String(d["message"] ?? "") }))
    : [];
  return { code: String(err["code"] ?? ""), message: String(err["message"] ?? ""), details };
}

/** An error answer in one line: its problems by path, else its message, else `otherwise`. */
export function errorLine(body: unknown, otherwise: string): string {
  const { message, details } = readError(body);
  return details.map((d) => `${d.path}: ${d.message}`).join("; ") || message || otherwise;
}

/** Whether a value is a JSON object (not null, not an array). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
