"""The bench's baselines on the same stack (Litestar + msgspec + uvicorn) as the service.

`/echo` decodes and re-encodes the body: the HTTP floor of every decide row. `/echo_call` does the same
plus one call to the scripted provider, through npcmind's own provider client, with the body the
service sent it for a 16-entity batch: the floor of a decide request whose entities all go to the model.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec
from litestar import Litestar, Request, Response, post

from npcmind.providers.http import JsonClient

_client = JsonClient()
_call_url = os.environ.get("NPCMIND_BENCH_PROVIDER_URL", "")
_call_body: dict[str, Any] = {}
if os.environ.get("NPCMIND_BENCH_CALL_BODY"):
    with open(os.environ["NPCMIND_BENCH_CALL_BODY"], "rb") as f:
        _call_body = msgspec.json.decode(f.read())


@post("/echo", status_code=200)
async def echo(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Decode and re-encode the body, as the decide route does at its edges."""
    return Response(
        content=msgspec.json.encode(msgspec.json.decode(await request.body())), media_type="application/json"
    )


@post("/echo_call", status_code=200)
async def echo_call(request: Request[Any, Any, Any]) -> Response[bytes]:
    """The echo, plus one provider round trip of a real batch's size."""
    body = msgspec.json.decode(await request.body())
    answer = await _client.post(_call_url, _call_body, {})
    assert answer["choices"], answer
    return Response(content=msgspec.json.encode(body), media_type="application/json")


app = Litestar([echo, echo_call], openapi_config=None, on_shutdown=[_client.close])
