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

const ENTITY_PATH = /^entities\[(\d+)\]\.?/;

/** The entities of a 422 whose every problem lies in one of the request's entities (`sent`: their ids in the
 * request's order), each with why; null when a problem lies in the whole request (world, scope, a field). */
export function refusedEntities(status: number, body: unknown, sent: readonly string[]): Map<string, string> | null {
  const details = status === 422 ? readError(body).details : [];
  if (details.length === 0) return null;
  const why = new Map<string, string[]>();
  for (const d of details) {
    const m = ENTITY_PATH.exec(d.path);
    const id = m ? sent[Number(m[1])] : undefined;
    if (m === null || id === undefined) return null;
    const problems = why.get(id) ?? [];
    problems.push(`${d.path.slice(m[0].length) || "entity"}: ${d.message}`);
    why.set(id, problems);
  }
  return new Map([...why].map(([id, problems]) => [id, problems.join("; ")]));
}
