"""The decision SDK's I/O: executes the scheduler's requests with httpx on worker threads, so the network
never blocks the game loop; their answers wait in a queue until the game's next ``tick()`` applies them. A
streamed decide answer (NDJSON, docs/streaming.md) goes into that queue chunk by chunk as its bytes arrive,
so each entity's decision is applied at the first tick after its line came, not after the whole answer."""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import queue
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from npcmind_client.limits import (
    IDENTITY,
    MAX_ANSWER_BYTES,
    MAX_ERROR_BYTES,
    MAX_MANIFEST_BYTES,
    MAX_STREAM_BYTES,
    MIN_CHUNK_BYTES,
    TooLargeError,
    body_bytes,
    pieces,
    too_large,
    too_large_body,
)
from npcmind_client.policy import MAX_BYTES, Policy, PolicyError
from npcmind_client.session import session_token
from npcmind_client.timings import deadline_timeout

if TYPE_CHECKING:
    from npcmind_client.scheduler import FailKind

GZIP_FROM = 16 * 1024  # bodies from this size are sent gzip-compressed (on a worker thread)
DEFAULT_TIMEOUT_S = 15.0  # the service's default provider deadline (10 s) and a margin, until it tells its own
TIMEOUT_MARGIN_S = 5.0
NDJSON = "application/x-ndjson"  # the media type of a streamed decide answer

Answer = tuple[int, Any, dict[str, str]]


@dataclass(frozen=True, slots=True)
class Done:
    """What became of a request: an ``answer``, or no answer (``failed``: ``timeout`` or ``unreachable``)."""

    ref: str
    answer: Answer | None
    failed: FailKind = "unreachable"  # read only when there is no answer
    why: str = ""


@dataclass(frozen=True, slots=True)
class Chunk:
    """Bytes of a streamed answer as they arrived (the scheduler assembles its lines: they may cut anything)."""

    ref: str
    data: bytes


@dataclass(frozen=True, slots=True)
class End:
    """A streamed answer's connection closed, after its last chunk; ``why``: what cut it, when something did."""

    ref: str
    failed: FailKind | None = None  # the stream broke off: no line within the timeout, or the connection lost
    why: str = ""


Outcome = Done | Chunk | End


def encode(body: Any) -> bytes:
    """The body as JSON, made now on the game's thread (a snapshot: the game may change its dicts from the
    next frame on). A NaN or an infinity is written null, as JSON has none (the service then names the field);
    TypeError or ValueError for what JSON cannot carry."""
    try:
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except ValueError:
        try:
            return json.dumps(_finite(body), separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
        except RecursionError:
            raise ValueError("a value holds itself (a circular reference)") from None


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _payload(data: bytes) -> Any:
    """An answer's JSON, or its text as an error message when it has none (a proxy's page; an integer of more
    than 4,300 digits, which Python's JSON refuses in linear time)."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return {"error": {"message": data[:200].decode("utf-8", "replace")}}


def read_answer(r: httpx.Response, what: str, cap: int = MAX_ANSWER_BYTES, name: str = "MAX_ANSWER_BYTES") -> Answer:
    """A whole answer: its status, its JSON read within its cap (an error's within MAX_ERROR_BYTES), its
    headers; a body past its cap is the error shape naming the cap, so every reader of errors says it."""
    if not 200 <= r.status_code < 300:
        cap, name = MAX_ERROR_BYTES, "MAX_ERROR_BYTES"
    try:
        payload = _payload(body_bytes(r, cap, what, name))
    except TooLargeError as e:
        payload = too_large_body(str(e))
    except (ValueError, zlib.error) as e:
        payload = {"error": {"message": f"{what}: the answer cannot be read ({e})"}}
    return r.status_code, payload, dict(r.headers)


def _session_token(future: Future[Answer | None] | None) -> str | None:
    """The token of a POST /v1/session answer, if it brought one."""
    try:
        answer = future.result(timeout=0) if future is not None else None
    except Exception:
        return None
    return None if answer is None else session_token(answer[0], answer[1])


class Transport:
    """HTTP for one client: requests on ``workers`` threads, each after the requests it must follow."""

    def __init__(
        self,
        base_url: str,
        timeout_s: float | None,
        workers: int,
        policy_max_bytes: int = MAX_BYTES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """``transport``: httpx's, injected by the game (a proxy, ``httpx.MockTransport``); the network otherwise."""
        self._http = httpx.Client(base_url=base_url, transport=transport)
        self.policy_max_bytes = policy_max_bytes
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="npcmind-decide")
        self._given = timeout_s is not None
        # given: kept; else the service's provider deadline plus a margin, once GET /v1/health told it
        self.timeout_s = timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S
        self._futures: dict[str, Future[Answer | None]] = {}
        # a request's ref once it is done; a streamed answer's chunks and end as they come, before that ref
        self._done: queue.SimpleQueue[str | Chunk | End] = queue.SimpleQueue()
        self._stopped: set[str] = set()  # streams the scheduler ended: their workers read no more

    def send(
        self,
        ref: str,
        method: str,
        path: str,
        raw: bytes | None,
        headers: dict[str, str],
        after: list[str],
        stream: bool = False,
    ) -> None:
        """Start request ``ref``; its outcome comes out of ``outcomes()`` once it is done (``stream``: its
        answer asked as NDJSON, whose chunks come out as they arrive)."""
        first = {r: f for r in after if (f := self._futures.get(r)) is not None}
        future = self._pool.submit(self._call, method, path, raw, dict(headers), first, ref if stream else None)
        self._futures[ref] = future
        future.add_done_callback(lambda _: self._done.put(ref))

    def outcomes(self) -> list[Outcome]:
        """What happened since the last call, in order: streamed chunks and ends, and the requests done."""
        out: list[Outcome] = []
        while True:
            try:
                item = self._done.get_nowait()
            except queue.Empty:
                return out
            if not isinstance(item, str):
                out.append(item)
                continue
            ref = item
            self._stopped.discard(ref)  # its worker is done: a stop that came after is forgotten
            future = self._futures.pop(ref, None)
            if future is None or future.cancelled():
                continue
            try:
                answer = future.result()
                if answer is not None:  # None: a stream, whose end is out already
                    out.append(Done(ref, answer))
            except httpx.TimeoutException:
                out.append(Done(ref, None, "timeout"))
            except Exception as exc:  # refused connection, DNS, a reset: the service is unreachable
                out.append(Done(ref, None, "unreachable", str(exc) or type(exc).__name__))

    def wait(self, timeout_s: float) -> None:
        """Block until every request started so far is done, or ``timeout_s`` passed."""
        import time

        deadline = time.monotonic() + timeout_s
        for f in list(self._futures.values()):
            with contextlib.suppress(Exception):  # a failure is an outcome like an answer
                f.result(timeout=max(0.0, deadline - time.monotonic()))

    def call(
        self, method: str, path: str, headers: dict[str, str], cap: int = MAX_ANSWER_BYTES, name: str = ""
    ) -> Answer:
        """One request on the caller's thread (a debug view's, on demand), its answer read within ``cap``."""
        headers = {**headers, **IDENTITY}
        if path.startswith("/v1/policy"):
            return self._policy(method, path, headers)
        with self._http.stream(method, path, headers=headers, timeout=self.timeout_s) as r:
            return read_answer(r, f"{method} {path.split('?')[0]}", cap, name or "MAX_ANSWER_BYTES")

    def stop(self, ref: str) -> None:
        """Read no more of request ``ref``'s stream (the scheduler ended it): its worker closes the connection
        at its next chunk."""
        self._stopped.add(ref)

    def _call(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: dict[str, str],
        after: dict[str, Future[Answer | None]],
        stream: str | None = None,
    ) -> Answer | None:
        """On a worker: wait for the requests this one follows (a decide request waits for the telemetry sent
        before it, so its prompt shows the scene as the game last told it), then send it. ``stream``: the
        ref of a decide request whose answer is asked as a stream (None when it came as one: ``_stream``).
        Every answer is read within its cap (``npcmind_client.limits``), here, off the game's thread."""
        for f in after.values():
            with contextlib.suppress(Exception):
                f.result(timeout=self.timeout_s)
        auth = headers.get("authorization", "")
        if auth.startswith("Bearer @"):  # the token the session request sent just before brings
            token = _session_token(after.get(auth[len("Bearer @") :]))
            if token is None:
                return 401, {"error": {"code": "no_session", "message": "no session could be opened"}}, {}
            headers["authorization"] = f"Bearer {token}"
        headers.update(IDENTITY)
        if body is not None:
            headers["content-type"] = "application/json"
            if len(body) >= GZIP_FROM:  # a large scene's telemetry: about a tenth of the bytes, for about 1 ms
                body = gzip.compress(body, compresslevel=1)
                headers["content-encoding"] = "gzip"
        if path.startswith("/v1/policy"):
            return self._policy(method, path, headers)
        if stream is not None:
            return self._stream(stream, method, path, body, headers)
        cap, name = (MAX_MANIFEST_BYTES, "MAX_MANIFEST_BYTES") if path == "/v1/manifest" else (MAX_ANSWER_BYTES, "")
        with self._http.stream(method, path, content=body, headers=headers, timeout=self.timeout_s) as r:
            answer = read_answer(r, f"{method} {path}", cap, name or "MAX_ANSWER_BYTES")
        if path == "/v1/health" and not self._given:
            deadline = deadline_timeout(answer[0], answer[1])
            if deadline is not None:  # before the decide requests that wait for it start
                self.timeout_s = deadline + TIMEOUT_MARGIN_S
        return answer

    def _stream(self, ref: str, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> Answer | None:
        """A decide request asking for NDJSON: a 200 in it is handed on chunk by chunk as the bytes arrive, then
        its ``End`` (also when the connection is lost midway: the scheduler keeps the lines, the rest fall
        back), and None; any other answer (an older service's JSON, an error status) is today's answer. The
        stream is read no further than MAX_STREAM_BYTES, nor once the scheduler ended it (``stop``)."""
        headers["accept"] = NDJSON
        streaming, why, size = False, "", 0
        failed: FailKind | None = None
        try:
            with self._http.stream(method, path, content=body, headers=headers, timeout=self.timeout_s) as r:
                media = r.headers.get("content-type", "").split(";")[0].strip().lower()
                if r.status_code != 200 or media != NDJSON:
                    return read_answer(r, f"{method} {path}")
                streaming = True
                for data in pieces(r):
                    if ref in self._stopped:
                        break
                    size += max(len(data), MIN_CHUNK_BYTES)  # at most 2,048 chunks however small
                    if size > MAX_STREAM_BYTES:
                        why = too_large(f"{method} {path}, a stream", MAX_STREAM_BYTES, "MAX_STREAM_BYTES")
                        break
                    if data:
                        self._done.put(Chunk(ref, data))
        except Exception as exc:  # a reset, a timeout between lines, the service killed: the stream is cut
            if not streaming:
                raise  # no answer at all: a failure, as today
            failed = "timeout" if isinstance(exc, httpx.TimeoutException) else "unreachable"
            why = str(exc) or type(exc).__name__
        self._stopped.discard(ref)
        self._done.put(End(ref, failed, why))
        return None

    def _policy(self, method: str, path: str, headers: dict[str, str]) -> Answer:
        """GET /v1/policy, its body streamed and read no further than one byte past ``policy_max_bytes`` (after
        decompression), and loaded here, on the worker, not in the game's ``tick()``: a 200 answers the loaded
        ``Policy``, or the ``PolicyError`` saying why it cannot be used; any other status its JSON."""
        with self._http.stream(method, path, headers=headers, timeout=self.timeout_s) as r:
            if r.status_code != 200:
                return read_answer(r, f"{method} /v1/policy")
            try:
                data = body_bytes(r, self.policy_max_bytes, "GET /v1/policy", "policy_max_bytes")
            except TooLargeError:
                error = PolicyError(
                    f"GET /v1/policy: the body is larger than {self.policy_max_bytes:,} bytes (policy_max_bytes), "
                    "not read past that"
                )
                return r.status_code, error, dict(r.headers)
            except (ValueError, zlib.error) as e:
                return r.status_code, PolicyError(f"GET /v1/policy: the body cannot be read ({e})"), dict(r.headers)
        try:
            loaded: Policy | PolicyError = Policy.load(data, max_bytes=self.policy_max_bytes)
        except PolicyError as e:
            loaded = e
        return r.status_code, loaded, dict(r.headers)

    def close(self) -> None:
        """Stop the workers and close the connection, without waiting for answers."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()
