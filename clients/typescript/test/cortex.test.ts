/** A CortexError names the address it tried: a wrong port or path is seen in the error's first line. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { CortexError, NpcMindError, OpenAICortex } from "../src/index.js";

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
