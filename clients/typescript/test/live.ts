/** What the live tests share: the service and scripted provider pytest started, and waiting on conditions. */

import assert from "node:assert/strict";

/** The service under test (tests/test_typescript.py starts it and sets these). */
export const SERVICE = process.env["NPCMIND_URL"] ?? "";
/** The scripted provider's root (PUT /_script there). */
export const SCRIPTED = process.env["NPCMIND_SCRIPTED_URL"] ?? "";
/** A hosted-profile service and one client's api key. */
export const HOSTED = process.env["NPCMIND_HOSTED_URL"] ?? "";
export const HOSTED_KEY = process.env["NPCMIND_HOSTED_KEY"] ?? "";
/** A service whose store holds a distilled policy of client `ts-policy` for its manifest. */
export const POLICY_SERVICE = process.env["NPCMIND_POLICY_URL"] ?? "";

/** Why live tests cannot run here, or undefined: never a silent pass. */
export function needsService(): void {
  assert.ok(SERVICE && SCRIPTED, "set NPCMIND_URL and NPCMIND_SCRIPTED_URL (tests/test_typescript.py does)");
}

/** Tell the scripted provider how to answer. */
export async function script(body: Record<string, unknown>): Promise<void> {
  const r = await fetch(`${SCRIPTED}/_script`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  assert.equal(r.status, 200, await r.text());
}

/** Run `step` until `done()` holds, with a generous deadline (never a duration asserted). */
export async function until(done: () => boolean, step: () => void = () => {}, deadlineMs = 30_000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!done()) {
    assert.ok(Date.now() < end, "the condition did not hold within the deadline");
    step();
    await new Promise((r) => setTimeout(r, 10));
  }
}
