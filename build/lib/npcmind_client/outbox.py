"""What the game tells the service beside decisions (no I/O): telemetry and reports, batched.

Telemetry goes every ``telemetry_ms`` with the entities changed since, the observe-only ones, the scene and
the removals (those two with the first part); a 413 (observations too rich for the body limit) halves the
batch, from then on too, and sends the refused body again in two. Reports go at most 256 a request, and at
most 10,000 wait while the service is unreachable (beyond it the oldest tenth goes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

TELEMETRY_BATCH = 1000
REPORT_BATCH = 256
MAX_QUEUED_REPORTS = 10_000


class Tracked(Protocol):
    """What the outbox reads of a tracked entity (the scheduler's ``Entity``)."""

    id: str
    type: str
    observation: dict[str, Any]
    position: list[float] | tuple[float, ...] | None
    state: str | None
    parent: str | None
    changed: bool


class Outbox:
    """The telemetry and reports that wait to be sent, as request bodies."""

    def __init__(self, client_id: str, telemetry_ms: float, say: Callable[[str, str, bool], None]) -> None:
        self.client_id = client_id
        self.every_ms = telemetry_ms
        self.batch = TELEMETRY_BATCH  # halved on a 413
        self.again: list[dict[str, Any]] = []  # telemetry bodies to send again (halved, or without a refused one)
        self._say = say
        self._observed: dict[str, dict[str, Any]] = {}
        self._removed: list[str] = []
        self._scene: str | None = None
        self._reports: list[dict[str, Any]] = []
        self._last = float("-inf")

    def observe(self, entity_id: str, item: dict[str, Any]) -> None:
        """An observe-only entity's telemetry item, sent with the next telemetry."""
        self._observed[entity_id] = item

    def forget(self, entity_id: str, was_tracked: bool) -> None:
        """The entity left: the service is told with the next telemetry."""
        if self._observed.pop(entity_id, None) is not None or was_tracked:
            self._removed.append(entity_id)

    def set_scene(self, scene: str) -> None:
        """A new scene: it goes with the first part of the next telemetry."""
        self._scene = scene

    def report(self, item: dict[str, Any]) -> None:
        """Queue a report; the oldest tenth goes when the queue is full (the service has been away)."""
        if len(self._reports) >= MAX_QUEUED_REPORTS:
            del self._reports[: MAX_QUEUED_REPORTS // 10]
            self._say(
                "reports-dropped",
                f"more than {MAX_QUEUED_REPORTS} reports wait for npcmind: the oldest are dropped",
                False,
            )
        self._reports.append(item)

    def has_reports(self) -> bool:
        """Whether reports wait."""
        return bool(self._reports)

    def reports(self) -> dict[str, Any] | None:
        """The body of the next report request (up to 256), or None."""
        if not self._reports:
            return None
        reports, self._reports = self._reports[:REPORT_BATCH], self._reports[REPORT_BATCH:]
        return {"client_id": self.client_id, "reports": reports}

    def telemetry(
        self, now: float, epoch: int, entities: Iterable[Tracked], alone: dict[str, str]
    ) -> list[dict[str, Any]]:
        """The telemetry bodies due now (none before ``telemetry_ms`` since the last, or with nothing new);
        entities refused before go in a body of their own, so they cannot sink the others'."""
        if now - self._last < self.every_ms:
            return []
        items: list[dict[str, Any]] = []
        for e in entities:
            if e.changed:
                e.changed = False
                item: dict[str, Any] = {"id": e.id, "type": e.type, "fields": e.observation}
                for k, v in (("position", e.position), ("state", e.state), ("parent", e.parent)):
                    if v is not None:
                        item[k] = v
                items.append(item)
        items += self._observed.values()
        if not items and not self._removed and self._scene is None:
            return []
        self._last = now
        lone = [item for item in items if item["id"] in alone]
        if lone:
            items = [item for item in items if item["id"] not in alone]
        first: dict[str, Any] = {"scene": self._scene} if self._scene is not None else {}
        bodies = []
        for i in range(0, max(len(items), 1), self.batch):  # the scene and removals go with the first
            body = {"client_id": self.client_id, "epoch": epoch, "entities": items[i : i + self.batch], **first}
            if i == 0:
                body["removed"] = self._removed
            bodies.append(body)
            first = {}
        if lone:
            bodies.append({"client_id": self.client_id, "epoch": epoch, "entities": lone})
        self._observed.clear()
        self._removed = []
        self._scene = None
        return bodies

    def halve(self, sent: dict[str, Any]) -> bool:
        """A 413 for ``sent``: fewer entities a request from now on, and ``sent`` again in two. False when it
        held one entity (nothing to halve)."""
        entities = sent["entities"]
        if len(entities) <= 1:
            return False
        half = len(entities) // 2
        self.batch = max(1, min(self.batch, half))
        self.again.append({**sent, "entities": entities[:half]})
        rest = {k: v for k, v in sent.items() if k not in ("scene", "removed")}  # those went with the first
        self.again.append({**rest, "entities": entities[half:]})
        return True

    def without(self, sent: dict[str, Any], bad: set[str]) -> None:
        """Send ``sent`` again without the entities the service refused, if anything is left."""
        kept = {**sent, "entities": [item for item in sent["entities"] if item["id"] not in bad]}
        if kept["entities"] or kept.get("removed") or kept.get("scene"):
            self.again.append(kept)
