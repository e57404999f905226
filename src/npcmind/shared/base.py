"""The interface of shared soft state, so the pipeline and the guard never know where it lives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(slots=True, frozen=True)
class CachedChoice:
    """What the model chose for a situation; reused while it lives (the type's ttl_ms)."""

    action: str
    confidence: float | None


class Shared(Protocol):
    """Soft state every process of a deployment shares. No method raises for an unreachable backend: it
    answers as a single process would (a miss, this process's own rate, ``None`` for "not known")."""

    async def start(self) -> None:
        """Connect inside the event loop that will use it."""
        ...

    async def close(self) -> None:
        """Let go of connections."""
        ...

    def problem(self) -> str | None:
        """Why the shared backend is not in use right now (for /v1/health), or None when it is."""
        ...

    async def cached(self, client_id: str, keys: list[str]) -> list[CachedChoice | None]:
        """The live cached choice of each key of one client, or None for a miss."""
        ...

    async def cache(self, client_id: str, entries: list[tuple[str, CachedChoice, int]]) -> None:
        """Keep fresh choices, each (key, choice, ttl_ms)."""
        ...

    async def take(self, client_id: str, session_id: str, rate: float, share: float) -> float:
        """One request of a session of a client at ``rate`` a second (bursts of twice that), of which the
        session may always use ``share``, and more while the client's other sessions leave it unused: 0 when it
        may go, else the seconds to wait. Atomic across processes: N processes let through what one does."""
        ...

    async def revoke(self, session_id: str, until: float) -> bool:
        """Refuse this session everywhere from now until ``until`` (epoch seconds, its token's expiry): True when
        every process sees it at once, False when the backend could not take it (the store's revocations still
        reach every process, within NPCMIND_REVOCATION_POLL_S)."""
        ...

    async def revoked(self, session_id: str) -> bool | None:
        """Whether the session was revoked; None when the backend cannot say (ask the store)."""
        ...

    async def claim(self, session_id: str, owner: str) -> bool | None:
        """Serve this session as ``owner`` (one id a process), as Colyseus owns a room: True when this process
        served it last, so what it holds of the session is current; False when another process served it
        meanwhile (or none ever did), so it must rebuild from the store; None when the backend cannot say."""
        ...

    async def back_off(self, until: float) -> None:
        """The provider asked every caller to wait until ``until`` (epoch seconds; a 429's Retry-After)."""
        ...

    async def backed_off(self) -> float:
        """Until when (epoch seconds) the provider asked to wait; 0 when it did not."""
        ...
