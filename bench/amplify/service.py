"""The service's own surfaces: what a game's request and a provider's answer can cost the process serving them.

In-process (the work the event loop does for one input, CPU and traced memory): a session's scope chain as
POST /v1/context checks it and a decide reads it; a provider's whole answer read from a real socket (a local
server writing n bytes as fast as it is read), and an answer's head of n bytes; one server-sent event of n
bytes; a streamed answer of n characters read by the partial reader; a whole answer of n characters with every
key twice. Through a real
`npcmind serve` (the client's wall time for one request, the service idle otherwise): a decide body of n bytes,
and a gzip body that unpacks to n bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import msgspec
from aiohttp import web

from amplify.core import Cost, Feed, Surface, in_process, simple
from npcmind import answer
from npcmind.context.checks import scope_problems
from npcmind.decide.validate import check_scope
from npcmind.manifest.load import MAX_CHAIN_FIELDS, load
from npcmind.protocol.a2g import ScopeDefinition
from npcmind.providers.base import ProviderCall, ProviderError
from npcmind.providers.http import MAX_ANSWER_BYTES, MAX_EVENT_BYTES, JsonClient
from npcmind.providers.openai import OpenAIProvider
from npcmind.providers.wire import MAX_HEAD_BYTES
from support import FOREST, bee, decide_body

_M = load(FOREST)
_OPTIONS = ["idle", "wander", "chase", "flee"]


def _chain(n: int) -> Cost:
    """n boolean fields over a chain of 16 session scopes, posted (checked) and then asked at its end."""
    per = -(-n // 15)
    defs: dict[str, ScopeDefinition] = {}
    for k in range(15):
        fields = {f"f{k}_{i}": {"type": "boolean"} for i in range(min(per, n - k * per))} if k * per < n else {}
        defs[f"s{k}"] = ScopeDefinition(text="x", parent=f"s{k - 1}" if k else "forest", fields=fields)
    state = {name: True for d in defs.values() for name in d.fields}

    def run() -> str:
        problems, specs = scope_problems(defs, _M, {})
        if problems:
            raise ValueError(problems[0].message)
        found = check_scope("s14", state, _M, specs)
        chain = _M.scope_chain("s14", specs)
        return f"{len(found)} problems, {len(_M.chain_fields(chain).render(state))} characters"

    return in_process(run, lambda e: isinstance(e, ValueError))


class _Writer:
    """A local HTTP server in a thread of its own, answering every POST with the bytes it was told to."""

    def __init__(self) -> None:
        self.body = b""
        self.kind = "application/json"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.port = 0
        threading.Thread(target=self._run, daemon=True).start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def answer_it(request: web.Request) -> web.StreamResponse:
            await request.read()
            resp = web.StreamResponse(headers={"content-type": self.kind})
            await resp.prepare(request)
            try:
                for at in range(0, len(self.body), 65_536):
                    await resp.write(self.body[at : at + 65_536])
            except (ConnectionError, RuntimeError):
                pass
            return resp

        app = web.Application()
        app.router.add_post("/{tail:.*}", answer_it)
        runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self._loop.run_forever()


def _read_answer(writer: _Writer, streamed: bool) -> Cost:
    async def run() -> str:
        client = JsonClient()
        try:
            if not streamed:
                await client.post(f"http://127.0.0.1:{writer.port}/v1/x", {}, {})
                return "read"
            async with client.stream(f"http://127.0.0.1:{writer.port}/v1/x", {}, {}) as opened:
                count = sum([len(events) async for events in opened.reads()])
            return f"{count} events"
        finally:
            await client.close()

    return in_process(lambda: asyncio.run(run()), lambda e: isinstance(e, ProviderError))


@contextmanager
def _answers(kind: str, make: Any, streamed: bool) -> Iterator[Feed]:
    writer = _Writer()
    writer.kind = kind

    def feed(n: int) -> Cost:
        writer.body = make(n)
        return _read_answer(writer, streamed)

    yield feed


def _decided(writer: _Writer) -> Cost:
    """An unstreamed answer read as the service reads one: the OpenAI adapter's typed decode, then its mapping."""
    call = ProviderCall("s", "u", [(1, _OPTIONS)], "enum", "k", 50)

    async def run() -> str:
        provider = OpenAIProvider("k", base_url=f"http://127.0.0.1:{writer.port}/v1", model="m")
        try:
            return f"{len((await provider.decide(call)).choices)} choice"
        finally:
            await provider.close()

    return in_process(lambda: asyncio.run(run()), lambda e: isinstance(e, ProviderError))


@contextmanager
def _decided_answers(make: Any) -> Iterator[Feed]:
    writer = _Writer()
    writer.kind = "application/json"

    def feed(n: int) -> Cost:
        writer.body = make(n)
        return _decided(writer)

    yield feed


def _tokens_answer(n: int) -> bytes:
    """An answer whose text is n tokens of one character, each with its bytes and five top alternatives."""
    alt = [{"token": "x", "logprob": -2.0, "bytes": [120]}] * 5
    toks = [{"token": " ", "logprob": -0.1, "bytes": [32], "top_logprobs": alt}] * (n - 1)
    toks.append({"token": '{"E1": "flee"}', "logprob": -0.1, "bytes": [], "top_logprobs": alt})
    message = {"content": " " * (n - 1) + '{"E1": "flee"}'}
    return msgspec.json.encode({"choices": [{"message": message, "logprobs": {"content": toks}}]})


@contextmanager
def _heads() -> Iterator[Feed]:
    """A raw server (no HTTP library would write this) answering each request with n bytes of headers, then a
    body of 2 bytes: the client reads the head up to its cap (providers/wire.py) and refuses past it."""
    srv = socket.create_server(("127.0.0.1", 0))
    head = [b""]

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn, contextlib.suppress(OSError):
                conn.recv(65_536)
                conn.sendall(head[0])

    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{srv.getsockname()[1]}/v1/x"

    def feed(n: int) -> Cost:
        head[0] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n" + b"x: y\r\n" * (n // 6) + b"\r\n{}"

        async def run() -> str:
            client = JsonClient()
            try:
                return f"{len(await client.post(url, {}, {}))} keys"
            finally:
                await client.close()

        return in_process(lambda: asyncio.run(run()), lambda e: isinstance(e, ProviderError))

    try:
        yield feed
    finally:
        srv.close()


def _spaces_answer(n: int) -> bytes:
    return b'{"choices": [{"message": {"content": "{}"}}]' + b" " * n + b"}"


def _one_event(n: int) -> bytes:
    return b"data: " + b" " * n + b"\n\n"


def _partial(n: int) -> Cost:
    """A streamed answer of n characters of keys no entity has, a delta a key, read as it comes."""
    deltas = [f'"x{k}":"y",' for k in range(n // 10)]

    def run() -> int:
        reader = answer.PartialAnswer("enum", [(i, _OPTIONS) for i in range(1, 17)])
        reader.feed("{")
        for d in deltas:
            reader.feed(d)
        return len(reader.text)

    return in_process(run)


def _twice(n: int) -> Cost:
    """A whole answer of n characters: every entity's key written again and again."""
    text = "{" + ",".join(f'"E{1 + k % 16}":"chase"' for k in range(n // 12)) + "}"
    return in_process(lambda: len(answer.parse(text, "enum", [(i, _OPTIONS) for i in range(1, 17)])))


@contextmanager
def _service() -> Iterator[Any]:
    import tempfile

    from npcmind.http.server import ServiceProcess

    with tempfile.TemporaryDirectory() as tmp:
        served = ServiceProcess(["--manifest", str(FOREST), "--store", f"sqlite:///{tmp}/a.db"])
        try:
            with httpx.Client(base_url=served.url, timeout=60) as http:
                yield http
        finally:
            served.stop()


def _timed(http: httpx.Client, body: bytes, headers: dict[str, str]) -> Cost:
    import time

    t = time.perf_counter()
    r = http.post("/v1/decide", content=body, headers={"content-type": "application/json", **headers})
    seconds = time.perf_counter() - t
    return Cost(seconds, 0, r.status_code in (413, 422), f"{r.status_code} {r.text[:60]}")


@contextmanager
def _bodies(gzipped: bool) -> Iterator[Feed]:
    with _service() as http:

        def feed(n: int) -> Cost:
            body = decide_body(bee("a", observation={"hp_fraction": 0.3, "pad": "x" * n}))
            raw = msgspec.json.encode(body)
            if gzipped:
                return _timed(http, gzip.compress(raw), {"content-encoding": "gzip"})
            return _timed(http, raw, {})

        yield feed


SURFACES = [
    Surface(
        "POST /v1/context then a decide: a session's scope chain",
        "fields",
        40,
        f"{MAX_CHAIN_FIELDS} state fields and 16 scopes a chain, 422 past either",
        simple(_chain),
        steps=(1, 6, 48),
        cap_at=MAX_CHAIN_FIELDS,
    ),
    Surface(
        "provider answer, whole (also the shadow's)",
        "bytes",
        128 * 1024,
        f"{MAX_ANSWER_BYTES // 2**20} MiB an answer, not read further",
        lambda: _answers("application/json", _spaces_answer, False),
        cap_at=MAX_ANSWER_BYTES,
    ),
    Surface(
        "provider answer, whole, as the OpenAI adapter reads it: n tokens with their alternatives",
        "tokens",
        256,
        f"{MAX_ANSWER_BYTES // 2**20} MiB an answer, not read further (about 30,000 such tokens)",
        lambda: _decided_answers(_tokens_answer),
        steps=(1, 8, 64),
    ),
    Surface(
        "provider answer's head: n bytes of headers",
        "bytes",
        8 * 1024,
        f"{MAX_HEAD_BYTES // 1024} KiB a head, not read further",
        _heads,
        cap_at=MAX_HEAD_BYTES,
    ),
    Surface(
        "provider answer, streamed: one server-sent event",
        "bytes",
        16 * 1024,
        f"{MAX_EVENT_BYTES // 1024} KiB an event, not read further",
        lambda: _answers("text/event-stream", _one_event, True),
        cap_at=MAX_EVENT_BYTES,
    ),
    Surface(
        "provider answer, streamed: the partial reader",
        "characters",
        10_000,
        "the stream's 8 MiB; read again at each quarter of growth past 16 KiB",
        simple(_partial),
        spread=True,
    ),
    Surface(
        "provider answer, whole: keys given again and again",
        "characters",
        10_000,
        "the answer's 8 MiB",
        simple(_twice),
    ),
    Surface(
        "POST /v1/decide: a body of n bytes (one long string)",
        "bytes",
        16 * 1024,
        "256 KiB a body (NPCMIND_MAX_BODY_BYTES), 413 past it; 64 characters a string field, 422",
        lambda: _bodies(False),
        cap_at=256 * 1024,
    ),
    Surface(
        "POST /v1/decide: a gzip body unpacking to n bytes",
        "bytes",
        16 * 1024,
        "256 KiB once unpacked, 413 past it",
        lambda: _bodies(True),
        cap_at=256 * 1024,
    ),
]
