"""One session's scene: its entities, where they are, who belongs to whom, and how many came and went.

Soft state, rebuilt by the game's telemetry after a restart. Only ever read for the session it belongs to.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from itertools import islice
from operator import attrgetter
from typing import Any

from npcmind.context.space import Grid


@dataclass(slots=True)
class EntityState:
    """What the session knows about one entity."""

    id: str
    type: str
    state: str = "active"
    action: str | None = None
    parent: str | None = None
    fields: dict[str, Any] | None = None
    decided: tuple[str, str, float] | None = None  # (action, label, unix time) of its latest decision
    # its description in the prompt, (type and quoted id, " " + state, action and fields), kept until it changes
    summary: tuple[str, str] | None = None
    touched: int = 0  # the scene's update count when this entity was last recorded


@dataclass(slots=True)
class Population:
    """Per type in the current scene."""

    alive: int
    seen: int

    @property
    def gone(self) -> int:
        return self.seen - self.alive


@dataclass
class Scene:
    """Entities of the current scene, a spatial index over them, their groups and population.

    ``seen`` is a number per type, not a set of ids: a game that gives every spawn a new id would grow a set of
    every id ever seen without bound (1 million ids of 128 characters: 200 MB). An id that leaves and comes
    back as the same type counts once while the scene still keeps it among the ids that left (``left``, in the
    order they left: the last ``limit`` at most, the last 90% of ``limit`` at least); after that it counts again."""

    name: str | None = None
    entities: dict[str, EntityState] = field(default_factory=dict)
    grid: Grid = field(default_factory=Grid)
    children: dict[str, set[str]] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)  # distinct ids seen in this scene, by type
    alive: dict[str, set[str]] = field(default_factory=dict)  # ids present now, by type
    left: dict[str, str] = field(default_factory=dict)  # the last ``limit`` ids that left, and their type then
    version: int = 0  # moves whenever something a prompt shows of the scene changes
    limit: int = 20_000  # entities kept; past it the least recently updated tenth is dropped
    dropped: int = 0  # entities dropped at the limit since the scene started
    updates: int = 0

    def change(self, name: str | None) -> None:
        """Enter scene ``name``; a different name forgets the old scene."""
        if name is None or name == self.name:
            return
        reset = self.name is not None
        self.name = name
        if reset:
            self.version += 1
            self.entities.clear()
            self.grid.clear()
            self.children.clear()
            self.seen.clear()
            self.alive.clear()
            self.left.clear()
            self.dropped = 0

    def upsert(
        self,
        eid: str,
        type_: str,
        position: list[float] | None = None,
        state: str | None = None,
        action: str | None = None,
        parent: str | None = None,
        fields: dict[str, Any] | None = None,
    ) -> EntityState:
        """Record what is known now; anything not given keeps its last value. The scene's ``version``
        moves only when something the prompt shows really changed."""
        e = self.entities.get(eid)
        changed = False
        self.updates += 1
        if e is None:
            e = self.entities[eid] = EntityState(eid, type_, touched=self.updates)
            self.alive.setdefault(type_, set()).add(eid)
            self._arrived(eid, type_)
            changed = True
            if len(self.entities) > self.limit:
                self._drop_oldest()  # never the entity just added: it is the most recent
        elif e.type != type_:
            self.alive[e.type].discard(eid)
            self.alive.setdefault(type_, set()).add(eid)
            self._arrived(eid, type_)
            self._left(eid, e.type)  # it is no longer one of that type: as if it had left
            e.type = type_
            e.fields = e.summary = None  # the old type's fields mean nothing for the new one
            changed = True
        e.touched = self.updates
        if position is not None:
            pos = tuple(position)
            if self.grid.position(eid) != pos:
                self.grid.put(eid, pos)
                changed = True
        if (
            (state is not None and state != e.state)
            or (action is not None and action != e.action)
            or (fields is not None and fields != e.fields)
        ):
            e.summary = None
            changed = True
            e.state = state if state is not None else e.state
            e.action = action if action is not None else e.action
            e.fields = fields if fields is not None else e.fields
        if parent is not None and parent != e.parent:
            self._unlink(e)
            e.parent = parent
            self.children.setdefault(parent, set()).add(eid)
            changed = True
        if changed:
            self.version += 1
        return e

    def chose(self, eid: str, action: str, label: str, at: float) -> None:
        """An entity's new decision: its latest decision, and its chosen action as others see it."""
        e = self.entities.get(eid)
        if e is None:
            return
        first = e.decided is None
        e.decided = (action, label, at)
        if first or e.action != action:
            e.action = action
            e.summary = None
            self.version += 1

    def remove(self, eid: str) -> None:
        """The entity left the scene (died, despawned): no longer alive, still seen."""
        e = self.entities.pop(eid, None)
        if e is None:
            return
        self.version += 1
        self.alive[e.type].discard(eid)
        self.grid.remove(eid)
        self._unlink(e)
        self._left(eid, e.type)

    def _arrived(self, eid: str, type_: str) -> None:
        """Count an id that is now of ``type_`` as seen, unless it is one of that type that left lately."""
        if self.left.pop(eid, None) != type_:
            self.seen[type_] = self.seen.get(type_, 0) + 1

    def _left(self, eid: str, type_: str) -> None:
        """Remember that an id of ``type_`` left, among the last ``limit`` that did: past it, the oldest tenth is
        forgotten at once (one at a time, each would first step over the ones deleted before it)."""
        left = self.left
        left.pop(eid, None)  # re-inserted: the dict's order is the order they left
        left[eid] = type_
        if len(left) > self.limit:
            for old in list(islice(left, len(left) - self.limit * 9 // 10)):
                del left[old]

    def _unlink(self, e: EntityState) -> None:
        """Take an entity out of its parent's members (and forget a parent left with none)."""
        if e.parent is None:
            return
        kids = self.children.get(e.parent)
        if kids is not None:
            kids.discard(e.id)
            if not kids:
                del self.children[e.parent]

    def _drop_oldest(self) -> None:
        """Past the limit, forget the least recently updated tenth of the scene: entities a game stopped
        mentioning without removing them (a death it never reported) must not grow a session without bound.
        They count as gone, as removed ones do."""
        n = len(self.entities) - self.limit * 9 // 10
        for e in heapq.nsmallest(n, self.entities.values(), key=attrgetter("touched")):
            self.remove(e.id)
            self.dropped += 1

    def population(self) -> dict[str, Population]:
        """Alive and seen per type, for every type seen in this scene."""
        return {t: Population(len(self.alive.get(t, ())), n) for t, n in sorted(self.seen.items())}

    def members(self, parent: str, k: int = 8) -> list[tuple[float | None, EntityState]]:
        """Up to ``k`` members of a parent, nearest to it first when positions are known, then by id."""
        ids = self.children.get(parent)
        if not ids:
            return []
        origin = self.grid.position(parent)
        rows: list[tuple[float | None, EntityState]] = []
        for cid in ids:
            pos = self.grid.position(cid)
            d = None
            if origin is not None and pos is not None:  # hypot: a square of 1e200 overflowed, a 500
                d = math.hypot(*[a - b for a, b in zip(origin, pos, strict=False)])
            rows.append((d, self.entities[cid]))
        rows.sort(key=lambda r: (r[0] is None, r[0] or 0.0, r[1].id))
        return rows[:k]
