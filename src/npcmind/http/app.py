"""The HTTP layer: Litestar routes that read raw bodies, decode with msgspec and answer JSON errors only.

Handlers take the raw body instead of Litestar's own data binding so that a 422 lists every problem
by path (msgspec and Litestar stop at the first), while valid bodies still decode in one msgspec pass.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from litestar import Litestar, Request, Response, get, post
from litestar.exceptions import HTTPException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from npcmind import A2G_VERSION, __version__
from npcmind.http.openapi import openapi_document
from npcmind.protocol.a2g import DecideRequest, HealthResponse, ManifestResponse
from npcmind.protocol.errors import ApiError
from npcmind.protocol.validate import parse
from npcmind.providers.select import describe
from npcmind.service import Service

log = logging.getLogger("npcmind.http")
JSON = "application/json"


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response[bytes]:
    """Encode with msgspec (fast, and the same encoder the wire types were made for)."""
    return Response(content=msgspec.json.encode(obj), status_code=status, media_type=JSON, headers=headers)


async def read_json(request: Request[Any, Any, Any], typ: type[Any]) -> Any:
    """The body decoded into ``typ``: 415 for non-JSON, 400 for broken JSON, 422 listing every problem."""
    ctype = request.headers.get("content-type", "")
    if "json" not in ctype:
        raise ApiError(415, "unsupported_media_type", f"content-type must be application/json, not {ctype!r}")
    return parse(await request.body(), typ)


def _error_response(_: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
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
        message = {404: "no such route", 405: "method not allowed on this route"}.get(status, str(exc.detail))
        err = ApiError(status, code, message)
        return Response(content=err.body(), status_code=status, media_type=JSON, headers=exc.headers)
    log.exception("unhandled error (a bug): %s", exc)
    err = ApiError(500, "internal", "internal error; the service logged it")
    return Response(content=err.body(), status_code=HTTP_500_INTERNAL_SERVER_ERROR, media_type=JSON)


def create_app(service: Service) -> Litestar:
    """Build the ASGI app around a service."""

    @post("/v1/decide", status_code=200)
    async def decide(request: Request[Any, Any, Any]) -> Response[bytes]:
        req: DecideRequest = await read_json(request, DecideRequest)
        session = await service.local_session(req.client_id)
        return json_response(await service.decide_pipeline().decide(session, req))

    @get("/v1/manifest")
    async def manifest() -> Response[bytes]:
        m = service.manifest
        return json_response(ManifestResponse(None, m.version, m.data))

    @get("/v1/health")
    async def health() -> Response[bytes]:
        p = service.provider
        return json_response(
            HealthResponse(
                status="ok",
                a2g=A2G_VERSION,
                version=__version__,
                profile=service.settings.profile,
                provider=p.name,
                model=p.model,
                provider_ready=p.ready,
                note=describe(p),
                manifest_version=service.manifest.version,
            )
        )

    @get("/metrics")
    async def metrics() -> Response[bytes]:
        return Response(content=service.metrics.render(), media_type="text/plain; version=0.0.4")

    @get("/openapi.json")
    async def openapi() -> Response[bytes]:
        return Response(content=openapi_document(), media_type=JSON)

    return Litestar(
        route_handlers=[decide, manifest, health, metrics, openapi],
        exception_handlers={Exception: _error_response},
        on_startup=[service.start],
        on_shutdown=[service.stop],
        openapi_config=None,
        request_max_body_size=service.settings.max_body_bytes,
        debug=False,
    )
