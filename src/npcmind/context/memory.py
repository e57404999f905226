"""Per-entity memory: its last decisions and what became of them, served from memory, rebuilt from the store.

The store keeps every issued decision and accepted report durably; this is the fast view the prompt
needs. After a restart a session's memory is rebuilt from the store the first time the session is used.
"""

from __future__ import annotations

from collections import deque

from npcmind.storage.base import IssuedDecision

DEPTH = 8
REBUILD_ROWS = 50_000


class Memory:
    """The last ``DEPTH`` decisions of each entity of one session, newest last."""

    __slots__ = ("_by_entity", "_by_seq")

    def __init__(self) -> None:
        self._by_entity: dict[str, deque[IssuedDecision]] = {}
        self._by_seq: dict[int, IssuedDecision] = {}

    def add(self, d: IssuedDecision) -> None:
        """Remember an issued decision."""
        q = self._by_entity.get(d.entity_id)
        if q is None:
            q = self._by_entity[d.entity_id] = deque(maxlen=DEPTH)
        if len(q) == DEPTH:
            self._by_seq.pop(q[0].seq, None)
        q.append(d)
        self._by_seq[d.seq] = d

    def outcome(self, seq: int, outcome: str, detail: str | None) -> None:
        """An accepted report: the decision now carries its outcome."""
        d = self._by_seq.get(seq)
        if d is not None:
            d.outcome, d.detail = outcome, detail

    def recent(self, entity_id: str) -> list[IssuedDecision]:
        """The entity's remembered decisions, newest first."""
        q = self._by_entity.get(entity_id)
        return list(reversed(q)) if q else []

    @classmethod
    def rebuilt(cls, newest_first: list[IssuedDecision]) -> Memory:
        """Memory from the store's rows of one session, newest first."""
        m = cls()
        for d in reversed(newest_first):
            m.add(d)
        return m
