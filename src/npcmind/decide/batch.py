"""One decide request on its way through the pipeline, and who asks it: what the pipeline and the code that keeps
its decisions share, apart from both."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from npcmind.decide.calls import Fell
from npcmind.decide.prompt import EntityContext, EntityPrompt, Prompt
from npcmind.manifest import Manifest
from npcmind.manifest.model import ScopeSpec
from npcmind.protocol.a2g import DecideRequest, Decision, ModelReply
from npcmind.shared.base import CachedChoice
from npcmind.storage.base import DecisionFeatures, IssuedDecision, RequestFeatures


def _never() -> bool:
    """A session that cannot end while a request of it is under way (the local profile's)."""
    return False


@dataclass(slots=True)
class SessionContext:
    """The session a request belongs to: who asks, with which manifest, and the scopes it added."""

    session_id: str
    client_id: str
    manifest: Manifest
    scopes: Mapping[str, ScopeSpec]
    ended: Callable[[], bool] = _never  # the session ended (DELETE /v1/session) since the request came


class Situation(Protocol):
    """What the context layer (telemetry, space, groups, memory) gives the pipeline."""

    async def observe(self, session: SessionContext, req: DecideRequest, now: float) -> None:
        """Step 1: record what the request tells about its entities, as telemetry would."""
        ...

    async def view(
        self, session: SessionContext, req: DecideRequest, now: float
    ) -> tuple[list[str], dict[str, EntityContext]]:
        """Part 5 lines for the batch, and part 6 context for each entity."""
        ...

    def decided(self, session: SessionContext, issued: list[IssuedDecision]) -> None:
        """Learn the chosen actions (a parent's latest decision, a neighbour's action)."""
        ...


class AfterAnswer(Protocol):
    """What is told of each batch the model answered, once the game has every decision of it (shadow mode)."""

    def offer(self, batch: Batch) -> None:
        """Take the batch, or not, without waiting: the game's answer must never wait for it."""
        ...


Asked = tuple[int, EntityPrompt, str]  # an entity sent to the provider: its index, its prompt, its cache key
Outcome = CachedChoice | Fell  # what becomes of one entity: its legal choice, or why it falls back


@dataclass(slots=True)
class Batch:
    """One decide request on its way: checked, its prompt rendered in the answer's order, what needs no model
    known (cache, budget) and what is asked; then each entity's decision as it becomes final, and when."""

    session: SessionContext
    req: DecideRequest
    chain: list[tuple[str, ScopeSpec]]
    now: float
    t0: float
    prompt: Prompt
    counts: dict[int, int]
    known: dict[int, Outcome]
    asked: list[Asked]
    streamed: bool = False
    decisions: dict[int, Decision] = field(default_factory=dict)  # by the entity's index in the request
    sent_ms: dict[str, int] = field(default_factory=dict)  # by entity id, in the order the lines went out
    reply: ModelReply | None = None
    keep: list[tuple[str, CachedChoice, int]] = field(default_factory=list)  # fresh legal choices, to cache
    learned: list[DecisionFeatures] = field(default_factory=list)  # what the fresh ones were made from, to keep
    entity_of: dict[int, str] = field(default_factory=dict)  # each decision number issued so far: its entity's id

    def ms(self) -> int:
        """Milliseconds since the request arrived."""
        return round((time.perf_counter() - self.t0) * 1000)


def features(
    session: SessionContext,
    req: DecideRequest,
    chain: list[tuple[str, ScopeSpec]],
    now: float,
    learned: list[DecisionFeatures],
) -> RequestFeatures | None:
    """What the fresh decisions of this request were made from, for ``npcmind distill``."""
    if not learned:
        return None
    m = session.manifest
    state = m.chain_fields(chain).quantize(req.scope_state) if req.scope_state else None
    return RequestFeatures(session.client_id, m.version, now, m.world.quantize(req.world), state, learned)
