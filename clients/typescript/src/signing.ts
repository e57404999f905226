/** Checking an outcome's Ed25519 signature with WebCrypto (browsers and Node 20+), as the service signs it. */

import { canonicalBytes, digest } from "./jcs.js";

export const ATTESTS = "npcmind/ruleset-verdict/v1"; // the payload's kind: a ruleset's verdict

/** base64url (no padding) of bytes. */
export function b64url(bytes: Uint8Array): string {
  let text = "";
  for (const b of bytes) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The bytes of base64url text; null when it is not base64url. */
export function unb64url(text: string): Uint8Array<ArrayBuffer> | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return null;
  try {
    const raw = atob(text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (text.length % 4)) % 4));
    return Uint8Array.from(raw, (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}

/** Exactly what the signature covers: the Finalize as sent (its `signature` left out), for the path's NPC, by
 * the ruleset its `ruleAudit.preset` names, over the returned tape's digest. */
export async function signedPayload(
  npcId: string,
  finalize: Record<string, unknown>,
  tape: unknown,
): Promise<Record<string, unknown>> {
  const { signature: _signature, ...verdict } = finalize;
  const audit = verdict["ruleAudit"];
  const preset =
    typeof audit === "object" && audit !== null && !Array.isArray(audit)
      ? (audit as Record<string, unknown>)["preset"]
      : null;
  return {
    attests: ATTESTS,
    npcId,
    rulesetId: preset ?? null,
    tapeDigest: await digest(tape),
    rulesetVerdict: verdict,
  };
}

/** Whether `signature` (`<kid>.<base64url>`) is a valid signature of `payload` by one of `keys` (kid -> key). */
export async function verify(signature: string, payload: unknown, keys: ReadonlyMap<string, string>): Promise<boolean> {
  const dot = signature.indexOf(".");
  const raw = dot > 0 ? keys.get(signature.slice(0, dot)) : undefined;
  const sig = unb64url(signature.slice(dot + 1));
  const pub = raw === undefined ? null : unb64url(raw);
  // one encoding per signature: no malleable padding bits
  if (sig === null || pub === null || sig.length === 0 || b64url(sig) !== signature.slice(dot + 1)) return false;
  try {
    const key = await crypto.subtle.importKey("raw", pub, { name: "Ed25519" }, false, ["verify"]);
    return await crypto.subtle.verify({ name: "Ed25519" }, key, sig, canonicalBytes(payload));
  } catch {
    return false; // a key that is not one, or a signature of the wrong length
  }
}
