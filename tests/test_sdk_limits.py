"""The Python SDK against a hostile server on a real port (issue 39): every body it reads is read no further
than its cap (clients/python/README.md "Limits") and refused with an error naming the cap; numbers too long to
parse are refused, never a crash of the game loop; an endless stream is ended. No timings: each test asserts
what was read, what was said, and that ``tick()`` never raised."""

from __future__ import annotations

import gzip
import json
import logging
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from npcmind.sdk import DecideClient, DecideOptions, NpcMind, NpcStore, OpenAICortex, TooLargeError
from npcmind_client.limits import (
    MAX_ANSWER_BYTES,
    MAX_ERROR_BYTES,
    MAX_STRAY_LINES,
    MAX_STREAM_BYTES,
    TICK_STREAM_BYTES,
)
from npcmind_client.policy import PolicyError
from npcmind_client.transport import Transport

NDJSON = "application/x-ndjson"
MANIFEST = {"types": {"bee": {"refresh_ms": 600_000, "ttl_ms": 60_000}}}
LEGAL = ["chase", "flee"]
MiB = 1024 * 1024
Route = Callable[["Hostile.Handler"], None]


def ai(eid: str, confidence: str = "0.9", ttl: str = "60000") -> bytes:
    """A decision line, its numbers written as given (a 60,000-digit confidence is text here)."""
    return (
        f'{{"source":"AI","id":"{eid}","action":"flee","label":"Flee","confidence":{confidence},'
        f'"ttl_ms":{ttl},"decision_id":"d-{eid}","cached":false}}\n'
    ).encode()


class Hostile:
    """A server on 127.0.0.1 that answers each path with a route a test sets (404 otherwise), and counts the
    bytes each endless body managed to send before the client closed the connection."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.sent: dict[str, int] = {}
        self.closed: dict[str, bool] = {}  # the client closed the connection while an endless body was sent
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _route(self) -> None:
                if "content-length" in self.headers:
                    self.rfile.read(int(self.headers["content-length"]))
                route = hostile.routes.get(self.path.split("?")[0])
                if route is None:
                    self.whole(404, b'{"error":{"code":"not_found","message":"none"}}')
                else:
                    route(self)

            do_GET = do_POST = _route

            def whole(self, status: int, data: bytes, kind: str = "application/json", **extra: str) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                for k, v in extra.items():
                    self.send_header(k.replace("_", "-"), v)
                self.end_headers()
                self.wfile.write(data)

            def endless(self, status: int, piece: bytes, kind: str = "application/json", head: bytes = b"") -> None:
                """A chunked body that never ends: ``head``, then ``piece`` again and again (1 GiB at most)."""
                path = self.path.split("?")[0]
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                hostile.sent[path] = 0
                try:
                    for data in [head] * bool(head) + [piece] * (2**30 // len(piece)):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        hostile.sent[path] += len(data)
                except OSError:
                    hostile.closed[path] = True
                self.close_connection = True

        self.Handler = Handler
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def until_closed(self, path: str) -> int:
        """The bytes an endless body sent once the client closed its connection (it waits for that)."""
        from conftest import until

        until(lambda: self.closed.get(path), f"the client closed the connection of {path}", 60)
        return self.sent[path]


@pytest.fixture()
def hostile() -> Iterator[Hostile]:
    h = Hostile()
    yield h
    h.server.shutdown()
    h.server.server_close()


def client(url: str, **fields: Any) -> DecideClient:
    """The test's client, its two bees tracked; ``fields``: more of its ``DecideOptions``."""
    c = DecideClient(url, "game-1", options=DecideOptions(epoch=1, manifest=MANIFEST, timeout_ms=60_000, **fields))
    for eid in ("b0", "b1"):
        c.track(eid, "bee", {"hp": 1}, LEGAL)
    return c


def settle(c: DecideClient) -> None:
    """Ticks until every request is answered (the transport's own wait, then what came applied)."""
    c.tick()
    assert c.wait(timeout_ms=60_000)
    c.tick()


READ_PAST = 64 * MiB  # what an endless body may send before the client's close is seen: its cap and socket buffers


def test_an_endless_error_body_is_read_no_further_than_its_cap_and_said(
    hostile: Hostile, caplog: pytest.LogCaptureFixture
) -> None:
    hostile.routes["/v1/telemetry"] = lambda h: h.endless(500, b"x" * 65536, "text/html")
    hostile.routes["/v1/decide"] = lambda h: h.endless(503, b"y" * 65536, "text/html")
    with caplog.at_level(logging.WARNING, "npcmind_client"), client(hostile.url) as c:
        settle(c)
        assert hostile.until_closed("/v1/telemetry") < READ_PAST
        assert hostile.until_closed("/v1/decide") < READ_PAST
        assert c.action("b0") is None and c.stats.errors == 1
    assert f"passed {MAX_ERROR_BYTES:,} bytes (MAX_ERROR_BYTES, the SDK's cap): not read past that" in caplog.text


def test_a_200_past_its_cap_is_read_no_further_and_said_naming_it(
    hostile: Hostile, caplog: pytest.LogCaptureFixture
) -> None:
    hostile.routes["/v1/telemetry"] = lambda h: h.endless(200, b" " * 65536)
    hostile.routes["/v1/decide"] = lambda h: h.endless(200, b" " * 65536, head=b'{"decisions":[')
    with caplog.at_level(logging.WARNING, "npcmind_client"), client(hostile.url, stream=False) as c:
        settle(c)
        assert hostile.until_closed("/v1/telemetry") < READ_PAST
        assert hostile.until_closed("/v1/decide") < READ_PAST
        assert c.action("b0") is None and c.stats.errors == 1
    said = f"passed {MAX_ANSWER_BYTES:,} bytes (MAX_ANSWER_BYTES, the SDK's cap): not read past that"
    assert f"POST /v1/telemetry: the answer {said}" in caplog.text
    assert f"the answer to /v1/decide could not be read: POST /v1/decide: the answer {said}" in caplog.text


def test_a_gzip_bomb_is_counted_as_it_unpacks(hostile: Hostile) -> None:
    bomb = gzip.compress(b"\0" * (64 * MiB), compresslevel=9)  # 64 KiB on the wire
    hostile.routes["/v1/manifest"] = lambda h: h.whole(200, bomb, content_encoding="gzip")
    t = Transport(hostile.url, 60, 1)
    try:
        status, body, _ = t.call("GET", "/v1/manifest", {})
    finally:
        t.close()
    assert status == 200 and body["error"]["code"] == "answer_too_large"
    assert f"passed {MAX_ANSWER_BYTES:,} bytes (MAX_ANSWER_BYTES" in body["error"]["message"]


def test_an_endless_stream_of_lines_for_ids_never_asked_is_ended(
    hostile: Hostile, caplog: pytest.LogCaptureFixture
) -> None:
    hostile.routes["/v1/decide"] = lambda h: h.endless(200, b"".join(ai(f"ghost{i}") for i in range(300)), NDJSON)
    with caplog.at_level(logging.WARNING, "npcmind_client"), client(hostile.url) as c:
        settle(c)
        assert hostile.until_closed("/v1/decide") < READ_PAST
        assert c.action("b0") is None and c.stats.streams_cut == 1 and c.stats.fallbacks == {"unavailable": 2}
        assert c.stats.streamed_decisions == 0
    assert f"more than {MAX_STRAY_LINES} lines that answer no entity it asked" in caplog.text


def test_a_stream_of_blank_lines_is_read_no_further_than_its_cap(
    hostile: Hostile, caplog: pytest.LogCaptureFixture
) -> None:
    hostile.routes["/v1/decide"] = lambda h: h.endless(200, b"\n" * 65536, NDJSON, head=ai("b0"))
    with caplog.at_level(logging.WARNING, "npcmind_client"), client(hostile.url) as c:
        settle(c)
        assert hostile.until_closed("/v1/decide") < READ_PAST
        assert c.action("b0").action == "flee"  # type: ignore[union-attr]  # the line before the flood stands
        assert c.action("b1") is None and c.stats.streams_cut == 1
    assert f"a stream: the answer passed {MAX_STREAM_BYTES:,} bytes (MAX_STREAM_BYTES" in caplog.text


def test_a_tick_applies_no_more_than_its_room_of_streamed_bytes(hostile: Hostile) -> None:
    blank = b" " * 60_000 + b"\n"  # 60 kB lines of blanks: skipped, never strays
    hostile.routes["/v1/decide"] = lambda h: h.whole(200, blank * 30 + ai("b0") + ai("b1"), NDJSON)
    with client(hostile.url) as c:
        c.tick()
        c._transport.wait(60)
        c.tick()  # one tick: at most TICK_STREAM_BYTES of the 1.8 MB applied, the rest waits for the next
        assert c.action("b0") is None and c._backlog
        for _ in range(len(blank) * 30 // TICK_STREAM_BYTES + 1):
            c.tick()
        assert c.action("b0").action == "flee" and c.action("b1").action == "flee"  # type: ignore[union-attr]


def test_numbers_too_long_are_refused_and_never_crash_the_game_loop(
    hostile: Hostile, caplog: pytest.LogCaptureFixture
) -> None:
    long_int, long_float = "9" * 160_000, "0." + "9" * 60_000
    hostile.routes["/v1/decide"] = lambda h: h.whole(
        200, ai("b0", confidence=long_float) + ai("b1", ttl=long_int[:60_000]), NDJSON
    )
    with caplog.at_level(logging.WARNING, "npcmind_client"), client(hostile.url) as c:
        settle(c)
        got = c.action("b0")  # a float of 60,000 digits is parsed (in linear time): 1.0 once a double
        assert got is not None and got.confidence == 1.0
        assert c.action("b1") is None and c.stats.errors == 2  # the 60,000-digit integer: a line not read
    assert "a line of the decision stream could not be read: a line is not JSON" in caplog.text
    answer = f'{{"a2g":"0.1","epoch":{long_int},"latency_ms":1,"decisions":[]}}'.encode()
    hostile.routes["/v1/decide"] = lambda h: h.whole(200, answer)
    with caplog.at_level(logging.WARNING, "npcmind_client"), client(hostile.url, stream=False) as c:
        settle(c)
        assert c.action("b0") is None and c.stats.errors == 1
    assert "the answer to /v1/decide could not be read" in caplog.text


def test_a_decide_answer_with_more_decisions_than_asked_is_refused_before_any_is_read(
    hostile: Hostile, caplog: pytest.LogCaptureFixture
) -> None:
    decisions = ",".join(ai(f"ghost{i}").decode().strip() for i in range(5000))
    answer = f'{{"a2g":"0.1","epoch":1,"latency_ms":1,"decisions":[{decisions}]}}'.encode()
    hostile.routes["/v1/decide"] = lambda h: h.whole(200, answer)
    with caplog.at_level(logging.WARNING, "npcmind_client"), client(hostile.url, stream=False) as c:
        settle(c)
        assert c.action("b0") is None and c.stats.errors == 1
    assert f"5,000 decisions for 2 entities asked (one each, and at most {MAX_STRAY_LINES} more" in caplog.text


def test_a_policy_of_huge_numbers_is_refused_on_the_worker_not_in_tick(
    hostile: Hostile, caplog: pytest.LogCaptureFixture
) -> None:
    tree = {"feature": [-1], "threshold": ["N"], "left": [-1], "right": [-1], "value": [[1]]}
    bee = {"actions": ["flee"], "features": [], "trees": [tree]}
    policy = {"format": "npcmind-policy", "format_version": 1, "manifest_version": "v1", "types": {"bee": bee}}
    numbers = ",".join("9" * 100_000 for _ in range(8))  # eight 100,000-digit numbers
    hostile.routes["/v1/policy"] = lambda h: h.whole(200, json.dumps(policy).replace('"N"', numbers).encode())
    t = Transport(hostile.url, 60, 1)
    try:
        status, body, _ = t.call("GET", "/v1/policy?client_id=g", {})
    finally:
        t.close()
    assert status == 200 and isinstance(body, PolicyError)  # the scheduler is handed the verdict, not the bytes
    with caplog.at_level(logging.WARNING, "npcmind_client"), client(hostile.url, manifest_version="v1") as c:
        settle(c)
        assert c.service_policy is None
    assert "the service's local policy is not used" in caplog.text


def test_a_dialogue_step_and_the_keys_are_read_no_further_than_their_caps(hostile: Hostile, tmp_path: Path) -> None:
    hostile.routes["/npcs/mara/process"] = lambda h: h.endless(200, b" " * 65536)
    hostile.routes["/v1/keys"] = lambda h: h.endless(200, b" " * 65536, head=b'{"keys":[')
    store = NpcStore(tmp_path / "npcs.db", embedder=object())  # type: ignore[arg-type]  # never reached
    store.register("mara", "an innkeeper", {})
    mind = NpcMind(hostile.url, cortex=OpenAICortex("http://127.0.0.1:9", model="m"), memory=store, timeout_ms=60_000)
    try:
        with pytest.raises(TooLargeError, match=r"passed 4,194,304 bytes \(MAX_STEP_BYTES") as step:
            mind.process("mara", "Hello?")
        assert (step.value.status, step.value.code) == (200, "answer_too_large")
        with pytest.raises(TooLargeError, match=r"passed 65,536 bytes \(MAX_KEYS_BYTES"):
            mind.public_keys()
        assert hostile.until_closed("/npcs/mara/process") < READ_PAST
        assert hostile.until_closed("/v1/keys") < READ_PAST
    finally:
        mind.close()
    assert store.count("mara") == 0


def test_a_response_with_an_error_and_a_200_is_said_by_its_message() -> None:
    from npcmind_client.wire import Malformed, read_decide_answer

    with pytest.raises(Malformed, match="the answer passed"):
        read_decide_answer({"error": {"code": "answer_too_large", "message": "the answer passed 1 bytes"}})


def test_a_cortex_answer_is_read_no_further_than_its_cap(hostile: Hostile) -> None:
    from npcmind_client.cortex import CortexError
    from npcmind_client.npc_wire import PromptConstraints

    hostile.routes["/v1/chat/completions"] = lambda h: h.endless(200, b" " * 65536, head=b'{"choices":[')
    cortex = OpenAICortex(f"{hostile.url}/v1", model="m", timeout_ms=60_000)
    try:
        with pytest.raises(CortexError, match=r"passed 8,388,608 bytes \(MAX_MODEL_BYTES"):
            cortex.complete("Hello?", PromptConstraints())
        assert hostile.until_closed("/v1/chat/completions") < READ_PAST
    finally:
        cortex.close()


def test_last_prompt_is_read_no_further_than_its_cap(hostile: Hostile) -> None:
    hostile.routes["/v1/prompt"] = lambda h: h.endless(200, b" " * 65536, head=b'{"prompt":')
    with client(hostile.url) as c:
        assert c.last_prompt() is None  # past MAX_PROMPT_BYTES: a debug view gets nothing, the game goes on
        assert hostile.until_closed("/v1/prompt") < READ_PAST


def test_a_trickle_of_one_byte_chunks_counts_each_as_a_kibibyte() -> None:
    import httpx

    from npcmind_client.limits import MIN_CHUNK_BYTES
    from npcmind_client.transport import Chunk, End

    pulled = [0]

    def trickle() -> Iterator[bytes]:
        for _ in range(10**6):  # a million chunks of one byte, if read to the end
            pulled[0] += 1
            yield b"\n"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": NDJSON}, content=trickle())

    t = Transport("http://hostile.test", 60, 1, transport=httpx.MockTransport(handler))
    try:
        t.send("r1", "POST", "/v1/decide", b"{}", {}, [], stream=True)
        t.wait(60)
        came = t.outcomes()
    finally:
        t.close()
    chunks = [o for o in came if isinstance(o, Chunk)]
    end = [o for o in came if isinstance(o, End)]
    assert len(chunks) == MAX_STREAM_BYTES // MIN_CHUNK_BYTES and pulled[0] <= len(chunks) + 2
    assert len(end) == 1 and "MAX_STREAM_BYTES" in end[0].why


def test_a_manifest_of_numbers_no_int_can_hold_never_raises_into_tick(
    hostile: Hostile, caplog: pytest.LogCaptureFixture
) -> None:
    types = f'{{"bee":{{"refresh_ms":"{"9" * 5000}","ttl_ms":1e400}},"wasp":{{"refresh_ms":"x","ttl_ms":NaN}}}}'
    hostile.routes["/v1/manifest"] = lambda h: h.whole(200, f'{{"manifest":{{"types":{types}}}}}'.encode())
    hostile.routes["/v1/health"] = lambda h: h.whole(200, f'{{"deadline_ms":{"9" * 4000}}}'.encode())
    with DecideClient(hostile.url, "game-1", options=DecideOptions(epoch=1, fetch_policy=False)) as c:
        c.track("b0", "bee", {"hp": 1}, LEGAL)
        settle(c)  # neither int("9" * 5000), int(inf) nor int(nan) in the game's tick: the defaults hold
        assert c._scheduler.timings.of("bee") == (4000.0, 12000.0) and c._scheduler.timings.of("wasp") == (
            4000.0,
            12000.0,
        )
        assert c.timeout_ms == 15_000  # a deadline of 4,000 digits is none


def test_numbers_past_a_float_in_decisions_and_refusals_never_raise_into_tick(
    hostile: Hostile, caplog: pytest.LogCaptureFixture
) -> None:
    big = "9" * 400  # an integer Python parses, and no float holds
    hostile.routes["/v1/decide"] = lambda h: h.whole(200, ai("b0", confidence=big) + ai("b1", ttl=big), NDJSON)
    with caplog.at_level(logging.WARNING, "npcmind_client"), client(hostile.url) as c:
        settle(c)  # float(10**400) and now + 10**400 raise OverflowError: each line refused, never raised
        assert c.action("b0") is None and c.action("b1") is None and c.stats.errors == 3  # two lines, one cut
    assert "$.confidence: out of range" in caplog.text  # said once: the ttl line is the same kind of problem
    refusal = {"error": {"code": "invalid", "message": "no", "details": [{"path": f"entities[{'9' * 5000}]"}]}}
    hostile.routes["/v1/decide"] = lambda h: h.whole(422, json.dumps(refusal).encode())
    with client(hostile.url) as c:
        settle(c)  # int() of a 5,000-digit index raised ValueError: now no entity's index, a refusal of the whole
        assert c.action("b0") is None and c.stats.refused == 0


def test_a_session_that_lasts_past_a_float_never_raises_into_tick() -> None:
    from npcmind_client.session import Session

    s = Session("g", "key")
    assert s.answered(200, {"session_token": "t", "expires_in_s": 10**400}, 0.0) is None
    assert s.token == "t" and s.renew_at == float("inf")  # kept, never renewed on a time no float holds


def test_a_retry_after_of_5000_digits_waits_an_hour_not_forever() -> None:
    from npcmind_client.refusals import MAX_RETRY_AFTER_S, retry_after_ms

    assert retry_after_ms({"retry-after": "9" * 5000}) == MAX_RETRY_AFTER_S * 1000 == 3_600_000
    assert retry_after_ms({"retry-after": "2.5"}) == 2500


def test_a_problem_is_remembered_and_logged_in_bounded_text(caplog: pytest.LogCaptureFixture) -> None:
    from npcmind_client.say import MAX_KEY, MAX_MESSAGE, SayOnce

    say = SayOnce()
    with caplog.at_level(logging.WARNING, "npcmind_client"):
        for i in range(3):  # three error bodies of 60 kB, alike in their first 300 characters
            say("500:" + "x" * 60_000 + str(i), "y" * 60_000)
    assert len(caplog.records) == 1 and len(caplog.records[0].getMessage()) < MAX_MESSAGE + 100
    assert max(len(k) for k in say._said) <= MAX_KEY
