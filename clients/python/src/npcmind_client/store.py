"""The SDK's NPC registry and per-NPC memory on disk (one SQLite file), with vector recall: an ``NpcMemory``.

Vectors are kept as float32 blobs next to their text; recall loads an NPC's vectors into one matrix
(cached until the NPC remembers something new) and scores them all with one matrix product.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from npcmind_client.embed import DIMENSION, Embedder, shared
from npcmind_client.errors import InvalidInputError
from npcmind_client.memory import NewMemory, NpcRecord, RecalledMemory, check_npc_id, merge_patch

_SCHEMA = """
CREATE TABLE IF NOT EXISTS npcs (npc_id TEXT PRIMARY KEY, persona TEXT, data TEXT NOT NULL, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memories (
  id INTEGER PRIMARY KEY, npc_id TEXT NOT NULL, text TEXT NOT NULL, type TEXT NOT NULL,
  importance REAL NOT NULL, created_at REAL NOT NULL, vector BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS memories_by_npc ON memories (npc_id, id);
"""
TIE = 0.02  # similarities this close count as a tie, broken by importance, then recency


@dataclass(frozen=True)
class Recalled(RecalledMemory):
    """A recalled memory with its true cosine similarity to the query, and when it was kept."""

    created_at: float = 0.0


class NpcStore:
    """Registry and memories in `path` (a SQLite file, created if missing), recalled by meaning (embeddings):
    one ``NpcMemory``."""

    def __init__(self, path: str | Path, *, embedder: Embedder | None = None) -> None:
        """``embedder``: the model recall embeds with (the SDK's shared one by default)."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()
        self.embedder = embedder or shared()
        self._matrix: dict[str, tuple[np.ndarray, list[tuple[str, str, float, float]]]] = {}

    # --- registry ---------------------------------------------------------------------------------

    def register(self, npc_id: str, persona: str | None = None, data: dict[str, Any] | None = None) -> NpcRecord:
        """Add an NPC or update its persona and data (its state and memories are kept)."""
        check_npc_id(npc_id)
        with self._lock:
            self._db.execute(
                "INSERT INTO npcs (npc_id, persona, data, state) VALUES (?, ?, ?, '{}')"
                " ON CONFLICT (npc_id) DO UPDATE SET persona = excluded.persona, data = excluded.data",
                (npc_id, persona, json.dumps(data or {})),
            )
        found = self.get(npc_id)
        assert found is not None
        return found

    def get(self, npc_id: str) -> NpcRecord | None:
        """An NPC by id, or None."""
        row = self._db.execute("SELECT npc_id, persona, data, state FROM npcs WHERE npc_id = ?", (npc_id,)).fetchone()
        return NpcRecord(row[0], row[1], json.loads(row[2]), json.loads(row[3])) if row else None

    def apply_state(self, npc_id: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Merge a stateTransform into the NPC's state and keep it."""
        return self.apply(npc_id, [], patch)

    # --- memory -----------------------------------------------------------------------------------

    def remember(self, npc_id: str, items: Sequence[NewMemory], now: float | None = None) -> None:
        """Keep memories, embedded now."""
        if items:
            self.apply(npc_id, items, {}, now)

    def apply(
        self, npc_id: str, memories: Sequence[NewMemory], state_transform: dict[str, Any], now: float | None = None
    ) -> dict[str, Any]:
        """Keep an outcome's memories and merge its state in one transaction, so a crash keeps both or
        neither; the new state."""
        items, patch = list(memories), state_transform
        vectors: list[np.ndarray] = list(self.embedder.embed([m.text for m in items])) if items else []
        at = time.time() if now is None else now
        with self._lock:
            rec = self.get(npc_id)
            if rec is None:
                raise InvalidInputError(f"npc_id: unknown NPC {npc_id!r}")
            state = merge_patch(rec.state, patch) if patch else rec.state
            self._db.execute("BEGIN")
            try:
                self._db.executemany(
                    "INSERT INTO memories (npc_id, text, type, importance, created_at, vector)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        (npc_id, m.text, m.type, float(m.importance), at, v.tobytes())
                        for m, v in zip(items, vectors, strict=True)
                    ],
                )
                if patch:
                    self._db.execute("UPDATE npcs SET state = ? WHERE npc_id = ?", (json.dumps(state), npc_id))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            if items:
                self._matrix.pop(npc_id, None)
        return dict(state)

    def count(self, npc_id: str) -> int:
        """How many memories an NPC has."""
        return int(self._db.execute("SELECT COUNT(*) FROM memories WHERE npc_id = ?", (npc_id,)).fetchone()[0])

    def _load(self, npc_id: str) -> tuple[np.ndarray, list[tuple[str, str, float, float]]]:
        cached = self._matrix.get(npc_id)
        if cached is None:
            rows = self._db.execute(
                "SELECT text, type, importance, created_at, vector FROM memories WHERE npc_id = ? ORDER BY id",
                (npc_id,),
            ).fetchall()
            matrix = (
                np.frombuffer(b"".join(r[4] for r in rows), dtype=np.float32).reshape(-1, DIMENSION)
                if rows
                else np.zeros((0, DIMENSION), dtype=np.float32)
            )
            cached = self._matrix[npc_id] = (matrix, [(r[0], r[1], r[2], r[3]) for r in rows])
        return cached

    def recall(self, npc_id: str, query: str, limit: int, threshold: float, now: float | None = None) -> list[Recalled]:
        """Memories at or above ``threshold`` cosine similarity, most similar first; near-ties (within 0.02)
        go to the more important, then the more recent memory. The similarity reported is the true one."""
        matrix, meta = self._load(npc_id)
        if not meta or limit <= 0:
            return []
        sims = matrix @ self.embedder.embed_one(query)
        idx = np.nonzero(sims >= threshold)[0]
        if idx.size == 0:
            return []
        at = time.time() if now is None else now
        size = max(limit * 4, limit + 8)
        if idx.size > size:  # only the best few need sorting
            idx = idx[np.argpartition(-sims[idx], size - 1)[:size]]
        pool = idx[np.argsort(-sims[idx])]

        def rank(i: int) -> float:
            _, _, importance, created = meta[i]
            recency = math.exp(-max(0.0, at - created) / 86_400)
            return float(sims[i]) + TIE * (importance + 0.5 * recency)

        best = sorted((int(i) for i in pool), key=rank, reverse=True)[:limit]
        return [Recalled(meta[i][0], meta[i][1], meta[i][2], round(float(sims[i]), 4), meta[i][3]) for i in best]

    def close(self) -> None:
        """Close the file."""
        self._db.close()
