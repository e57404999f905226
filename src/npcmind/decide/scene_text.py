"""The words the prompt uses for a session's scene (part 5's population and observers, part 6's neighbours,
parent and members), kept here with the rest of the prompt so that every line the model reads is written in
one package; the context layer finds who is near whom and calls these to say it.

Game strings are JSON-quoted, as everywhere in the prompt: they stay data on their line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from npcmind.manifest import Manifest
from npcmind.manifest.fields import quote


class Shown(Protocol):
    """What the prompt shows of an entity others see; ``summary`` keeps its text until the entity changes."""

    id: str
    type: str
    state: str
    action: str | None
    fields: dict[str, Any] | None
    decided: tuple[str, str, float] | None  # (action, label, unix time) of its latest decision
    summary: tuple[str, str] | None


class Counted(Protocol):
    """One type's head count in a scene."""

    alive: int
    seen: int

    @property
    def gone(self) -> int:
        """Seen, and no longer alive."""
        ...


def describe(e: Shown, m: Manifest, distance: float | None) -> str:
    """One entity as others see it; its text is built once per change, only the distance is new."""
    found = e.summary
    if found is None:
        parts = [f"state={quote(e.state)}"]
        if e.action:
            parts.append(f"action={e.action}")
        t = m.types.get(e.type)
        if e.fields and t is not None:
            parts.append(t.fields.render(e.fields))
        found = e.summary = (f"{e.type} {quote(e.id)}", " " + " ".join(parts))
    head, text = found
    if distance is None or distance == math.inf:  # positions ±1.7e308 apart: a distance no float holds
        return head + text
    return f"{head} d={round(distance)}{text}"


def population_line(population: Mapping[str, Counted]) -> str:
    """Part 5: how many of each type are alive, were seen and are gone in the scene."""
    return "POPULATION: " + "; ".join(f"{t} alive={p.alive} seen={p.seen} gone={p.gone}" for t, p in population.items())


def observed_line(e: Shown, m: Manifest, near: Mapping[str, int] | None) -> str:
    """Part 5: an observe-only entity, and how many of each type are within its perception (None: no position)."""
    line = "OBSERVED: " + describe(e, m, None)
    if near is None:
        return line
    return line + " near: " + (", ".join(f"{t}={n}" for t, n in sorted(near.items())) or "nobody")


def nearby_line(near: Sequence[tuple[float, Shown]], m: Manifest) -> str:
    """Part 6: the nearest entities within the entity's perception radius, nearest first."""
    return "nearby: " + "; ".join([describe(e, m, d) for d, e in near])


def parent_line(parent_id: str, parent: Shown | None) -> str:
    """Part 6: the entity's parent, and its latest choice when it made one."""
    if parent is None:
        return f"parent: {quote(parent_id)}"
    if parent.decided is None:
        return f"parent: {parent.type} {quote(parent.id)} has not decided yet"
    action, label, _ = parent.decided
    return f"parent: {parent.type} {quote(parent.id)} chose {action} ({label})"


def parent_decided_line(ago: int) -> tuple[str, str]:
    """Part 6: how long ago the parent decided, as shown and as the cache key holds it (the age as ``?``)."""
    return f"parent decided {ago} s ago", "parent decided ? s ago"


def members_line(members: Sequence[tuple[float | None, Shown]], m: Manifest) -> str:
    """Part 6: the entity's own members, nearest first."""
    return "members: " + "; ".join(describe(c, m, d) for d, c in members)
