"""Connections that ask nothing are closed, and open connections are capped: uvicorn timed out only the idle
wait between requests, so 500 connections sending a byte a second were all open after 20 s.

No assertion here is about time: the deadlines are small and the tests wait, up to a bound that only ends a
hang, until the server has closed what it must close.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from litestar import Litestar, Request, Response, post

from conftest import FOREST, logged
from npcmind.http.server import BackgroundServer, ServiceProcess

HANG = 30.0  # seconds: only a server that never closes takes this long


@post("/echo", status_code=200)
async def echo(request: Request[Any, Any, Any]) -> Response[bytes]:
    return Response(content=await request.body(), media_type="application/json")


@pytest.fixture(params=["httptools", "h11"])
def server(request: pytest.FixtureRequest) -> Iterator[BackgroundServer]:
    """A small app on each of uvicorn's HTTP implementations, a request due whole within 1 s (a request sent in one
    write must get there on a machine whose every core is busy; one that stops coming must not hold the test)."""
    app = Litestar([echo], openapi_config=None)
    with BackgroundServer(app, lifespan="off", read_timeout_s=1.0, http=request.param) as s:
        yield s


HEAD = b"POST /echo HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=HANG)


def until_closed(s: socket.socket, drip: bytes = b"") -> bytes:
    """What the server wrote before it closed the connection (a reset counts as closed); ``drip``: a byte of it
    is sent whenever the server has said nothing, as a client that keeps a connection by sending slowly."""
    got, deadline = b"", time.monotonic() + HANG
    while time.monotonic() < deadline:
        if drip:
            try:
                s.sendall(drip[:1])
            except OSError:  # closed by the server meanwhile
                return got
            drip = drip[1:] or drip
        if select.select([s], [], [], 0.05)[0]:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                return got
            if not chunk:
                return got
            got += chunk
    raise AssertionError(f"still open after {HANG} s; it said {got!r}")


def error_of(answer: bytes) -> tuple[str, dict[str, Any]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), msgspec.json.decode(body)["error"]


def test_a_connection_that_sends_nothing_is_closed_with_408(server: BackgroundServer) -> None:
    with connect(server.port) as quiet:
        status, error = error_of(until_closed(quiet))
    assert status == "HTTP/1.1 408 Request Timeout" and error["code"] == "request_timeout"
    assert "within 1 s (NPCMIND_READ_TIMEOUT_S)" in error["message"]


def test_a_head_sent_a_byte_at_a_time_is_closed_and_others_are_answered(server: BackgroundServer) -> None:
    with connect(server.port) as slow:
        slow.sendall(b"POST /echo HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        with connect(server.port) as other:  # meanwhile, a whole request in one write: answered
            other.sendall(HEAD + b'content-length: 8\r\nconnection: close\r\n\r\n{"a": 1}')
            answer = until_closed(other)
            assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(b'{"a": 1}'), answer
        said = until_closed(slow, drip=b"x-slow: " + b"a" * 10_000)  # a header that never ends
    assert said == b"" or error_of(said)[0] == "HTTP/1.1 408 Request Timeout"


def test_a_body_that_stops_coming_is_answered_408_and_closed(server: BackgroundServer) -> None:
    """Issue 39, 7: a late body ended with the connection closed and no answer, which HAProxy in front turns
    into a 502 (a late head was a 408 in both): now a 408 that says why, as long as no answer has begun."""
    with connect(server.port) as slow:
        slow.sendall(HEAD + b'content-length: 50\r\n\r\n{"a"')
        answer = until_closed(slow)
    assert b"HTTP/1.1 2" not in answer  # closed, never answered as if the body had come
    status, error = error_of(answer)
    assert status == "HTTP/1.1 408 Request Timeout" and error["code"] == "request_timeout", answer


def test_a_kept_alive_connection_has_the_same_deadline_for_its_next_request(server: BackgroundServer) -> None:
    with connect(server.port) as kept:
        kept.sendall(HEAD + b"content-length: 2\r\n\r\n{}")
        first = b""
        while b"\r\n\r\n{}" not in first:
            first += kept.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        kept.sendall(b"POST /echo HTTP/1.1\r\n")  # the next request's head, never finished
        assert error_of(until_closed(kept))[0] == "HTTP/1.1 408 Request Timeout"


@pytest.mark.fast
def test_connections_past_the_cap_are_refused_with_503_and_the_log_says_so() -> None:
    app = Litestar([echo], openapi_config=None)
    with (
        logged("npcmind.http") as said,
        BackgroundServer(app, lifespan="off", max_connections=3, read_timeout_s=600) as server,
    ):
        held = [connect(server.port) for _ in range(3)]
        with connect(server.port) as extra:
            status, error = error_of(until_closed(extra))
        assert status == "HTTP/1.1 503 Service Unavailable" and error["code"] == "too_many_connections"
        assert "3 connections open (NPCMIND_MAX_CONNECTIONS)" in error["message"]
        held.pop().close()
        deadline = time.monotonic() + HANG  # until the server has seen that one go
        while True:
            try:
                r = httpx.post(f"{server.url}/echo", json={}, timeout=HANG)
                if r.status_code != 503:  # a 503: the close was not yet seen when this connection came
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "a connection closed was never counted out"
        assert r.status_code == 200
        for s in held:
            s.close()
    assert any("refused a connection: 3 were open" in m and "NPCMIND_MAX_CONNECTIONS" in m for m in said), said


def test_npcmind_serve_closes_connections_that_send_nothing(tmp_path: Path) -> None:
    """The service's own server, started by `npcmind serve`, has the same deadline as every BackgroundServer."""
    proc = ServiceProcess(
        ["--manifest", str(FOREST), "--store", f"sqlite:///{tmp_path}/s.db", "--provider", "none"],
        env={"NPCMIND_READ_TIMEOUT_S": "0.2"},
    )
    try:
        with connect(proc.port) as quiet:
            status, error = error_of(until_closed(quiet))
        assert status == "HTTP/1.1 408 Request Timeout" and "0.2 s" in error["message"]
        assert httpx.get(f"{proc.url}/v1/health", timeout=HANG).status_code == 200
    finally:
        proc.stop()
