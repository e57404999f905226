"""Each type's refresh and decision life, from the service's manifest (GET /v1/manifest), and the service's
provider deadline (GET /v1/health): a client that kept its own would re-ask too often or give up too soon."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

DEFAULT_REFRESH_MS = 4000
DEFAULT_TTL_MS = 12000
MAX_MS = 2**53 - 1  # the manifest's bound on ttl_ms and the like (every integer up to it is exact in a double)


class Asked(Protocol):
    """What the timings read of a tracked entity: when it was asked, and when it is due."""

    type: str
    asked_at: float
    due: float


class Timings:
    """Refresh and ttl per type (ms); the defaults hold until the manifest is known."""

    def __init__(self, refresh_ms: int | None, manifest: dict[str, Any] | None) -> None:
        self._refresh_ms = refresh_ms  # the game's own, over every type's
        self._types: dict[str, tuple[int, int]] = {}
        self.known = False
        self.asked = False  # GET /v1/manifest is out
        if manifest is not None:
            self._load(manifest)

    def of(self, type_: str) -> tuple[float, float]:
        """The type's refresh and ttl, in ms."""
        refresh, ttl = self._types.get(type_, (DEFAULT_REFRESH_MS, DEFAULT_TTL_MS))
        return float(self._refresh_ms or refresh), float(ttl)

    def read(self, status: int, body: Any, entities: Iterable[Asked]) -> bool:
        """Take the answer to GET /v1/manifest; False when it holds none (asked again later). Entities asked
        before it came are due again on their type's refresh."""
        self.asked = False
        data = body.get("manifest") if status == 200 and isinstance(body, dict) else None
        if not isinstance(data, dict):
            return False
        self._load(data)
        for e in entities:
            e.due = min(e.due, e.asked_at + self.of(e.type)[0])
        return True

    def _load(self, data: dict[str, Any]) -> None:
        defaults: dict[str, Any] = d if isinstance(d := data.get("defaults"), dict) else {}
        types: dict[str, Any] = t if isinstance(t := data.get("types"), dict) else {}
        refresh, ttl = _ms(defaults.get("refresh_ms"), DEFAULT_REFRESH_MS), _ms(defaults.get("ttl_ms"), DEFAULT_TTL_MS)
        for name, given in types.items():
            one: dict[str, Any] = given if isinstance(given, dict) else {}
            self._types[name] = (_ms(one.get("refresh_ms"), refresh), _ms(one.get("ttl_ms"), ttl))
        self.known = True


def _ms(value: Any, fallback: int) -> int:
    """A positive whole number of ms from the manifest, else ``fallback``: a string, NaN, an infinity or a
    number past 2**53 from a broken or hostile service never reaches ``int()`` in the game's tick."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_MS:
        return fallback
    return int(value)


def deadline_timeout(status: int, body: Any) -> float | None:
    """The service's provider deadline in seconds, from a GET /v1/health answer, or None (an older service)."""
    deadline = body.get("deadline_ms") if status == 200 and isinstance(body, dict) else None
    if isinstance(deadline, int) and not isinstance(deadline, bool) and 0 < deadline <= MAX_MS:
        return deadline / 1000
    return None
