"""The provider's HTTP client (providers/wire.py) against a server that writes raw bytes: connections kept and
not kept, answers of every framing, and what a broken or hostile server gets back (a clear ProviderError)."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket
import socketserver
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from npcmind.providers.base import ProviderError
from npcmind.providers.http import JsonClient
from npcmind.providers.wire import HIGH_WATER, MAX_HEAD_BYTES, Pool, WireError

OK = b'{"ok": 1}'


def _sized(body: bytes, status: str = "200 OK", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s" % (
        status.encode(),
        len(body),
        extra,
        body,
    )


class _Raw(socketserver.ThreadingTCPServer):
    """Answers each request with what ``script(path)`` gives: bytes to write, or None to close at once; closes
    after writing to a path that ends with ``!``, or when its answer says ``connection: close``."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, script: Callable[[str], Any]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = script
        self.connections = 0
        self.open_now = 0
        self.most_open = 0
        self.requests: list[bytes] = []
        self.reset = False
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        srv: _Raw = self.server  # type: ignore[assignment]
        with srv.lock:
            srv.connections += 1
            srv.open_now += 1
            srv.most_open = max(srv.most_open, srv.open_now)
        try:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    got = self.request.recv(65536)
                    if not got:
                        return
                    buf += got
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = next(
                    (int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")), 0
                )
                while len(buf) < length:
                    buf += self.request.recv(65536)
                buf = buf[length:]
                with srv.lock:
                    srv.requests.append(head)
                out = srv.script(head.split(b" ")[1].decode())
                if out is None:
                    return
                for k, piece in enumerate(out if isinstance(out, tuple) else (out,)):  # pieces 0.2 s apart
                    if k:
                        time.sleep(0.2)
                    self.request.sendall(piece)
                if srv.reset:  # a reset, not a close: unread bytes left and no lingering
                    self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.request.close()  # now, before socketserver shuts its writing down (a FIN)
                    return
                if (
                    head.split(b" ")[1].endswith(b"!")
                    or b"connection: close"
                    in bytes(out[0] if isinstance(out, tuple) else out).lower().split(b"\r\n\r\n")[0]
                ):
                    return
        except OSError:
            return
        finally:
            with srv.lock:
                srv.open_now -= 1


@pytest.fixture()
def raw() -> Iterator[Callable[[Callable[[str], bytes | None]], _Raw]]:
    servers: list[_Raw] = []

    def start(script: Callable[[str], bytes | None]) -> _Raw:
        srv = _Raw(script)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def _posts(url: str, paths: list[str], headers: dict[str, str] | None = None) -> list[Any]:
    """Each path POSTed in turn by one client: its decoded answer, or the ProviderError's text."""

    async def run() -> list[Any]:
        c = JsonClient()
        out: list[Any] = []
        for p in paths:
            try:
                async with asyncio.timeout(20):  # a client that waited for ever would fail here, not hang the suite
                    out.append(await c.post(url + p, {"model": "m"}, headers or {"authorization": "Bearer k"}))
            except ProviderError as e:
                out.append(str(e))
        await c.close()
        return out

    return asyncio.run(run())


@pytest.mark.fast
def test_one_connection_serves_call_after_call(raw: Any) -> None:
    srv = raw(lambda path: _sized(OK))
    assert _posts(srv.url, ["/a", "/b", "/c"]) == [{"ok": 1}] * 3
    assert srv.connections == 1
    head = srv.requests[0].decode()
    assert head.startswith("POST /a HTTP/1.1\r\n") and "\r\nHost: 127.0.0.1:" in head, head
    assert "authorization: Bearer k" in head and "Accept-Encoding: identity" in head and "npcmind/" in head, head


@pytest.mark.fast
def test_every_framing_of_an_answer_is_read_whole(raw: Any) -> None:
    chunked = b'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\n{"ok\r\n5\r\n": 2}\r\n0\r\n\r\n'
    to_close = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n" + b'{"ok": 3}'
    informational = b"HTTP/1.1 100 Continue\r\n\r\n" + _sized(b'{"ok": 4}')
    closing = _sized(OK, extra=b"connection: close\r\n")
    scripts = {"/chunked": chunked, "/close!": to_close, "/100": informational, "/closing": closing}
    srv = raw(lambda path: scripts[path])
    got = _posts(srv.url, ["/chunked", "/close!", "/100", "/closing", "/chunked"])
    assert got == [{"ok": 2}, {"ok": 3}, {"ok": 4}, {"ok": 1}, {"ok": 2}]
    assert srv.connections == 3  # kept after the chunked one; the one read to its close and the closed one are not


@pytest.mark.fast
def test_a_broken_or_hostile_answer_is_one_clear_reason(raw: Any) -> None:
    scripts: dict[str, bytes | None] = {
        "/garbage": b"SSH-2.0-OpenSSH_9.2\r\n\r\n",
        "/headers": b"HTTP/1.1 200 OK\r\n" + b"x: y\r\n" * (MAX_HEAD_BYTES // 6 + 10),  # and no end of them
        "/gzip": _sized(b"\x1f\x8b\x08\x00", extra=b"content-encoding: gzip\r\n"),
        "/cut!": b'HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"ok"',
        "/nothing": None,
        "/moved": _sized(b"<html>moved</html>", "301 Moved Permanently", b"location: https://api.example.org/v1\r\n"),
        "/ok": _sized(OK),
    }
    srv = raw(lambda path: scripts[path])
    got = _posts(srv.url, ["/garbage", "/headers", "/gzip", "/cut!", "/nothing", "/moved", "/ok"])
    assert got[0].startswith("cannot reach provider: the provider's answer is not HTTP"), got[0]
    assert (
        got[1] == f"cannot reach provider: the provider's answer had no end of its headers in {MAX_HEAD_BYTES:,} bytes"
    )
    assert got[2] == "the provider's answer came gzip-encoded, where it was asked for plain"
    assert got[3].startswith("cannot reach provider: the connection was lost before the answer ended"), got[3]
    assert got[4].startswith("cannot reach provider: the connection was lost before the answer ended"), got[4]
    assert got[5] == (
        "provider answered HTTP 301, a redirect to https://api.example.org/v1: redirects are not followed; set the "
        "base URL to where it points"
    )
    assert got[6] == {"ok": 1}  # and the client still works
    assert srv.requests[-1].startswith(b"POST /ok ")  # the redirect was not followed


@pytest.mark.fast
def test_a_server_that_cannot_be_reached_is_named_with_its_address() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (got,) = _posts(f"http://127.0.0.1:{port}", ["/v1/chat/completions"])
    assert got.startswith(f"cannot reach provider: cannot connect to 127.0.0.1:{port}: ConnectionRefusedError"), got


@pytest.mark.fast
def test_a_header_that_would_end_its_line_is_not_sent(raw: Any) -> None:
    srv = raw(lambda path: _sized(OK))
    (got,) = _posts(srv.url, ["/a"], {"authorization": "Bearer k\r\nx-evil: 1"})
    assert got == "cannot reach provider: header 'authorization' holds a character a header cannot: not sent"
    assert srv.requests == []


@pytest.mark.fast
def test_a_connection_closed_while_idle_is_not_used_again(raw: Any) -> None:
    """A provider closes a connection it kept idle (its keep-alive timeout): the next call opens a new one and is
    answered, not failed."""
    srv = raw(lambda path: _sized(OK))

    async def run() -> list[Any]:
        c = JsonClient()
        got = [await c.post(srv.url + "/a", {}, {})]
        (x,) = c._pool._open
        assert x.transport is not None
        x.transport.close()  # as the server closing it would: the connection is lost while idle
        await asyncio.sleep(0.05)
        got.append(await c.post(srv.url + "/b", {}, {}))
        await c.close()
        return got

    assert asyncio.run(run()) == [{"ok": 1}, {"ok": 1}]
    assert srv.connections == 2


@pytest.mark.fast
def test_a_call_left_mid_answer_closes_its_connection(raw: Any) -> None:
    """A call cancelled by its deadline while the answer is still coming: its connection holds the rest of an
    answer, so it is closed, never given to the next call."""
    srv = raw(lambda path: b"HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\n{" if path == "/slow" else _sized(OK))

    async def run() -> list[Any]:
        c = JsonClient()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await c.post(srv.url + "/slow", {}, {})
        got = await c.post(srv.url + "/ok", {}, {})
        await c.close()
        return [got]

    assert asyncio.run(run()) == [{"ok": 1}]
    assert srv.connections == 2


@pytest.mark.fast
def test_no_more_connections_than_the_pool_allows(raw: Any) -> None:
    gate = threading.Event()

    def script(path: str) -> bytes:
        gate.wait(5)
        return _sized(OK)

    srv = raw(script)

    async def run() -> list[Any]:
        pool = Pool(2)

        async def one() -> bytes:
            async with pool.request("POST", srv.url + "/a", {}, b"{}") as answer:
                return await answer.readany()

        tasks = [asyncio.create_task(one()) for _ in range(5)]
        await asyncio.sleep(0.3)
        gate.set()
        out = await asyncio.gather(*tasks)
        pool.close()
        return out

    assert asyncio.run(run()) == [OK] * 5
    assert srv.most_open == 2 and srv.connections == 2


@pytest.mark.fast
def test_a_url_that_is_not_http_is_refused() -> None:
    async def run() -> str:
        with pytest.raises(WireError) as e:
            async with Pool(1).request("GET", "ftp://example.org/x", {}):
                pass
        return str(e.value)

    assert asyncio.run(run()) == "not an http(s) URL: ftp://example.org/x"


@pytest.mark.fast
def test_an_answer_read_slowly_is_held_in_the_kernel_not_in_memory(raw: Any) -> None:
    """A reader that takes its time: what comes meanwhile is buffered up to HIGH_WATER (and one read past it),
    then the socket is left unread; reading on resumes it, and the whole answer comes."""
    body = b"x" * (4 * 1024 * 1024)
    srv = raw(lambda path: _sized(body))

    async def run() -> tuple[int, int]:
        pool = Pool(1)
        async with asyncio.timeout(20), pool.request("POST", srv.url + "/big", {}, b"{}") as answer:
            (x,) = pool._open
            while not x._paused:  # the server writes it all at once: reading pauses past HIGH_WATER
                await asyncio.sleep(0.01)
            held = x._buffered
            got = 0
            while chunk := await answer.readany():
                got += len(chunk)
        pool.close()
        return held, got

    held, got = asyncio.run(run())
    assert got == len(body)
    assert HIGH_WATER < held <= HIGH_WATER + 512 * 1024, held


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, as files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


@pytest.mark.fast
def test_a_provider_over_tls_is_verified_and_its_connection_kept(
    raw: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTPS with the system's trust store (SSL_CERT_FILE points OpenSSL at another): a certificate it trusts is
    served call after call on one connection; one it does not is refused, and the reason names the address."""
    cert, key = _self_signed(tmp_path)
    srv = raw(lambda path: _sized(OK))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    url = srv.url.replace("http://", "https://")
    (untrusted,) = _posts(url, ["/v1/chat/completions"])
    assert untrusted.startswith(f"cannot reach provider: cannot connect to 127.0.0.1:{srv.server_address[1]}: "), (
        untrusted
    )
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted, untrusted
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    before = srv.connections
    assert _posts(url, ["/a", "/b"]) == [{"ok": 1}] * 2
    assert srv.connections - before == 1


@pytest.mark.fast
def test_a_connection_left_paused_with_its_answer_whole_serves_the_next_call(raw: Any) -> None:
    """An answer past HIGH_WATER that came whole while its caller was busy, then left unread: the connection went
    to the pool with its reading paused, and the next call on it waited for ever (a review's case)."""
    big = b"x" * (HIGH_WATER + 1000)
    whole = _sized(big)
    srv = raw(lambda path: (whole[:-2000], whole[-2000:]))  # its last 2,000 bytes alone: that read pauses and ends it

    async def run() -> int:
        pool = Pool(1)
        with pytest.raises(ValueError):
            async with asyncio.timeout(10), pool.request("POST", srv.url + "/a", {}, b"{}"):
                (x,) = pool._open
                while not x.complete:  # its last 2,000 bytes pass HIGH_WATER and end it: paused, and whole
                    await asyncio.sleep(0.01)
                assert x._paused
                raise ValueError("the caller gives up")
        got = 0
        async with asyncio.timeout(10), pool.request("POST", srv.url + "/b", {}, b"{}") as answer:
            while chunk := await answer.readany():
                got += len(chunk)
        pool.close()
        return got

    assert asyncio.run(run()) == len(big)  # not a hang
    assert srv.connections == 1


@pytest.mark.fast
def test_framing_and_trailers_are_capped_with_the_head(raw: Any) -> None:
    """Bytes that are neither head nor body (chunk extensions, trailers after the last chunk) count against the
    head's cap and a few bytes a byte of body: endless trailers once filled memory past the answer's cap."""
    chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    scripts = {
        "/trailers!": chunked + b"2\r\n{}\r\n0\r\n" + b"x-trailer: 1\r\n" * (MAX_HEAD_BYTES // 7),
        "/extension!": chunked + b"2;" + b"e" * (2 * MAX_HEAD_BYTES) + b"\r\n{}\r\n0\r\n\r\n",
        "/bytewise": chunked + b"1\r\n{\r\n" + b"1\r\n \r\n" * 100_000 + b"1\r\n}\r\n0\r\n\r\n",
    }
    srv = raw(lambda path: scripts[path])
    trailers, extension, bytewise = _posts(srv.url, ["/trailers!", "/extension!", "/bytewise"])
    assert trailers == extension, (trailers, extension)
    assert trailers.startswith("cannot reach provider: the provider's answer sent more than 65,536 bytes"), trailers
    assert bytewise == {}  # a body a byte a chunk is framing 5 bytes a byte: read


@pytest.mark.fast
def test_what_a_request_carries_is_what_http_can(raw: Any) -> None:
    """Credentials in the base URL go as Basic authorization (as aiohttp sent them); a header given twice in two
    cases goes once; a value past latin-1 is refused by name, not sent as question marks."""
    srv = raw(lambda path: _sized(OK))
    url = srv.url.replace("http://", "http://me:secret@")
    assert _posts(url, ["/a"], {"Content-Type": "application/json; charset=utf-8"}) == [{"ok": 1}]
    (refused,) = _posts(srv.url, ["/b"], {"authorization": "Bearer k\u2019ey"})
    assert refused == "cannot reach provider: header 'authorization' holds a character HTTP cannot carry: not sent"
    (head,) = srv.requests
    assert b"\r\nAuthorization: Basic bWU6c2VjcmV0" in head, head
    assert head.lower().count(b"content-type:") == 1 and b"charset=utf-8" in head, head


@pytest.mark.fast
def test_an_answer_read_to_its_close_is_cut_when_the_connection_is_reset(raw: Any) -> None:
    """An answer without a length ends with its connection: closed, it is whole; reset, it is cut."""

    def script(path: str) -> bytes | None:
        return b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"ok": '

    srv = raw(script)
    srv.reset = True  # the handler resets instead of closing

    async def run() -> str:
        c = JsonClient()
        with pytest.raises(ProviderError) as e:
            await c.post(srv.url + "/cut!", {}, {})
        await c.close()
        return str(e.value)

    assert asyncio.run(run()).startswith("cannot reach provider: the connection was lost before the answer ended")


@pytest.mark.fast
def test_one_client_serves_one_event_loop_after_another(raw: Any) -> None:
    """A CLI runs asyncio.run more than once with one provider: each loop gets connections of its own."""
    srv = raw(lambda path: _sized(OK))
    c = JsonClient()
    assert asyncio.run(c.post(srv.url + "/a", {}, {})) == {"ok": 1}
    assert asyncio.run(c.post(srv.url + "/b", {}, {})) == {"ok": 1}
    asyncio.run(c.close())
    assert srv.connections == 2 and c._pool._open == set()


class _Sink:
    """A transport that keeps nothing: an exchange fed by hand, each read as the test chooses to cut them."""

    def writelines(self, data: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


@pytest.mark.fast
@pytest.mark.parametrize("reads", [1, 3, 1000])
def test_an_answer_past_the_framing_cap_is_refused_however_its_bytes_are_cut_into_reads(reads: int) -> None:
    """Whether the answer's end came in the read that passed the cap is the network's timing: refused either way
    (a CI run read a whole answer with 128 KiB of chunk extension in one read and took it)."""
    from npcmind.providers.wire import _Exchange

    whole = (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2;"
        + b"e" * (2 * MAX_HEAD_BYTES)
        + b"\r\n{}\r\n0\r\n\r\n"
    )

    async def read() -> bytes:
        x = _Exchange()
        x.connection_made(_Sink())  # type: ignore[arg-type]
        x.send(b"", b"")
        step = -(-len(whole) // reads)
        for at in range(0, len(whole), step):
            x.data_received(whole[at : at + step])
        got = b""
        while chunk := await x.chunk():
            got += chunk
        return got

    with pytest.raises(WireError, match="neither \\(chunk framing, trailers\\)"):
        asyncio.run(read())
