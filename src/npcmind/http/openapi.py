"""The OpenAPI 3.1 document of every route, generated from the same msgspec wire types that decode requests."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import msgspec

from npcmind import __version__
from npcmind.protocol.a2g import (
    ContextRequest,
    ContextResponse,
    DecideRequest,
    DecideResponse,
    EndedResponse,
    HealthResponse,
    ManifestResponse,
    PromptView,
    ReportRequest,
    ReportResponse,
    SessionRequest,
    SessionResponse,
    TelemetryRequest,
    TelemetryResponse,
)
from npcmind.protocol.errors import ErrorResponse
from npcmind.protocol.npc import KeysResponse, NPCProcessRequest, NPCProcessResponse


@dataclass(frozen=True)
class Route:
    """One documented operation."""

    method: str
    path: str
    summary: str
    request: type | None = None
    response: type | None = None
    errors: tuple[int, ...] = ()
    media: str = "application/json"
    public: bool = False
    query: tuple[str, ...] = ()


ROUTES: list[Route] = [
    Route(
        "post",
        "/v1/decide",
        "One decision per entity, or a typed fallback",
        DecideRequest,
        DecideResponse,
        (400, 401, 403, 413, 415, 422, 429),
    ),
    Route(
        "post",
        "/v1/telemetry",
        "Where entities are and what they do: soft state for the situation context",
        TelemetryRequest,
        TelemetryResponse,
        (400, 401, 403, 413, 415, 422, 429),
    ),
    Route(
        "post",
        "/v1/context",
        "Add scopes to this session",
        ContextRequest,
        ContextResponse,
        (400, 401, 403, 409, 413, 415, 422, 429),
    ),
    Route(
        "post",
        "/v1/report",
        "What became of decisions",
        ReportRequest,
        ReportResponse,
        (400, 401, 403, 413, 415, 422, 429),
    ),
    Route(
        "post",
        "/v1/session",
        "Open a session with the client's API key (hosted profile)",
        SessionRequest,
        SessionResponse,
        (400, 401, 403, 404, 413, 415, 422, 429),
        public=True,
    ),
    Route("delete", "/v1/session", "End this session (hosted profile)", None, EndedResponse, (401, 404, 429)),
    Route(
        "post",
        "/npcs/{npcId}/process",
        "One atomic step of an NPC's dialogue: the next instruction and tape",
        NPCProcessRequest,
        NPCProcessResponse,
        (400, 401, 409, 413, 415, 422, 429),
    ),
    Route("get", "/v1/keys", "Public keys that verify signed NPC outcomes", None, KeysResponse, public=True),
    Route(
        "get",
        "/v1/prompt",
        "What the model saw in this session's last decide request (?client_id=)",
        None,
        PromptView,
        (401, 403, 404, 422, 429),
    ),
    Route("get", "/v1/manifest", "The client's manifest and its version", None, ManifestResponse, (401,)),
    Route(
        "get", "/v1/health", "Liveness and what the service will do with a decision", None, HealthResponse, public=True
    ),
    Route("head", "/v1/health", "Liveness without a body, for uptime monitors that send HEAD", public=True),
    Route("get", "/metrics", "Prometheus metrics", media="text/plain", errors=(401, 429)),
    Route("get", "/openapi.json", "This document (hosted profile: with a session token)", errors=(401, 429)),
    Route("get", "/", "A page for a person: what the model saw, from GET /v1/prompt", media="text/html", public=True),
]


def methods_of(path: str) -> list[str]:
    """The methods a concrete path takes (``/npcs/mara/process``: POST), for a 405 that says which."""
    return sorted({r.method.upper() for r in ROUTES if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", r.path), path)})


_ERROR_TEXT = {
    400: "Malformed JSON",
    401: "No or bad token",
    403: "Token of another client",
    404: "Unknown id or route",
    409: "Stale or conflicting state",
    413: "Body over the limit",
    415: "Not JSON",
    422: "Well-formed but invalid: every problem by path",
    429: "Over the client's request rate",
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


@lru_cache(maxsize=1)
def openapi_document() -> bytes:
    """The document as JSON bytes (built once)."""
    types: list[Any] = [ErrorResponse]
    types += [r.request for r in ROUTES if r.request] + [r.response for r in ROUTES if r.response]
    refs, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
    for component in components.values():  # a tagged union's tag (source, type) is msgspec's, not a field of ours
        for prop in component.get("properties", {}).values():
            if "description" not in prop and len(prop.get("enum", ())) == 1:
                prop["description"] = f"Always {prop['enum'][0]}: says which of the shapes this object has."
    by_type = dict(zip(types, refs, strict=True))
    paths: dict[str, dict[str, Any]] = {}
    for r in ROUTES:
        op: dict[str, Any] = {"summary": r.summary, "operationId": r.method + r.path.replace("/", "_")}
        params = [{"name": q, "in": "query", "required": False, "schema": {"type": "string"}} for q in r.query]
        if "{" in r.path:
            name = r.path[r.path.index("{") + 1 : r.path.index("}")]
            params.append({"name": name, "in": "path", "required": True, "schema": {"type": "string"}})
        if params:
            op["parameters"] = params
        if r.request is not None:
            op["requestBody"] = {"required": True, "content": {"application/json": {"schema": by_type[r.request]}}}
        ok: dict[str, Any] = {"description": "OK"}
        if r.method == "head":
            pass  # no body
        elif r.response is not None:
            ok["content"] = {r.media: {"schema": by_type[r.response]}}
        else:
            ok["content"] = {r.media: {"schema": {"type": "string"} if r.media != "application/json" else {}}}
        responses: dict[str, Any] = {"200": ok}
        for status in r.errors:
            responses[str(status)] = {
                "description": _ERROR_TEXT.get(status, "Error"),
                "content": {"application/json": {"schema": _ref("ErrorResponse")}},
            }
        op["responses"] = responses
        if not r.public:
            op["security"] = [{"bearer": []}, {}]
        paths.setdefault(r.path, {})[r.method] = op
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "npcmind", "version": __version__, "description": "A2G 0.1 decisions and NPC dialogue steps"},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
    return msgspec.json.encode(doc)
