"""The tracked entities (no I/O): what the game tells about each, its live choice, and when it is due.

Every rule that concerns one entity is here: a new epoch forgets every choice; an action is checked
against the legal actions sent and those of now; a choice expires after its ``ttl_ms``; a fallback gives
no choice; events of one moment share a window; a change of population re-asks everyone, at most every
500 ms; in cascade mode a sure local policy decides here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from npcmind_client.refusals import NUMBER
from npcmind_client.say import SayOnce
from npcmind_client.wire import OUTCOMES, AIDecision, FallbackDecision, Outcome

log = logging.getLogger("npcmind_client.decide")
REASK_GAP_MS = 500.0  # a change of population re-asks everyone, at most this often
Chooser = Callable[["Entity"], "tuple[str, float] | None"]  # the cascade's choice for an entity, or None


@dataclass(frozen=True, slots=True)
class Choice:
    """A usable decision for one entity: from the model (``AI``, fresh or cached) or the local policy."""

    action: str
    source: Literal["AI", "local"]
    confidence: float | None
    expires_at: float  # on the client's clock, in seconds
    decision_id: str | None = None
    cached: bool = False
    label: str | None = None


@dataclass(slots=True)
class Entity:
    """What the game tells about one entity; the scheduler's own bookkeeping sits beside it."""

    id: str
    type: str
    observation: dict[str, Any]
    legal_actions: list[str]
    position: list[float] | tuple[float, ...] | None = None
    profile: str | None = None
    parent: str | None = None
    state: str | None = None
    # bookkeeping (ms on the scheduler's clock)
    trigger: str | None = None
    due: float = 0.0
    asked_at: float = float("-inf")
    in_flight: bool = False
    choice: Choice | None = None
    expires: float = 0.0
    changed: bool = True  # since the last telemetry


@dataclass(slots=True)
class Stats:
    """Counters a game can show in a debug overlay; the tests read them too."""

    requests: int = 0
    asked: int = 0
    ai: int = 0
    cached: int = 0
    local: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)
    dropped_epoch: int = 0
    illegal: int = 0
    errors: int = 0
    reports_sent: int = 0
    refused: int = 0  # times the service refused an entity as malformed (it then goes alone until taken)
    # streamed answers (docs/streaming.md): decision lines applied, the sum over them of ms from the request's
    # send to the line's arrival (the per-entity latency: its mean is total / count), streams ended without
    # their last line
    streamed_decisions: int = 0
    streamed_ms_total: float = 0.0
    streams_cut: int = 0


class Roster:
    """The entities of one game, on the scheduler's clock (ms)."""

    def __init__(
        self, epoch: int, event_window_ms: float, choose: Chooser, threshold: float, stats: Stats, say: SayOnce
    ) -> None:
        self.entities: dict[str, Entity] = {}
        self.epoch = epoch
        self.choose, self.threshold = choose, threshold
        self.last_tick = float("-inf")  # a new entity is due then: with the next tick
        self._stats, self._say = stats, say
        self._window = float(event_window_ms)
        self._window_end = float("-inf")  # events until then go out together, when it ends
        self._count = 0
        self._last_reask = float("-inf")
        self._reask_pending = False

    def track(
        self,
        entity_id: str,
        type_: str,
        observation: dict[str, Any],
        legal_actions: list[str],
        position: list[float] | tuple[float, ...] | None = None,
        profile: str | None = None,
        parent: str | None = None,
        state: str | None = None,
        now: float | None = None,
    ) -> None:
        """Add an entity that decides, or update what it sees and may do now (not asked again for that
        alone: on its refresh, on an event, or when the population changes). It runs for every entity of
        every frame: no object is made and no clock read for an entity already tracked; a new one is due
        at ``now``, by default the last tick's time (so it goes with the next tick)."""
        e = self.entities.get(entity_id)
        if now is None:
            now = self.last_tick
        if e is None:
            self.entities[entity_id] = Entity(
                entity_id, type_, observation, legal_actions, position, profile, parent, state, due=now
            )
            return
        if e.type != type_:
            e.choice = None
            e.due = now
        # kept by reference; copied when a request is built
        e.type, e.observation, e.legal_actions = type_, observation, legal_actions
        e.position, e.profile, e.parent, e.state = position, profile, parent, state
        e.changed = True

    def event(self, entity_id: str, trigger: str, now: float) -> bool:
        """Something happened to the entity: ask for it when the event window it opened or joined ends (the
        events of one moment share a request). False, said once, for an entity not tracked (one untracked
        as it died from the hit): a game loop must not crash on the order of two calls."""
        e = self.entities.get(entity_id)
        if e is None:
            self._say(
                f"event:{trigger}", f"event({entity_id!r}, {trigger!r}) for an entity not tracked: ignored", False
            )
            return False
        e.trigger = trigger
        if now >= self._window_end:  # the first event of a moment opens a window; the next ones join it
            self._window_end = now + self._window
        e.due = min(e.due, self._window_end)
        return True

    def report(self, entity_id: str, outcome: Outcome, detail: str | None) -> dict[str, Any] | None:
        """The report item for the entity's current AI decision, or None: it has none (a fallback, a local
        choice, an expired decision), or the outcome is not one of the protocol's (said once)."""
        if outcome not in OUTCOMES:  # one wrong outcome would get the whole batch of reports refused
            self._say(
                f"outcome:{outcome}",
                f"report({entity_id!r}, {outcome!r}): the outcome must be one of {', '.join(OUTCOMES)}; not sent",
                False,
            )
            return None
        e = self.entities.get(entity_id)
        if e is None or e.choice is None or e.choice.decision_id is None:
            return None
        item: dict[str, Any] = {"decision_id": e.choice.decision_id, "outcome": outcome}
        if detail:
            item["detail"] = detail[:200]
        return item

    def action(self, entity_id: str, legal_now: list[str] | None, now: float) -> Choice | None:
        """The entity's live decision, or None: run the game's native AI. The action is checked against
        ``legal_now``, else against the legal actions last given to ``track()``."""
        e = self.entities.get(entity_id)
        if e is None or e.choice is None:
            return None
        if now >= e.expires:
            e.choice = None
            return None
        if e.choice.action not in (legal_now if legal_now is not None else e.legal_actions):
            return None
        return e.choice

    def set_epoch(self, value: int, now: float) -> None:
        """A new epoch: what was decided for the old state no longer holds; everyone is asked again."""
        if value != self.epoch:
            self.epoch = value
            for e in self.entities.values():
                e.choice = None
                e.due = min(e.due, now)

    def population(self, now: float) -> None:
        """When the number of entities changed, everyone is due now (at most every 500 ms)."""
        if len(self.entities) != self._count:
            self._count = len(self.entities)
            self._reask_pending = True
        if self._reask_pending and now - self._last_reask >= REASK_GAP_MS:
            self._reask_pending = False
            self._last_reask = now
            for e in self.entities.values():
                e.due = min(e.due, now)

    def local(self, e: Entity, now: float, ttl: float) -> bool:
        """Cascade: whether the local policy is sure enough of ``e`` to decide it here (none, or one that gives
        None for it: the service decides)."""
        try:
            got = self.choose(e)
        except Exception:  # a broken policy must not stop the game: ask the service instead
            if self._say.first("policy"):  # its traceback once, not once an entity a refresh
                log.exception("the local policy failed for %r (said once; the service decides instead)", e.id)
            return False
        if got is None:
            return False
        action, confidence = got
        if confidence >= self.threshold and action in e.legal_actions:
            e.choice = Choice(action, "local", confidence, (now + ttl) / 1000)
            e.expires = now + ttl
            e.trigger = None
            self._stats.local += 1
            return True
        return False

    def use(self, e: Entity, d: AIDecision | FallbackDecision, legal: tuple[str, ...], now: float) -> None:
        """One decision of an answer, for the entity it names."""
        e.in_flight = False
        if isinstance(d, AIDecision):
            if d.action not in legal:
                self._stats.illegal += 1
                e.choice = None
                return
            self._stats.ai += 1
            self._stats.cached += d.cached
            e.expires = now + d.ttl_ms
            e.choice = Choice(d.action, "AI", d.confidence, e.expires / 1000, d.decision_id, d.cached, d.label)
            return
        self._stats.fallbacks[d.code] = self._stats.fallbacks.get(d.code, 0) + 1
        e.choice = None
        if d.code == "budget":
            self._say(f"budget:{e.type}", f"{e.type} {e.id!r} is over its token budget: {d.reason}")
        elif d.code in ("unavailable", "busy"):  # the service's state, not the entity's: say it once
            kind = NUMBER.sub("#", d.reason)  # "asked to wait: 0.9 s more" is not new at every ask
            self._say(f"{d.code}:{kind}", f"npcmind fell back with {d.code!r}: {d.reason}")

    def release(self, ids: Iterable[str], due: float | None, keep: set[str] | frozenset[str] = frozenset()) -> None:
        """The entities of an answered or failed request may be asked again: at ``due``, or else on their
        next refresh (the seed's reaction to `unavailable` and `busy`); those in ``keep`` on their refresh."""
        for eid in ids:
            e = self.entities.get(eid)
            if e is not None and e.in_flight:
                e.in_flight = False
                if due is not None and eid not in keep:
                    e.due = min(e.due, due)
