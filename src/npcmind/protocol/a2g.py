"""Wire types of A2G 0.1: the decide request and answer, and the session-scoped bodies beside it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from npcmind.protocol.numbers import Count

MAX_ID = 128  # characters of an id: a client, an entity, a scene
Id = Annotated[str, Meta(min_length=1, max_length=MAX_ID)]
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
    urgency: Annotated[
        int,
        Meta(
            ge=0,
            le=100,
            description="0 to 100, how soon the game needs this decision: the model answers in the order the prompt "
            "lists entities, higher urgency first, then those with a trigger, then request order (docs/streaming.md).",
        ),
    ] = 0


class DecideRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of POST /v1/decide."""

    client_id: Annotated[Id, Meta(description="The game; in the hosted profile, the session token's client.")]
    epoch: Annotated[
        Count,
        Meta(
            description="Raised by the game when its state is invalidated (a reload, a new wave); echoed back. "
            "0 to 2^53-1, the integers every engine's number holds exactly."
        ),
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


class DecideEnd(msgspec.Struct):
    """The last line of a streamed decide answer (docs/streaming.md): what the JSON answer carries besides its
    decisions, and when each entity's line went out; a stream without it was cut."""

    a2g: Annotated[str, Meta(description="The protocol version, 0.1.")]
    epoch: Annotated[int, Meta(description="The request's epoch: drop lines whose epoch is not the current one.")]
    latency_ms: Annotated[int, Meta(description="The service's wall time for this request, to its last line.")]
    sent_ms: Annotated[
        dict[str, int],
        Meta(description="Per entity id, the milliseconds from the request's arrival to the writing of its line."),
    ]


class TelemetryEntity(msgspec.Struct, forbid_unknown_fields=True):
    """What the game knows about one entity now: soft state that rebuilds the situation context."""

    id: Annotated[Id, Meta(description="The game's id of the entity; the same id as in decide requests.")]
    type: Annotated[Name, Meta(description="A type of the manifest, observe-only types (the player) included.")]
    position: Annotated[Position | None, Meta(description="[x, y] or [x, y, z]; needed for neighbours (`nearby`).")] = (
        None
    )
    state: Annotated[
        Annotated[str, Meta(min_length=1, max_length=32)] | None,
        Meta(description="A short word the game defines (stunned, fleeing); `active` when omitted."),
    ] = None
    action: Annotated[
        Name | None, Meta(description="What the entity is doing now, as neighbours see it: one of its type's actions.")
    ] = None
    parent: Annotated[
        Id | None, Meta(description="The id of the entity this one belongs to (its squad); the parent sees it.")
    ] = None
    fields: Annotated[
        dict[str, Any] | None, Meta(description="Exactly the type's fields, each within its bounds; kept as last sent.")
    ] = None


class TelemetryRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of POST /v1/telemetry."""

    client_id: Annotated[Id, Meta(description="The game; in the hosted profile, the session token's client.")]
    epoch: Annotated[Count, Meta(description="The game's epoch, as in decide requests.")]
    entities: Annotated[
        list[TelemetryEntity], Meta(max_length=10_000, description="Entities updated since the last telemetry.")
    ] = []
    removed: Annotated[
        list[Id], Meta(max_length=10_000, description="Ids of entities that left the scene (dead, despawned).")
    ] = []
    scene: Annotated[
        Id | None,
        Meta(description="The current scene (level, map): a new one resets the population and forgets the old."),
    ] = None


class TelemetryResponse(msgspec.Struct):
    """How many entity updates the service took."""

    accepted: Annotated[int, Meta(description="Entity updates and removals taken: all, or the request is refused.")]


class ScopeDefinition(msgspec.Struct, forbid_unknown_fields=True):
    """A scope a session adds at run time (a generated cave, a quest area)."""

    text: Annotated[str, Meta(max_length=4000, description="What the model is told about this scope.")]
    parent: Annotated[
        Name | None, Meta(description="A manifest or session scope this one is inside; its text and fields apply.")
    ] = None
    fields: Annotated[
        dict[str, Any],
        Meta(description="Fields of scope_state this scope declares, in the manifest's field form (type, min, ...)."),
    ] = {}


class ContextRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of POST /v1/context."""

    client_id: Annotated[Id, Meta(description="The game; in the hosted profile, the session token's client.")]
    scopes: Annotated[
        dict[DeclaredName, ScopeDefinition],
        Meta(
            min_length=1,
            max_length=256,
            description="Scopes to add by name; a manifest scope's name is a 409, a session scope's is replaced.",
        ),
    ]


class ContextResponse(msgspec.Struct):
    """The session's own scopes after the change."""

    scopes: Annotated[list[str], Meta(description="The names of every scope this session has added.")]


Outcome = Literal["done", "failed", "interrupted", "rejected"]


class Report(msgspec.Struct, forbid_unknown_fields=True):
    """What became of one decision in the game."""

    decision_id: Annotated[
        str, Meta(min_length=1, max_length=64, description="The decision_id of an AI decision of this session.")
    ]
    outcome: Annotated[
        Outcome,
        Meta(
            description="done (carried out), failed (tried, did not work), interrupted, rejected (the game did not "
            "apply it); enters the entity's memory."
        ),
    ]
    detail: Annotated[
        Annotated[str, Meta(max_length=200)] | None,
        Meta(description="What happened, in a few words (stung the player); up to 200 characters."),
    ] = None


class ReportRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of POST /v1/report."""

    client_id: Annotated[Id, Meta(description="The game; in the hosted profile, the session token's client.")]
    reports: Annotated[list[Report], Meta(min_length=1, max_length=256, description="1 to 256 reports.")]


class ReportResult(msgspec.Struct):
    """The status of one report: accepted, unknown (not this session's, or forged) or duplicate."""

    decision_id: Annotated[str, Meta(description="The report's decision_id.")]
    status: Annotated[
        Literal["accepted", "unknown", "duplicate"],
        Meta(
            description="accepted; unknown (not a decision of this session, forged, or older than the store keeps:"
            " NPCMIND_RETENTION_H); duplicate (already reported)."
        ),
    ]


class ReportResponse(msgspec.Struct):
    """One status per report, in order."""

    results: Annotated[list[ReportResult], Meta(description="One a report, in the request's order.")]


class SessionRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of POST /v1/session (with the client's API key as bearer)."""

    client_id: Annotated[Id, Meta(description="The client the API key belongs to, as in the clients file.")]


class SessionResponse(msgspec.Struct):
    """A new session and its token."""

    session_token: Annotated[
        str, Meta(description="The bearer token of every other request of this session; survives restarts.")
    ]
    session_id: Annotated[str, Meta(description="The session's id, as the service's logs name it.")]
    expires_in_s: Annotated[int, Meta(description="Seconds until the token expires: open a new session before.")]


class EndedResponse(msgspec.Struct):
    """DELETE /v1/session."""

    ended: Annotated[str, Meta(description="The id of the session that ended; its token is refused from now on.")]


class SeenEntity(msgspec.Struct):
    """One entity of the last batch: its own prompt part, its token count and what became of it."""

    id: Annotated[str, Meta(description="The entity's id.")]
    number: Annotated[
        int,
        Meta(
            description="Its number in the prompt (E1, E2, ...): its place in the answer's order (urgency, then a "
            "trigger, then the request's order)."
        ),
    ]
    tokens: Annotated[int, Meta(description="Tokens of its own part, as the token budget counted them.")]
    sent: Annotated[bool, Meta(description="Whether its part went to the model (not cached, not over budget).")]
    source: Annotated[str, Meta(description="AI or FALLBACK, as in the decide answer.")]
    code: Annotated[
        str | None, Meta(description="The fallback code, `cached` for a cache hit, or null for a fresh choice.")
    ]
    text: Annotated[str, Meta(description="Its own part of the prompt (parts 6-7), exactly as rendered.")]
    action: Annotated[str | None, Meta(description="The action it was given, if AI.")] = None
    reason: Annotated[str | None, Meta(description="Why it fell back, if it did.")] = None
    sent_ms: Annotated[
        int | None,
        Meta(
            description="When its decision went out, in ms from the request's arrival: its line of a streamed answer, "
            "or the whole answer (null: not sent, the client left first)."
        ),
    ] = None


class ModelReply(msgspec.Struct):
    """What the provider call of a batch gave back: the model's answer as it came, or why there was none."""

    text: Annotated[str | None, Meta(description="The model's answer exactly as it came, or null.")]
    error: Annotated[str | None, Meta(description="Why there was no answer (timeout, provider error), or null.")]
    latency_ms: Annotated[int, Meta(description="The provider call's wall time.")]
    input_tokens: Annotated[int, Meta(description="Input tokens the provider counted.")] = 0
    cached_tokens: Annotated[int, Meta(description="Of those, the ones read from the provider's prompt cache.")] = 0
    output_tokens: Annotated[int, Meta(description="Output tokens the provider counted.")] = 0


class PromptView(msgspec.Struct):
    """GET /v1/prompt: what the model saw in this session's last decide request, and what it answered."""

    at: Annotated[float, Meta(description="When the request was decided, in Unix seconds.")]
    system: Annotated[str, Meta(description="Parts 1-3: the same for requests of one scope and set of profiles.")]
    user: Annotated[
        str | None, Meta(description="The dynamic tail as sent (parts 4-7 of the entities sent), or null if none.")
    ]
    entities: Annotated[
        list[SeenEntity], Meta(description="Every entity of the request, in the prompt's order (its `number`).")
    ]
    reply: Annotated[
        ModelReply | None, Meta(description="The provider call's answer, or null when no entity was sent.")
    ] = None
    cached_since: Annotated[
        float | None,
        Meta(
            description="Null when this is the session's last request. Else the last request, at this time in Unix "
            "seconds, made no model call (every entity cached or over budget): this view is the last that made one."
        ),
    ] = None


class ManifestResponse(msgspec.Struct):
    """GET /v1/manifest: the manifest the service loaded for this client, and its version."""

    client_id: Annotated[str | None, Meta(description="The token's client (hosted profile), or null (local profile).")]
    version: Annotated[str, Meta(description="The manifest's version hash; it changes with any change of it.")]
    manifest: Annotated[dict[str, Any], Meta(description="The manifest as the service loaded it, as JSON.")]


class PolicyDocument(msgspec.Struct):
    """GET /v1/policy: the client's latest local policy for its manifest version (docs/policy.md)."""

    format: Annotated[Literal["npcmind-policy"], Meta(description="Always npcmind-policy.")]
    format_version: Annotated[int, Meta(description="1; an SDK refuses a version it does not know.")]
    manifest_version: Annotated[
        str, Meta(description="The manifest version it was trained for; never used for another.")
    ]
    client_id: Annotated[str | None, Meta(description="The client whose decisions it learnt.")]
    created_at: Annotated[str | None, Meta(description="When it was trained (ISO 8601, UTC).")]
    types: Annotated[dict[str, Any], Meta(description="Per entity type: actions, features and trees (docs/policy.md).")]


class ShadowReport(msgspec.Struct):
    """GET /v1/shadow: this process's shadow figures for the client, in the replay report's form (docs/replay.md)."""

    format: Annotated[Literal["npcmind-replay-report"], Meta(description="The replay report's format.")]
    target: Annotated[
        dict[str, Any],
        Meta(description="kind shadow; the client, shadow provider and model, share, dropped and failed calls."),
    ]
    calls: Annotated[int, Meta(description="Calls the shadow model answered or failed.")]
    decisions: Annotated[int, Meta(description="The game's decisions compared.")]
    left_out: Annotated[dict[str, int], Meta(description="Always empty for shadow figures.")]
    agreement: Annotated[float | None, Meta(description="Share of decisions where the shadow chose the same.")]
    types: Annotated[dict[str, Any], Meta(description="Per type: agreement, the confusion table, fallbacks.")]
    tokens: Annotated[dict[str, int], Meta(description="The shadow model's input and output tokens.")]
    cost: Annotated[dict[str, Any] | None, Meta(description="Always null for shadow figures (no prices given).")]
    latency_ms: Annotated[dict[str, Any], Meta(description="The shadow calls' p50 and p99 (the newest calls).")]
    fallbacks: Annotated[dict[str, int], Meta(description="The shadow's fallbacks, by code.")]
    situations_differing: Annotated[int, Meta(description="Situations where a choice differed.")]
    differ: Annotated[list[dict[str, Any]], Meta(description="The situations that differ most, both entity parts.")]


class HealthResponse(msgspec.Struct):
    """GET /v1/health: whether the service is up and what it will do with a decide request."""

    status: Annotated[Literal["ok"], Meta(description="ok whenever the service answers.")]
    a2g: Annotated[str, Meta(description="The protocol version, 0.1.")]
    version: Annotated[str, Meta(description="npcmind's version.")]
    profile: Annotated[str, Meta(description="local (no tokens) or hosted (session tokens).")]
    provider: Annotated[str, Meta(description="openai, anthropic, or none.")]
    model: Annotated[str | None, Meta(description="The model the provider is asked for, or null.")]
    provider_ready: Annotated[
        bool, Meta(description="Whether a call can succeed; false means every decision falls back with unavailable.")
    ]
    note: Annotated[str, Meta(description="The same for a person, with what the start-up check found.")]
    manifest_version: Annotated[
        str | None, Meta(description="The local profile's manifest version; null in the hosted profile (one a client).")
    ]
    # how long a decide request may wait for its provider call (NPCMIND_DEADLINE_MS): a client's timeout
    # belongs above it, or a slow model's answers arrive after the client gave up
    deadline_ms: Annotated[
        int, Meta(description="How long a decide request may wait for its model: a client's timeout belongs above it.")
    ]
    shared: Annotated[
        Literal["memory", "redis"],
        Meta(description="Where the decision cache, request rates and ended sessions live: this process or Redis."),
    ] = "memory"
    shared_ready: Annotated[
        bool,
        Meta(description="False while Redis is unreachable: each process then decides on its own (the note says why)."),
    ] = True
