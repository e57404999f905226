"""What `npcmind demo` adds to the service it runs, and only there: a model the page can cut and restore (so a
viewer sees the cache, the learned policy and the native AI carry on without it), and the page's view of the
demo (the model cut or not, how often the demo learns, the policy published for the page's client, the tokens
of the prompt's static prefix for the page's naive baseline). Routes of the demo alone: `npcmind serve` has none.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from litestar import Litestar, Request, Response, get, put

from npcmind.protocol.a2g import MAX_ID
from npcmind.protocol.errors import ApiError, Problem
from npcmind.protocol.validate import parse
from npcmind.providers.base import Provider, ProviderAnswer, ProviderCall, ProviderError, StreamPiece, whole_answer
from npcmind.service import Service

CUT = "the model is cut from the demo page (its button restores it)"


class Cuttable:
    """The service's provider, which the demo page may cut: while cut no call is made (the provider is not
    ready, as with no key), so every decision the cache and the policy do not give falls back to native AI."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.cut = False
        self.name, self.model, self.mode = inner.name, inner.model, inner.mode
        self.encoding, self.cache_minimum = inner.encoding, inner.cache_minimum

    def __getattr__(self, name: str) -> Any:  # what the start banner and /v1/health read of some models: base_url
        return getattr(self.inner, name)

    @property
    def ready(self) -> bool:
        """Not while cut: the call is never made, so it is not counted or logged as a failed one."""
        return not self.cut and self.inner.ready

    async def decide(self, call: ProviderCall) -> ProviderAnswer:
        """The model's answer, or while cut the fallback's reason."""
        if self.cut:
            raise ProviderError(CUT)
        return await self.inner.decide(call)

    def stream(self, call: ProviderCall) -> AsyncIterator[StreamPiece]:
        """The model's streamed answer, or while cut the fallback's reason."""
        return whole_answer(self.decide, call) if self.cut else self.inner.stream(call)

    async def check(self) -> str | None:
        """The model's start-up check."""
        return await self.inner.check()

    async def close(self) -> None:
        """The model's connections."""
        await self.inner.close()


class ModelSwitch(msgspec.Struct, forbid_unknown_fields=True):
    """PUT /demo/model's body."""

    cut: bool


def attach(learn_every_s: float | None) -> Any:
    """What `_run` calls with the service and its app: the cuttable model and the demo's two routes."""

    def attached(service: Service, app: Litestar) -> None:
        model = Cuttable(service.provider)
        service.provider = model  # before the app starts: the pipeline is built on it at start

        async def state(client_id: str | None) -> Response[bytes]:
            return Response(content=msgspec.json.encode(await _state(service, model, learn_every_s, client_id)))

        @get("/demo/state")
        async def demo_state(client_id: str | None = None) -> Response[bytes]:
            return await state(client_id)

        @put("/demo/model", status_code=200)
        async def demo_model(request: Request[Any, Any, Any], client_id: str | None = None) -> Response[bytes]:
            model.cut = parse(await request.body(), ModelSwitch).cut
            return await state(client_id)

        app.register(demo_state)
        app.register(demo_model)

    return attached


async def _state(
    service: Service, model: Cuttable, learn_every_s: float | None, client_id: str | None
) -> dict[str, Any]:
    """The page's view of the demo: the model cut, learning, the client's policy, the static prefix's tokens."""
    if client_id is not None and not 0 < len(client_id) <= MAX_ID:
        raise ApiError.invalid([Problem("client_id", f"must have 1 to {MAX_ID} characters, not {len(client_id)}")])
    manifest = service.manifest
    policy = None
    if client_id and manifest is not None:
        found = await service.store.policies.get(client_id, manifest.version)
        if found is not None:
            types = json.loads(found.data)["types"]
            policy = {
                "created_at": found.created_at,
                "types": {k: {"trained_on": v["trained_on"], "agreement": v["agreement"]} for k, v in types.items()},
            }
    static = service.pipeline.builder(manifest).static_tokens(model.encoding) if manifest is not None else None
    return {
        "cut": model.cut,
        "model": model.name != "none",
        "learn_every_s": learn_every_s,
        "policy": policy,
        "static_tokens": static,
    }
