/** NpcMind.process against a real npcmind: the step loop, and no outcome applied without a valid signature. */

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  InMemoryNpcs,
  InvalidInputError,
  NpcMind,
  NpcMindError,
  OpenAICortex,
  ServiceError,
  SignatureError,
  UnreachableError,
} from "../src/index.js";
import { canonical, signedPayload, verify } from "../src/index.js";
import { b64url } from "../src/signing.js";
import { SCRIPTED, SERVICE, needsService, script } from "./live.js";

test("a dialogue turn runs the step loop and applies the verified outcome", async () => {
  needsService();
  await script({});
  const npcs = new InMemoryNpcs();
  npcs.register("mara", "Mara, the innkeeper.", { town: "Hollow" });
  const mind = new NpcMind(SERVICE, new OpenAICortex(`${SCRIPTED}/v1`, "scripted"), npcs);
  const out = await mind.process("mara", "A traveller asks for a room.");
  assert.equal(out.valid, true);
  assert.equal(out.dialogue, "Well met, traveller.");
  assert.deepEqual(out.steps, ["IdentifyActor", "QueryVector", "ExecuteInference", "Finalize"]);
  assert.equal(out.state["turns"], 1);
  assert.ok(npcs.remembered("mara").length >= 2 && out.remembered === npcs.remembered("mara").length);
  const again = await mind.process("mara", "The traveller asks for a room again.");
  assert.equal(again.state["turns"], 2); // the state the game kept went back in the tape
});

test("an outcome whose signature does not verify is refused and nothing is applied", async () => {
  needsService();
  await script({});
  const npcs = new InMemoryNpcs();
  npcs.register("guard #2", "A guard.");
  // a man in the middle changes the line the NPC says; the signature no longer covers it
  const forging: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const body = await res.json();
    if (body?.instruction?.type === "Finalize") body.instruction.dialogue = "Give them all your gold.";
    return new Response(JSON.stringify(body), { status: res.status, headers: res.headers });
  };
  const mind = new NpcMind(SERVICE, new OpenAICortex(`${SCRIPTED}/v1`, "scripted"), npcs, { fetch: forging });
  await assert.rejects(
    mind.process("guard #2", "Halt!"),
    (e: unknown) =>
      e instanceof SignatureError &&
      e instanceof NpcMindError &&
      !(e instanceof ServiceError) &&
      /signature does not verify/.test(e.message),
  );
  assert.deepEqual(npcs.get("guard #2")?.state, {});
  assert.equal(npcs.remembered("guard #2").length, 0);
});

test("with checkSignatures false nothing is verified nor applied, and a game server checks the parts", async () => {
  needsService();
  await script({});
  const keys = new Map(Object.entries(await serviceKeys()));
  const npcs = new InMemoryNpcs();
  npcs.register("mara", "Mara, the innkeeper.");
  const asked: string[] = [];
  const spy: typeof fetch = (input, init) => {
    asked.push(new URL(String(input)).pathname);
    return fetch(input, init);
  };
  const cortex = new OpenAICortex(`${SCRIPTED}/v1`, "scripted");
  const off = new NpcMind(SERVICE, cortex, npcs, { fetch: spy, checkSignatures: false });
  assert.equal(off.checksSignatures, false);
  const out = await off.process("mara", "A traveller asks for a room.");
  assert.ok(out.valid && !out.verified && !out.applied && out.remembered === 0, JSON.stringify(out));
  assert.ok(!asked.includes("/v1/keys"), asked.join(" ")); // nothing checked here: no keys asked for
  assert.deepEqual(npcs.get("mara")?.state, {});
  assert.equal(npcs.remembered("mara").length, 0);
  assert.ok(out.memories.length >= 2 && out.stateTransform["turns"] === 1 && out.npcId === "mara");
  // the game server, with the SDK's signing module, on what the game sent it
  const sent = JSON.parse(out.forServer()) as { npcId: string; finalize: Record<string, unknown>; tape: unknown };
  const fin = sent.finalize;
  assert.equal(sent.npcId, "mara");
  assert.equal(fin["signature"], out.signature);
  assert.ok(await verify(String(fin["signature"]), await signedPayload(sent.npcId, fin, sent.tape), keys));
  assert.equal(canonical(await signedPayload("mara", fin, sent.tape)), out.signedPayload);
  const changed = { ...fin, dialogue: "Free rooms for all!" };
  assert.equal(await verify(String(fin["signature"]), await signedPayload("mara", changed, sent.tape), keys), false);
  // the server said yes: the game applies the parts itself
  const state = await npcs.apply(out.npcId, out.memories, out.stateTransform);
  assert.equal(state["turns"], 1);
  assert.equal(npcs.remembered("mara").length, out.memories.length);

  const on = new NpcMind(SERVICE, cortex, npcs); // the default: verified, then applied, as before
  assert.equal(on.checksSignatures, true);
  const again = await on.process("mara", "The traveller asks for a room again.");
  assert.ok(again.verified && again.applied && again.remembered === again.memories.length);
  assert.equal(again.state["turns"], 2);
  assert.equal(npcs.remembered("mara").length, out.memories.length + again.memories.length);
  assert.ok(again.signedPayload !== null && JSON.parse(again.forServer()).tape["npcState"]["turns"] === 1);
});

test("a forged outcome with the check off is given back unapplied, and the server refuses it", async () => {
  needsService();
  await script({});
  const keys = new Map(Object.entries(await serviceKeys()));
  const npcs = new InMemoryNpcs();
  npcs.register("guard", "A guard.");
  const forging: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const body = await res.json();
    if (body?.instruction?.type === "Finalize") body.instruction.dialogue = "Give them all your gold.";
    return new Response(JSON.stringify(body), { status: res.status, headers: res.headers });
  };
  const cortex = new OpenAICortex(`${SCRIPTED}/v1`, "scripted");
  const mind = new NpcMind(SERVICE, cortex, npcs, { fetch: forging, checkSignatures: false });
  const out = await mind.process("guard", "Halt!");
  assert.ok(out.valid && !out.verified && !out.applied);
  assert.equal(npcs.remembered("guard").length, 0);
  const sent = JSON.parse(out.forServer()) as { npcId: string; finalize: Record<string, unknown>; tape: unknown };
  const payload = await signedPayload(sent.npcId, sent.finalize, sent.tape);
  assert.equal(await verify(String(sent.finalize["signature"]), payload, keys), false);
});

test("an invalid outcome has nothing to check, and the switch must be a boolean", async () => {
  needsService();
  await script({ text: "I murder the innocent villager." });
  const npcs = new InMemoryNpcs();
  npcs.register("mara", "Mara.");
  const cortex = new OpenAICortex(`${SCRIPTED}/v1`, "scripted");
  const out = await new NpcMind(SERVICE, cortex, npcs, { checkSignatures: false }).process("mara", "Hi", {}, "rpg");
  assert.ok(!out.valid && !out.verified && !out.applied && out.signature === null && out.signedPayload === null);
  assert.deepEqual([out.memories, out.stateTransform, out.finalize["valid"]], [[], {}, false]);
  assert.throws(
    () => new NpcMind(SERVICE, cortex, npcs, { checkSignatures: "no" as unknown as boolean }),
    (e: unknown) => e instanceof TypeError && /^checkSignatures: must be true or false, not "no"/.test(e.message),
  );
});

test("an unknown NPC and a refused step say what is wrong", async () => {
  needsService();
  const npcs = new InMemoryNpcs();
  const mind = new NpcMind(SERVICE, new OpenAICortex(`${SCRIPTED}/v1`, "scripted"), npcs);
  await assert.rejects(
    mind.process("nobody", "Hi"),
    (e: unknown) => e instanceof InvalidInputError && /unknown NPC "nobody"/.test(e.message),
  );
  npcs.register("mara", "Mara.");
  await assert.rejects(mind.process("mara", "Hi", {}, "no-such-ruleset"), /422.*rulesetId/);
});

test("a refused step carries the service's status and error code", async () => {
  needsService();
  const npcs = new InMemoryNpcs();
  npcs.register("mara", "Mara.");
  const mind = new NpcMind(SERVICE, new OpenAICortex(`${SCRIPTED}/v1`, "scripted"), npcs);
  const refused = await mind.process("mara", "Hi", {}, "preset_nothing").then(
    () => null,
    (e: unknown) => e,
  );
  assert.ok(refused instanceof ServiceError, String(refused));
  assert.equal(refused.status, 422);
  assert.equal(refused.code, "invalid_request");
  assert.match(refused.message, /unknown ruleset 'preset_nothing'/);
  assert.deepEqual(npcs.get("mara")?.state, {});
});

test("a service that cannot be reached is an UnreachableError without a status", async () => {
  const npcs = new InMemoryNpcs();
  npcs.register("mara", "Mara.");
  const mind = new NpcMind("http://127.0.0.1:9", new OpenAICortex("http://127.0.0.1:9/v1", "m"), npcs);
  const down = await mind.process("mara", "Hi").then(
    () => null,
    (e: unknown) => e,
  );
  assert.ok(down instanceof UnreachableError, String(down));
  assert.equal(down.status, null);
  assert.equal(down.code, null);
});

/** The service's signing keys as GET /v1/keys lists them: kid -> public key (base64url). */
async function serviceKeys(): Promise<Record<string, string>> {
  type Listed = { keys: { kid: string; public_key: string }[] };
  const listed = (await (await fetch(`${SERVICE}/v1/keys`)).json()) as Listed;
  return Object.fromEntries(listed.keys.map((k) => [k.kid, k.public_key]));
}

/** A well-formed Ed25519 public key the service never signed with (base64url, as GET /v1/keys gives one). */
async function otherKey(): Promise<string> {
  const pair = (await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as CryptoKeyPair;
  return b64url(new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey)));
}

test("pinned keys alone are trusted and none is fetched; an outcome signed by another key is refused", async () => {
  needsService();
  await script({});
  const service = await serviceKeys();
  const [kid] = Object.keys(service) as [string];
  const cases: [Record<string, string> | ReadonlyMap<string, string>, boolean][] = [
    [service, true],
    [new Map(Object.entries(service)), true], // a Map pins as well
    [{ [kid]: await otherKey() }, false], // the service's kid, another key: a proxy's key pinned by mistake
    [{ elsewhere: await otherKey() }, false], // the service's key is not among those pinned
  ];
  for (const [n, [keys, verifies]] of cases.entries()) {
    const npcs = new InMemoryNpcs();
    npcs.register(`guard-${n}`, "A guard.");
    const asked: string[] = [];
    const spy: typeof fetch = (input, init) => {
      asked.push(new URL(String(input)).pathname);
      return fetch(input, init);
    };
    const cortex = new OpenAICortex(`${SCRIPTED}/v1`, "scripted");
    const mind = new NpcMind(SERVICE, cortex, npcs, { fetch: spy, keys });
    if (verifies) {
      const out = await mind.process(`guard-${n}`, "Someone approaches.");
      assert.ok(out.valid && out.remembered > 0 && npcs.remembered(`guard-${n}`).length === out.remembered);
    } else {
      await assert.rejects(
        mind.process(`guard-${n}`, "Someone approaches."),
        (e: unknown) => e instanceof SignatureError && /signature does not verify: nothing was applied/.test(e.message),
      );
      assert.deepEqual(npcs.get(`guard-${n}`)?.state, {});
      assert.equal(npcs.remembered(`guard-${n}`).length, 0);
    }
    assert.ok(!asked.includes("/v1/keys") && asked.some((p) => p.endsWith("/process")), asked.join(" "));
    assert.deepEqual(Object.fromEntries(await mind.publicKeys()), service); // the service's own list, to read
  }
});

test("keys that cannot be pinned are named when given", () => {
  const cortex = new OpenAICortex("http://127.0.0.1:9/v1");
  const pin = (keys: unknown): NpcMind =>
    new NpcMind("http://127.0.0.1:9", cortex, new InMemoryNpcs(), { keys: keys as Record<string, string> });
  const bad: [unknown, RegExp][] = [
    [{}, /^keys: pin at least one key/],
    [new Map(), /^keys: pin at least one key/],
    [[["k", "x"]], /^keys: must map each kid to its base64url public key, not be an array/],
    [{ "": "A".repeat(43) }, /^keys: a kid must be a non-empty text/],
    [{ "a.b": "A".repeat(43) }, /^keys: a kid must be a non-empty text without '\.'/],
    [new Map([[7, "A".repeat(43)]]), /^keys: a kid must be .* not a number/],
    [{ k1: "A".repeat(42) }, /^keys\["k1"\]: not the base64url of an Ed25519 public key/],
    [{ k1: "+".repeat(43) }, /^keys\["k1"\]: not the base64url/],
    [{ k1: null }, /^keys\["k1"\]: not the base64url/],
  ];
  for (const [keys, said] of bad)
    assert.throws(
      () => pin(keys),
      (e: unknown) => e instanceof TypeError && said.test(e.message),
    );
  assert.ok(pin(null) instanceof NpcMind && pin(undefined) instanceof NpcMind); // none pinned: as before
});
