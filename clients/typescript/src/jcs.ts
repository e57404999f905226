/** RFC 8785 (JCS) canonical JSON, so the SDK rebuilds the exact bytes an outcome's signature covers. */

import { NpcMindError } from "./errors.js";

/** A value with no canonical form (a number no double holds, undefined, a function), and where it lies. */
export class NotCanonical extends NpcMindError {
  override name = "NotCanonical";

  constructor(
    readonly path: string,
    readonly problem: string,
  ) {
    super(`${path || "value"}: ${problem}`);
  }
}

/** The canonical JSON text of a parsed JSON value: keys sorted by UTF-16 code units, numbers as ECMAScript
 * writes them (what JSON.stringify already does for one number), strings escaped as JSON.stringify does. */
export function canonical(value: unknown, path = ""): string {
  if (value === null || typeof value === "boolean" || typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new NotCanonical(path, `${value} is not a JSON number`);
    return JSON.stringify(value); // -0 is written 0, 1e21 as 1e+21: ECMAScript's Number.prototype.toString
  }
  if (Array.isArray(value)) return `[${value.map((v, i) => canonical(v, `${path}[${i}]`)).join(",")}]`;
  if (typeof value === "object") {
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj).sort(); // the default sort compares UTF-16 code units, as RFC 8785 asks
    const parts = keys.map((k) => `${JSON.stringify(k)}:${canonical(obj[k], path ? `${path}.${k}` : k)}`);
    return `{${parts.join(",")}}`;
  }
  throw new NotCanonical(path, `a ${typeof value} is not JSON`);
}

/** The canonical form's UTF-8 bytes: what is hashed and signed. */
export function canonicalBytes(value: unknown): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(canonical(value)) as Uint8Array<ArrayBuffer>;
}

/** SHA-256 hex of a value's canonical JSON (the tape digest inside a signed outcome), with WebCrypto. */
export async function digest(value: unknown): Promise<string> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", canonicalBytes(value)));
  return Array.from(hash, (b) => b.toString(16).padStart(2, "0")).join("");
}
