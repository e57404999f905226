/** The fetch transport over real HTTP (a node:http server): gzip from 16 KB, a session's token put in for the
 * requests made while it was asked for, waiting for `after`, and timeouts told apart from an unreachable service. */

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { test } from "node:test";
import { gunzipSync } from "node:zlib";

import { Transport, type Settled } from "../src/transport.js";
import type { OutRequest } from "../src/types.js";
import { until } from "./live.js";

type Seen = { path: string; headers: IncomingMessage["headers"]; body: string };

/** A server that records what it got and answers by path; `/slow` never answers. */
async function server(): Promise<{ url: string; seen: Seen[]; close: () => void }> {
  const seen: Seen[] = [];
  const srv: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      const body = req.headers["content-encoding"] === "gzip" ? gunzipSync(raw).toString() : raw.toString();
      seen.push({ path: req.url ?? "", headers: req.headers, body });
      if (req.url === "/slow") return;
      res.setHeader("content-type", "application/json");
      if (req.url === "/v1/session")
        res.end(JSON.stringify({ session_token: "tok-1", session_id: "s", expires_in_s: 3600 }));
      else res.end(JSON.stringify({ ok: true }));
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const address = srv.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  return { url: `http://127.0.0.1:${port}`, seen, close: () => (srv.closeAllConnections(), srv.close()) };
}

function request(
  ref: string,
  path: string,
  body: Record<string, unknown> | null,
  extra: Partial<OutRequest> = {},
): OutRequest {
  return {
    ref,
    method: body === null ? "GET" : "POST",
    path,
    headers: {},
    body,
    json: body === null ? null : JSON.stringify(body),
    after: [],
    ...extra,
  };
}

async function settled(t: Transport, n: number): Promise<Settled[]> {
  const got: Settled[] = [];
  await until(() => (got.push(...t.drain()), got.length >= n));
  return got;
}

test("a body from 16 KB goes gzip-compressed, a small one as it is", async () => {
  const s = await server();
  const t = new Transport({ baseUrl: s.url, timeoutMs: () => 30_000 });
  const big = { entities: Array.from({ length: 400 }, (_, i) => ({ id: `e${i}`, fields: { text: "x".repeat(40) } })) };
  t.send(request("r1", "/v1/telemetry", big));
  t.send(request("r2", "/v1/telemetry", { entities: [] }));
  const got = await settled(t, 2);
  assert.deepEqual(got.map((g) => ("status" in g ? g.status : g.fail)).sort(), [200, 200]);
  const [first, second] = [s.seen.find((x) => x.body.length > 16_384), s.seen.find((x) => x.body.length < 100)];
  assert.equal(first?.headers["content-encoding"], "gzip");
  assert.deepEqual(JSON.parse(first?.body ?? "{}"), big);
  assert.equal(second?.headers["content-encoding"], undefined);
  assert.equal(second?.headers["content-type"], "application/json");
  s.close();
});

test("requests made while the session was asked for wait for it and carry the token it brought", async () => {
  const s = await server();
  const t = new Transport({ baseUrl: s.url, timeoutMs: () => 30_000 });
  t.send(request("r1", "/v1/session", { client_id: "c1" }, { headers: { authorization: "Bearer key" } }));
  t.send(request("r2", "/v1/decide", { entities: [] }, { headers: { authorization: "Bearer @r1" }, after: ["r1"] }));
  await settled(t, 2);
  assert.deepEqual(
    s.seen.map((x) => [x.path, x.headers["authorization"]]),
    [
      ["/v1/session", "Bearer key"],
      ["/v1/decide", "Bearer tok-1"],
    ],
  );
  // a request waiting for a session that brought no token is answered 401 here, never sent with "@r9"
  t.send(request("r3", "/v1/decide", { entities: [] }, { headers: { authorization: "Bearer @r9" } }));
  const [answer] = await settled(t, 1);
  assert.ok(answer !== undefined && "status" in answer && answer.status === 401);
  assert.equal(s.seen.length, 2);
  s.close();
});

test("no answer within the timeout is a timeout; no service is unreachable", async () => {
  const s = await server();
  const t = new Transport({ baseUrl: s.url, timeoutMs: () => 200 });
  t.send(request("r1", "/slow", null));
  const [late] = await settled(t, 1);
  assert.ok(late !== undefined && "fail" in late && late.fail === "timeout", JSON.stringify(late));
  s.close();
  const gone = new Transport({ baseUrl: "http://127.0.0.1:9", timeoutMs: () => 30_000 });
  gone.send(request("r2", "/v1/health", null));
  const [none] = await settled(gone, 1);
  assert.ok(none !== undefined && "fail" in none && none.fail === "unreachable", JSON.stringify(none));
});
