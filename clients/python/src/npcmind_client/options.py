"""How a decision client is set up, as one value: ``DecideClient`` and ``Scheduler`` take it and store it, so a
new option is written once (here) instead of in every signature that forwards it (TypeScript: ``SchedulerOptions``
in scheduler.ts, ``DecideClientOptions`` in decide.ts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from npcmind_client.cascade import DEFAULT_POLICY_REFRESH_MS, LocalPolicy
from npcmind_client.policy import MAX_BYTES


@dataclass(frozen=True, slots=True, kw_only=True)
class DecideOptions:
    """The options of one game's decision client; every field has the default a game gets by leaving it out."""

    world: dict[str, Any] | None = None  # what the service sees beside the entities (a game changes it live)
    scope: str | None = None  # a scope of the manifest (a boss fight), and its state, sent only with a scope
    scope_state: dict[str, Any] | None = None
    epoch: int = 0  # answers to requests of another epoch are dropped
    api_key: str | None = None  # the hosted profile: the client opens its own session with it
    refresh_ms: int | None = None  # over every type's refresh from the manifest
    event_window_ms: int = 50  # an event is asked at the latest this long after it, with the others of the window
    telemetry_ms: int = 500
    # the cascade: a local policy (a ``Policy`` or a function of the entity giving ``(action, confidence)`` or
    # None) decides the entities it is sure of (``threshold``); ``fetch_policy``: use the service's distilled
    # one (GET /v1/policy, asked every ``policy_refresh_ms``), by default on when no ``policy`` is given; one
    # larger than ``policy_max_bytes`` is not read past that, and not used (docs/policy.md)
    policy: LocalPolicy | None = None
    threshold: float = 0.8
    fetch_policy: bool | None = None
    policy_refresh_ms: float = DEFAULT_POLICY_REFRESH_MS
    policy_max_bytes: int = MAX_BYTES
    timeout_ms: float | None = None  # None: the service's provider deadline (GET /v1/health) plus 5 s
    workers: int = 4  # decide requests in flight at most (and the transport's threads)
    # decide answers as a stream of lines (docs/streaming.md): each entity's decision is applied as its line
    # arrives; False: today's single JSON answer
    stream: bool = True
    # the manifest when it is known already (what GET /v1/manifest answers as ``manifest``), and its version:
    # then it is not asked (the conformance cases and tests start from one)
    manifest: dict[str, Any] | None = None
    manifest_version: str | None = None
