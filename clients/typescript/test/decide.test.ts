/** DecideClient against a real npcmind and the scripted provider over HTTP. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { DecideClient, Policy } from "../src/index.js";
import { HOSTED, HOSTED_KEY, POLICY_SERVICE, SERVICE, needsService, script, until } from "./live.js";

const BEE = { hp_fraction: 0.5, distance_to_player: 90, sees_player: true, current_action: "chase" };
const LEGAL = ["idle", "wander", "chase", "flee"];
const world = { player_hp_fraction: 0.4, repellent: false }; // the forest example's world fields

test("a tracked bee gets the model's action, and a declined one runs its native AI", async () => {
  needsService();
  await script({ choose: { b1: "flee" }, decline: ["b2"] });
  const said: string[] = [];
  const client = new DecideClient(SERVICE, "ts-live-1", { world, log: (m) => said.push(m) });
  client.track("b1", "bee", BEE, LEGAL);
  client.track("b2", "bee", BEE, LEGAL);
  await until(
    () => client.stats.ai + (client.stats.fallbacks["refused"] ?? 0) >= 2,
    () => client.tick(),
  );
  const got = client.action("b1");
  assert.equal(got?.action, "flee");
  assert.equal(got?.source, "AI");
  assert.equal(client.action("b1", ["chase"]), null); // not legal now: the game's own AI
  assert.equal(client.action("b2"), null);
  assert.equal(client.stats.fallbacks["refused"], 1);
  assert.ok(client.report("b1", "done"));
  assert.equal(client.report("b2", "done"), false); // a fallback has nothing to report
  assert.ok(await client.wait());
  assert.equal(client.stats.reportsSent, 1);
  assert.ok(client.timeoutMs > 5000, "the service's deadline plus 5 s, from GET /v1/health");
  const prompt = await client.lastPrompt();
  assert.ok(prompt !== null && JSON.stringify(prompt).includes("b1"), JSON.stringify(prompt));
  client.close();
  client.tick(); // a frame after close: nothing to send, nothing thrown
});

test("an event asks at once and the answer names the trigger", async () => {
  needsService();
  await script({ choose: { b3: "chase" } });
  const client = new DecideClient(SERVICE, "ts-live-2", { world, log: () => {} });
  client.track("b3", "bee", BEE, LEGAL);
  await until(
    () => client.stats.ai >= 1,
    () => client.tick(),
  );
  await script({ choose: { b3: "flee" } });
  assert.ok(client.event("b3", "hit"));
  assert.equal(client.event("ghost", "hit"), false);
  await until(
    () => client.action("b3")?.action === "flee",
    () => client.tick(),
  );
  assert.equal(client.stats.requests, 2);
  client.close();
});

test("cascade: entities the local policy is sure about never reach the service", async () => {
  needsService();
  await script({ choose: { b5: "wander" } });
  const client = new DecideClient(SERVICE, "ts-live-3", {
    world,
    log: () => {},
    policy: (e) => (e.id === "b4" ? ["flee", 0.95] : ["chase", 0.2]),
  });
  client.track("b4", "bee", BEE, LEGAL);
  client.track("b5", "bee", BEE, LEGAL);
  await until(
    () => client.stats.ai >= 1,
    () => client.tick(),
  );
  assert.deepEqual([client.action("b4")?.source, client.action("b4")?.action], ["local", "flee"]);
  assert.deepEqual([client.action("b5")?.source, client.action("b5")?.action], ["AI", "wander"]);
  assert.equal(client.stats.asked, 1);
  assert.equal(client.stats.local, 1);
  client.close();
});

test("an unreachable service leaves every entity to its native AI, without throwing", async () => {
  const said: string[] = [];
  const client = new DecideClient("http://127.0.0.1:9", "ts-live-4", { log: (m) => said.push(m) });
  client.track("b6", "bee", BEE, LEGAL);
  await until(
    () => said.some((m) => m.includes("unreachable")),
    () => client.tick(),
  );
  assert.equal(client.action("b6"), null);
  client.close();
});

test("a hosted game opens a session with its api key and decides with the token", async () => {
  needsService();
  assert.ok(HOSTED && HOSTED_KEY, "set NPCMIND_HOSTED_URL and NPCMIND_HOSTED_KEY (tests/test_typescript.py does)");
  const seen: string[] = [];
  const fetchSpy: typeof fetch = (input, init) => {
    seen.push(`${init?.method ?? "GET"} ${new URL(String(input)).pathname}`);
    return fetch(input, init);
  };
  const client = new DecideClient(HOSTED, "game-1", { world, apiKey: HOSTED_KEY, fetch: fetchSpy, log: () => {} });
  client.track("b7", "bee", BEE, LEGAL);
  await until(
    () => client.stats.ai >= 1,
    () => client.tick(),
  );
  assert.equal(seen[0], "POST /v1/session");
  assert.ok(seen.includes("POST /v1/decide"));
  assert.equal(client.action("b7")?.source, "AI");
  client.close();
  const refused = new DecideClient(HOSTED, "game-1", { apiKey: "not-a-key", log: () => {} });
  const said: string[] = [];
  const quiet = new DecideClient(HOSTED, "game-1", { apiKey: "not-a-key", log: (m) => said.push(m) });
  quiet.track("b8", "bee", BEE, LEGAL);
  await until(
    () => said.some((m) => m.includes("did not open a session")),
    () => quiet.tick(),
  );
  assert.equal(quiet.action("b8"), null);
  refused.close();
  quiet.close();
});

test("the service's distilled policy is fetched and decides locally: source local, no model call", async () => {
  needsService();
  assert.ok(POLICY_SERVICE, "set NPCMIND_POLICY_URL (tests/test_typescript.py does)");
  await script({ choose: { p1: "chase", p2: "chase" } });
  let t = 0;
  const client = new DecideClient(POLICY_SERVICE, "ts-policy", { world, clock: () => t, log: () => {} });
  const low = { ...BEE, hp_fraction: 0.1 }; // the forest policy: flee, at 0.99
  client.track("p1", "bee", low, LEGAL);
  client.track("p2", "bee", low, LEGAL);
  await until(
    () => client.servicePolicy !== null && client.stats.ai === 2,
    () => client.tick(),
  );
  assert.equal(client.action("p1")?.source, "AI"); // asked before the policy came
  const asked = client.stats.asked;
  t += 4100; // the forest's refresh_ms: both due again, and the policy is sure of them
  client.tick();
  for (const id of ["p1", "p2"]) {
    const got = client.action(id);
    assert.equal(got?.source, "local");
    assert.equal(got?.action, "flee");
    assert.equal(got?.decisionId, null);
    assert.ok((got?.confidence ?? 0) >= 0.8);
  }
  assert.equal(client.stats.local, 2);
  assert.equal(client.stats.asked, asked); // nothing more went to the service
  client.close();
});

test("DecideClient takes a distilled Policy as its own; one below the threshold asks the service", async () => {
  needsService();
  await script({ choose: { q1: "chase", q2: "chase" } });
  const manifest = (await (await fetch(`${SERVICE}/v1/manifest`)).json()) as { version: string };
  const doc = {
    format: "npcmind-policy",
    format_version: 1,
    manifest_version: manifest.version,
    types: {
      bee: {
        actions: LEGAL,
        features: [{ source: "observation", field: "hp_fraction", encoding: "number" }],
        trees: [
          {
            feature: [0, -1, -1],
            threshold: [0.3, 0, 0],
            left: [1, -1, -1],
            right: [2, -1, -1],
            value: [[], [0, 0, 0.1, 0.9], [0.3, 0.3, 0.4, 0]],
          },
        ],
      },
    },
  };
  const client = new DecideClient(SERVICE, "ts-live-own", { world, policy: Policy.load(doc), log: () => {} });
  client.track("q1", "bee", { ...BEE, hp_fraction: 0.1 }, LEGAL);
  client.track("q2", "bee", { ...BEE, hp_fraction: 0.9 }, LEGAL);
  await until(
    () => client.stats.ai >= 1,
    () => client.tick(),
  );
  assert.deepEqual(
    [client.action("q1")?.source, client.action("q1")?.action, client.action("q1")?.confidence],
    ["local", "flee", 0.9],
  );
  assert.deepEqual([client.action("q2")?.source, client.action("q2")?.action], ["AI", "chase"]);
  assert.deepEqual([client.stats.local, client.stats.asked, client.servicePolicy], [1, 1, null]);
  client.close();
});

test("against the service, decisions stream by default; stream: false asks for one answer", async () => {
  needsService();
  await script({ choose: { s1: "flee", s2: "chase" } });
  for (const stream of [true, false]) {
    const client = new DecideClient(SERVICE, `ts-live-stream-${stream}`, { world, stream, log: () => {} });
    client.track("s1", "bee", BEE, LEGAL);
    client.track("s2", "bee", BEE, LEGAL);
    await until(
      () => client.stats.ai >= 2,
      () => client.tick(),
    );
    assert.deepEqual([client.action("s1")?.action, client.action("s2")?.action], ["flee", "chase"]);
    const { streamedDecisions, streamsCut, errors } = client.stats;
    // streamed: the service saw Accept: application/x-ndjson and answered lines, whole
    assert.deepEqual([streamedDecisions, streamsCut, errors], stream ? [2, 0, 0] : [0, 0, 0]);
    client.close();
  }
});

test("scope, scope state and threshold change as the game goes: the next request and choice use them", async () => {
  needsService();
  await script({ choose: { b9: "chase" } });
  const decides: Record<string, unknown>[] = [];
  const fetchSpy: typeof fetch = (input, init) => {
    const path = new URL(String(input)).pathname;
    if (path === "/v1/decide" && typeof init?.body === "string") decides.push(JSON.parse(init.body));
    return fetch(input, init);
  };
  const sure = (e: { id: string }): [string, number] => (e.id === "b9" ? ["flee", 0.7] : ["", 0]);
  const client = new DecideClient(SERVICE, "ts-live-scope", { world, policy: sure, fetch: fetchSpy, log: () => {} });
  assert.deepEqual([client.scope, client.scopeState, client.threshold], [null, null, 0.8]);
  client.track("b9", "bee", BEE, LEGAL);
  await until(
    () => client.stats.ai >= 1,
    () => client.tick(),
  );
  assert.ok(!("scope" in (decides[0] ?? {})) && !("scope_state" in (decides[0] ?? {})), JSON.stringify(decides[0]));
  assert.equal(client.action("b9")?.source, "AI"); // 0.7 is below the threshold: the service decided

  client.scope = "forest_boss"; // the boss fight begins
  client.scopeState = { boss_phase: 2 };
  assert.ok(client.event("b9", "hit"));
  await until(
    () => client.stats.ai >= 2,
    () => client.tick(),
  );
  const inScope = decides.at(-1) ?? {};
  assert.equal(inScope["scope"], "forest_boss");
  assert.deepEqual(inScope["scope_state"], { boss_phase: 2 }); // the service took it: an answer came
  assert.equal(client.stats.errors, 0);

  client.threshold = 0.6; // now the local policy is sure enough
  const asked = decides.length;
  assert.ok(client.event("b9", "hit"));
  await until(
    () => client.stats.local >= 1,
    () => client.tick(),
  );
  assert.deepEqual([client.action("b9")?.action, client.action("b9")?.source], ["flee", "local"]);
  assert.equal(decides.length, asked); // decided here: nothing asked

  client.scope = null; // out of the fight: the state is no longer sent
  client.threshold = 0.9;
  assert.ok(client.event("b9", "hit"));
  await until(
    () => decides.length > asked,
    () => client.tick(),
  );
  const after = decides.at(-1) ?? {};
  assert.ok(!("scope" in after) && !("scope_state" in after), JSON.stringify(after));
  assert.equal(client.scopeState?.["boss_phase"], 2); // kept for when a scope is set again
  assert.ok(await client.wait());
  client.close();
});

test("a setter given the wrong kind of value names the field and changes nothing", () => {
  const client = new DecideClient("http://127.0.0.1:9", "ts-setters", { log: () => {} });
  const wrong = (set: () => void, field: string): void =>
    assert.throws(set, (e: unknown) => e instanceof TypeError && e.message.startsWith(`${field}: must be`));
  wrong(() => (client.threshold = Number.NaN), "threshold");
  wrong(() => (client.threshold = "0.5" as unknown as number), "threshold");
  wrong(() => (client.scope = 7 as unknown as string), "scope");
  wrong(() => (client.scopeState = [] as unknown as Record<string, unknown>), "scopeState");
  wrong(() => (client.world = null as unknown as Record<string, unknown>), "world");
  assert.deepEqual([client.threshold, client.scope, client.scopeState, client.world], [0.8, null, null, {}]);
  client.world = { night: true };
  assert.deepEqual(client.world, { night: true });
  client.close();
});
