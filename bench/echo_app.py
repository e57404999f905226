"""The bench's baseline: a minimal JSON echo route on the same stack (Litestar + msgspec + uvicorn)."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Litestar, Request, Response, post


@post("/echo", status_code=200)
async def echo(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Decode and re-encode the body, as the decide route does at its edges."""
    return Response(
        content=msgspec.json.encode(msgspec.json.decode(await request.body())), media_type="application/json"
    )


app = Litestar([echo], openapi_config=None)
