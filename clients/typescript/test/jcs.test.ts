/** The canonical form and signature check against docs/signature-vectors.json, the service's own vectors. */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { canonical, digest, NotCanonical } from "../src/jcs.js";
import { mergePatch } from "../src/npc.js";
import { signedPayload, verify } from "../src/signing.js";

type Json = Record<string, unknown>;
const VECTORS = JSON.parse(
  readFileSync(fileURLToPath(new URL("../../../../docs/signature-vectors.json", import.meta.url)), "utf8"),
) as {
  canonical: { name: string; json: string; canonical: string; sha256: string }[];
  numbers: { ieee754: string; canonical: string }[];
  refused: { name: string; json: string; path: string }[];
  signatures: {
    name: string;
    kid: string;
    publicKey: string;
    npcId: string;
    tapeJson: string;
    tapeDigest: string;
    finalize: Json;
    payloadCanonical: string;
  }[];
};

test("canonical JSON matches every vector, bytes and SHA-256", async () => {
  for (const v of VECTORS.canonical) {
    const value: unknown = JSON.parse(v.json);
    assert.equal(canonical(value), v.canonical, v.name);
    assert.equal(await digest(value), v.sha256, v.name);
  }
});

test("numbers are written as RFC 8785 Appendix B says", () => {
  for (const v of VECTORS.numbers) {
    const x = new DataView(new Uint8Array(v.ieee754.match(/../g)!.map((h) => parseInt(h, 16))).buffer).getFloat64(0);
    if (!Number.isFinite(x)) assert.throws(() => canonical(x), NotCanonical, v.ieee754);
    else assert.equal(canonical(x), v.canonical, v.ieee754);
  }
});

test("JSON without a canonical form is refused at its path", () => {
  for (const v of VECTORS.refused)
    assert.throws(
      () => canonical(JSON.parse(v.json)),
      (e: unknown) => e instanceof NotCanonical && e.path === v.path,
      v.name,
    );
});

test("a signed outcome verifies, and any changed byte fails", async () => {
  for (const v of VECTORS.signatures) {
    const keys = new Map([[v.kid, v.publicKey]]);
    const tape: unknown = JSON.parse(v.tapeJson);
    const payload = await signedPayload(v.npcId, v.finalize, tape);
    assert.equal(payload["tapeDigest"], v.tapeDigest, v.name);
    assert.equal(canonical(payload), v.payloadCanonical, v.name);
    const signature = String(v.finalize["signature"]);
    assert.ok(await verify(signature, payload, keys), v.name);
    const forged = await signedPayload(v.npcId, { ...v.finalize, dialogue: "Something else." }, tape);
    assert.equal(await verify(signature, forged, keys), false, v.name);
    assert.equal(await verify(signature, await signedPayload("other", v.finalize, tape), keys), false, v.name);
    assert.equal(await verify(signature, payload, new Map([["other-kid", v.publicKey]])), false, v.name);
    const last = signature.at(-1) === "A" ? "B" : "A"; // another last character: another encoding or signature
    assert.equal(await verify(signature.slice(0, -1) + last, payload, keys), false, v.name);
  }
});

test("a state patch is a JSON merge patch", () => {
  assert.deepEqual(mergePatch({ a: 1, b: { c: 2, d: 3 } }, { a: null, b: { c: 5 }, e: [1] }), {
    b: { c: 5, d: 3 },
    e: [1],
  });
});
