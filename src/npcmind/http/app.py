"""The HTTP layer: Litestar routes that read raw bodies, decode with msgspec and answer JSON errors only.

Handlers take the raw body instead of Litestar's own data binding so that a 422 lists every problem
by path (msgspec and Litestar stop at the first), while valid bodies still decode in one msgspec pass.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import re
import zlib
from collections.abc import AsyncIterator, Callable
from functools import cache, lru_cache, partial
from importlib import resources
from typing import Annotated, Any
from urllib.parse import unquote_to_bytes

import msgspec
from litestar import Litestar, Request, Response
from litestar.datastructures import State
from litestar.exceptions import HTTPException
from litestar.params import Parameter
from litestar.response import Stream
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from npcmind import A2G_VERSION, __version__
from npcmind.context.checks import misshaped_telemetry_problems, scope_problems, telemetry_problems
from npcmind.decide.pipeline import DecidePipeline, SessionContext
from npcmind.decide.validate import partial_problems
from npcmind.failures import FailureLog
from npcmind.http.browsers import browser_origins
from npcmind.http.hosts import host_check
from npcmind.http.hot import HotRoutes
from npcmind.http.openapi import openapi_document
from npcmind.http.routes import RouteTable, Streamed
from npcmind.protocol.a2g import (
    MAX_ID,
    ContextRequest,
    ContextResponse,
    DecideEnd,
    DecideRequest,
    DecideResponse,
    Decision,
    DeclaredName,
    EndedResponse,
    HealthResponse,
    ManifestResponse,
    PolicyDocument,
    PromptView,
    ReportRequest,
    ReportResponse,
    ScopeDefinition,
    SessionRequest,
    SessionResponse,
    ShadowReport,
    TelemetryEntity,
    TelemetryRequest,
    TelemetryResponse,
)
from npcmind.protocol.errors import ApiError, Problem, choices
from npcmind.protocol.npc import KeysResponse, NPCProcessRequest, NPCProcessResponse, PublicKey
from npcmind.protocol.validate import decode_loosely, parse, well_shaped
from npcmind.providers.select import describe
from npcmind.service import Service
from npcmind.sessions.guard import key_holder, key_owner
from npcmind.sessions.tokens import TokenClaims
from npcmind.storage import StoreError

log = logging.getLogger("npcmind.http")
JSON = "application/json"
NDJSON = "application/x-ndjson"  # a streamed decide answer: one JSON document a line (docs/streaming.md)
# a proxy must pass each line on as it comes (nginx buffers a response unless told not to)
STREAM_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
# the media ranges of an Accept that are read: a browser sends under ten, and an Accept is read before any token is
# checked; 800,000 of them (an 8 MB header, which uvicorn takes) held the event loop for a second a request
MAX_RANGES = 64
JSON_MEDIA = re.compile(r"application/(json|[a-z0-9][a-z0-9!#$&^_.+-]*\+json)")  # RFC 6838's names, lowercased
# GET /: a page for a person that shows what the model saw; it holds no data, so it needs no token
PAGE = (resources.files("npcmind.http") / "page.html").read_bytes()
REPLAY_PAGE = (resources.files("npcmind.http") / "replay.html").read_bytes()  # shows a report file: docs/replay.md
# the replay page fetches nothing: the report it shows, opened from a file, cannot leave the browser
REPLAY_HEADERS = {
    "content-security-policy": "default-src 'none'; img-src data:; script-src 'unsafe-inline'; "
    "style-src 'unsafe-inline'"
}
PAGE_HEADERS = {"content-security-policy": "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'"}
# GET /demo: the demo game's built page and script, package data of npcmind.demo, read here and not imported
# (the demo's command starts the scripted model server, a layer above this one)
DEMO_HEADERS = {"content-security-policy": "default-src 'self'; img-src 'self' data:; style-src 'unsafe-inline'"}


@cache
def demo_asset(name: str) -> bytes:
    """A file of the built demo (index.html, demo.js), read once."""
    return (resources.files("npcmind.demo") / name).read_bytes()


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response[bytes]:
    """Encode with msgspec (fast, and the same encoder the wire types were made for)."""
    return Response(content=msgspec.json.encode(obj), status_code=status, media_type=JSON, headers=headers)


async def body_of(request: Request[Any, Any, Any]) -> bytes:
    """The body, gunzipped when sent with `content-encoding: gzip`, without a UTF-8 byte order mark: JSON has
    none, but .NET's default UTF-8 encoder and some Windows tools write one, and a game should not fail on it."""
    body = await request.body()
    if request.headers.get("content-encoding", "").strip().lower() == "gzip":
        limit = request.route_handler.resolve_request_max_body_size() or len(body)
        body = _gunzip(body, limit, request.url.path)
    return body[3:] if body[:3] == b"\xef\xbb\xbf" else body


def _gunzip(body: bytes, limit: int, path: str) -> bytes:
    """A gzip body (a large scene's telemetry is a tenth of its size so), never more than ``limit`` bytes once
    unpacked: the body limit holds for what the service reads, so a small bomb is refused like a large body."""
    unpack = zlib.decompressobj(wbits=31)  # gzip's header and checksum, not a bare zlib stream
    try:
        out = unpack.decompress(body, limit + 1)
    except zlib.error as e:
        raise ApiError(400, "malformed_json", f"content-encoding is gzip, but the body is not gzip: {e}") from None
    if len(out) > limit:
        raise ApiError(413, "body_too_large", "unpacked, " + _too_large(limit, path))
    if not unpack.eof:
        raise ApiError(400, "malformed_json", "content-encoding is gzip, but the gzip body is cut short")
    if unpack.unused_data:  # a second gzip member, or bytes after the first: never read in silence
        raise ApiError(400, "malformed_json", "content-encoding is gzip, but bytes follow the end of the gzip body")
    return out


def require_json(request: Request[Any, Any, Any]) -> str:
    """The content-type of a JSON body, or a 415 naming the one to send. Only `application/json` and
    `application/<name>+json` are JSON: a page on any site may send `text/plain` (even `text/plain;charset=json`,
    which looked like JSON to a substring test) without the browser asking the service first."""
    ctype = request.headers.get("content-type")
    if ctype is None:
        raise ApiError(415, "unsupported_media_type", "content-type is missing: send content-type: application/json")
    if not JSON_MEDIA.fullmatch(ctype.partition(";")[0].strip().lower()):
        raise ApiError(
            415,
            "unsupported_media_type",
            f"content-type is {ctype!r}: send content-type: application/json (or application/<name>+json)",
        )
    return ctype


async def read_json(request: Request[Any, Any, Any], typ: type[Any]) -> Any:
    """The body decoded into ``typ``: 415 for non-JSON, 400 for broken JSON, 422 listing every problem."""
    ctype = require_json(request)
    body = await body_of(request)
    try:
        return parse(body, typ)
    except ApiError as e:
        if e.status == 400:  # no JSON at all: when the cause is how the body was sent, say that instead
            _explain_encoding(request.headers.get("content-encoding", ""), ctype, body)
        raise


def _explain_encoding(coding: str, ctype: str, body: bytes) -> None:
    """A 415 for a body that is not JSON because it was compressed or is not UTF-8 (the decoder would only say
    'invalid character (byte 0)'). Read only when decoding failed: a body that decodes is taken as it is."""
    coding = coding.strip().lower()
    if coding not in ("identity", "", "gzip"):
        raise ApiError(
            415,
            "unsupported_media_type",
            f"content-encoding {coding!r} is not accepted: send the body gzip-compressed or uncompressed",
        )
    charset = ctype.lower().partition("charset=")[2].split(";")[0].strip().strip('"')
    if charset not in ("", "utf-8", "utf8"):
        raise ApiError(415, "unsupported_media_type", f"the body must be UTF-8 JSON, not charset={charset}")
    if body[:2] in (b"\xff\xfe", b"\xfe\xff"):  # a byte order mark of UTF-16: the commonest wrong encoding
        raise ApiError(415, "unsupported_media_type", "the body is UTF-16; JSON must be sent as UTF-8")


def error_handler(max_body_bytes: int) -> Callable[[Request[Any, Any, Any], Exception], Response[bytes]]:
    """Every error as the protocol's JSON error body; the handler knows the body limit so a 413 can name it."""
    return partial(_error_response, max_body_bytes, _Bugs())


class _Bugs:
    """A 500 (a bug of ours): its traceback once per kind and route, then the repeats at a readable rate. A bug
    on the decide path under load was a traceback a request, burying everything else in the log."""

    def __init__(self) -> None:
        self._seen: set[tuple[type[Exception], str]] = set()
        self._repeats = FailureLog(log, "request", every=10.0)

    def log(self, request: Request[Any, Any, Any], exc: Exception) -> None:
        """Log an unhandled error of a request."""
        kind = (type(exc), request.url.path)
        if kind in self._seen:
            self._repeats.failed(
                f"{request.method} {request.url.path} hit a bug logged above again: {type(exc).__name__}: {exc}"
            )
            return
        if len(self._seen) < 1000:
            self._seen.add(kind)
        log.exception(
            "unhandled error (a bug: please report it with this traceback) in %s %s: %s",
            request.method,
            request.url.path,
            exc,
        )


def _too_large(max_body_bytes: int, path: str) -> str:
    """A 413 that says what to send instead, for the route it came to."""
    if path == "/v1/telemetry":
        hint = "send telemetry for a large scene in several requests"
    elif path.startswith("/npcs/"):
        hint = "a tape that large carries too long an observation or too many memories: recall fewer"
    else:
        hint = "send less in one request"
    return f"the body is larger than {max_body_bytes} bytes (NPCMIND_MAX_BODY_BYTES); {hint}"


def _not_routed(status: int, request: Request[Any, Any, Any]) -> str:
    """A 404 or 405 that says what was asked and what there is, so a typo in a path is fixed from the error."""
    method, path = request.method, request.url.path
    if status == 405:
        return f"{path} takes {' or '.join(API.methods_of(path)) or 'other methods'}, not {method}"
    paths = sorted(API.paths)
    if path.startswith("/npcs/") and path.endswith("/process") and path.count("/") > 3:
        return f"no route {method} {path}: an npcId cannot hold '/', not even as %2F"
    # the API's routes are listed (the pages for a person are found by the hint): a list longer than 16 is cut
    api = [p for p in paths if any(r.media not in ("text/html", "text/javascript") for r in API.routes if r.path == p)]
    return f"no route {method} {path}{choices(path, api, 'routes', _likely_route(path, paths))}"


def _likely_route(path: str, paths: list[str]) -> str | None:
    """The route meant: one whose last part begins as the asked one's does (/v1/decisions: /v1/decide),
    else the closest by spelling (difflib alone takes /v1/decisions for /v1/session)."""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    for p in paths:
        if len(last) >= 4 and p.rsplit("/", 1)[-1].startswith(last[:4]):
            return p
    close = difflib.get_close_matches(path, paths, n=1, cutoff=0.7)
    return close[0] if close else None


def _error_response(
    max_body_bytes: int, bugs: _Bugs, request: Request[Any, Any, Any], exc: Exception
) -> Response[bytes]:
    if isinstance(exc, ApiError):
        return Response(content=exc.body(), status_code=exc.status, media_type=JSON, headers=exc.headers)
    if isinstance(exc, HTTPException):
        status = exc.status_code
        code = {
            400: "bad_request",
            404: "not_found",
            405: "method_not_allowed",
            413: "body_too_large",
            415: "unsupported_media_type",
            429: "rate_limited",
        }.get(status, "http_error")
        if status in (404, 405):
            message = _not_routed(status, request)
        else:
            message = _too_large(max_body_bytes, request.url.path) if status == 413 else str(exc.detail)
        err = ApiError(status, code, message)
        return Response(content=err.body(), status_code=status, media_type=JSON, headers=exc.headers)
    if isinstance(exc, StoreError):  # disk full or the like: the store logged it; the game runs its own AI
        err = ApiError(503, "store_unavailable", f"{exc}; run your own AI and ask again", headers={"retry-after": "5"})
        return Response(content=err.body(), status_code=503, media_type=JSON, headers=err.headers)
    bugs.log(request, exc)
    err = ApiError(500, "internal", "internal error; the service logged it")
    return Response(content=err.body(), status_code=HTTP_500_INTERNAL_SERVER_ERROR, media_type=JSON)


def _auth(request: Request[Any, Any, Any]) -> str | None:
    return request.headers.get("authorization")


Partial = Callable[[Any, SessionContext], list[Problem]]


def _decide_partial(raw: Any, session: SessionContext) -> list[Problem]:
    return partial_problems(raw, session.manifest, session.scopes)


def _context_partial(raw: Any, session: SessionContext) -> list[Problem]:
    scopes = raw.get("scopes") if isinstance(raw, dict) else None
    defs: dict[str, ScopeDefinition] = {}
    for name, d in scopes.items() if isinstance(scopes, dict) else ():
        try:  # each scope on its own, its name included: those well-shaped have their rules checked
            defs.update(msgspec.convert({name: d}, dict[DeclaredName, ScopeDefinition], strict=True))
        except msgspec.ValidationError:
            continue
    return scope_problems(defs, session.manifest, session.scopes)[0]


def _telemetry_partial(raw: Any, session: SessionContext) -> list[Problem]:
    entities = raw.get("entities") if isinstance(raw, dict) else None
    items = well_shaped(entities, TelemetryEntity)
    shaped = {i for i, _ in items}
    return telemetry_problems(items, session.manifest) + misshaped_telemetry_problems(
        entities, shaped, session.manifest
    )


API = RouteTable()  # every route, declared once below: the app and GET /openapi.json are built from it
BODY_ERRORS = (400, 401, 403, 413, 415, 422, 429)


def _service(request: Request[Any, Any, Any]) -> Service:
    """The service of the app that took the request: the endpoints are declared once for every app."""
    service: Service = request.app.state.service
    return service


async def manifest_problems(
    service: Service, request: Request[Any, Any, Any], claims: TokenClaims | None, partial: Partial
) -> list[Problem]:
    """The manifest's problems of a body's well-shaped parts; none when the body names no client or
    cannot be walked (nesting too deep: the shape error already says where)."""
    try:
        raw = decode_loosely(await body_of(request))
        cid = claims.cid if claims else raw.get("client_id") if isinstance(raw, dict) else None
        if not isinstance(cid, str) or not cid:
            return []
        return partial(raw, await service.guard.session(claims, cid))
    except (msgspec.DecodeError, ValueError, RecursionError):
        return []


async def read_session_body(
    request: Request[Any, Any, Any], typ: type[Any], partial: Partial | None = None
) -> tuple[Any, SessionContext]:
    """Authenticate first, then read the body; a 422 also lists the manifest's problems with its
    well-shaped parts, so one answer names everything to fix."""
    service = _service(request)
    claims = await service.guard.authenticate(_auth(request))
    try:
        req = await read_json(request, typ)
    except ApiError as e:
        if e.status != 422 or partial is None:
            raise
        extra = await manifest_problems(service, request, claims, partial)
        if not extra:
            raise
        said = {p.path for p in e.details}  # a part mis-shaped is told once, by its shape
        raise ApiError.invalid(e.details + [p for p in extra if p.path not in said]) from None
    return req, await service.guard.session(claims, req.client_id)


def wants_stream(accept: str | None) -> bool:
    """Whether the request asks for a streamed decide answer: application/x-ndjson among the types its Accept
    takes (with q above 0) in its first MAX_RANGES media ranges. Server-sent events are not offered
    (docs/streaming.md says why): an Accept that takes only text/event-stream is a 406 that names the type to ask
    for, not a JSON answer it would not read."""
    taken: set[str] = set()
    for item in (accept or "").split(",", MAX_RANGES)[:MAX_RANGES]:
        media, *params = item.split(";")
        q = next((p.partition("=")[2].strip() for p in params if p.strip().lower().startswith("q=")), "1")
        try:
            refused = float(q) <= 0
        except ValueError:
            refused = False  # a q that is no number: the type is still named
        if media.strip() and not refused:
            taken.add(media.strip().lower())
    if NDJSON in taken:
        return True
    if taken == {"text/event-stream"}:
        raise ApiError(
            406,
            "not_acceptable",
            f"a streamed decide answer is {NDJSON}, not text/event-stream (server-sent events cannot carry a "
            f"POST's body): send Accept: {NDJSON}, or no Accept for the JSON answer",
        )
    return False


_line = msgspec.json.Encoder().encode
# characters JSON may write raw inside a string that Python's splitlines (so httpx's iter_lines) takes for a line end:
# an entity id holding one split its line in two; escaped, the line is the same JSON document
_LINE_ENDS = ((b"\xe2\x80\xa8", b"\\u2028"), (b"\xe2\x80\xa9", b"\\u2029"), (b"\xc2\x85", b"\\u0085"))


def ndjson_line(obj: Decision | DecideEnd) -> bytes:
    """One line of a streamed answer: its JSON with no character any line reader takes for a line end."""
    line = _line(obj)
    if b"\xe2\x80" in line or b"\xc2\x85" in line:  # rare: most lines pay two scans, no copy
        for raw, escaped in _LINE_ENDS:
            line = line.replace(raw, escaped)
    return line + b"\n"


async def ndjson_lines(lines: AsyncIterator[Decision | DecideEnd]) -> AsyncIterator[bytes]:
    """Each line of a streamed answer as it is made, flushed on its own."""
    async for line in lines:
        yield ndjson_line(line)


DECIDE_LINES = Streamed(
    NDJSON,
    (Decision, DecideEnd),
    "With Accept: application/x-ndjson, one JSON document a line: each entity's decision (as in `decisions`, with "
    "`source`) as soon as it is final, in that order, then a last line (`a2g`, `epoch`, `latency_ms`, `sent_ms`); "
    "a stream without the last line was cut. See docs/streaming.md.",
)


@API.route(
    "post",
    "/v1/decide",
    "One decision per entity, or a typed fallback (streamed with Accept: application/x-ndjson)",
    DecideRequest,
    DecideResponse,
    errors=(*BODY_ERRORS, 406),
    streamed=DECIDE_LINES,
)
async def decide(request: Request[Any, Any, Any]) -> Response[Any]:
    req, session = await read_session_body(request, DecideRequest, _decide_partial)  # who asks, first: a 401
    # an Accept sent as several header lines is one list (RFC 9110, 5.3): a proxy may add a line of its own
    streamed = wants_stream(", ".join(request.headers.getall("accept", [])))
    pipeline: DecidePipeline = _service(request).pipeline
    if not streamed:
        return json_response(await pipeline.decide(session, req))
    batch = await pipeline.begin(session, req, streamed=True)  # every refusal before the 200
    return Stream(ndjson_lines(pipeline.streamed(batch)), media_type=NDJSON, headers=STREAM_HEADERS)


@API.route(
    "post",
    "/v1/telemetry",
    "Where entities are and what they do: soft state for the situation context",
    TelemetryRequest,
    TelemetryResponse,
    errors=BODY_ERRORS,
)
async def telemetry(request: Request[Any, Any, Any]) -> Response[bytes]:
    req, session = await read_session_body(request, TelemetryRequest, _telemetry_partial)
    return json_response(TelemetryResponse(await _service(request).hub.telemetry(session, req)))


@API.route(
    "post", "/v1/context", "Add scopes to this session", ContextRequest, ContextResponse, errors=(*BODY_ERRORS, 409)
)
async def context(request: Request[Any, Any, Any]) -> Response[bytes]:
    req, session = await read_session_body(request, ContextRequest, _context_partial)
    return json_response(ContextResponse(await _service(request).hub.add_scopes(session, req)))


@API.route("post", "/v1/report", "What became of decisions", ReportRequest, ReportResponse, errors=BODY_ERRORS)
async def report(request: Request[Any, Any, Any]) -> Response[bytes]:
    req, session = await read_session_body(request, ReportRequest)
    return json_response(ReportResponse(await _service(request).hub.report(session, req)))


@API.route(
    "post",
    "/v1/session",
    "Open a session with the client's API key (hosted profile)",
    SessionRequest,
    SessionResponse,
    errors=(*BODY_ERRORS, 404),
    public=True,
)
async def open_session(request: Request[Any, Any, Any]) -> Response[bytes]:
    req: SessionRequest = await read_json(request, SessionRequest)
    return json_response(await _service(request).guard.open(_auth(request), req.client_id))


@API.route("delete", "/v1/session", "End this session (hosted profile)", None, EndedResponse, errors=(401, 404, 429))
async def end_session(request: Request[Any, Any, Any]) -> Response[bytes]:
    return json_response(EndedResponse(await _service(request).guard.end(_auth(request))))


@API.route(
    "post",
    "/npcs/{npcId}/process",
    "One atomic step of an NPC's dialogue: the next instruction and tape",
    NPCProcessRequest,
    NPCProcessResponse,
    errors=(400, 401, 409, 413, 415, 422, 429),
)
async def npc_process(request: Request[Any, Any, Any]) -> Response[bytes]:
    npc_id = str(request.path_params["npcId"])
    service = _service(request)
    await service.guard.authenticate(_auth(request))
    require_json(request)
    return json_response(service.npc.process(npc_id, await body_of(request)))


@API.route("get", "/v1/keys", "Public keys that verify signed NPC outcomes", None, KeysResponse, public=True)
async def keys(request: Request[Any, Any, Any]) -> Response[bytes]:
    signer = _service(request).npc.signer
    return json_response(KeysResponse([PublicKey(signer.kid, "Ed25519", signer.public_key)]))


QUERY_CLIENT = "the query parameter client_id"  # where GET routes name their client, said in a 403


def _utf8_query(request: Request[Any, Any, Any]) -> None:
    """A query value whose percent-encoded bytes are not UTF-8 was read with U+FFFD in their place: a client_id
    then named no one, and the 404 said "no decide request yet in this session of '\ufffd'" instead of the cause."""
    for part in request.scope.get("query_string", b"").split(b"&"):
        name, _, value = part.partition(b"=")
        try:
            unquote_to_bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            field = unquote_to_bytes(name).decode("utf-8", "replace")
            problem = "is not UTF-8 text (a percent-encoded byte that no UTF-8 character has)"
            raise ApiError.invalid([Problem(field, problem)]) from None


ClientIdQuery = Annotated[  # a query parameter, named as the argument is: Parameter(query=) is deprecated
    str | None,
    Parameter(description="The client whose session's last batch to show (local profile; hosted: the token's client)"),
]


@API.route(
    "get",
    "/v1/prompt",
    "What the model saw in this session's last decide request",
    None,
    PromptView,
    errors=(401, 403, 404, 422, 429),
)
async def prompt(request: Request[Any, Any, Any], client_id: ClientIdQuery = None) -> Response[bytes]:
    service = _service(request)
    _utf8_query(request)
    claims = await service.guard.authenticate(_auth(request))
    client_id = client_id or (claims.cid if claims else None)
    if not client_id:
        raise ApiError.invalid([Problem("client_id", "is required (a query parameter)")])
    if len(client_id) > MAX_ID:  # as in every body: no such session, and not an id to echo back
        raise ApiError.invalid([Problem("client_id", f"has {len(client_id)} characters, at most {MAX_ID} allowed")])
    session = await service.guard.session(claims, client_id, QUERY_CLIENT)
    view = service.pipeline.seen(session.session_id)
    if view is None:
        message = f"no decide request yet in this session of {client_id!r}"
        if not service.guard.hosted:  # implicit sessions: a mistyped client_id would wait forever unsaid
            known = [s.removeprefix("local:") for s in service.pipeline.seen_sessions() if s.startswith("local:")]
            message += choices(client_id, known[:16], "client_ids with one") if known else ""
        raise ApiError(404, "not_found", message)
    return json_response(view)


@API.route("get", "/v1/manifest", "The client's manifest and its version", None, ManifestResponse, errors=(401,))
async def manifest(request: Request[Any, Any, Any]) -> Response[bytes]:
    service = _service(request)
    client_id = await service.guard.client_of(_auth(request))
    m = service.guard.manifest_for(client_id) if client_id else service.manifest
    assert m is not None
    return json_response(ManifestResponse(client_id, m.version, m.data))


@API.route(
    "get",
    "/v1/policy",
    "The client's latest local policy for its manifest version (ETag; If-None-Match gives 304)",
    None,
    PolicyDocument,
    errors=(304, 401, 403, 404, 422, 429),
)
async def policy(request: Request[Any, Any, Any], client_id: ClientIdQuery = None) -> Response[bytes]:
    service = _service(request)
    _utf8_query(request)
    claims = await service.guard.authenticate(_auth(request))
    client_id = client_id or (claims.cid if claims else None)
    if not client_id:
        raise ApiError.invalid([Problem("client_id", "is required (a query parameter)")])
    if len(client_id) > MAX_ID:
        raise ApiError.invalid([Problem("client_id", f"has {len(client_id)} characters, at most {MAX_ID} allowed")])
    session = await service.guard.session(claims, client_id, QUERY_CLIENT)
    version = session.manifest.version
    found = await service.store.policies.get(client_id, version)
    if found is None:
        raise ApiError(
            404,
            "not_found",
            f"no policy of {client_id!r} for manifest version {version} yet: `npcmind serve --distill-every HOURS` "
            "trains one from the model's decisions, or `npcmind distill --publish` once (docs/policy.md)",
        )
    etag = '"' + hashlib.blake2b(found.data, digest_size=16).hexdigest() + '"'
    given = [t.strip().removeprefix("W/") for t in request.headers.get("if-none-match", "").split(",")]
    if etag in given or "*" in given:  # `*`: any current representation (RFC 9110, 13.1.2), and one exists
        return Response(content=b"", status_code=304, headers={"etag": etag})
    return Response(content=found.data, status_code=200, media_type=JSON, headers={"etag": etag})


ShadowClientQuery = Annotated[
    str | None, Parameter(description="The client whose shadow figures to show (hosted: the API key's client)")
]


@API.route(
    "get",
    "/v1/shadow",
    "Shadow mode's agreement figures for the client, in this process (hosted profile: with the client API key)",
    None,
    ShadowReport,
    errors=(401, 403, 404, 422),
)
async def shadow(request: Request[Any, Any, Any], client_id: ShadowClientQuery = None) -> Response[bytes]:
    service = _service(request)
    _utf8_query(request)
    if service.clients is not None:  # the game's owner, by its API key, first (a 401 before any 422): a session's
        owner = key_owner(service.clients, _auth(request))  # token must not read the other sessions' prompts here
        client_id = client_id or owner.client_id  # the key names its client: the query may leave it out
    if not client_id:
        raise ApiError.invalid([Problem("client_id", "is required (a query parameter)")])
    if len(client_id) > MAX_ID:
        raise ApiError.invalid([Problem("client_id", f"has {len(client_id)} characters, at most {MAX_ID} allowed")])
    if service.clients is not None:
        key_holder(service.clients, _auth(request), client_id)  # 403: the key of another client
    if service.shadow is None:
        raise ApiError(
            404,
            "not_found",
            "shadow mode is off: `serve --shadow-provider P --shadow-model M` starts it (docs/replay.md)",
        )
    figures = service.shadow.report(client_id)
    if figures is None:
        raise ApiError(404, "not_found", f"no call of {client_id!r} shadowed yet in this process")
    return json_response(figures)


@API.route(
    "get", "/v1/health", "Liveness and what the service will do with a decision", None, HealthResponse, public=True
)
async def health(request: Request[Any, Any, Any]) -> Response[bytes]:
    service = _service(request)
    p = service.provider
    shared_problem = service.shared.problem()
    return json_response(
        HealthResponse(
            status="ok",
            a2g=A2G_VERSION,
            version=__version__,
            profile=service.settings.profile,
            provider=p.name,
            model=p.model,
            provider_ready=p.ready,
            note=describe(p)
            + (f"; at start: {service.provider_problem}" if service.provider_problem else "")
            + (f"; shared state: {shared_problem}, so each process decides on its own" if shared_problem else ""),
            manifest_version=service.manifest.version if service.manifest else None,
            deadline_ms=service.settings.deadline_ms,
            shared="redis" if service.settings.redis else "memory",
            shared_ready=shared_problem is None,
        )
    )


@API.route("head", "/v1/health", "Liveness without a body, for uptime monitors that send HEAD", public=True)
async def health_head() -> None:
    """Uptime monitors (UptimeRobot's default among them) ask with HEAD: a 405 would read as down."""


@API.route("get", "/metrics", "Prometheus metrics", media="text/plain", errors=(401, 429))
async def metrics(request: Request[Any, Any, Any]) -> Response[bytes]:
    service = _service(request)
    await service.guard.client_of(_auth(request))
    return Response(content=service.metrics.render(), media_type="text/plain; version=0.0.4")


@API.route("get", "/openapi.json", "This document (hosted profile: with a session token)", errors=(401, 429))
async def openapi(request: Request[Any, Any, Any]) -> Response[bytes]:
    await _service(request).guard.client_of(_auth(request))
    return Response(content=document(), media_type=JSON)


@API.route("get", "/", "A page for a person: what the model saw, from GET /v1/prompt", media="text/html", public=True)
async def page() -> Response[bytes]:
    return Response(content=PAGE, media_type="text/html", headers=PAGE_HEADERS)  # Litestar adds the charset


@API.route(
    "get",
    "/replay",
    "A page for a person: a report of `npcmind replay`, opened from a file",
    media="text/html",
    public=True,
)
async def replay_page() -> Response[bytes]:
    return Response(content=REPLAY_PAGE, media_type="text/html", headers=REPLAY_HEADERS)


@API.route(
    "get",
    "/demo",
    "The demo game (`npcmind demo`): bees that decide through this service",
    media="text/html",
    public=True,
)
async def demo_page() -> Response[bytes]:
    return Response(content=demo_asset("index.html"), media_type="text/html", headers=DEMO_HEADERS)


@API.route("get", "/demo/demo.js", "The demo game's script", media="text/javascript", public=True)
async def demo_script() -> Response[bytes]:
    return Response(content=demo_asset("demo.js"), media_type="text/javascript", headers=DEMO_HEADERS)


ROUTES = API.routes


@lru_cache(maxsize=1)
def document() -> bytes:
    """The OpenAPI document of the route table, read from an app of its handlers (built once)."""
    return openapi_document(Litestar(route_handlers=API.handlers(), openapi_config=None))


def create_app(service: Service) -> HotRoutes:
    """Build the ASGI app around a service: Litestar's, with a game's hot routes served ahead of its layers."""
    settings = service.settings
    check = host_check(settings.profile, settings.host, settings.allowed_hosts)
    on_error = error_handler(service.settings.max_body_bytes)
    app = Litestar(
        route_handlers=API.handlers(),
        before_request=check,
        state=State({"service": service}),
        exception_handlers={Exception: on_error},
        cors_config=browser_origins(service.settings.cors_origins),
        on_startup=[service.start],
        on_shutdown=[service.stop],
        openapi_config=None,
        request_max_body_size=service.settings.max_body_bytes,
        debug=False,
    )
    return HotRoutes(app, check, on_error)
