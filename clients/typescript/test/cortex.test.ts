/** A CortexError names the address it tried: a wrong port or path is seen in the error's first line. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { CortexError, OpenAICortex } from "../src/index.js";

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
