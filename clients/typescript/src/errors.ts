/** The SDK's errors, under one root, and the service's error answers read by one reader: a game catches
 * `NpcMindError` for every failure of the SDK and reads `status` (the HTTP status, null where no answer came)
 * and `code` (the protocol's error code, `invalid_request` or `unauthorized`, null where there is none). */

/** Every failure of this SDK: `status` the HTTP status of the answer it comes from (null without one), `code`
 * the protocol's error code (the body's `error.code`; null without one). */
export class NpcMindError extends Error {
  override name = "NpcMindError";
  readonly status: number | null;
  readonly code: string | null;

  /** `status` and `code` optional: a game's own code may throw one with a message alone. */
  constructor(message: string, options: { status?: number | null; code?: string | null } = {}) {
    super(message);
    this.status = options.status ?? null;
    this.code = options.code ?? null;
  }
}

/** The service refused a request: its answer's status and error code, the message its problems by path. */
export class ServiceError extends NpcMindError {
  override name = "ServiceError";
}

/** The service's answer breaks the protocol: a 200 without an instruction, an unknown instruction, no Finalize
 * after the calls allowed, keys that are none. */
export class ProtocolError extends NpcMindError {
  override name = "ProtocolError";
}

/** The service cannot be reached, or its answer broke off: no status. */
export class UnreachableError extends NpcMindError {
  override name = "UnreachableError";
}

/** What the game gave cannot be used (an NPC id that is no URL segment, an NPC its memory does not know). */
export class InvalidInputError extends NpcMindError {
  override name = "InvalidInputError";
}

/** An outcome's signature does not verify (or its tape has no canonical form to verify): nothing was applied.
 * Not a `ServiceError`: the service answered 200; what it answered cannot be trusted. */
export class SignatureError extends NpcMindError {
  override name = "SignatureError";
}

/** The ServiceError of an error answer: its status, the code of its body, its problems in one line. */
export function serviceError(status: number, body: unknown, what: string): ServiceError {
  const { code } = readError(body);
  return new ServiceError(`${what} answered ${status}: ${errorLine(body, "")}`, { status, code: code || null });
}

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
