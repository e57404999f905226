"""The decision SDK's streamed answers over real HTTP, against a stand-in service on a real port whose NDJSON
body a test writes line by line (the real service's stream: tests/test_sdk_decide.py): each decision is used
as its line arrives, a stream cut midway keeps what came, and an answer that is not a stream is today's."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from conftest import until
from npcmind.sdk import DecideClient, DecideOptions
from npcmind_client.lines import MAX_LINE, Lines

NDJSON = "application/x-ndjson"
MANIFEST = {"types": {"bee": {"refresh_ms": 600_000, "ttl_ms": 60_000}}}  # no refresh during a test
LEGAL = ["chase", "flee"]


def line(d: dict[str, Any]) -> bytes:
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def ai(eid: str, action: str, label: str | None = None) -> dict[str, Any]:
    return {"source": "AI", "id": eid, "action": action, "label": label or action, "confidence": 0.9,
            "ttl_ms": 60_000, "decision_id": f"d-{eid}", "cached": False}  # fmt: skip


LAST = line({"a2g": "0.1", "epoch": 1, "latency_ms": 5, "sent_ms": {}})


class Answer:
    """The decide answer being written by the stand-in: whole lines or parts, then its end or a cut."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        self._h = handler

    def start(self) -> None:
        """The 200 of a stream, chunked: its body goes out as it is written."""
        self._h.send_response(200)
        self._h.send_header("content-type", NDJSON)
        self._h.send_header("transfer-encoding", "chunked")
        self._h.end_headers()

    def write(self, data: bytes) -> None:
        self._h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self._h.wfile.flush()

    def finish(self) -> None:
        self._h.wfile.write(b"0\r\n\r\n")

    def cut(self) -> None:
        """The connection closes with the body unfinished (no last chunk): a service killed mid-answer."""
        self._h.close_connection = True

    def json(self, body: dict[str, Any]) -> None:
        """Today's answer: one JSON document."""
        data = json.dumps(body).encode()
        self._h.send_response(200)
        self._h.send_header("content-type", "application/json")
        self._h.send_header("content-length", str(len(data)))
        self._h.end_headers()
        self._h.wfile.write(data)


Script = Callable[[Answer, dict[str, Any]], None]


class StandIn:
    """A stand-in npcmind on 127.0.0.1: telemetry taken, each decide request answered by ``script``; the
    ``Accept`` header of every decide request kept."""

    def __init__(self) -> None:
        self.script: Script = lambda answer, body: answer.json({})
        self.accept: list[str] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if self.path == "/v1/decide":
                    stand_in.accept.append(self.headers.get("accept", ""))
                    stand_in.script(Answer(self), body)
                    return
                data = b'{"accepted": 0}'
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture()
def stand_in() -> Iterator[StandIn]:
    s = StandIn()
    yield s
    s.server.shutdown()
    s.server.server_close()


def client(url: str, **fields: Any) -> DecideClient:
    """The test's client, its two bees tracked; ``fields``: more of its ``DecideOptions``."""
    c = DecideClient(url, "game-1", options=DecideOptions(epoch=1, manifest=MANIFEST, timeout_ms=60_000, **fields))
    for eid in ("b0", "b1"):
        c.track(eid, "bee", {"hp": 1}, LEGAL)
    return c


def test_each_decision_is_used_as_its_line_arrives_before_the_stream_ends(stand_in: StandIn) -> None:
    rest = threading.Event()

    def script(answer: Answer, body: dict[str, Any]) -> None:
        answer.start()
        answer.write(line(ai("b0", "flee")))
        rest.wait(120)  # b1's line is written once the test saw b0's used
        answer.write(line(ai("b1", "chase")) + LAST)
        answer.finish()

    stand_in.script = script
    with client(stand_in.url) as c:
        c.tick()
        b0 = until(lambda: (c.tick(), c.action("b0"))[1], "b0's decision used while the stream is open")
        assert b0.action == "flee" and b0.source == "AI" and b0.decision_id == "d-b0"
        assert c.action("b1") is None and c.stats.streamed_decisions == 1
        rest.set()
        assert c.wait(timeout_ms=60_000)
        assert c.action("b1").action == "chase"  # type: ignore[union-attr]
        s = c.stats
        assert (s.streamed_decisions, s.ai, s.streams_cut, s.errors, s.fallbacks) == (2, 2, 0, 0, {})
        assert s.streamed_ms_total > 0
    assert stand_in.accept == [NDJSON]


def test_a_stream_cut_midway_keeps_the_lines_received_and_the_rest_fall_back(stand_in: StandIn) -> None:
    def script(answer: Answer, body: dict[str, Any]) -> None:
        answer.start()
        answer.write(line(ai("b0", "flee")) + line(ai("b1", "chase"))[:25])
        answer.cut()

    stand_in.script = script
    with client(stand_in.url) as c:
        c.tick()
        assert c.wait(timeout_ms=60_000)
        assert c.action("b0").action == "flee"  # type: ignore[union-attr]
        assert c.action("b1") is None  # its line never completed: native AI, never half a line
        s = c.stats
        assert (s.streamed_decisions, s.streams_cut, s.fallbacks, s.errors) == (1, 1, {"unavailable": 1}, 1)


def test_stream_false_asks_for_one_json_answer(stand_in: StandIn) -> None:
    stand_in.script = lambda answer, body: answer.json(
        {"a2g": "0.1", "epoch": 1, "latency_ms": 5, "decisions": [ai("b0", "flee"), ai("b1", "chase")]}
    )
    with client(stand_in.url, stream=False) as c:
        c.tick()
        assert c.wait(timeout_ms=60_000)
        assert c.action("b1").action == "chase"  # type: ignore[union-attr]
        assert c.stats.ai == 2 and c.stats.streamed_decisions == 0
    assert len(stand_in.accept) == 1 and NDJSON not in stand_in.accept[0]


def test_a_plain_json_answer_to_a_streamed_request_is_used_as_today(stand_in: StandIn) -> None:
    stand_in.script = lambda answer, body: answer.json(
        {"a2g": "0.1", "epoch": 1, "latency_ms": 5, "decisions": [ai("b0", "flee"), ai("b1", "chase")]}
    )
    with client(stand_in.url) as c:
        c.tick()
        assert c.wait(timeout_ms=60_000)
        assert c.action("b0").action == "flee"  # type: ignore[union-attr]
        assert (c.stats.ai, c.stats.streamed_decisions, c.stats.streams_cut) == (2, 0, 0)
    assert stand_in.accept == [NDJSON]  # asked for a stream; an older service answered as it can


@pytest.mark.fast
def test_lines_become_text_only_whole_so_a_character_split_by_the_network_survives() -> None:
    lines = Lines()
    data = line(ai("b0", "flee", label="fuir à l'écart"))
    cut = data.index("à".encode()) + 1  # inside the two bytes of 'à'
    assert lines.feed(data[:cut]) == [] and lines.partial
    got = lines.feed(data[cut:] + b"\n\r\n")  # a blank line (and a CRLF) is skipped
    assert [json.loads(x)["label"] for x in got] == ["fuir à l'écart"] and not lines.partial


@pytest.mark.fast
def test_a_line_past_the_limit_is_dropped_whole_and_the_next_is_kept() -> None:
    lines = Lines()
    assert lines.feed(b"x" * (MAX_LINE + 10)) == []  # no newline yet: none of it is kept
    assert lines.feed(b"yyy\n" + line(ai("b0", "flee"))) == [line(ai("b0", "flee")).decode().strip()]
    assert lines.overlong == 1
