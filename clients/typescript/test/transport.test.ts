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
  assert.deepEqual(got.map((g) => ("status" in g ? g.status : "fail" in g ? g.fail : "stream")).sort(), [200, 200]);
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

/** A server that answers POST /v1/decide with NDJSON written piece by piece, each piece once the test lets it
 * go (`next()`), and ends the answer whole (`end`) or destroys the connection (`cut`); `/json` answers plain JSON. */
async function ndjsonServer(pieces: Buffer[], finish: "end" | "cut") {
  const accepts: (string | undefined)[] = [];
  let release: () => void = () => {};
  const srv: Server = createServer((req, res) => {
    accepts.push(req.headers["accept"]);
    req.resume();
    req.on("end", () => {
      if (req.url === "/json") {
        res.setHeader("content-type", "application/json");
        return res.end(JSON.stringify({ epoch: 1, a2g: "0.1", decisions: [] }));
      }
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.flushHeaders();
      let i = 0;
      release = () => {
        if (i < pieces.length) res.write(pieces[i++]);
        else if (finish === "end") res.end();
        else res.destroy();
      };
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const address = srv.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  return { url: `http://127.0.0.1:${port}`, accepts, next: () => release(), close: () => (srv.closeAllConnections(), srv.close()) };
}

/** Let the server write its pieces one at a time, each once the transport queued what came before. */
async function pieceByPiece(t: Transport, s: { next: () => void; accepts: unknown[] }, pieces: number): Promise<Settled[]> {
  const got: Settled[] = [];
  await until(() => (got.push(...t.drain()), s.accepts.length > 0)); // the request arrived
  for (let i = 0; i <= pieces; i++) {
    const before = got.length;
    s.next();
    if (i < pieces) await until(() => (got.push(...t.drain()), got.length > before));
  }
  await until(() => (got.push(...t.drain()), got.some((g) => "end" in g)));
  return got;
}

test("a streamed decide answer is queued chunk by chunk as it arrives, its bytes as they came", async (ctx) => {
  const line = Buffer.from(`${JSON.stringify({ id: "b1", source: "AI", action: "fuir→" })}\n`);
  const arrow = line.indexOf(Buffer.from("→")) + 1; // inside the three bytes of the arrow
  const pieces = [line.subarray(0, arrow), line.subarray(arrow), Buffer.from('{"a2g": "0.1", "epoch": 1}\n')];
  const s = await ndjsonServer(pieces, "end");
  ctx.after(() => s.close());
  const t = new Transport({ baseUrl: s.url, timeoutMs: () => 30_000 });
  t.send(request("r1", "/v1/decide", { entities: [] }, { stream: true }));
  const got = await pieceByPiece(t, s, pieces.length);
  assert.equal(s.accepts[0], "application/x-ndjson");
  const chunks = got.flatMap((g) => ("chunk" in g ? [g.chunk] : []));
  assert.ok(chunks.length >= 3, JSON.stringify(got)); // each piece queued before the next was written
  assert.deepEqual(Buffer.concat(chunks), Buffer.concat(pieces)); // the arrow's bytes too: Lines decodes lines
  assert.deepEqual(got.at(-1), { ref: "r1", end: true, failed: null, error: "" });
});

test("a stream whose connection is lost midway ends: what came is queued, then the end", async (ctx) => {
  const pieces = [Buffer.from('{"id": "b1", "source": "AI"}\n{"id": "b2", "sou')];
  const s = await ndjsonServer(pieces, "cut");
  ctx.after(() => s.close());
  const t = new Transport({ baseUrl: s.url, timeoutMs: () => 30_000 });
  t.send(request("r1", "/v1/decide", { entities: [] }, { stream: true }));
  const got = await pieceByPiece(t, s, pieces.length);
  assert.equal(got.length, 2, JSON.stringify(got));
  const [chunk, end] = got;
  assert.ok(chunk !== undefined && "chunk" in chunk);
  assert.equal(Buffer.from(chunk.chunk).toString(), pieces[0]?.toString());
  assert.ok(end !== undefined && "end" in end && end.failed === "unreachable", JSON.stringify(end));
});

test("a plain JSON answer to a streamed request (an older service) is one answer; unstreamed asks no stream", async (ctx) => {
  const s = await ndjsonServer([], "end");
  ctx.after(() => s.close());
  const t = new Transport({ baseUrl: s.url, timeoutMs: () => 30_000 });
  t.send(request("r1", "/json", { entities: [] }, { stream: true }));
  const [whole] = await settled(t, 1);
  assert.ok(whole !== undefined && "status" in whole && whole.status === 200, JSON.stringify(whole));
  assert.deepEqual(whole.body, { epoch: 1, a2g: "0.1", decisions: [] });
  t.send(request("r2", "/json", { entities: [] }));
  await settled(t, 1);
  assert.deepEqual(s.accepts, ["application/x-ndjson", "*/*"]);
});

test("a stream with no bytes within the timeout ends as timed out, what came queued first", async (ctx) => {
  const pieces = [Buffer.from('{"id": "b1", "source": "AI"}\n')];
  const s = await ndjsonServer(pieces, "end");
  ctx.after(() => s.close());
  const t = new Transport({ baseUrl: s.url, timeoutMs: () => 300 });
  t.send(request("r1", "/v1/decide", { entities: [] }, { stream: true }));
  const got: Settled[] = [];
  await until(() => (got.push(...t.drain()), s.accepts.length > 0));
  s.next(); // the one line; then the service writes nothing more
  await until(() => (got.push(...t.drain()), got.some((g) => "end" in g)));
  assert.equal(got.length, 2, JSON.stringify(got));
  assert.ok(got[0] !== undefined && "chunk" in got[0]);
  const end = got[1];
  assert.ok(end !== undefined && "end" in end && end.failed === "timeout", JSON.stringify(end));
});
