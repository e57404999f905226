"""The game's memory of its NPCs as one interface (``NpcMemory``, as TypeScript's and C#'s), so the dialogue
loop takes any of them: ``InMemoryNpcs`` here (no dependencies), the SQLite + embeddings ``NpcStore``, or the
game's own save data."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from npcmind_client.errors import InvalidInputError

_WORD = re.compile(r"[^\W_]+")


@dataclass
class NpcRecord:
    """An NPC of the game: who it is, what it knows about itself, and its current state."""

    npc_id: str
    persona: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NewMemory:
    """A memory the service asks the game to keep (a Finalize's ``memoryStore`` item)."""

    text: str
    type: str
    importance: float


@dataclass(frozen=True)
class RecalledMemory:
    """A memory the game recalled for an observation, with how similar it is (0..1)."""

    text: str
    type: str
    importance: float
    similarity: float


@runtime_checkable
class NpcMemory(Protocol):
    """The game's memory of its NPCs: who they are, what they recall, and where a verified outcome is kept."""

    def get(self, npc_id: str) -> NpcRecord | None:
        """An NPC by id, or None."""
        ...

    def recall(self, npc_id: str, query: str, limit: int, threshold: float) -> Sequence[RecalledMemory]:
        """At most ``limit`` memories at least ``threshold`` similar to ``query``, most similar first."""
        ...

    def apply(self, npc_id: str, memories: Sequence[NewMemory], state_transform: dict[str, Any]) -> dict[str, Any]:
        """Keep the memories and merge the state patch (JSON merge patch), both or neither; the new state."""
        ...


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch: objects merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def check_npc_id(npc_id: str) -> None:
    """An NPC id travels as one segment of the URL path: non-empty, without '/'."""
    if not isinstance(npc_id, str) or not npc_id or "/" in npc_id:
        raise InvalidInputError(f"npc_id: {npc_id!r} must be non-empty text without '/' (a segment of the URL)")


def _words(text: str) -> set[str]:
    """The set of lowercase words of a text."""
    return set(_WORD.findall(text.lower()))


class InMemoryNpcs:
    """NPCs and their memories in the process (lost when it ends): enough for a game to start with; recall is
    word overlap (Jaccard similarity), not meaning, as TypeScript's and C#'s ``InMemoryNpcs``."""

    def __init__(self) -> None:
        self._npcs: dict[str, NpcRecord] = {}
        self._memories: dict[str, list[NewMemory]] = {}

    def register(
        self,
        npc_id: str,
        persona: str | None = None,
        data: dict[str, Any] | None = None,
        state: dict[str, Any] | None = None,
    ) -> NpcRecord:
        """Add an NPC (or replace who it is); its state starts empty unless given."""
        check_npc_id(npc_id)
        rec = self._npcs[npc_id] = NpcRecord(npc_id, persona, dict(data or {}), dict(state or {}))
        return rec

    def get(self, npc_id: str) -> NpcRecord | None:
        """An NPC by id, or None."""
        return self._npcs.get(npc_id)

    def recall(self, npc_id: str, query: str, limit: int, threshold: float) -> list[RecalledMemory]:
        """Memories sharing words with the query, most similar first (ties: the older first)."""
        q = _words(query)
        scored = []
        for m in self._memories.get(npc_id, []):
            w = _words(m.text)
            similarity = len(w & q) / max(1, len(w | q))
            if similarity >= threshold:
                scored.append(RecalledMemory(m.text, m.type, m.importance, round(similarity, 4)))
        scored.sort(key=lambda m: -m.similarity)
        return scored[: max(0, limit)]

    def apply(self, npc_id: str, memories: Sequence[NewMemory], state_transform: dict[str, Any]) -> dict[str, Any]:
        """Keep the memories and merge the state patch; the new state."""
        rec = self._npcs.get(npc_id)
        if rec is None:
            raise InvalidInputError(f"npc_id: unknown NPC {npc_id!r}")
        rec.state = merge_patch(rec.state, state_transform)
        self._memories.setdefault(npc_id, []).extend(memories)
        return dict(rec.state)

    def remembered(self, npc_id: str) -> list[NewMemory]:
        """Everything an NPC remembers, oldest first."""
        return list(self._memories.get(npc_id, []))
