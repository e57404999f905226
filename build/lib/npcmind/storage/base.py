"""The store interface: everything the service must not lose, behind one async API (SQLite, PostgreSQL)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import msgspec

SCHEMA_VERSION = 2  # 1: a row a decision (moved over at start); 2: a row a request, outcomes apart


def check_version(found: int | None, where: str) -> None:
    """Refuse a store written by a newer npcmind: its rows may mean what this one cannot know."""
    if found is not None and found > SCHEMA_VERSION:
        raise ValueError(
            f"the store {where} was written by a newer npcmind (schema version {found}; this npcmind knows up to "
            f"{SCHEMA_VERSION}): upgrade npcmind, or give this one another --store"
        )


class StoreError(Exception):
    """The store could not keep or read what it was asked (disk full, I/O error): nothing of the request
    was kept, so nothing of it may be acknowledged; the HTTP layer answers 503."""


@dataclass(slots=True)
class IssuedDecision:
    """An AI decision as issued to one session, and its outcome once the game reports it."""

    seq: int
    decision_id: str
    session_id: str
    entity_id: str
    type: str
    action: str
    label: str
    created_at: float
    outcome: str | None = None
    detail: str | None = None


@dataclass(slots=True)
class SessionRecord:
    """A session of one client, as created by POST /v1/session (or implicitly in the local profile)."""

    session_id: str
    client_id: str
    created_at: float
    expires_at: float
    ended: bool = False


_encode = msgspec.json.Encoder().encode


def batch_row(rows: list[IssuedDecision]) -> tuple[int, int, str, float, bytes]:
    """One request's decisions as the one row every store keeps of them (a row a decision cost 2 KB a request):
    the first number, how many, the session, the time, and [decision_id, entity_id, type, action, label] each."""
    first = rows[0]
    decisions = _encode([(r.decision_id, r.entity_id, r.type, r.action, r.label) for r in rows])
    return first.seq, len(rows), first.session_id, first.created_at, decisions


class Store(Protocol):
    """Durable state. Once a method has returned, what it wrote survives kill -9 and a restart."""

    async def check(self) -> None:
        """Connect, create the schema and let go again, before the server starts: a store that cannot be used
        is one line at start (ValueError), not a failed start-up with a traceback."""
        ...

    async def open(self) -> None:
        """Connect inside the event loop that will use the store; a store it cannot use raises ValueError."""
        ...

    async def secret(self, name: str, size: int = 32) -> bytes:
        """A random secret created once and kept (MAC keys, token keys, signing seeds)."""
        ...

    async def allocate(self, n: int) -> int:
        """The first of ``n`` new consecutive decision sequence numbers."""
        ...

    async def record_decisions(self, rows: list[IssuedDecision]) -> None:
        """Keep issued decisions so that their reports can be checked later."""
        ...

    async def decision(self, seq: int) -> IssuedDecision | None:
        """An issued decision by its sequence number."""
        ...

    async def set_outcome(self, seq: int, outcome: str, detail: str | None, now: float) -> bool:
        """Record a decision's outcome unless one is recorded already (False then)."""
        ...

    async def session_decisions(self, session_id: str, limit: int) -> list[IssuedDecision]:
        """This session's latest decisions, newest first (to rebuild memory after a restart)."""
        ...

    async def create_session(self, rec: SessionRecord) -> None:
        """Keep a new session."""
        ...

    async def open_session(self, rec: SessionRecord, limit: int) -> bool:
        """Keep a new session unless its client has ``limit`` live ones already (False then), counted and kept
        in one atomic step: two processes opening a client's last session at once must not both succeed."""
        ...

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """A session by id, ended or not."""
        ...

    async def end_session(self, session_id: str) -> None:
        """Mark a session ended; its token stops working."""
        ...

    async def live_sessions(self, client_id: str, now: float) -> int:
        """How many sessions of a client are open and unexpired."""
        ...

    async def put_scope(self, session_id: str, name: str, spec: bytes) -> None:
        """Add or replace a scope of this session (JSON of a ScopeSpec)."""
        ...

    async def scopes(self, session_id: str) -> dict[str, bytes]:
        """The scopes this session added."""
        ...

    async def prune(self, before: float) -> tuple[int, int]:
        """Forget decisions issued before ``before`` (their outcomes too) and sessions that expired before it
        (their scopes too), so the store stops growing; the numbers of decisions and sessions forgotten.
        Decision numbers never repeat after it, across restarts too."""
        ...

    async def close(self) -> None:
        """Flush and release."""
        ...
