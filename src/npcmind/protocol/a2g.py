"""Wire types of A2G 0.1: the decide request and answer, and the session-scoped bodies beside it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

Id = Annotated[str, Meta(min_length=1, max_length=128)]
Name = Annotated[str, Meta(min_length=1, max_length=48)]
Position = Annotated[list[float], Meta(min_length=2, max_length=3)]
FallbackCode = Literal["unavailable", "busy", "refused", "invalid_choice", "budget"]
MAX_ENTITIES = 16


class DecideEntity(msgspec.Struct, forbid_unknown_fields=True):
    """One entity that needs a decision, with the actions the game's rules allow right now."""

    id: Id
    type: Name
    observation: dict[str, Any]
    legal_actions: Annotated[list[Name], Meta(min_length=1, max_length=32)]
    position: Position | None = None
    profile: Name | None = None
    parent: Id | None = None
    trigger: Name | None = None


class DecideRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of POST /v1/decide."""

    client_id: Id
    epoch: Annotated[int, Meta(ge=0)]
    world: dict[str, Any]
    entities: Annotated[list[DecideEntity], Meta(min_length=1, max_length=MAX_ENTITIES)]
    scope: Name | None = None
    scope_state: dict[str, Any] | None = None


class AIDecision(msgspec.Struct, tag_field="source", tag="AI"):
    """A valid model choice, fresh or from the decision cache."""

    id: str
    action: str
    label: str
    confidence: float | None
    ttl_ms: int
    decision_id: str
    cached: bool


class FallbackDecision(msgspec.Struct, tag_field="source", tag="FALLBACK"):
    """No choice for this entity: the game runs its native AI."""

    id: str
    code: FallbackCode
    reason: str
    ttl_ms: int


Decision = AIDecision | FallbackDecision


class DecideResponse(msgspec.Struct):
    """The answer of POST /v1/decide: one decision per entity, in the request's order."""

    a2g: str
    epoch: int
    latency_ms: int
    decisions: list[Decision]


class ManifestResponse(msgspec.Struct):
    """GET /v1/manifest: the manifest the service loaded for this client, and its version."""

    client_id: str | None
    version: str
    manifest: dict[str, Any]


class HealthResponse(msgspec.Struct):
    """GET /v1/health: whether the service is up and what it will do with a decide request."""

    status: Literal["ok"]
    a2g: str
    version: str
    profile: str
    provider: str
    model: str | None
    provider_ready: bool
    note: str
    manifest_version: str | None
