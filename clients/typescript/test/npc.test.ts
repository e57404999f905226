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
