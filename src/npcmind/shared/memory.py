"""Shared soft state held in this process's memory: the embedded default, for one process."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

from npcmind.shared.base import CachedChoice


@dataclass(slots=True)
class Bucket:
    """A token bucket: ``rate`` requests a second, bursts up to twice that."""

    rate: float
    tokens: float
    at: float = field(default_factory=time.monotonic)

    def take(self) -> float:
        """0 when a request may go now, else the seconds to wait."""
        now = time.monotonic()
        cap = max(1.0, 2 * self.rate)
        self.tokens = min(cap, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


class LocalCache:
    """An LRU of choices keyed by (client, cache key), each dying after its ttl_ms."""

    def __init__(self, max_entries: int) -> None:
        self._entries: OrderedDict[tuple[str, str], tuple[CachedChoice, float]] = OrderedDict()
        self._max = max_entries

    def get(self, client_id: str, key: str) -> CachedChoice | None:
        """A live entry, or None."""
        k = (client_id, key)
        hit = self._entries.get(k)
        if hit is None:
            return None
        if hit[1] <= time.monotonic():
            del self._entries[k]
            return None
        self._entries.move_to_end(k)
        return hit[0]

    def put(self, client_id: str, key: str, choice: CachedChoice, ttl_ms: int) -> None:
        """Keep a choice for ttl_ms."""
        k = (client_id, key)
        self._entries[k] = (choice, time.monotonic() + ttl_ms / 1000)
        self._entries.move_to_end(k)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)


class MemoryShared:
    """Everything in this process: exact for one process, and what a process falls back to without Redis."""

    def __init__(self, cache_entries: int = 100_000) -> None:
        self.local = LocalCache(cache_entries)
        self._buckets: dict[str, Bucket] = {}
        self._revoked: dict[str, float] = {}
        self._back_off = 0.0

    async def start(self) -> None:
        """Nothing to connect."""

    async def close(self) -> None:
        """Nothing to let go."""

    def problem(self) -> str | None:
        return None

    async def cached(self, client_id: str, keys: list[str]) -> list[CachedChoice | None]:
        return [self.local.get(client_id, k) for k in keys]

    async def cache(self, client_id: str, entries: list[tuple[str, CachedChoice, int]]) -> None:
        for key, choice, ttl_ms in entries:
            self.local.put(client_id, key, choice, ttl_ms)

    async def take(self, client_id: str, rate: float) -> float:
        return self.take_now(client_id, rate)

    def take_now(self, client_id: str, rate: float) -> float:
        """The bucket of this process alone (also Redis's stand-in while it is unreachable)."""
        b = self._buckets.get(client_id)
        if b is None or b.rate != rate:
            b = self._buckets[client_id] = Bucket(rate, max(1.0, 2 * rate))
        return b.take()

    async def revoke(self, session_id: str, until: float) -> bool:
        now = time.time()
        self._revoked = {s: t for s, t in self._revoked.items() if t > now}  # expired tokens fail on their own
        self._revoked[session_id] = until
        return True

    async def revoked(self, session_id: str) -> bool | None:
        return session_id in self._revoked

    async def claim(self, session_id: str, owner: str) -> bool | None:
        return True  # one process: it serves every session, and nothing it holds can go stale

    async def back_off(self, until: float) -> None:
        self._back_off = max(self._back_off, until)

    async def backed_off(self) -> float:
        return self._back_off
