"""Shared soft state held in this process's memory: the embedded default, for one process."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from npcmind.shared.base import CachedChoice

MAX_SHARES = 65_536  # sessions whose own rate bucket a process keeps (a bucket idle longer is full anyway)


@dataclass(slots=True)
class Bucket:
    """A token bucket: ``rate`` requests a second, bursts up to twice that (at least one)."""

    rate: float
    tokens: float
    at: float = field(default_factory=time.monotonic)

    @property
    def cap(self) -> float:
        return max(1.0, 2 * self.rate)

    def refill(self, now: float) -> None:
        """Add what ``rate`` gave since the last look."""
        self.tokens = min(self.cap, self.tokens + max(0.0, now - self.at) * self.rate)
        self.at = now

    def wait(self) -> float:
        """Seconds until one token is there (0: now)."""
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate

    def take(self, now: float | None = None) -> float:
        """0 when a request may go now, else the seconds to wait."""
        self.refill(time.monotonic() if now is None else now)
        wait = self.wait()
        if wait == 0:
            self.tokens -= 1
        return wait


def take_shared(own: Bucket, pool: Bucket, now: float) -> float:
    """One request of a session: within its own share (``own``) it always goes, and is counted in the
    client's ``pool`` too (which may owe up to one burst); past its share it borrows what the pool holds.
    0 when it may go, else the seconds to wait. The client as a whole stays within the pool's rate."""
    own.refill(now)
    pool.refill(now)
    if own.tokens >= 1:
        own.tokens -= 1
        pool.tokens = max(-pool.cap, pool.tokens - 1)
        return 0.0
    if pool.tokens >= 1:
        pool.tokens -= 1
        return 0.0
    return min(own.wait(), pool.wait())


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

    def __init__(self, cache_entries: int = 100_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.local = LocalCache(cache_entries)
        self.clock = clock  # the rates' clock (a test gives its own)
        self._buckets: dict[str, Bucket] = {}
        self._shares: OrderedDict[tuple[str, str], Bucket] = OrderedDict()  # by session, least recently used first
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

    async def take(self, client_id: str, session_id: str, rate: float, share: float) -> float:
        return self.take_now(client_id, session_id, rate, share)

    def take_now(self, client_id: str, session_id: str, rate: float, share: float) -> float:
        """The buckets of this process alone (also Redis's stand-in while it is unreachable)."""
        now = self.clock()
        pool = self._buckets.get(client_id)
        if pool is None or pool.rate != rate:
            pool = self._buckets[client_id] = Bucket(rate, max(1.0, 2 * rate), now)
        k = (client_id, session_id)
        own = self._shares.get(k)
        if own is None or own.rate != share:
            own = self._shares[k] = Bucket(share, max(1.0, 2 * share), now)
            while len(self._shares) > MAX_SHARES:  # the one idle longest: full again by now, as a new one is
                self._shares.popitem(last=False)
        self._shares.move_to_end(k)
        return take_shared(own, pool, now)

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
