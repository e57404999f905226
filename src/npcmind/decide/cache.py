"""The decision cache: a fresh answer reused while its situation repeats, for the type's ttl_ms."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class CachedChoice:
    """What the model chose for a situation, and until when it may be reused."""

    action: str
    confidence: float | None
    expires_at: float


class DecisionCache:
    """An LRU of choices keyed by (client, cache key); entries die after the type's ttl_ms.

    Soft state: after a restart it refills from fresh calls. Shared by all sessions of one client,
    because the key already holds everything that decides the answer (manifest version included).
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        self._entries: OrderedDict[tuple[str, str], CachedChoice] = OrderedDict()
        self._max = max_entries

    def get(self, client_id: str, key: str) -> CachedChoice | None:
        """A live entry, or None."""
        k = (client_id, key)
        hit = self._entries.get(k)
        if hit is None:
            return None
        if hit.expires_at <= time.monotonic():
            del self._entries[k]
            return None
        self._entries.move_to_end(k)
        return hit

    def put(self, client_id: str, key: str, action: str, confidence: float | None, ttl_ms: int) -> None:
        """Remember a fresh choice for ttl_ms."""
        k = (client_id, key)
        self._entries[k] = CachedChoice(action, confidence, time.monotonic() + ttl_ms / 1000)
        self._entries.move_to_end(k)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
