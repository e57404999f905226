"""Accepting on uvloop: every connection waiting in one turn of the loop (libuv alone accepts one a turn), the same
transport and protocol as uvloop's own server gives, and a close that keeps what is open."""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar

import httpx
import pytest
import uvloop

from npcmind.http import accept
from npcmind.http.accept import Acceptor
from npcmind.http.server import BackgroundServer


class Echo(asyncio.Protocol):
    """Says back what it reads, after its peer's address."""

    made: ClassVar[list[Echo]] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        Echo.made.append(self)

    def data_received(self, data: bytes) -> None:
        _, port = self.transport.get_extra_info("peername")[:2]
        self.transport.write(f"{port}:".encode() + data)  # type: ignore[attr-defined]


def on_uvloop(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(test())


def listening() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(2048)
    return s


def test_every_connection_waiting_is_accepted_in_one_turn_up_to_the_burst() -> None:
    async def test() -> None:
        Echo.made = []
        server = listening()
        clients = [socket.create_connection(server.getsockname()) for _ in range(accept.BURST + 40)]
        try:
            loop = asyncio.get_running_loop()
            loop.add_reader = lambda *a: None  # type: ignore[method-assign]  # the turn is driven by hand below
            a = Acceptor(server, Echo)
            a._accept()  # one turn of the loop: libuv's server would have taken one
            await asyncio.sleep(0.05)
            assert len(Echo.made) == accept.BURST
            a._accept()  # the next turn takes the rest
            await asyncio.sleep(0.05)
            assert len(Echo.made) == accept.BURST + 40
            del loop.add_reader
            loop.remove_reader = lambda *a: True  # type: ignore[method-assign]
            a.close()
        finally:
            for c in clients:
                c.close()

    on_uvloop(test)


def test_a_connection_accepted_here_is_uvloops_own_transport_and_a_close_keeps_it_open() -> None:
    async def test() -> None:
        Echo.made = []
        server = listening()
        a = Acceptor(server, Echo)
        addr = server.getsockname()
        reader, writer = await asyncio.open_connection(*addr)
        writer.write(b"hello")
        got = await asyncio.wait_for(reader.readexactly(len(b"hello") + 6), 10)
        port = writer.get_extra_info("sockname")[1]
        assert got == f"{port}:hello".encode()
        assert type(Echo.made[0].transport).__module__.startswith("uvloop")
        a.close()
        await a.wait_closed()
        with pytest.raises(OSError):  # no longer listening
            await asyncio.open_connection(*addr)
        writer.write(b"again")  # the connection open before the close still answers
        assert await asyncio.wait_for(reader.readexactly(len(b"again") + 6), 10) == f"{port}:again".encode()
        writer.close()

    on_uvloop(test)


def test_a_connection_that_opens_after_the_close_is_told_to_close_too() -> None:
    """uvicorn's shutdown tells the connections open when it closes the server to close; one accepted just
    before and opened just after would otherwise keep serving (and the process would not exit)."""

    class Closing(Echo):
        shut: ClassVar[list[Closing]] = []

        def shutdown(self) -> None:
            Closing.shut.append(self)

    async def test() -> None:
        Echo.made = []
        server = listening()
        clients = [socket.create_connection(server.getsockname()) for _ in range(5)]
        try:
            loop = asyncio.get_running_loop()
            loop.add_reader = lambda *a: None  # type: ignore[method-assign]
            loop.remove_reader = lambda *a: True  # type: ignore[method-assign]
            a = Acceptor(server, Closing)
            a._accept()  # five accepted, their opening tasks not yet run
            a.close()  # the shutdown comes in the same turn
            await a.wait_closed()
            assert len(Echo.made) == 5 and sorted(map(id, Closing.shut)) == sorted(map(id, Echo.made))
        finally:
            for c in clients:
                c.close()

    on_uvloop(test)


def test_a_connection_that_fails_to_open_is_said_to_the_loops_exception_handler() -> None:
    def broken() -> asyncio.Protocol:
        raise RuntimeError("a protocol that cannot be made")

    async def test() -> None:
        said: list[dict[str, Any]] = []
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: said.append(context))
        server = listening()
        a = Acceptor(server, broken)
        _, writer = await asyncio.open_connection(*server.getsockname())
        for _ in range(400):
            if said:
                break
            await asyncio.sleep(0.025)
        assert [str(c["exception"]) for c in said] == ["a protocol that cannot be made"]
        writer.close()
        a.close()

    on_uvloop(test)


def test_out_of_descriptors_accepting_waits_instead_of_spinning(caplog: pytest.LogCaptureFixture) -> None:
    class Starved(socket.socket):
        fails = 0
        starved = True

        def accept(self) -> tuple[socket.socket, Any]:
            if Starved.starved:
                Starved.fails += 1
                raise OSError(errno.EMFILE, "Too many open files")
            return super().accept()

    async def test() -> None:
        Echo.made = []
        plain = listening()
        server = Starved(fileno=plain.detach())
        a = Acceptor(server, Echo)
        _, writer = await asyncio.open_connection(*server.getsockname())
        for _ in range(200):
            if Starved.fails:
                break
            await asyncio.sleep(0.01)
        # the socket left out of the loop's polling (it would be readable at every turn) until a timer says
        assert Starved.fails == 1 and a._again is not None
        assert not asyncio.get_running_loop().remove_reader(server.fileno())
        Starved.starved = False
        for _ in range(400):
            if Echo.made:
                break
            await asyncio.sleep(0.05)
        assert len(Echo.made) == 1 and Starved.fails == 1
        writer.close()
        a.close()

    on_uvloop(test)
    assert "no file descriptor left to accept a connection (Too many open files)" in caplog.text


def test_a_served_app_takes_its_socket_over_on_uvloop_and_answers_a_burst() -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})

    with BackgroundServer(app, lifespan="off") as srv:
        assert [type(s) for s in srv._server.servers] == [Acceptor]

        async def burst() -> list[int]:
            async with httpx.AsyncClient(limits=httpx.Limits(max_connections=300)) as client:
                got = await asyncio.gather(*(client.get(srv.url) for _ in range(300)))
            return [r.status_code for r in got]

        assert asyncio.run(burst()) == [200] * 300


def test_asyncios_own_loop_keeps_uvicorns_server_it_accepts_in_bulk_already() -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    with BackgroundServer(app, lifespan="off", loop="asyncio") as srv:
        assert [type(s).__module__ for s in srv._server.servers] == ["asyncio.base_events"]
        assert httpx.get(srv.url).status_code == 204
