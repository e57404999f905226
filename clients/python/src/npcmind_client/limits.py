"""What the SDK reads of the service at most, in one place (README "Limits"): a hostile or broken server (a
proxy's page, a 600 MB error, an endless stream) costs the game a bounded read and a clear error, never its
memory or its frame. Every body is read in chunks and counted: a Content-Length is never trusted alone."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from typing import Any

import httpx

from npcmind_client.errors import TooLargeError

MAX_ANSWER_BYTES = 1024 * 1024  # a JSON answer: a decide answer of 16 decisions is ~10 kB, a manifest less
MAX_MANIFEST_BYTES = 4 * 1024 * 1024  # GET /v1/manifest: the operator's whole manifest (64 types of 64 fields)
MAX_ERROR_BYTES = 64 * 1024  # an error answer (any status but 2xx and 304): only its message is read
MAX_STREAM_BYTES = 2 * 1024 * 1024  # a streamed decide answer as a whole: 17 lines of at most 64 KiB each
MAX_STRAY_LINES = 16  # lines of a stream that answer no entity it asked (unknown ids, repeats, malformed)
MAX_PROMPT_BYTES = 4 * 1024 * 1024  # GET /v1/prompt (last_prompt): the prompt and the model's answer
MAX_STEP_BYTES = 4 * 1024 * 1024  # a dialogue step (POST /npcs/{id}/process): its tape and instruction
MAX_KEYS_BYTES = 64 * 1024  # GET /v1/keys: a few public keys
MAX_MODEL_BYTES = 8 * 1024 * 1024  # a cortex's (the game's local model's) answer: as the service's providers
TICK_STREAM_BYTES = 256 * 1024  # streamed bytes a tick() applies at most; the rest waits for the next frame
MIN_CHUNK_BYTES = 1024  # what a chunk of a stream counts for at least: a trickle of tiny chunks is bounded too
TOO_LARGE = "answer_too_large"  # the error code of an answer the SDK stopped reading at its cap
IDENTITY = {"accept-encoding": "identity"}  # npcmind never compresses an answer: a body is counted as sent


def too_large(what: str, cap: int, name: str) -> str:
    """The message of a body read no further than its cap."""
    return f"{what}: the answer passed {cap:,} bytes ({name}, the SDK's cap): not read past that"


def capped(chunks: Iterable[bytes], cap: int, what: str, name: str) -> bytes:
    """The bytes of a body read chunk by chunk, or TooLargeError once they pass ``cap`` (read no further)."""
    data = bytearray()
    for chunk in chunks:
        data += chunk
        if len(data) > cap:
            raise TooLargeError(too_large(what, cap, name))
    return bytes(data)


def is_too_large(body: Any) -> bool:
    """Whether an answer is the error shape of a body read no further than its cap."""
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and error.get("code") == TOO_LARGE


def too_large_body(message: str) -> dict[str, Any]:
    """The service's error shape for an answer the SDK stopped reading: every reader of errors says it."""
    return {"error": {"code": TOO_LARGE, "message": message}}


def body_bytes(r: httpx.Response, cap: int, what: str, name: str) -> bytes:
    """A response's body read chunk by chunk and counted, TooLargeError past ``cap`` (read no further)."""
    return capped(pieces(r), cap, what, name)


def pieces(r: httpx.Response) -> Iterator[bytes]:
    """A body's pieces as they arrive, as sent or decompressed here in pieces of at most 64 KiB, so a gzip
    bomb is counted as it unpacks, not after; ValueError for an encoding the SDK does not read."""
    if r.is_stream_consumed:  # a response made whole (a game's httpx.MockTransport): in memory already
        return iter([r.content])
    coding = r.headers.get("content-encoding", "identity").strip().lower()
    if coding in ("", "identity"):
        return r.iter_raw()
    if coding not in ("gzip", "deflate"):
        raise ValueError(f"the answer is {coding}-encoded, which the SDK does not read (it asks for identity)")
    return _inflate(r.iter_raw(), 47 if coding == "gzip" else 15)


def _inflate(raw: Iterator[bytes], wbits: int) -> Iterator[bytes]:
    """Decompressed pieces of at most 64 KiB each, however much one compressed chunk unpacks to."""
    unpack = zlib.decompressobj(wbits=wbits)
    for chunk in raw:
        data = chunk
        while True:
            piece = unpack.decompress(data, 64 * 1024)
            yield piece
            data = unpack.unconsumed_tail
            if not data and len(piece) < 64 * 1024:
                break
