"""Connections that hold the service without asking anything: a deadline on each request's arrival, a cap on
open connections.

uvicorn times out only the idle wait between two requests: a client that sends a byte a second, or nothing
at all after connecting, held its connection for ever (500 of them were all open after 20 s). uvicorn's
`limit_concurrency` answers 503 to requests over a limit but keeps their connections open. This wraps
uvicorn's HTTP protocol class (httptools or h11) with what it lacks.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import msgspec

from npcmind.failures import EventLog

log = logging.getLogger("npcmind.http")


def _answer(status: str, code: str, message: str) -> bytes:
    """A whole HTTP answer in the protocol's error form, written before the connection is closed."""
    body = msgspec.json.encode({"error": {"code": code, "message": message, "details": []}})
    head = f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
    return (head + "connection: close\r\n\r\n").encode() + body


class Deadlines:
    """Mixed in before uvicorn's protocol class: a request (its head and body) must arrive whole within
    ``read_timeout_s`` of the connection opening or, on a kept-alive connection, of the request's first
    byte; the connections beyond ``max_connections`` are answered 503 and closed at once."""

    read_timeout_s: float
    max_connections: int
    closed: EventLog
    refused: EventLog
    # uvicorn's protocol classes set these
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    connections: set[Any]
    cycle: Any

    _timer: asyncio.TimerHandle | None = None
    _waiting: object = None  # the request cycle current when the wait began: another one means the head came

    def connection_made(self, transport: asyncio.Transport) -> None:
        """Count the connection; over the cap it is refused, else its first request is awaited."""
        super().connection_made(transport)  # type: ignore[misc]
        if len(self.connections) > self.max_connections:
            self.refused.happened(
                f"refused a connection: {len(self.connections) - 1} were open, the most NPCMIND_MAX_CONNECTIONS "
                f"allows ({self.max_connections})"
            )
            message = f"the service has {self.max_connections} connections open (NPCMIND_MAX_CONNECTIONS): try again"
            transport.write(_answer("503 Service Unavailable", "too_many_connections", message))
            transport.close()
            return
        self._await_request()

    def data_received(self, data: bytes) -> None:
        """Bytes of a request: the first ones of a request start its deadline, the last ones end it."""
        if self._timer is None and (self.cycle is None or self.cycle.response_complete):
            self._await_request()
        super().data_received(data)  # type: ignore[misc]
        if self._timer is not None and self.cycle is not self._waiting and not self.cycle.more_body:
            self._stop()

    def connection_lost(self, exc: Exception | None) -> None:
        """No deadline outlives its connection."""
        self._stop()
        super().connection_lost(exc)  # type: ignore[misc]

    def _await_request(self) -> None:
        self._waiting = self.cycle
        self._timer = self.loop.call_later(self.read_timeout_s, self._passed)

    def _stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _passed(self) -> None:
        """The deadline passed: judge only once the loop has read what had already arrived. A loop held up (a
        busy machine) runs a late timer before it reads the socket, and would close a client that was on time;
        two hops of call_soon put a read of the socket in between, with uvloop as with asyncio's own loop."""
        self.loop.call_soon(self.loop.call_soon, self._close_if_still_waiting)

    def _close_if_still_waiting(self) -> None:
        if self._timer is None or self.transport.is_closing():
            return
        self._timer = None
        head = self.cycle is self._waiting
        what = "head" if head else "body"
        self.closed.happened(
            f"closed a connection whose request {what} did not arrive within {self.read_timeout_s:g} s "
            "(NPCMIND_READ_TIMEOUT_S)"
        )
        if head or not self.cycle.response_started:  # nothing of an answer was sent: the client is told why, and
            # a load balancer in front relays the 408 (a connection closed without an answer is its 502)
            message = f"the request did not arrive whole within {self.read_timeout_s:g} s (NPCMIND_READ_TIMEOUT_S)"
            self.transport.write(_answer("408 Request Timeout", "request_timeout", message))
        self.transport.close()


def guarded(protocol: type[asyncio.Protocol], read_timeout_s: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class with the deadlines and the cap, for one server."""
    attrs = {
        "read_timeout_s": read_timeout_s,
        "max_connections": max_connections,
        "closed": EventLog(log, "connections closed"),
        "refused": EventLog(log, "connections refused", level=logging.WARNING),
    }
    return type(f"Guarded{protocol.__name__}", (Deadlines, protocol), attrs)
