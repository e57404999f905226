"""HTTP/1.1 to a provider on asyncio's transports and httptools' parser, because aiohttp's client spent about four
times the CPU of the call itself (docs/models.md, "The provider's HTTP client").

What a provider call needs and no more: connections kept open across calls (a pool with a limit), TLS with the
system's certificates, a connect timeout, and caps on what is read (the answer's head here, its body by the
caller). No redirects, proxies, cookies or compression: no provider API needs them, and the answer is asked for
uncompressed (``Accept-Encoding: identity``), so a compressed one is refused rather than unpacked unbounded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import ssl
from collections import deque
from collections.abc import AsyncIterator

import aiohappyeyeballs
import httptools
import yarl

from npcmind import __version__

MAX_HEAD_BYTES = 64 * 1024  # an answer's status line and headers: a provider's are about 1 KB
# bytes of an answer that are neither its head nor its body (chunk sizes and extensions, trailers): at most this
# many a byte of body, past MAX_HEAD_BYTES (a body sent a byte a chunk takes 5 more for its framing)
FRAMING_PER_BODY_BYTE = 8
HIGH_WATER = 256 * 1024  # bytes read and not yet taken: past this the socket is left unread until they are
CONNECT_S = 5.0  # to open a connection (and shake hands over TLS)
HAPPY_EYEBALLS_S = 0.25  # a host's next address is tried this long after the one before (RFC 8305), as aiohttp did
USER_AGENT = f"User-Agent: npcmind/{__version__}"


class WireError(Exception):
    """The provider could not be reached, or what it sent is not an HTTP answer: the message says which."""


class _Exchange(asyncio.Protocol):
    """One connection to the provider, and the answer to the request last sent on it: its status, headers and
    body as they come (the parser's callbacks), for one reader at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.lost = False  # the connection is gone (or must not be used again)
        self._parser: httptools.HttpResponseParser | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._error: WireError | None = None
        self.status = 0
        self.headers: dict[str, str] = {}
        self._wire_bytes = 0  # of this answer, as read
        self._body_bytes = 0  # of those, its body's
        self._headed = False
        self.complete = False
        self.keep_alive = False
        self._until_eof = False  # no length and not chunked: the body ends when the connection does
        self._body: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False  # by HIGH_WATER, not by a reader holding the socket

    # the request
    def send(self, head: bytes, body: bytes) -> None:
        """Begin an exchange: the request written, a new answer awaited."""
        assert self.transport is not None
        self._parser = httptools.HttpResponseParser(self)
        self.status, self.headers, self._headed, self.complete, self.keep_alive = 0, {}, False, False, False
        self._wire_bytes, self._body_bytes, self._error, self._until_eof = 0, 0, None, False
        self._body.clear()
        self._buffered = 0
        if self._paused:  # left paused by an answer before (its connection should not have been kept)
            self._paused = False
            self.transport.resume_reading()
        self.transport.writelines((head, body))

    async def head(self) -> None:
        """Until the answer's status and headers have come."""
        while not self._headed:
            await self._wait()

    async def chunk(self) -> bytes:
        """What of the body has come (waiting for some), or b"" once it has all been taken."""
        while not self._body:
            if self.complete:
                return b""
            await self._wait()
        out = self._body.popleft() if len(self._body) == 1 else b"".join(self._body)
        self._body.clear()
        self._buffered = 0
        if self._paused and self.transport is not None and not self.lost:
            self._paused = False
            self.transport.resume_reading()
        return out

    async def _wait(self) -> None:
        if self.lost and self._error is None and not self.complete:  # a connection gone before it was asked
            self._error = WireError("the connection was lost before the answer ended (closed by the provider)")
        if self._error is not None:
            raise self._error
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None
        if self._error is not None and not self._body:
            raise self._error

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _fail(self, error: WireError) -> None:
        if self._error is None and not self.complete:
            self._error = error
        self.lost = True
        if self.transport is not None:
            self.transport.close()
        self._wake()

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if parser is None or self.complete:  # nothing asked: a server that talks out of turn is not reused
            self._fail(WireError("the provider sent bytes it was not asked for"))
            return
        self._wire_bytes += len(data)  # a read is at most 256 KiB: the caps hold within one read of them
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(WireError("the provider switched protocols: not an HTTP answer"))
            return
        except httptools.HttpParserError as e:
            self._fail(WireError(f"the provider's answer is not HTTP: {e}"))
            return
        if self._wire_bytes - self._body_bytes > MAX_HEAD_BYTES + FRAMING_PER_BODY_BYTE * self._body_bytes:
            # refused whole, even when its end came in this same read (whether it did is the network's timing)
            self.complete = False
            self._body.clear()
            self._buffered = 0
            self._fail(
                WireError(f"the provider's answer had no end of its headers in {MAX_HEAD_BYTES:,} bytes")
                if not self._headed
                else WireError(
                    f"the provider's answer sent more than {MAX_HEAD_BYTES:,} bytes and {FRAMING_PER_BODY_BYTE} a "
                    "byte of its body that were neither (chunk framing, trailers): not read further"
                )
            )

    def eof_received(self) -> bool | None:
        return False  # the transport closes itself; connection_lost says the rest

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self._parser is not None and not self.complete:
            if self._headed and self._until_eof and exc is None:
                self.complete = True  # an answer without a length ends with its connection (closed, not reset)
            else:
                why = f"{exc.__class__.__name__}: {exc}" if exc is not None else "closed by the provider"
                self._error = self._error or WireError(f"the connection was lost before the answer ended ({why})")
        self._wake()

    # httptools' callbacks (each header comes whole: the parser joins a name or value split across reads)
    def on_message_begin(self) -> None:
        if self.complete:  # a second answer to one request: the connection is not reused
            self.lost = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._headed:  # trailers, after the body, are not read
            self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        if self.complete or self._parser is None:
            return
        self.status = self._parser.get_status_code()
        if self.status < 200:  # 100 Continue and the like: the answer is the next message
            self.headers = {}
            return
        self._headed = True
        chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        self._until_eof = not chunked and "content-length" not in self.headers and self.status not in (204, 304)
        self._wake()

    def on_body(self, body: bytes) -> None:
        if self.complete:
            return
        self._body_bytes += len(body)
        self._body.append(body)
        self._buffered += len(body)
        if self._buffered > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if not self._headed or self.complete or self._parser is None:  # an informational answer: the real one follows
            return
        self.complete = True
        self.keep_alive = self._parser.should_keep_alive()
        self._wake()


class Answer:
    """The provider's answer as the caller reads it: status, headers, and the body a piece at a time."""

    __slots__ = ("_x", "headers", "status")

    def __init__(self, exchange: _Exchange) -> None:
        self._x = exchange
        self.status = exchange.status
        self.headers = exchange.headers

    @property
    def content_length(self) -> int | None:
        """The length the answer gave for its body, if it gave one."""
        raw = self.headers.get("content-length")
        return int(raw) if raw is not None and raw.isdigit() else None

    @property
    def content_type(self) -> str:
        """Its media type, lower case, without parameters ("" when it gave none)."""
        return self.headers.get("content-type", "").partition(";")[0].strip().lower()

    @property
    def transport(self) -> asyncio.Transport | None:
        """The connection's transport while the answer is being read (a reader may hold it unread)."""
        return None if self._x.lost else self._x.transport

    async def readany(self) -> bytes:
        """What of the body has come (waiting for some), or b"" once it has all been read."""
        return await self._x.chunk()


class Pool:
    """Connections to the providers, kept open across calls, ``limit`` of them in use at once (a call past that
    waits for one): a new TLS handshake a decision would cost more than the decision."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._slots = asyncio.Semaphore(limit)  # made again in the loop that first uses the pool
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: dict[tuple[str, str, int], list[_Exchange]] = {}
        self._tls: ssl.SSLContext | None = None
        self._open: set[_Exchange] = set()

    @contextlib.asynccontextmanager
    async def request(
        self, method: str, url: str, headers: dict[str, str], body: bytes = b"", connect_s: float = CONNECT_S
    ) -> AsyncIterator[Answer]:
        """Send a request and yield its answer once its head has come; the connection goes back to the pool when
        the answer was read whole and the provider keeps it open, else it is closed (an answer left half read, a
        cancelled call)."""
        u = yarl.URL(url)
        if u.scheme not in ("http", "https") or not u.raw_host:
            raise WireError(f"not an http(s) URL: {url}")
        head = _head(method, u, headers, len(body))
        if self._loop is not (loop := asyncio.get_running_loop()):  # another loop's: its connections were that one's
            self.close()
            self._slots, self._loop = asyncio.Semaphore(self._limit), loop
        async with self._slots:
            x = await self._connection(u, connect_s)
            try:
                x.send(head, body)
                await x.head()
                yield Answer(x)
            finally:
                self._done(x, (u.scheme, u.raw_host, u.port or 0))

    async def _connection(self, u: yarl.URL, connect_s: float) -> _Exchange:
        key = (u.scheme, u.raw_host or "", u.port or 0)
        idle = self._idle.get(key)
        while idle:
            x = idle.pop()
            if not x.lost and x.transport is not None and not x.transport.is_closing():
                return x
            self._open.discard(x)
        x = _Exchange()
        tls = self._context() if u.scheme == "https" else None
        loop = asyncio.get_running_loop()
        where = u.host_port_subcomponent
        host = key[1].strip("[]")
        try:
            async with asyncio.timeout(connect_s):
                found = await loop.getaddrinfo(host, key[2], type=socket.SOCK_STREAM)
                sock = await aiohappyeyeballs.start_connection(found, happy_eyeballs_delay=HAPPY_EYEBALLS_S)
                try:
                    await loop.create_connection(
                        lambda: x, sock=sock, ssl=tls, server_hostname=host.rstrip(".") if tls else None
                    )
                except BaseException:
                    sock.close()
                    raise
        except TimeoutError:
            raise WireError(f"cannot connect to {where}: no connection in {connect_s:g} s") from None
        except (OSError, ssl.SSLError, UnicodeError, ValueError) as e:  # refused, unresolved, TLS, a name IDNA refuses
            raise WireError(f"cannot connect to {where}: {e.__class__.__name__}: {e}") from None
        self._open.add(x)
        return x

    def _done(self, x: _Exchange, key: tuple[str, str, int]) -> None:
        if x.complete and x.keep_alive and not x.lost and x.transport is not None and not x.transport.is_closing():
            x._parser = None
            if not x.transport.is_reading():  # paused by its reader or past HIGH_WATER: idle, it must hear a close
                x._paused = False
                x.transport.resume_reading()
            self._idle.setdefault(key, []).append(x)
            return
        self._open.discard(x)
        _close(x)

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    def close(self) -> None:
        """Close every connection, idle or in use."""
        for x in self._open:
            _close(x)
        self._open.clear()
        self._idle.clear()


def _close(x: _Exchange) -> None:
    """Close a connection, from its own loop or after that loop has closed."""
    x.lost = True
    if x.transport is not None:
        with contextlib.suppress(RuntimeError):  # its loop is closed: the socket is closed when collected
            x.transport.close()


def _head(method: str, u: yarl.URL, headers: dict[str, str], length: int) -> bytes:
    """The request line and headers (a name given twice in other cases is sent once, the last given); a name or
    value that would end its line, or that HTTP cannot carry (past latin-1), is refused; credentials in the URL
    go as Basic authorization unless the caller gave one."""
    given = {name.lower(): (name, value) for name, value in headers.items()}
    if u.raw_user is not None and "authorization" not in given:
        pair = f"{u.user or ''}:{u.password or ''}".encode()
        given["authorization"] = ("Authorization", "Basic " + base64.b64encode(pair).decode())
    lines = [f"{method} {u.raw_path_qs or '/'} HTTP/1.1", f"Host: {u.host_port_subcomponent}"]
    if length or method == "POST":
        lines.append(f"Content-Length: {length}")
    lines.append("Accept-Encoding: identity")
    lines.append(USER_AGENT)
    for name, value in given.values():
        if any(c in name or c in value for c in "\r\n\0") or ":" in name:
            raise WireError(f"header {name!r} holds a character a header cannot: not sent")
        try:
            (name + value).encode("latin-1")
        except UnicodeEncodeError:
            raise WireError(f"header {name!r} holds a character HTTP cannot carry: not sent") from None
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
