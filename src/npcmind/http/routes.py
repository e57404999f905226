"""The route table: each route's method, path, wire types and summary, declared once beside its endpoint.

The app and its OpenAPI document are both built from it: a document kept by hand beside the routes had
drifted from them (a query parameter and a method were missing).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from litestar import Response
from litestar.enums import HttpMethod
from litestar.handlers import HTTPRouteHandler

JSON = "application/json"
E = TypeVar("E", bound=Callable[..., Any])


@dataclass(frozen=True)
class Streamed:
    """A second form of a route's 200 that the client asks for with ``Accept``: its media type, the shapes of its
    lines, and what the document says of it."""

    media: str
    lines: tuple[Any, ...]
    description: str


@dataclass(frozen=True)
class Route:
    """One operation: what the app routes to ``endpoint`` and what the document says of it."""

    method: str
    path: str  # as the document writes it: /npcs/{npcId}/process
    summary: str
    endpoint: Callable[..., Any]
    request: type | None = None
    response: type | None = None
    errors: tuple[int, ...] = ()
    media: str = JSON
    public: bool = False
    streamed: Streamed | None = None

    def handler(self) -> HTTPRouteHandler:
        """A new Litestar handler of the endpoint: Litestar keeps an app's state on its handlers (their owner,
        the body limit once resolved), so each app gets handlers of its own."""
        path, method = litestar_path(self.path), HttpMethod(self.method.upper())
        handler = HTTPRouteHandler(path=path, http_method=method, status_code=200, opt={"route": self})
        return handler(self.endpoint)


class RouteTable:
    """The routes in the order declared, and the Litestar handlers of one app built from them."""

    def __init__(self) -> None:
        self.routes: list[Route] = []

    def route(
        self,
        method: str,
        path: str,
        summary: str,
        request: type | None = None,
        response: type | None = None,
        *,
        errors: tuple[int, ...] = (),
        media: str = JSON,
        public: bool = False,
        streamed: Streamed | None = None,
    ) -> Callable[[E], E]:
        """Declare an endpoint's route; its query parameters are those its signature declares (Litestar reads them)."""

        def add(endpoint: E) -> E:
            self.routes.append(
                Route(method, path, summary, endpoint, request, response, errors, media, public, streamed)
            )
            return endpoint

        return add

    @property
    def paths(self) -> list[str]:
        """Every path, in the order first declared."""
        return list(dict.fromkeys(r.path for r in self.routes))

    def methods_of(self, path: str) -> list[str]:
        """The methods a concrete path takes (``/npcs/mara/process``: POST), for a 405 that says which."""
        return sorted(
            {r.method.upper() for r in self.routes if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", r.path), path)}
        )

    def handlers(self) -> list[HTTPRouteHandler]:
        """New handlers for one app, each path's OPTIONS first: Litestar made its own OPTIONS handler with the
        methods of the first handler of a path, so `Allow` lacked DELETE on /v1/session and HEAD on /v1/health."""
        out: list[HTTPRouteHandler] = []
        for path in self.paths:
            out.append(_options(path, [r.method.upper() for r in self.routes if r.path == path]))
            out += [r.handler() for r in self.routes if r.path == path]
        return out


def _options(path: str, methods: list[str]) -> HTTPRouteHandler:
    """OPTIONS of a path without a CORS preflight (the CORS layer answers those): 204 with every method in `Allow`."""
    allow = ", ".join(sorted({*methods, "OPTIONS"}))

    async def options() -> Response[None]:
        return Response(content=None, status_code=204, headers={"allow": allow}, media_type="text/plain")

    return HTTPRouteHandler(path=litestar_path(path), http_method="OPTIONS", include_in_schema=False)(options)


def litestar_path(path: str) -> str:
    """A documented path as Litestar routes it: /npcs/{npcId}/process is /npcs/{npcId:str}/process."""
    return re.sub(r"\{(\w+)\}", r"{\1:str}", path)
