/** A CortexError names the address it tried: a wrong port or path is seen in the error's first line; a parameter
 * the model refuses is left out and the call asked again (against the scripted provider and a vLLM-like server). */

import assert from "node:assert/strict";
import { createServer } from "node:http";
import { test } from "node:test";

import { CortexError, NpcMindError, OpenAICortex } from "../src/index.js";
import { refusedParameter } from "../src/params.js";
import { SCRIPTED, needsService, script } from "./live.js";

const constraints = { maxTokens: 8, temperature: null, stop: [] };

test("an unreachable cortex names the URL it tried", async () => {
  const refused: typeof fetch = async () => {
    throw new TypeError("fetch failed");
  };
  const cortex = new OpenAICortex("http://127.0.0.1:9/v1/", "local", null, refused);
  const err = await cortex.complete("hi", constraints).then(
    () => assert.fail("no error"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof CortexError);
  assert.equal(err.url, "http://127.0.0.1:9/v1/chat/completions");
  assert.deepEqual([err.status, err.code], [null, null]);
  const said = "cannot reach the cortex: TypeError: fetch failed (http://127.0.0.1:9/v1/chat/completions)";
  assert.equal(err.message, said);
});

test("a cortex that answers an error names the URL and the status", async () => {
  const seen: string[] = [];
  const failing: typeof fetch = async (input) => {
    seen.push(String(input));
    return new Response("no such model", { status: 404 });
  };
  const cortex = new OpenAICortex("http://models.test/v1", "local", null, failing);
  const err = await cortex.complete("hi", constraints).then(
    () => assert.fail("no error"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof CortexError);
  assert.deepEqual(seen, ["http://models.test/v1/chat/completions"]);
  assert.equal(err.message, "the cortex answered HTTP 404: no such model (http://models.test/v1/chat/completions)");
  assert.equal(new CortexError("a game's own cortex").url, null);
});

test("a cortex error carries the model server's status and code on the SDK's one error root", async () => {
  const body = { error: { message: "no such model", type: "invalid_request_error", code: "model_not_found" } };
  const gone: typeof fetch = async () => new Response(JSON.stringify(body), { status: 404 });
  const err = await new OpenAICortex("http://models.test/v1", "local", null, gone).complete("hi", constraints).then(
    () => assert.fail("no error"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof NpcMindError && err instanceof CortexError);
  assert.deepEqual([err.status, err.code], [404, "model_not_found"]);
  const typed = { error: { message: "slow down", type: "rate_limit_exceeded" } };
  const busy: typeof fetch = async () => new Response(JSON.stringify(typed), { status: 429 });
  const slow = await new OpenAICortex("http://models.test/v1", "local", null, busy).complete("hi", constraints).then(
    () => assert.fail("no error"),
    (e: unknown) => e,
  );
  assert.ok(slow instanceof CortexError);
  assert.deepEqual([slow.status, slow.code], [429, "rate_limit_exceeded"]);
});

/** The scripted provider's request bodies since they were last cleared (GET /_requests). */
async function scriptedRequests(): Promise<Record<string, unknown>[]> {
  return (await (await fetch(`${SCRIPTED}/_requests`)).json()) as Record<string, unknown>[];
}

test("the cortex drops what a reasoning model refuses and still answers", async () => {
  needsService();
  // OpenAI's reasoning models refuse temperature, stop and max_tokens (they take max_completion_tokens): the
  // scripted provider answers each as OpenAI does, a 400 naming it in error.param
  await script({ reject_params: ["max_tokens", "temperature", "stop"], text: '{"dialogue": "Hm."}' });
  await fetch(`${SCRIPTED}/_requests`, { method: "DELETE" });
  const said: string[] = [];
  const cortex = new OpenAICortex(`${SCRIPTED}/v1`, "scripted", null, undefined, (m) => said.push(m));
  const asked = { maxTokens: 200, temperature: 0.7, stop: ["\n\n"] };
  const text = await cortex.complete("Say hello.", asked);
  const again = await cortex.complete("Say hello.", asked);
  await script({});
  assert.equal(text, '{"dialogue": "Hm."}');
  assert.equal(again, text);
  const sent = await scriptedRequests();
  assert.equal(sent.length, 5); // three refusals, then two answers without asking again
  assert.equal(sent.at(-1)?.["max_completion_tokens"], 200);
  assert.deepEqual(Object.keys(sent.at(-1) ?? {}).filter((k) => ["max_tokens", "temperature", "stop"].includes(k)), []);
  assert.deepEqual([...cortex.refused].sort(), ["max_tokens", "stop", "temperature"]);
  assert.equal(said.length, 3);
  assert.ok(said.every((m) => m.includes("no longer sent")), said.join("\n"));
});

test("the cortex still fails clearly on an error it cannot work around", async () => {
  needsService();
  await script({ status: 500 });
  await fetch(`${SCRIPTED}/_requests`, { method: "DELETE" });
  const cortex = new OpenAICortex(`${SCRIPTED}/v1`, "scripted", null, undefined, () => {});
  await assert.rejects(
    cortex.complete("Say hello.", { maxTokens: 50, temperature: null, stop: [] }),
    (e: unknown) => e instanceof CortexError && /HTTP 500/.test(e.message),
  );
  await script({});
  assert.equal((await scriptedRequests()).length, 1);
  assert.equal(cortex.refused.size, 0);
});

type Server = { url: string; bodies: Record<string, unknown>[]; close: () => void };

/** An OpenAI-compatible server on a real port that refuses the parameters of `refuse` as vLLM does (a 422 whose
 * message alone names the field); it keeps every body it was sent. */
async function vllmLike(refuse: string[]): Promise<Server> {
  const bodies: Record<string, unknown>[] = [];
  const srv = createServer((req, res) => {
    let raw = "";
    req.on("data", (c: Buffer) => (raw += c.toString()));
    req.on("end", () => {
      const body = JSON.parse(raw) as Record<string, unknown>;
      bodies.push(body);
      const bad = refuse.find((p) => p in body);
      res.writeHead(bad ? 422 : 200, { "content-type": "application/json" });
      const refused = { object: "error", message: `[{'type': 'extra_forbidden', 'loc': ('body', '${bad}')}]` };
      res.end(JSON.stringify(bad ? refused : { choices: [{ message: { content: "Aye." } }] }));
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const address = srv.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  return { url: `http://127.0.0.1:${port}/v1`, bodies, close: () => srv.close() };
}

test("a parameter refused in the message alone (vLLM's form) is dropped too; a limit is renamed", async () => {
  const server = await vllmLike(["stop", "max_tokens"]);
  try {
    const cortex = new OpenAICortex(server.url, "m", null, undefined, () => {});
    assert.equal(await cortex.complete("Hi.", { maxTokens: 20, temperature: 0.5, stop: ["\n"] }), "Aye.");
    const last = server.bodies.at(-1) ?? {};
    assert.deepEqual([last["max_completion_tokens"], last["temperature"], "stop" in last, "max_tokens" in last], [
      20,
      0.5,
      false,
      false,
    ]);
    assert.equal(server.bodies.length, 3); // stop refused, then max_tokens, then the answer
  } finally {
    server.close();
  }
});

test("which refused parameter an error names", () => {
  const sent = ["model", "messages", "temperature", "stop", "max_tokens"];
  const optional = ["temperature", "stop", "max_tokens", "max_completion_tokens"];
  const cases: [unknown, string | null][] = [
    [{ error: { message: "Unsupported parameter: 'stop'", param: "stop" } }, "stop"],
    [{ error: { message: "x", param: "messages" } }, null], // named, but not optional
    [{ error: { message: "This model does not support the 'temperature' parameter." } }, "temperature"],
    [{ message: "Unrecognized request argument supplied: max_tokens" }, "max_tokens"], // a proxy's form
    [{ error: { message: "context length exceeded: max_tokens too large for 8192" } }, null], // not a refusal
    [{ error: { message: "max_completion_tokens is not supported" } }, null], // not sent: nothing to drop
  ];
  for (const [body, expected] of cases) {
    assert.equal(refusedParameter(400, body, sent, optional), expected, JSON.stringify(body));
    assert.equal(refusedParameter(422, body, sent, optional), expected, JSON.stringify(body));
    assert.equal(refusedParameter(500, body, sent, optional), null); // a server's own failure, not a refusal
  }
  const validation = { detail: "1 validation error: stop: extra fields not permitted" };
  assert.equal(refusedParameter(500, validation, sent, optional), "stop"); // llama-cpp-python's 500
  assert.equal(refusedParameter(404, { error: { param: "stop" } }, sent, optional), null);
});
