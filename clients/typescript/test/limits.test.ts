/** The TypeScript SDK against a hostile server on a real port (issue 39): every body it reads is read no further
 * than its cap (README "Limits") and refused with an error naming the cap; an endless stream is ended; numbers
 * of any length never throw into the game loop. No timings: each test asserts what was read and what was said. */

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { test } from "node:test";

import {
  DecideClient,
  InMemoryNpcs,
  MAX_ANSWER_BYTES,
  MAX_ERROR_BYTES,
  MAX_STREAM_BYTES,
  MAX_STRAY_LINES,
  MIN_CHUNK_BYTES,
  NpcMind,
  OpenAICortex,
  PolicyError,
  TooLargeError,
  TICK_STREAM_BYTES,
  Transport,
} from "../src/index.js";
import { retryAfterMs } from "../src/refusals.js";
import { SayOnce } from "../src/say.js";
import { until } from "./live.js";

const MANIFEST = { types: { bee: { refresh_ms: 600_000, ttl_ms: 60_000 } } };
const LEGAL = ["chase", "flee"];
const MiB = 1024 * 1024;
const READ_PAST = 64 * MiB; // what an endless body may send before the client's close is seen
const NDJSON = "application/x-ndjson";

/** A decision line, its numbers written as given (a 60,000-digit confidence is text here). */
function ai(id: string, confidence = "0.9", ttl = "60000"): string {
  return (
    `{"source":"AI","id":"${id}","action":"flee","label":"Flee","confidence":${confidence},` +
    `"ttl_ms":${ttl},"decision_id":"d-${id}","cached":false}\n`
  );
}

type Route = (res: ServerResponse, path: string, sent: Map<string, number>) => void;

/** A server on 127.0.0.1 answering each path with a route a test sets (404 otherwise); an endless body counts
 * what it managed to send before the client closed the connection. */
async function hostile(): Promise<{
  url: string;
  routes: Map<string, Route>;
  sent: Map<string, number>;
  closed: (path: string) => Promise<number>;
  close: () => void;
}> {
  const routes = new Map<string, Route>();
  const sent = new Map<string, number>();
  const gone = new Set<string>();
  const srv = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on("end", () => {
      const path = (req.url ?? "").split("?")[0] ?? "";
      const route = routes.get(path);
      if (route === undefined) return res.writeHead(404, { "content-type": "application/json" }).end("{}");
      res.on("close", () => gone.add(path));
      route(res, path, sent);
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const address = srv.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    routes,
    sent,
    closed: async (path) => {
      await until(() => gone.has(path), () => {}, 60_000);
      return sent.get(path) ?? 0;
    },
    close: () => {
      srv.closeAllConnections();
      srv.close();
    },
  };
}

/** A chunked body that never ends (1 GiB at most): `head`, then `piece` again and again, as fast as read. */
function endless(status: number, piece: string, type = "application/json", head = ""): Route {
  return (res, path, sent) => {
    res.writeHead(status, { "content-type": type });
    const chunk = Buffer.from(piece);
    let total = 0;
    const more = (): void => {
      while (!res.destroyed && total < 2 ** 30) {
        total += chunk.length;
        sent.set(path, total);
        if (!res.write(chunk)) return void res.once("drain", more);
      }
      res.end();
    };
    if (head !== "") res.write(head);
    more();
  };
}

function whole(status: number, body: string | Buffer, type = "application/json"): Route {
  return (res) => res.writeHead(status, { "content-type": type }).end(body);
}

function client(url: string, log: (m: string) => void, extra: Record<string, unknown> = {}): DecideClient {
  const c = new DecideClient(url, "g1", { manifest: MANIFEST, fetchPolicy: false, timeoutMs: 60_000, log, ...extra });
  c.track("b0", "bee", { hp: 1 }, LEGAL);
  c.track("b1", "bee", { hp: 1 }, LEGAL);
  return c;
}

async function settle(c: DecideClient): Promise<void> {
  c.tick();
  assert.ok(await c.wait(60_000));
  c.tick();
}

test("an endless error body is read no further than its cap, and said naming it", async (ctx) => {
  const h = await hostile();
  ctx.after(h.close);
  h.routes.set("/v1/telemetry", endless(500, "x".repeat(65536), "text/html"));
  h.routes.set("/v1/decide", endless(503, "y".repeat(65536), "text/html"));
  const said: string[] = [];
  const c = client(h.url, (m) => said.push(m));
  ctx.after(() => c.close());
  await settle(c);
  assert.ok((await h.closed("/v1/telemetry")) < READ_PAST);
  assert.ok((await h.closed("/v1/decide")) < READ_PAST);
  assert.equal(c.action("b0"), null);
  const cap = `passed ${MAX_ERROR_BYTES.toLocaleString("en-US")} bytes (MAX_ERROR_BYTES, the SDK's cap)`;
  assert.ok(said.some((m) => m.includes(cap)), said.join("\n"));
});

test("a 200 past its cap is read no further and said naming it", async (ctx) => {
  const h = await hostile();
  ctx.after(h.close);
  h.routes.set("/v1/telemetry", endless(200, " ".repeat(65536)));
  h.routes.set("/v1/decide", endless(200, " ".repeat(65536), "application/json", '{"decisions":['));
  const said: string[] = [];
  const c = client(h.url, (m) => said.push(m), { stream: false });
  ctx.after(() => c.close());
  await settle(c);
  assert.ok((await h.closed("/v1/telemetry")) < READ_PAST);
  assert.ok((await h.closed("/v1/decide")) < READ_PAST);
  assert.equal(c.action("b0"), null);
  assert.equal(c.stats.errors, 1);
  const cap = `passed ${MAX_ANSWER_BYTES.toLocaleString("en-US")} bytes (MAX_ANSWER_BYTES, the SDK's cap)`;
  assert.ok(said.some((m) => m.includes(`POST /v1/telemetry: the answer ${cap}`)), said.join("\n"));
  assert.ok(said.some((m) => m.includes(`could not be read: POST /v1/decide: the answer ${cap}`)), said.join("\n"));
});

test("an endless stream of lines for ids never asked is ended after MAX_STRAY_LINES", async (ctx) => {
  const h = await hostile();
  ctx.after(h.close);
  const ghosts = Array.from({ length: 300 }, (_, i) => ai(`ghost${i}`)).join("");
  h.routes.set("/v1/decide", endless(200, ghosts, NDJSON));
  const said: string[] = [];
  const c = client(h.url, (m) => said.push(m));
  ctx.after(() => c.close());
  await settle(c);
  assert.ok((await h.closed("/v1/decide")) < READ_PAST);
  assert.equal(c.action("b0"), null);
  assert.equal(c.stats.streamsCut, 1);
  assert.deepEqual(c.stats.fallbacks, { unavailable: 2 });
  assert.ok(said.some((m) => m.includes(`more than ${MAX_STRAY_LINES} lines that answer no entity`)), said.join());
});

test("a stream of blank lines is read no further than MAX_STREAM_BYTES", async (ctx) => {
  const h = await hostile();
  ctx.after(h.close);
  h.routes.set("/v1/decide", endless(200, "\n".repeat(65536), NDJSON, ai("b0")));
  const said: string[] = [];
  const c = client(h.url, (m) => said.push(m));
  ctx.after(() => c.close());
  await settle(c);
  assert.ok((await h.closed("/v1/decide")) < READ_PAST);
  assert.equal(c.action("b0")?.action, "flee"); // the line before the flood stands
  assert.equal(c.action("b1"), null);
  assert.equal(c.stats.streamsCut, 1);
  const cap = `a stream: the answer passed ${MAX_STREAM_BYTES.toLocaleString("en-US")} bytes (MAX_STREAM_BYTES`;
  assert.ok(said.some((m) => m.includes(cap)), said.join("\n"));
});

test("a tick applies no more than TICK_STREAM_BYTES of streamed bytes; the rest waits for the next", async (ctx) => {
  const h = await hostile();
  ctx.after(h.close);
  const blank = `${" ".repeat(60_000)}\n`; // blank lines: skipped, never strays
  h.routes.set("/v1/decide", whole(200, blank.repeat(30) + ai("b0") + ai("b1"), NDJSON));
  const c = client(h.url, () => {});
  ctx.after(() => c.close());
  c.tick();
  await (c as unknown as { transport: Transport }).transport.idle(); // read whole, not applied yet
  c.tick(); // one tick: at most TICK_STREAM_BYTES of the 1.8 MB applied
  assert.equal(c.action("b0"), null);
  for (let i = 0; i <= (blank.length * 30) / TICK_STREAM_BYTES; i++) c.tick();
  assert.equal(c.action("b0")?.action, "flee");
  assert.equal(c.action("b1")?.action, "flee");
});

test("numbers of any length are parsed or refused, never thrown into the game loop", async (ctx) => {
  const h = await hostile();
  ctx.after(h.close);
  const long = "9".repeat(60_000);
  h.routes.set("/v1/decide", whole(200, ai("b0", `0.${long}`) + ai("b1", "0.5", `"${long}"`), NDJSON));
  const said: string[] = [];
  const c = client(h.url, (m) => said.push(m));
  ctx.after(() => c.close());
  await settle(c);
  assert.equal(c.action("b0")?.confidence, 1); // 60,000 digits: 1 once a double (JSON.parse is linear)
  assert.equal(c.action("b1"), null); // a ttl that is a string: a line not read
  assert.ok(said.some((m) => m.includes("line.ttl_ms: must be a number")), said.join("\n"));
});

test("a decide answer with more decisions than asked is refused before any is read", async (ctx) => {
  const h = await hostile();
  ctx.after(h.close);
  const decisions = Array.from({ length: 5000 }, (_, i) => ai(`ghost${i}`).trim()).join(",");
  h.routes.set("/v1/decide", whole(200, `{"a2g":"0.1","epoch":0,"latency_ms":1,"decisions":[${decisions}]}`));
  const said: string[] = [];
  const c = client(h.url, (m) => said.push(m), { stream: false });
  ctx.after(() => c.close());
  await settle(c);
  assert.equal(c.stats.errors, 1);
  assert.ok(said.some((m) => m.includes(`5,000 decisions for 2 entities asked`)), said.join("\n"));
});

test("a policy of eight 100,000-digit numbers is refused in the transport, not in tick()", async (ctx) => {
  const h = await hostile();
  ctx.after(h.close);
  const tree = { feature: [-1], threshold: ["N"], left: [-1], right: [-1], value: [[1]] };
  const policy = {
    format: "npcmind-policy",
    format_version: 1,
    manifest_version: "v1",
    types: { bee: { actions: ["flee"], features: [], trees: [tree] } },
  };
  const numbers = Array.from({ length: 8 }, () => "9".repeat(100_000)).join(",");
  h.routes.set("/v1/policy", whole(200, JSON.stringify(policy).replace('"N"', numbers)));
  const t = new Transport({ baseUrl: h.url, timeoutMs: () => 60_000 });
  const got = await t.call("GET", "/v1/policy?client_id=g", {});
  assert.ok("status" in got && got.status === 200 && got.body instanceof PolicyError); // the verdict, not bytes
  const said: string[] = [];
  const c = client(h.url, (m) => said.push(m), { fetchPolicy: true, manifestVersion: "v1" });
  ctx.after(() => c.close());
  await settle(c);
  assert.equal(c.servicePolicy, null);
  assert.ok(said.some((m) => m.includes("the service's local policy is not used")), said.join("\n"));
});

test("a dialogue step and the keys are read no further than their caps", async (ctx) => {
  const h = await hostile();
  ctx.after(h.close);
  h.routes.set("/npcs/mara/process", endless(200, " ".repeat(65536)));
  h.routes.set("/v1/keys", endless(200, " ".repeat(65536), "application/json", '{"keys":['));
  const memory = new InMemoryNpcs();
  memory.register("mara", "an innkeeper", {});
  const mind = new NpcMind(h.url, new OpenAICortex("http://127.0.0.1:9", "m"), memory, { timeoutMs: 60_000 });
  await assert.rejects(mind.process("mara", "Hello?"), (e: unknown) => {
    assert.ok(e instanceof TooLargeError && e.message.includes("passed 4,194,304 bytes (MAX_STEP_BYTES"), String(e));
    assert.deepEqual([e.status, e.code], [200, "answer_too_large"]);
    return true;
  });
  await assert.rejects(mind.publicKeys(), (e: unknown) => {
    assert.ok(e instanceof TooLargeError && e.message.includes("passed 65,536 bytes (MAX_KEYS_BYTES"), String(e));
    return true;
  });
  assert.ok((await h.closed("/npcs/mara/process")) < READ_PAST);
  assert.ok((await h.closed("/v1/keys")) < READ_PAST);
});

test("a cortex answer is read no further than its cap", async (ctx) => {
  const h = await hostile();
  ctx.after(h.close);
  h.routes.set("/v1/chat/completions", endless(200, " ".repeat(65536), "application/json", '{"choices":['));
  const cortex = new OpenAICortex(`${h.url}/v1`, "m");
  await assert.rejects(cortex.complete("Hello?", { maxTokens: null, temperature: null, stop: null }), (e: unknown) => {
    assert.ok(String(e).includes("passed 8,388,608 bytes (MAX_MODEL_BYTES"), String(e));
    return true;
  });
  assert.ok((await h.closed("/v1/chat/completions")) < READ_PAST);
});

test("lastPrompt is read no further than its cap", async (ctx) => {
  const h = await hostile();
  ctx.after(h.close);
  h.routes.set("/v1/prompt", endless(200, " ".repeat(65536), "application/json", '{"prompt":'));
  const c = client(h.url, () => {});
  ctx.after(() => c.close());
  assert.equal(await c.lastPrompt(), null); // past MAX_PROMPT_BYTES: a debug view gets nothing
  assert.ok((await h.closed("/v1/prompt")) < READ_PAST);
});

test("a trickle of one-byte chunks counts each as a kibibyte: the stream ends after 2,048", async () => {
  let pulled = 0;
  const trickle = new ReadableStream<Uint8Array>({
    pull(c) {
      pulled++;
      c.enqueue(new Uint8Array([10]));
    },
  });
  const headers = { "content-type": NDJSON };
  const fetch = async (): Promise<Response> => new Response(trickle, { status: 200, headers });
  const t = new Transport({ baseUrl: "http://hostile.test", timeoutMs: () => 60_000, fetch });
  t.send({ ref: "r1", method: "POST", path: "/v1/decide", headers: {}, body: {}, json: "{}", after: [], stream: true });
  await t.idle();
  const came = t.drain();
  const chunks = came.filter((s) => "chunk" in s);
  const ends = came.filter((s) => "end" in s);
  assert.equal(chunks.length, MAX_STREAM_BYTES / MIN_CHUNK_BYTES);
  assert.ok(pulled <= chunks.length + 4, `pulled ${pulled}`);
  assert.equal(ends.length, 1);
  assert.ok(JSON.stringify(ends[0]).includes("MAX_STREAM_BYTES"));
});

test("a manifest's refresh that is no number keeps the default refresh, never one that is never due", async (ctx) => {
  const h = await hostile();
  ctx.after(h.close);
  let asked = 0;
  h.routes.set("/v1/manifest", whole(200, '{"manifest":{"types":{"bee":{"refresh_ms":"x","ttl_ms":1e400}}}}'));
  h.routes.set("/v1/decide", (res) => {
    asked++;
    res.writeHead(200, { "content-type": "application/json" });
    res.end(`{"a2g":"0.1","epoch":0,"latency_ms":1,"decisions":[${ai("b0").trim()}]}`);
  });
  let now = 0;
  const c = new DecideClient(h.url, "g1", { fetchPolicy: false, stream: false, clock: () => now, log: () => {} });
  ctx.after(() => c.close());
  c.track("b0", "bee", { hp: 1 }, LEGAL);
  await settle(c);
  assert.equal(asked, 1);
  now = 5000; // past the default refresh (4 s): asked again
  await settle(c);
  assert.equal(asked, 2);
});

test("a confidence or a ttl_ms that parses as Infinity is refused: no decision that never expires", async (ctx) => {
  const h = await hostile();
  ctx.after(h.close);
  h.routes.set("/v1/decide", whole(200, ai("b0", "1e400") + ai("b1", "0.5", "1e400"), NDJSON));
  const said: string[] = [];
  const c = client(h.url, (m) => said.push(m));
  ctx.after(() => c.close());
  await settle(c);
  assert.equal(c.action("b0"), null);
  assert.equal(c.action("b1"), null);
  assert.ok(said.some((m) => m.includes("line.confidence: must be a finite number")), said.join("\n"));
});

test("a Retry-After of 5,000 digits waits an hour, not forever", () => {
  assert.equal(retryAfterMs({ "retry-after": "9".repeat(5000) }), 3_600_000);
  assert.equal(retryAfterMs({ "retry-after": "2.5" }), 2500);
});

test("a problem is remembered and logged in bounded text", () => {
  const said: string[] = [];
  const once = new SayOnce((m) => said.push(m));
  for (let i = 0; i < 3; i++) once.say(`500:${"x".repeat(60_000)}${i}`, "y".repeat(60_000));
  assert.equal(said.length, 1);
  assert.ok((said[0] ?? "").length < 2100);
});
