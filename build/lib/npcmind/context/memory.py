"""Per-entity memory: its last decisions and what became of them, served from memory, rebuilt from the store.

The store keeps every issued decision and accepted report durably; this is the fast view the prompt
needs. After a restart a session's memory is rebuilt from the store the first time the session is used.
"""

from __future__ import annotations

import math
from collections import deque

from npcmind.decide.prompt import quote
from npcmind.storage.base import IssuedDecision

DEPTH = 8
REBUILD_ROWS = 50_000


def seconds_ago(then: float, now: float) -> int:
    """Whole seconds from ``then`` to ``now``, rounded half up, never negative (a clock set back)."""
    return max(0, int(now - then + 0.5))


class _Shown:
    """One remembered decision as the prompt shows it: its fixed parts, made once, and the last text with
    the span of ``now`` it holds for (its age in whole seconds is all that changes)."""

    __slots__ = ("at", "head", "since", "tail", "text", "until")

    def __init__(self, d: IssuedDecision) -> None:
        report = "no report yet" if d.outcome is None else d.outcome + (f" {quote(d.detail)}" if d.detail else "")
        self.at = d.created_at
        self.head = f"{d.action} "
        self.tail = f" s ago -> {report}"
        self.since = self.until = 0.0
        self.text = ""

    def render(self, now: float) -> None:
        """The text at ``now``, kept until ``now`` leaves the second it was made for."""
        age = int(now - self.at + 0.5)  # seconds_ago(), inline: this runs for every entry of a changed second
        if age > 0:
            self.since = self.at + age - 0.5
        else:
            age, self.since = 0, -math.inf
        self.until = self.at + age + 0.5
        self.text = f"{self.head}{age}{self.tail}"


class Memory:
    """The last ``DEPTH`` decisions of each entity of one session, newest last, for the ``limit`` entities
    decided most recently (a game that gives every spawn a new id must not grow a session without bound)."""

    __slots__ = ("_by_entity", "_by_seq", "_shown", "limit")

    def __init__(self, limit: int = 20_000) -> None:
        self.limit = limit
        self._by_entity: dict[str, deque[IssuedDecision]] = {}  # least recently decided first
        self._by_seq: dict[int, IssuedDecision] = {}
        # each remembered decision's rendered text, kept while its age in whole seconds is unchanged
        self._shown: dict[int, _Shown] = {}

    def add(self, d: IssuedDecision) -> None:
        """Remember an issued decision."""
        by_entity = self._by_entity
        q = by_entity.pop(d.entity_id, None)  # re-inserted below: the dict's order is recency
        if q is None:
            q = deque(maxlen=DEPTH)
            if len(by_entity) >= self.limit:
                self._forget(next(iter(by_entity)))
        by_entity[d.entity_id] = q
        if len(q) == DEPTH:
            self._by_seq.pop(q[0].seq, None)
            self._shown.pop(q[0].seq, None)
        q.append(d)
        self._by_seq[d.seq] = d

    def _forget(self, entity_id: str) -> None:
        for d in self._by_entity.pop(entity_id, ()):
            self._by_seq.pop(d.seq, None)
            self._shown.pop(d.seq, None)

    def __len__(self) -> int:
        """Entities remembered."""
        return len(self._by_entity)

    def outcome(self, seq: int, outcome: str, detail: str | None) -> None:
        """An accepted report: the decision now carries its outcome."""
        d = self._by_seq.get(seq)
        if d is not None:
            d.outcome, d.detail = outcome, detail
            self._shown.pop(seq, None)

    def line(self, entity_id: str, now: float) -> str | None:
        """The entity's memory line for its prompt, newest first, or None if it has none. It is built
        for every entity of every request, so each entry's text is reused until its age changes."""
        q = self._by_entity.get(entity_id)
        if not q:
            return None
        shown = self._shown
        parts = []
        for d in reversed(q):
            s = shown.get(d.seq)
            if s is None:
                s = shown[d.seq] = _Shown(d)
            if not s.since <= now < s.until:
                s.render(now)
            parts.append(s.text)
        return "memory: " + "; ".join(parts)

    @classmethod
    def rebuilt(cls, newest_first: list[IssuedDecision], limit: int = 20_000) -> Memory:
        """Memory from the store's rows of one session, newest first."""
        m = cls(limit)
        for d in reversed(newest_first):
            m.add(d)
        return m
