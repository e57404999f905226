// One hostile input of size n fed to the TypeScript SDK's own reading code, for bench/amplify/sdk_typescript.py
// (the harness of issue 39). Bodies come from an injected fetch as a stream of 64 KiB chunks made as read, so the
// SDK's counting reader is what is measured. Prints one JSON line: the CPU seconds of the read, the resident
// memory it added, whether it was refused (read no further than its cap, or refused whole), and what happened.
// Surfaces: number (a decide answer whose confidence has n digits), policy (GET /v1/policy of n bytes of long
// numbers), error (a 500 of n bytes), strays (a decide stream of n lines for ids never asked).
// Run: npm run build && node bench/amplify.mjs <surface> <n>
import { DecideClient, Transport } from "../dist/src/index.js";

const [surface, size] = [process.argv[2], Number(process.argv[3])];
const CHUNK = 64 * 1024;
const encoder = new TextEncoder();
const MANIFEST = { types: { bee: { refresh_ms: 600_000, ttl_ms: 60_000 } } };

/** `head`, then `piece` repeated, `total` bytes in all, in chunks of at most 64 KiB made as they are read. */
function body(head, piece, total) {
  const block = encoder.encode(piece.repeat(Math.max(1, Math.floor(CHUNK / piece.length))));
  let sent = 0;
  let first = head.length > 0;
  return new ReadableStream({
    pull(c) {
      if (first) {
        first = false;
        sent += head.length;
        return c.enqueue(encoder.encode(head));
      }
      if (sent >= total) return c.close();
      const part = block.subarray(0, Math.min(block.length, total - sent));
      sent += part.length;
      c.enqueue(part);
    },
  });
}

function line(id, confidence = "0.9") {
  return (
    `{"source":"AI","id":"${id}","action":"flee","label":"Flee","confidence":${confidence},` +
    `"ttl_ms":60000,"decision_id":"d-${id}","cached":false}\n`
  );
}

function policy(n) {
  const numbers = Array.from({ length: 8 }, () => "9".repeat(Math.max(1, Math.floor((n - 300) / 8)))).join(",");
  const tree = `{"feature":[-1],"threshold":[${numbers}],"left":[-1],"right":[-1],"value":[[1]]}`;
  return (
    `{"format":"npcmind-policy","format_version":1,"manifest_version":"v1",` +
    `"types":{"bee":{"actions":["flee"],"features":[],"trees":[${tree}]}}}`
  );
}

/** A DecideClient with one bee, its decide request answered by `answer`. */
function client(answer, extra = {}) {
  const fetch = async (url) => (url.endsWith("/v1/decide") ? answer() : new Response("{}", { status: 200 }));
  const c = new DecideClient("http://hostile.test", "g", { manifest: MANIFEST, fetchPolicy: false, fetch, ...extra });
  c.track("b0", "bee", { hp: 1 }, ["flee"]);
  return c;
}

const said = [];
const feeds = {
  async number(n) {
    const text = `{"a2g":"0.1","epoch":0,"latency_ms":1,"decisions":[${line("b0", `0.${"9".repeat(n)}`).trim()}]}`;
    const c = client(() => new Response(body("", text, text.length), { status: 200 }), {
      stream: false,
      log: (m) => said.push(m),
    });
    c.tick();
    await c.wait(60_000);
    const got = c.action("b0");
    return { refused: got === null, note: got === null ? said.join("; ") : `confidence ${got.confidence}` };
  },
  async policy(n) {
    const text = policy(n);
    const fetch = async () => new Response(body("", text, text.length), { status: 200 });
    const got = await new Transport({ baseUrl: "http://hostile.test", timeoutMs: () => 60_000, fetch }).call(
      "GET",
      "/v1/policy?client_id=g",
      {},
    );
    const why = String(got.body);
    return { refused: why.includes("larger than"), note: why };
  },
  async error(n) {
    const fetch = async () => new Response(body("", "x", n), { status: 500, headers: { "content-type": "text/html" } });
    const got = await new Transport({ baseUrl: "http://hostile.test", timeoutMs: () => 60_000, fetch }).call(
      "POST",
      "/v1/telemetry",
      {},
    );
    const why = JSON.stringify(got.body);
    return { refused: why.includes("MAX_ERROR_BYTES"), note: why };
  },
  async strays(n) {
    const ghosts = Array.from({ length: 64 }, (_, i) => line(`ghost${i}`)).join("");
    const total = Math.floor((n * ghosts.length) / 64);
    const headers = { "content-type": "application/x-ndjson" };
    const c = client(() => new Response(body("", ghosts, total), { status: 200, headers }), {
      log: (m) => said.push(m),
    });
    for (;;) {
      c.tick(); // as a game does, a frame at a time: the stream ends at the tick that reads its 17th stray line
      if (c.stats.streamsCut > 0) break;
      await new Promise((r) => setTimeout(r, 1));
    }
    c.close();
    return { refused: said.some((m) => m.includes("MAX_STRAY_LINES")), note: `streams cut ${c.stats.streamsCut}` };
  },
};

const feed = feeds[surface];
if (feed === undefined) throw new Error(`no surface ${surface}: one of ${Object.keys(feeds).join(", ")}`);
// memory: the resident set grown by the read (a child's peak from wait4 also counts its parent's pages at spawn)
const rss = process.memoryUsage().rss;
const before = process.cpuUsage();
const out = await feed(size);
const used = process.cpuUsage(before);
const bytes = Math.max(0, process.memoryUsage().rss - rss);
console.log(JSON.stringify({ seconds: (used.user + used.system) / 1e6, bytes, ...out, note: out.note.slice(0, 120) }));
