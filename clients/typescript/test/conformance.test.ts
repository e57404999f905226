/** Runs every conformance case of clients/conformance/ against the TypeScript scheduler: the same files the
 * Python SDK runs, so the two cannot drift. */

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import type { LocalPolicy } from "../src/cascade.js";
import { DecideClient } from "../src/decide.js";
import { NpcMindError, serviceError } from "../src/errors.js";
import { Policy } from "../src/policy.js";
import { Scheduler, type SchedulerOptions } from "../src/scheduler.js";
import type { Choice, OutRequest, Outcome, Stats } from "../src/types.js";

type Json = Record<string, unknown>;
const FOLDER = process.env["NPCMIND_CONFORMANCE"] ?? fileURLToPath(new URL("../../../conformance/", import.meta.url));
const STATS: Record<string, keyof Stats> = {
  requests: "requests",
  asked: "asked",
  ai: "ai",
  cached: "cached",
  local: "local",
  fallbacks: "fallbacks",
  dropped_epoch: "droppedEpoch",
  illegal: "illegal",
  errors: "errors",
  reports_sent: "reportsSent",
  refused: "refused",
  streamed_decisions: "streamedDecisions",
  streamed_ms_total: "streamedMsTotal",
  streams_cut: "streamsCut",
};

/** A `set_scope` or `set_threshold` step through the game's own setter (`DecideClient`'s `scope`, `scopeState`,
 * `threshold`) on the case's scheduler, the client's `core`: a setter that did nothing fails the case. */
function live(s: Scheduler, name: "scope" | "scopeState" | "threshold", value: unknown): void {
  const setter = Object.getOwnPropertyDescriptor(DecideClient.prototype, name)?.set;
  assert.ok(setter, `DecideClient has no ${name} setter`);
  setter.call({ core: s }, value);
}

/** Every case of the folder, each with the file it came from. */
function cases(): { file: string; case: Json }[] {
  const files = readdirSync(FOLDER)
    .filter((f) => f.endsWith(".json"))
    .sort();
  return files.flatMap((file) => {
    const data = JSON.parse(readFileSync(join(FOLDER, file), "utf8")) as Json | Json[];
    return (Array.isArray(data) ? data : [data]).map((c) => ({ file, case: c }));
  });
}

/** The scheduler a case's options describe (snake_case in the files). */
function scheduler(c: Json): Scheduler {
  const o = (c["options"] ?? {}) as Json;
  const options: SchedulerOptions = {
    clientId: (o["client_id"] as string | undefined) ?? "c1",
    epoch: (o["epoch"] as number | undefined) ?? 0,
    world: (o["world"] as Json | undefined) ?? {},
    scope: (o["scope"] as string | null | undefined) ?? null,
    scopeState: (o["scope_state"] as Json | null | undefined) ?? null,
    apiKey: (o["api_key"] as string | null | undefined) ?? null,
    refreshMs: (o["refresh_ms"] as number | null | undefined) ?? null,
    eventWindowMs: (o["event_window_ms"] as number | undefined) ?? 50,
    telemetryMs: (o["telemetry_ms"] as number | undefined) ?? 500,
    threshold: (o["threshold"] as number | undefined) ?? 0.8,
    maxInFlight: (o["workers"] as number | undefined) ?? 4,
    timeoutMs: typeof o["timeout_s"] === "number" ? o["timeout_s"] * 1000 : null,
    manifest: (c["manifest"] as Json | undefined) ?? null,
    manifestVersion: (c["manifest_version"] as string | undefined) ?? null,
    fetchPolicy: (o["fetch_policy"] as boolean | null | undefined) ?? null,
    policyRefreshMs: (o["policy_refresh_ms"] as number | undefined) ?? 60_000,
    policy: localPolicy(c),
    stream: (o["stream"] as boolean | undefined) ?? true,
    log: () => {},
  };
  return new Scheduler(options);
}

/** The game's own policy a case gives: a function of the entity's id (`policy`), or a distilled policy file
 * (`policy_file`, loaded as a `Policy`). */
function localPolicy(c: Json): LocalPolicy | null {
  if ("policy_file" in c) return Policy.load(c["policy_file"] as Json);
  const table = c["policy"] as Record<string, [string, number]> | undefined;
  return table ? (e) => table[e.id] ?? ["", 0] : null;
}

/** `expected` as a subset of `actual`, by the README's rules; where it differs, or null. */
function differs(expected: unknown, actual: unknown, at: string): string | null {
  if (expected === null)
    return actual === null || actual === undefined ? null : `${at}: expected null, got ${JSON.stringify(actual)}`;
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length)
      return `${at}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`;
    for (let i = 0; i < expected.length; i++) {
      const d = differs(expected[i], actual[i], `${at}[${i}]`);
      if (d) return d;
    }
    return null;
  }
  if (typeof expected === "object") {
    if (typeof actual !== "object" || actual === null || Array.isArray(actual))
      return `${at}: expected an object, got ${JSON.stringify(actual)}`;
    for (const [k, v] of Object.entries(expected)) {
      const d = differs(v, (actual as Json)[k], `${at}.${k}`);
      if (d) return d;
    }
    return null;
  }
  return expected === actual ? null : `${at}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`;
}

/** A choice as the files name its fields. */
function choiceJson(c: Choice | null): Json | null {
  if (c === null) return null;
  const { action, source, confidence, cached, decisionId, label, expiresAt } = c;
  return { action, source, confidence, cached, decision_id: decisionId, label, expires_at_ms: expiresAt };
}

/** A request as the files write it (its body as sent: the JSON text the transport would send). */
function requestJson(r: OutRequest): Json {
  return {
    ref: r.ref,
    method: r.method,
    path: r.path,
    headers: r.headers,
    after: [...r.after],
    body: r.json === null ? null : JSON.parse(r.json),
    stream: r.stream === true,
  };
}

/** One case, step by step. */
function run(c: Json): void {
  const s = scheduler(c);
  const emitted = new Set<string>();
  const answered = new Set<string>();
  const note = (rs: OutRequest[]): OutRequest[] => (rs.forEach((r) => emitted.add(r.ref)), rs);
  const steps = c["steps"] as Json[];
  steps.forEach((step, i) => {
    const at = `step ${i} (${String(step["do"])} at ${String(step["at_ms"])} ms)`;
    const now = step["at_ms"] as number;
    const args = (step["args"] ?? {}) as Json;
    const expect = (result: unknown): void => {
      if (!("expect" in step)) return;
      const d = differs(step["expect"], result, "expect");
      assert.equal(d, null, `${at}: ${d}`);
    };
    switch (step["do"]) {
      case "track": {
        const { id, type, observation, legal_actions, ...rest } = args as Json & {
          id: string;
          type: string;
          observation: Json;
          legal_actions: string[];
        };
        s.roster.track(id, type, observation, legal_actions, rest, now);
        break;
      }
      case "observe":
        s.observe(
          args["id"] as string,
          args["type"] as string,
          args["fields"] as Json,
          (args["position"] as number[] | undefined) ?? null,
        );
        break;
      case "untrack":
        s.untrack(args["id"] as string);
        break;
      case "event":
        expect(s.roster.event(args["id"] as string, args["trigger"] as string, now));
        break;
      case "report":
        expect(
          s.report(args["id"] as string, args["outcome"] as Outcome, (args["detail"] as string | undefined) ?? null),
        );
        break;
      case "set_epoch":
        s.roster.setEpoch(args["epoch"] as number, now);
        break;
      case "set_scene":
        s.setScene(args["scene"] as string);
        break;
      case "set_scope":
        live(s, "scope", args["scope"]);
        live(s, "scopeState", args["scope_state"] ?? null);
        break;
      case "set_threshold":
        live(s, "threshold", args["threshold"]);
        break;
      case "tick": {
        const sent = note(s.tick(now)).map(requestJson);
        if ("sent" in step) {
          const want = step["sent"] as Json[];
          assert.equal(
            sent.length,
            want.length,
            `${at}: expected ${want.length} requests, got ${JSON.stringify(sent)}`,
          );
          want.forEach((w, j) => {
            const d = differs(w, sent[j], `sent[${j}]`);
            assert.equal(d, null, `${at}: ${d}; sent ${JSON.stringify(sent)}`);
          });
        }
        break;
      }
      case "answer":
      case "fail":
      case "end": {
        const ref = step["ref"] as string;
        assert.ok(emitted.has(ref) && !answered.has(ref), `${at}: ${ref} was not emitted, or was answered already`);
        answered.add(ref);
        if (step["do"] === "fail") s.fail(ref, step["kind"] as "timeout" | "unreachable", now);
        else if (step["do"] === "end") s.end(ref, now);
        else
          s.answer(ref, step["status"] as number, step["body"], (step["headers"] ?? {}) as Record<string, string>, now);
        break;
      }
      case "chunk": {
        const ref = step["ref"] as string;
        assert.ok(emitted.has(ref) && !answered.has(ref), `${at}: ${ref} was not emitted, or has ended already`);
        s.chunk(ref, new TextEncoder().encode(step["text"] as string), now); // bytes, as the transport gives them
        break;
      }
      case "action":
        expect(
          choiceJson(s.roster.action(args["id"] as string, (args["legal_now"] as string[] | undefined) ?? null, now)),
        );
        break;
      case "stats":
        expect(Object.fromEntries(Object.entries(STATS).map(([file, mine]) => [file, s.stats[mine]])));
        break;
      case "timeout_s":
        expect(s.timeoutMs / 1000);
        break;
      default:
        assert.fail(`${at}: unknown step ${JSON.stringify(step["do"])}`);
    }
  });
}

const all = cases();
test("the conformance folder holds cases", () => {
  assert.ok(all.length > 0, `no case in ${FOLDER}`);
});
for (const { file, case: c } of all) {
  test(`conformance ${file}: ${String(c["name"])}`, () => run(c));
}

/** The error-answer vectors (clients/conformance/errors/): the error every SDK makes of an error answer. */
const errors = JSON.parse(readFileSync(join(FOLDER, "errors", "error-answers.json"), "utf8")) as {
  what: string;
  vectors: { name: string; status: number; body: unknown; kind: string; code: string | null; message: string }[];
};
for (const v of errors.vectors) {
  test(`error answer: ${v.name}`, () => {
    const e = serviceError(v.status, v.body, errors.what);
    assert.ok(e instanceof NpcMindError);
    assert.deepEqual([e.constructor.name, e.status, e.code, e.message], [v.kind, v.status, v.code, v.message]);
  });
}
