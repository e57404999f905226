"""One pooled JSON-over-HTTP client for provider adapters, mapping every transport failure to ProviderError."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from npcmind.config import MAX_CONCURRENT_CALLS
from npcmind.providers.base import ProviderError
from npcmind.providers.pace import ReadPace
from npcmind.providers.wire import Answer, Pool, WireError
from npcmind_client.params import error_text, is_html

HOLD_MIN_S = 0.002  # a shorter pause would cost more than the reads it saves
MAX_WAIT_S = 60.0  # a longer Retry-After is read as this: the game should not lose its model for minutes
# an answer past this is no model's answer to a batch (a streamed one of 4,096 tokens, each in its own event of
# about 250 bytes, is 1 MB): read no further, so a provider gone wrong cannot fill the service's memory
MAX_ANSWER_BYTES = 8 * 1024 * 1024
MAX_EVENT_BYTES = 256 * 1024  # of one server-sent event, or one line of the stream: a model's is about 250 bytes
MAX_EVENT_LINES = 4096  # data lines of one server-sent event (a model's has one)
MAX_ERROR_BYTES = 64 * 1024  # of an error answer, what is read to say what it was


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a rate-limited provider asked for: ``retry-after-ms`` (OpenAI), else ``retry-after`` in seconds
    (OpenAI, Anthropic); an HTTP date or anything else unreadable counts as not given."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            wait = float(raw) * scale
        except ValueError:
            continue
        if wait == wait and wait > 0:  # not NaN
            return min(wait, MAX_WAIT_S)
    return None


_JSON = {"content-type": "application/json"}


class JsonClient:
    """Keeps connections to one provider open across calls (a new TLS handshake per decision is slow).

    Its pool holds a connection for each of the ``calls`` the service makes at once, and one for the start-up
    check: a smaller pool would make calls past it wait for a connection, unseen, against their deadline."""

    def __init__(self, calls: int = MAX_CONCURRENT_CALLS) -> None:
        self._pool = Pool(calls + 1)

    async def post(
        self, url: str, body: dict[str, Any], headers: dict[str, str], typed: msgspec.json.Decoder[Any] | None = None
    ) -> Any:
        """POST JSON and return the decoded JSON answer; anything else is a ProviderError. With ``typed``, an answer
        of that decoder's shape comes as its struct (one strict pass that skips, unchecked, what it does not
        read), any other as plain JSON, for the adapter's tolerant reading."""
        data = msgspec.json.encode(body)
        try:
            async with self._pool.request("POST", url, {**_JSON, **headers}, data) as resp:
                status = resp.status
                raw = await _capped(resp, MAX_ANSWER_BYTES if status < 300 else MAX_ERROR_BYTES, status < 300)
                wait = retry_after(resp.headers) if status in (429, 503, 529) else None  # 529: Anthropic overloaded
                if status >= 300:
                    raise _status_error(status, raw, wait, resp.headers.get("location"))
        except WireError as e:
            raise ProviderError(f"cannot reach provider: {e}") from None
        if typed is not None:
            try:
                return typed.decode(raw)
            except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):  # read loosely, or said why not
                pass
        return _decoded(raw)

    @contextlib.asynccontextmanager
    async def stream(self, url: str, body: dict[str, Any], headers: dict[str, str]) -> AsyncIterator[Streamed]:
        """POST JSON asking for a stream, and read the answer as it comes: server-sent events, or the whole
        JSON document of a server that answered unstreamed. An HTTP error status raises ProviderError exactly
        as ``post`` does, before anything is read; a connection lost mid-answer raises it from the reading."""
        data = msgspec.json.encode(body)
        try:
            async with self._pool.request("POST", url, {**_JSON, **headers}, data) as resp:
                if resp.status >= 300:
                    wait = retry_after(resp.headers) if resp.status in (429, 503, 529) else None
                    raw = await _capped(resp, MAX_ERROR_BYTES, False)
                    raise _status_error(resp.status, raw, wait, resp.headers.get("location"))
                if resp.content_type in ("application/json", "text/html"):  # it did not stream (or is no API)
                    yield Streamed(_decoded(await _capped(resp, MAX_ANSWER_BYTES, True)), resp)
                else:  # text/event-stream, or whatever a proxy calls it
                    _plain(resp)
                    yield Streamed(None, resp)
        except WireError as e:
            raise ProviderError(f"cannot reach provider: {e}") from None

    async def status_of(self, url: str, headers: dict[str, str], timeout_s: float = 5) -> tuple[int, Any]:
        """GET a small JSON document: its HTTP status and decoded body (its text when it is not JSON: an HTML
        page says the URL is not an API's); a ProviderError when the server cannot be reached."""
        try:
            async with asyncio.timeout(timeout_s), self._pool.request("GET", url, headers, connect_s=timeout_s) as resp:
                raw = await _capped(resp, MAX_ERROR_BYTES, False)
                status = resp.status
        except TimeoutError:
            raise ProviderError(f"cannot reach provider: no answer in {timeout_s:g} s") from None
        except WireError as e:
            raise ProviderError(f"cannot reach provider: {e}") from None
        try:
            return status, msgspec.json.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            return status, raw[:1000].decode("utf-8", "replace")

    async def close(self) -> None:
        """Close pooled connections."""
        self._pool.close()


@dataclass(slots=True)
class Streamed:
    """A provider's answer to a streamed call: its events as they come, or, from a server that ignored the
    ask to stream, the whole decoded answer (``whole``), which the adapter reads as an unstreamed one."""

    whole: Any
    _resp: Answer

    async def reads(self, pace: ReadPace | None = None) -> AsyncGenerator[list[bytes], None]:
        """The data of the server-sent events each read of the socket brought, read by read (the ``event:`` names
        are left out: every provider's data says its own type; a read that ends no event gives none). With a
        ``pace``, the socket is read when it says (providers/pace.py): the reader handles each read's events
        together; the next read's time is counted from when the read before came, so the time its events took to
        handle is not added to a part's wait. A connection lost mid-answer is a ProviderError."""
        data: list[bytes] = []
        partial = bytearray()  # the last line, not yet ended: nothing before it is ever read again
        content = self._resp
        loop = asyncio.get_running_loop()
        held = _Held(self._resp)
        size = 0
        woke = loop.time()  # when the last read came: the next hold counts from it, not from when it was handled
        try:
            while True:
                if pace is not None:  # what came while the read before was handled waits no longer for it
                    held.until(pace.next_read(woke))
                chunk = await content.readany()  # whatever has come: often several events at once
                woke = loop.time()
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise ProviderError(f"the provider's stream passed {MAX_ANSWER_BYTES:,} bytes: not read further")
                end = chunk.rfind(b"\n")
                if end < 0:
                    partial += chunk
                    _event_fits(len(partial), data)
                    continue
                lines = bytes(partial) + chunk[:end] if partial else chunk[:end]
                partial = bytearray(chunk[end + 1 :])
                events = _sse_events(lines, data)
                _event_fits(len(partial), data)
                if events:
                    yield events
        except WireError as e:
            raise ProviderError(f"the connection was lost mid-answer: {e}") from None
        finally:
            held.release()  # a connection goes back to the pool reading, however the answer ended
        _sse_line(bytes(partial).rstrip(b"\r"), data)  # a last line, or event, left unended
        if event := _sse_line(b"", data):
            yield [event]


def _event_fits(partial: int, data: list[bytes]) -> None:
    """A ProviderError when one event passes its bound: a model's event is a token or a few (about 250 bytes),
    and an unended one would otherwise be held, and its lines looked at again, at every read."""
    if partial > MAX_EVENT_BYTES or len(data) > MAX_EVENT_LINES or sum(map(len, data)) > MAX_EVENT_BYTES:
        raise ProviderError(
            f"an event of the provider's stream passed {MAX_EVENT_BYTES:,} bytes or {MAX_EVENT_LINES:,} lines: "
            "not read further"
        )


class _Held:
    """A response's socket left unread until a time: its transport paused, so the kernel keeps what comes and
    the next read takes all of it at once (not woken, parsed and buffered token by token), then resumed by a
    timer, so that the reader, waiting for data meanwhile, wakes once, when the bytes are there. A transport the
    connection paused itself (past wire.HIGH_WATER unread) is left to the connection, which resumes it as it is
    read."""

    def __init__(self, resp: Answer) -> None:
        self._resp = resp
        self._paused: asyncio.Transport | None = None  # the transport this paused, until resumed
        self._wake: asyncio.TimerHandle | None = None

    def until(self, when: float) -> None:
        """Read nothing before the event loop's time ``when`` (at once if it is past or too near)."""
        loop = asyncio.get_running_loop()
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        if when - loop.time() < HOLD_MIN_S:
            self.release()
            return
        if self._paused is None:
            transport = self._resp.transport  # None once the connection is gone
            if transport is None or transport.is_closing() or not transport.is_reading():
                return  # gone, or held by the connection's own flow control, which resumes it
            transport.pause_reading()
            self._paused = transport
        self._wake = loop.call_at(when, self.release)

    def release(self) -> None:
        """Read again (what came meanwhile, in one read)."""
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        transport, self._paused = self._paused, None
        if transport is not None and not transport.is_closing() and not transport.is_reading():
            transport.resume_reading()


def _sse_events(text: bytes, data: list[bytes]) -> list[bytes]:
    """The data of the events ``text`` ends: whole lines (the last one's line break cut off), each read once;
    the lines of an event not yet ended are kept in ``data``. Providers send one ``data:`` line an event, ended
    by a blank line: those are cut whole; anything else (other fields, several data lines, carriage returns,
    an event begun in a read before) goes line by line."""
    if data or b"\r" in text:
        return [event for line in text.split(b"\n") if (event := _sse_line(line.rstrip(b"\r"), data))]
    *blocks, tail = text.split(b"\n\n")
    events: list[bytes] = []
    for block in blocks:
        if block.startswith(b"data: ") and b"\n" not in block:
            if len(block) > 6:  # an empty event's data is left out, as _sse_line leaves it out
                events.append(block[6:])
            continue
        for line in block.split(b"\n"):
            _sse_line(line, data)
        if event := _sse_line(b"", data):
            events.append(event)
    for line in tail.split(b"\n"):  # whole lines of the event after the last blank line: it may end here
        if event := _sse_line(line, data):
            events.append(event)
    return events


def _sse_line(line: bytes, data: list[bytes]) -> bytes | None:
    """One line of server-sent events: a ``data:`` line is kept in ``data``; a blank line ends the event,
    whose data it returns (and empties ``data``); other fields are left out."""
    if not line:
        event = b"\n".join(data) if data else None
        data.clear()
        return event
    if line.startswith(b"data:"):
        data.append(line[5:].removeprefix(b" "))
    return None


async def _capped(resp: Answer, limit: int, strict: bool) -> bytes:
    """The body, read up to ``limit`` bytes: past it, a ProviderError (``strict``: an answer) or the bytes so far
    (an error answer, read only to say what it was)."""
    _plain(resp)
    length = resp.content_length
    if strict and length is not None and length > limit:
        raise _too_long(limit)
    chunks: list[bytes] = []  # joined once at the end: a growing buffer reallocates, and glibc keeps what it grew
    size = 0
    while chunk := await resp.readany():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            if strict:
                raise _too_long(limit)
            return b"".join(chunks)[:limit]
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _plain(resp: Answer) -> None:
    """A ProviderError for a body sent compressed: it was asked for plain (wire.py), and is not unpacked."""
    coding = resp.headers.get("content-encoding", "").strip().lower()
    if coding not in ("", "identity"):
        raise ProviderError(f"the provider's answer came {coding[:40]}-encoded, where it was asked for plain")


def _too_long(limit: int) -> ProviderError:
    return ProviderError(f"the provider's answer passed {limit:,} bytes: not read further")


def _status_error(status: int, raw: bytes, wait: float | None, location: str | None = None) -> ProviderError:
    """The error for an HTTP error answer, with the provider's body and the wait it asked for; a redirect is not
    followed (a model call sent again elsewhere, unseen): it says where it pointed."""
    if status < 400:
        where = f" to {location[:200]}" if location else ""
        return ProviderError(
            f"provider answered HTTP {status}, a redirect{where}: redirects are not followed; "
            "set the base URL to where it points",
            status,
        )
    try:
        answer: Any = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        answer = None
    return ProviderError(f"provider answered HTTP {status}: {error_text(raw, answer)}", status, answer, wait)


def _decoded(raw: bytes) -> Any:
    """A successful answer's JSON; anything else is a ProviderError that says what it was."""
    try:
        return msgspec.json.decode(raw)
    except RecursionError:  # valid JSON nested thousands deep: no answer of a model's
        raise ProviderError("provider answered with JSON nested too deep to be an answer") from None
    except msgspec.DecodeError:
        what = (
            "an HTML page: the base URL is likely not the API's"
            if is_html(raw[:100].decode("utf-8", "replace"))
            else "not JSON"
        )
        raise ProviderError(f"provider answered with a body that is {what}") from None
