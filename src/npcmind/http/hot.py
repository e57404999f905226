"""The hot routes served ahead of the framework's per-request layers: a game's decide request and NPC step.

Litestar's layers around a handler (its middleware stack, routing, the handler's signature model, its response
objects) cost about 70 us a request on this machine, a bare ASGI app on the same uvicorn 32 us against 102
(docs/bench.md, "The hot path"): a sixth of a cached decide. A request to a hot route that no browser sent (no
``Origin``: the CORS layer has nothing to add or refuse) is served here by the same endpoint, with the same
Litestar ``Request``, the same host check and the same error answers; everything else (every browser, every other
route and method, the lifespan) goes through Litestar as before. What a request is told does not depend on the
path it took: the tests run every answer of these routes over both.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from litestar import Litestar, Request, Response
from litestar.handlers import HTTPRouteHandler

JSON = "application/json"
# a Host of a name or an address and a port: a part of what Litestar's router lets through, so that a Host it would
# refuse (a 400 for "[::1]/x", a byte past ASCII) goes to it and is refused there, as on every other route
_PLAIN_HOST = re.compile(rb"[0-9A-Za-z.:\[\]-]*")

Before = Callable[[Request[Any, Any, Any]], Awaitable[None]]
OnError = Callable[[Request[Any, Any, Any], Exception], Response[bytes]]
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class HotRoutes:
    """The ASGI app a server runs: POST /v1/decide and POST /npcs/{npcId}/process from a game straight to their
    endpoints, the rest to the Litestar app it wraps."""

    def __init__(self, app: Litestar, before: Before | None, on_error: OnError) -> None:
        self.app = app  # the app of every other request: its state, handlers and lifespan are this one's too
        self._before = before
        self._on_error = on_error
        handlers = {h.opt["route"].path: h for h in _handlers(app) if "POST" in h.http_methods and "route" in h.opt}
        self._decide = handlers["/v1/decide"]
        self._npc = handlers["/npcs/{npcId}/process"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A game's request to a hot route here, the rest to Litestar."""
        if scope["type"] == "http" and scope["method"] == "POST" and (hot := self._route(scope)) is not None:
            await self._serve(hot, scope, receive, send)
        else:
            await self.app(scope, receive, send)  # type: ignore[arg-type]

    def _route(self, scope: Scope) -> HTTPRouteHandler | None:
        """The hot route of a request no browser sent, with its path parameters set; None: Litestar's to answer
        (a browser's, one under a root path, whose routing Litestar does, or one whose Host is more than a name,
        an address and a port, which Litestar's router judges: a 400 for some)."""
        if scope.get("root_path"):
            return None
        path: str = scope["path"]
        if path == "/v1/decide":
            handler, params = self._decide, {}
        elif path.startswith("/npcs/") and path.endswith("/process") and path.count("/") == 3 and len(path) > 14:
            handler, params = self._npc, {"npcId": path[6:-8]}
        else:
            return None
        for name, value in scope["headers"]:
            if name == b"origin" or (name == b"host" and _PLAIN_HOST.fullmatch(value) is None):
                return None
        scope["path_params"] = params
        return handler

    async def _serve(self, handler: HTTPRouteHandler, scope: Scope, receive: Receive, send: Send) -> None:
        """The endpoint's answer, or the error answer Litestar's exception handler would give."""
        scope["app"] = scope["litestar_app"] = self.app
        scope["route_handler"] = handler  # the body limit is the route's, as Litestar resolves it
        scope.setdefault("state", {})
        request: Request[Any, Any, Any] = Request(scope, receive, send)  # type: ignore[arg-type]
        try:
            if self._before is not None:
                await self._before(request)
            response: Response[Any] = await handler.fn(request)
        except Exception as e:  # every error becomes its JSON answer, as Litestar's exception handler makes it
            response = self._on_error(request, e)
        if _plain(response):
            await _send_bytes(response, send)
        else:  # a stream (its lines as they come), or anything else Litestar's response makes
            await response.to_asgi_response(None, request)(scope, receive, send)  # type: ignore[arg-type]


def _plain(response: Response[Any]) -> bool:
    """A JSON answer of bytes and headers alone: sent as Litestar would send it, without its response object."""
    return (
        type(response) is Response
        and type(response.content) is bytes
        and response.media_type == JSON
        and response.background is None
        and not response.cookies
    )


async def _send_bytes(response: Response[bytes], send: Send) -> None:
    """A whole answer of bytes, with the headers Litestar gives it (its media type, its length, its own)."""
    body: bytes = response.content
    headers = [(b"content-type", str(response.media_type).encode("latin-1")), (b"content-length", b"%d" % len(body))]
    headers += [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in response.headers.items()]
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _handlers(app: Litestar) -> list[HTTPRouteHandler]:
    """Every HTTP handler the app registered (its own copies, which know their owner and body limit)."""
    return [h for route in app.routes for h in getattr(route, "route_handlers", []) if isinstance(h, HTTPRouteHandler)]
