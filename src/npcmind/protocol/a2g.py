"""Wire types of A2G 0.1: the decide request and answer, and the session-scoped bodies beside it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

Id = Annotated[str, Meta(min_length=1, max_length=128)]
Name = Annotated[str, Meta(min_length=1, max_length=48)]
# what a manifest or a session names (types, fields, actions, scopes); `shape` says the rule in words
NAME_PATTERN = "^[a-z][a-z0-9_]{0,47}$"
DeclaredName = Annotated[
    str,
    Meta(
        pattern=NAME_PATTERN,
        extra={
            "shape": "a name: a lowercase ASCII letter, then lowercase letters, digits or _ (48 characters at most)"
        },
    ),
]
# `shape` says the form in a game developer's terms in a 422 (a Vector3 sent as {"x": ...} is told the form)
Position = Annotated[list[float], Meta(min_length=2, max_length=3, extra={"shape": "an array [x, y] or [x, y, z]"})]
FallbackCode = Literal["unavailable", "busy", "refused", "invalid_choice", "budget"]
MAX_ENTITIES = 16


class DecideEntity(msgspec.Struct, forbid_unknown_fields=True):
    """One entity that needs a decision, with the actions the game's rules allow right now."""

    id: Annotated[Id, Meta(description="The game's id of the entity, unique in the request; echoed in its decision.")]
    type: Annotated[Name, Meta(description="A type of the manifest, one with actions.")]
    observation: Annotated[dict[str, Any], Meta(description="Exactly the type's fields, each within its bounds.")]
    legal_actions: Annotated[
        list[Name],
        Meta(
            min_length=1,
            max_length=32,
            description="The type's actions the game's rules allow right now, without repeats: the model chooses "
            "among these or the entity falls back.",
        ),
    ]
    position: Annotated[
        Position | None, Meta(description="[x, y] or [x, y, z]; if omitted, the last telemetry position is used.")
    ] = None
    profile: Annotated[Name | None, Meta(description="A profile of the manifest, of this type if it names one.")] = None
    parent: Annotated[
        Id | None, Meta(description="The id of the entity this one belongs to: its squad or director.")
    ] = None
    trigger: Annotated[Name | None, Meta(description="One of the type's events: why it asks now.")] = None


class DecideRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of POST /v1/decide."""

    client_id: Annotated[Id, Meta(description="The game; in the hosted profile, the session token's client.")]
    epoch: Annotated[
        int,
        Meta(ge=0, description="Raised by the game when its state is invalidated (a reload, a new wave); echoed back."),
    ]
    world: Annotated[dict[str, Any], Meta(description="Exactly the manifest's world fields.")]
    entities: Annotated[
        list[DecideEntity], Meta(min_length=1, max_length=MAX_ENTITIES, description="1 to 16 entities, unique ids.")
    ]
    scope: Annotated[Name | None, Meta(description="The active scope: a manifest scope or one the session added.")] = (
        None
    )
    scope_state: Annotated[
        dict[str, Any] | None, Meta(description="Exactly the fields declared along the scope's chain, if it has any.")
    ] = None


class AIDecision(msgspec.Struct, tag_field="source", tag="AI"):
    """A valid model choice, fresh or from the decision cache."""

    id: Annotated[str, Meta(description="The entity's id.")]
    action: Annotated[str, Meta(description="One of the entity's legal_actions.")]
    label: Annotated[str, Meta(description="The manifest's description of the action, not model reasoning.")]
    confidence: Annotated[
        float | None, Meta(description="The model's probability for the action, from log-probabilities; or null.")
    ]
    ttl_ms: Annotated[int, Meta(description="How long the decision is valid, from the manifest.")]
    decision_id: Annotated[
        str, Meta(description="Opaque, unique and unforgeable; the game sends it back in POST /v1/report.")
    ]
    cached: Annotated[bool, Meta(description="True when reused from the decision cache instead of a model call.")]


class FallbackDecision(msgspec.Struct, tag_field="source", tag="FALLBACK"):
    """No choice for this entity: the game runs its native AI."""

    id: Annotated[str, Meta(description="The entity's id.")]
    code: Annotated[
        FallbackCode,
        Meta(
            description="Why: unavailable (provider error, timeout, no credentials), busy (at capacity), refused, "
            "invalid_choice (outside legal_actions or none), budget (over the type's max_input_tokens)."
        ),
    ]
    reason: Annotated[str, Meta(description="The same for a person: what happened, and what to change if anything.")]
    ttl_ms: Annotated[int, Meta(description="How long to run the native AI before asking again, from the manifest.")]


Decision = AIDecision | FallbackDecision


class DecideResponse(msgspec.Struct):
    """The answer of POST /v1/decide: one decision per entity, in the request's order."""

    a2g: Annotated[str, Meta(description="The protocol version, 0.1.")]
    epoch: Annotated[int, Meta(description="The request's epoch: drop an answer whose epoch is not the current one.")]
    latency_ms: Annotated[int, Meta(description="The service's wall time for this request.")]
    decisions: Annotated[list[Decision], Meta(description="One a request entity, in the request's order.")]


class TelemetryEntity(msgspec.Struct, forbid_unknown_fields=True):
    """What the game knows about one entity now: soft state that rebuilds the situation context."""

    id: Id
    type: Name
    position: Position | None = None
    state: Annotated[str, Meta(min_length=1, max_length=32)] | None = None
    action: Name | None = None
    parent: Id | None = None
    fields: dict[str, Any] | None = None


class TelemetryRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of POST /v1/telemetry."""

    client_id: Id
    epoch: Annotated[int, Meta(ge=0)]
    entities: Annotated[list[TelemetryEntity], Meta(max_length=10_000)] = []
    removed: Annotated[list[Id], Meta(max_length=10_000)] = []
    scene: Annotated[str, Meta(min_length=1, max_length=128)] | None = None


class TelemetryResponse(msgspec.Struct):
    """How many entity updates the service took."""

    accepted: int


class ScopeDefinition(msgspec.Struct, forbid_unknown_fields=True):
    """A scope a session adds at run time (a generated cave, a quest area)."""

    text: Annotated[str, Meta(max_length=4000)]
    parent: Name | None = None
    fields: dict[str, Any] = {}


class ContextRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of POST /v1/context."""

    client_id: Id
    scopes: Annotated[
        dict[DeclaredName, ScopeDefinition],
        Meta(min_length=1, max_length=256),
    ]


class ContextResponse(msgspec.Struct):
    """The session's own scopes after the change."""

    scopes: list[str]


Outcome = Literal["done", "failed", "interrupted", "rejected"]


class Report(msgspec.Struct, forbid_unknown_fields=True):
    """What became of one decision in the game."""

    decision_id: Annotated[str, Meta(min_length=1, max_length=64)]
    outcome: Outcome
    detail: Annotated[str, Meta(max_length=200)] | None = None


class ReportRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of POST /v1/report."""

    client_id: Id
    reports: Annotated[list[Report], Meta(min_length=1, max_length=256)]


class ReportResult(msgspec.Struct):
    """The status of one report: accepted, unknown (not this session's, or forged) or duplicate."""

    decision_id: str
    status: Literal["accepted", "unknown", "duplicate"]


class ReportResponse(msgspec.Struct):
    """One status per report, in order."""

    results: list[ReportResult]


class SessionRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of POST /v1/session (with the client's API key as bearer)."""

    client_id: Id


class SessionResponse(msgspec.Struct):
    """A new session and its token."""

    session_token: str
    session_id: str
    expires_in_s: int


class EndedResponse(msgspec.Struct):
    """DELETE /v1/session."""

    ended: str


class SeenEntity(msgspec.Struct):
    """One entity of the last batch: its own prompt part, its token count and what became of it."""

    id: str
    number: int
    tokens: int
    sent: bool
    source: str
    code: str | None
    text: str
    action: str | None = None
    reason: str | None = None


class ModelReply(msgspec.Struct):
    """What the provider call of a batch gave back: the model's answer as it came, or why there was none."""

    text: str | None
    error: str | None
    latency_ms: int
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0


class PromptView(msgspec.Struct):
    """GET /v1/prompt: what the model saw in this session's last decide request, and what it answered."""

    at: float
    system: str
    user: str | None
    entities: list[SeenEntity]
    reply: ModelReply | None = None


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
    # how long a decide request may wait for its provider call (NPCMIND_DEADLINE_MS): a client's timeout
    # belongs above it, or a slow model's answers arrive after the client gave up
    deadline_ms: int
