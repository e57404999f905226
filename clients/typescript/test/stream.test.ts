/** DecideClient's streamed answers over real HTTP, against a stand-in service on a real port whose NDJSON body
 * the test writes line by line (the real service's stream: decide.test.ts): each decision is used as its line
 * arrives, a stream cut midway keeps what came, and the rest run their native AI. */

import assert from "node:assert/strict";
import { createServer, type ServerResponse } from "node:http";
import { test } from "node:test";

import { DecideClient } from "../src/index.js";
import { until } from "./live.js";

const MANIFEST = { types: { bee: { refresh_ms: 600_000, ttl_ms: 60_000 } } }; // no refresh during a test
const LEGAL = ["chase", "flee"];

function line(d: Record<string, unknown>): string {
  return `${JSON.stringify(d)}\n`;
}

function ai(id: string, action: string): string {
  const d = { source: "AI", id, action, label: action, confidence: 0.9, ttl_ms: 60_000, decision_id: `d-${id}` };
  return line({ ...d, cached: false });
}

const LAST = line({ a2g: "0.1", epoch: 0, latency_ms: 5, sent_ms: {} });

/** A stand-in service: telemetry is taken, a decide request gets a 200 NDJSON stream the test writes to. */
async function standIn(): Promise<{ url: string; accepts: string[]; answer: () => ServerResponse | null; close: () => void }> {
  const accepts: string[] = [];
  let decide: ServerResponse | null = null;
  const srv = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.url !== "/v1/decide") return res.writeHead(200, { "content-type": "application/json" }).end("{}");
      accepts.push(req.headers["accept"] ?? "");
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.flushHeaders();
      decide = res;
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const address = srv.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  const close = (): void => {
    srv.closeAllConnections();
    srv.close();
  };
  return { url: `http://127.0.0.1:${port}`, accepts, answer: () => decide, close };
}

function client(url: string, log: (m: string) => void = () => {}): DecideClient {
  const c = new DecideClient(url, "c1", { manifest: MANIFEST, fetchPolicy: false, timeoutMs: 30_000, log });
  c.track("b1", "bee", { hp: 1 }, LEGAL);
  c.track("b2", "bee", { hp: 1 }, LEGAL);
  return c;
}

test("a streamed decision is used as its line arrives, while the others are still being written", async (ctx) => {
  const s = await standIn();
  ctx.after(s.close);
  const c = client(s.url);
  ctx.after(() => c.close());
  await until(
    () => s.answer() !== null,
    () => c.tick(),
  );
  assert.deepEqual(s.accepts, ["application/x-ndjson"]);
  const b2 = ai("b2", "chase");
  s.answer()?.write(ai("b1", "flee") + b2.slice(0, 30)); // b2's line not finished
  await until(
    () => c.action("b1") !== null,
    () => c.tick(),
  );
  assert.equal(c.action("b1")?.action, "flee");
  assert.equal(c.action("b2"), null); // its line is still coming: nothing of it applied
  assert.equal(c.stats.streamedDecisions, 1);
  s.answer()?.end(b2.slice(30) + LAST);
  await until(
    () => c.action("b2") !== null,
    () => c.tick(),
  );
  assert.equal(c.action("b2")?.action, "chase");
  assert.ok(await c.wait());
  const { streamedDecisions, streamsCut, errors } = c.stats;
  assert.deepEqual([streamedDecisions, c.stats.ai, streamsCut, errors], [2, 2, 0, 0]);
  assert.ok(c.stats.streamedMsTotal >= 0);
});

test("a stream cut midway keeps the decisions received; the rest fall back and run their native AI", async (ctx) => {
  const s = await standIn();
  ctx.after(s.close);
  const said: string[] = [];
  const c = client(s.url, (m) => said.push(m));
  ctx.after(() => c.close());
  await until(
    () => s.answer() !== null,
    () => c.tick(),
  );
  s.answer()?.write(ai("b1", "flee") + ai("b2", "chase").slice(0, 30));
  await until(
    () => c.action("b1") !== null,
    () => c.tick(),
  );
  s.answer()?.destroy(); // the service killed mid-answer: no last chunk
  await until(
    () => c.stats.streamsCut === 1,
    () => c.tick(),
  );
  assert.equal(c.action("b1")?.action, "flee"); // what came stands
  assert.equal(c.action("b2"), null);
  assert.equal(c.stats.fallbacks["unavailable"], 1);
  assert.ok(said.some((m) => m.includes("the decision stream was cut")), JSON.stringify(said));
});

test("stream: false asks for today's single answer, and a JSON answer to a streamed request is used as today", async (ctx) => {
  const seen: string[] = [];
  const srv = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.url === "/v1/decide") seen.push(req.headers["accept"] ?? "");
      const body = req.url === "/v1/decide" ? { epoch: 0, a2g: "0.1", latency_ms: 1, decisions: [] } : {};
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  ctx.after(() => (srv.closeAllConnections(), srv.close()));
  const address = srv.address();
  const url = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`;
  for (const stream of [false, true]) {
    const c = new DecideClient(url, "c1", { manifest: MANIFEST, fetchPolicy: false, stream, log: () => {} });
    c.track("b1", "bee", { hp: 1 }, LEGAL);
    c.tick();
    assert.ok(await c.wait());
    assert.deepEqual([c.stats.requests, c.stats.errors, c.stats.streamedDecisions], [1, 0, 0]);
    c.close();
  }
  assert.deepEqual(seen, ["*/*", "application/x-ndjson"]);
});
