"""Connections accepted on uvloop as asyncio's own loop accepts them: every one waiting, not one a turn of the loop.

libuv, under uvloop, accepts one connection each time the loop polls (libuv 1.45: "don't accept() connections in
a loop", for processes that share one listening socket). While the loop is busy, connections a game opened at
once wait in the kernel's listen queue: with 1,000 opened at once against `npcmind serve`, 700 were still
there 5 s later, drained at 15-20 a second, and the p99 was 9.2 s against a median of 0.54 s (docs/bench.md,
"1,000 in flight: the listen queue"). asyncio's selector loop accepts up to its backlog each time. No npcmind
process shares its listening socket (a cluster's processes each have a port, behind HAProxy), so on uvloop the
socket uvicorn bound (its errors and messages stay uvicorn's) is taken over: each turn of the loop accepts up to
``BURST`` connections and gives each to uvloop as an accepted socket, the same transport and protocol as before.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

import uvicorn

from npcmind.failures import EventLog

log = logging.getLogger("npcmind.http")

BURST = 256  # connections accepted in one turn of the loop at most: the rest wait for the next turn
OUT_OF_FILES_S = 0.1  # how long accepting waits when the process has no descriptor left (it would spin otherwise)
_OUT_OF_FILES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class Acceptor:
    """A listening socket whose waiting connections are accepted together, with a server's close() and
    wait_closed() for uvicorn's shutdown."""

    def __init__(self, sock: socket.socket, factory: Callable[[], asyncio.Protocol]) -> None:
        self._sock = sock
        self._factory = factory
        self._loop = asyncio.get_running_loop()
        self._opening: set[asyncio.Task[Any]] = set()  # accepted connections being given to uvloop
        self._again: asyncio.TimerHandle | None = None  # out of descriptors: when to accept again
        self._closed = False
        self._starved = EventLog(log, "accepts postponed: no file descriptor left", level=logging.WARNING)
        sock.setblocking(False)
        self._loop.add_reader(sock.fileno(), self._accept)

    @property
    def sockets(self) -> list[socket.socket]:
        """The listening socket, as a server lists its own."""
        return [self._sock]

    def _accept(self) -> None:
        """Every connection waiting, up to BURST; none left: wait for the loop to say there is one."""
        for _ in range(BURST):
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as e:
                if e.errno not in _OUT_OF_FILES:
                    raise
                self._starved.happened(
                    f"no file descriptor left to accept a connection ({e.strerror}): accepting again in "
                    f"{OUT_OF_FILES_S:g} s; raise the open-file limit (ulimit -n) or lower NPCMIND_MAX_CONNECTIONS"
                )
                self._loop.remove_reader(self._sock.fileno())
                self._again = self._loop.call_later(OUT_OF_FILES_S, self._resume)
                return
            if conn.family in (socket.AF_INET, socket.AF_INET6):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as uvloop's own server sets it
            task = self._loop.create_task(self._open(conn))
            self._opening.add(task)
            task.add_done_callback(self._opening.discard)

    async def _open(self, conn: socket.socket) -> None:
        """Give a connection to uvloop, with the server's protocol. One that opens after close() (uvicorn's
        shutdown told the connections open then to close, not this one) is told to close too; a failure that is
        no client leaving goes to the loop's exception handler, as uvloop's own server sends it."""
        try:
            transport, protocol = await self._loop.connect_accepted_socket(self._factory, conn)
        except OSError:  # the client left before its connection was opened
            return
        except Exception as e:
            self._loop.call_exception_handler({"message": "a connection could not be opened", "exception": e})
            return
        if not self._closed:
            return
        shutdown = getattr(protocol, "shutdown", None)  # uvicorn's protocols finish the request they are in
        if shutdown is not None:
            shutdown()
        else:
            transport.close()

    def _resume(self) -> None:
        self._again = None
        if not self._closed:
            self._loop.add_reader(self._sock.fileno(), self._accept)
            self._accept()

    def close(self) -> None:
        """Accept no more; the connections open stay open (uvicorn's shutdown closes them)."""
        if self._closed:
            return
        self._closed = True
        if self._again is not None:
            self._again.cancel()
        else:
            self._loop.remove_reader(self._sock.fileno())
        self._sock.close()

    async def wait_closed(self) -> None:
        """Once the connections accepted last are open."""
        if self._opening:
            await asyncio.gather(*self._opening, return_exceptions=True)


def taken_over(server: uvicorn.Server) -> None:
    """On uvloop, each socket uvicorn listens on now accepted by an Acceptor (a duplicate of its descriptor
    keeps it listening, with the connections queued on it, when uvloop's server closes); on any other loop, and
    for TLS, which npcmind serve does not do itself, uvicorn's servers as they are."""
    loop = asyncio.get_running_loop()
    if not type(loop).__module__.startswith("uvloop") or server.config.ssl is not None:
        return
    config = server.config

    def protocol() -> asyncio.Protocol:  # what uvicorn's startup gives each connection
        return config.http_protocol_class(  # type: ignore[call-arg]
            config=config, server_state=server.server_state, app_state=server.lifespan.state
        )

    taken: list[Any] = []
    for s in server.servers:
        socks = [socket.socket(fileno=os.dup(sock.fileno())) for sock in s.sockets]
        s.close()
        taken += [Acceptor(sock, protocol) for sock in socks]
    server.servers = taken


class AcceptingServer(uvicorn.Server):
    """uvicorn whose listening sockets accept every waiting connection a turn of the loop (see the module).
    ``listening`` is set once its servers are final (uvicorn's ``started`` comes before they are taken over)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and sockets is None:  # sockets given may be shared with other processes: left to libuv
            taken_over(self)
        if self.started:
            self.listening.set()
