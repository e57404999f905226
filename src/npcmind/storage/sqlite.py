"""The embedded default store: one SQLite file in WAL mode, safe against kill -9 once a call returned."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from npcmind.storage.base import IssuedDecision, ReportStatus, SessionRecord

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
  session_id TEXT PRIMARY KEY, client_id TEXT NOT NULL, created_at REAL NOT NULL,
  expires_at REAL NOT NULL, ended INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS scopes (
  session_id TEXT NOT NULL, name TEXT NOT NULL, spec BLOB NOT NULL, PRIMARY KEY (session_id, name));
CREATE TABLE IF NOT EXISTS decisions (
  decision_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, entity_id TEXT NOT NULL, type TEXT NOT NULL,
  action TEXT NOT NULL, label TEXT NOT NULL, created_at REAL NOT NULL,
  outcome TEXT, detail TEXT, reported_at REAL);
CREATE INDEX IF NOT EXISTS decisions_by_entity ON decisions (session_id, entity_id, created_at);
"""
_COLS = "decision_id, session_id, entity_id, type, action, label, created_at, outcome, detail"


class SqliteStore:
    """SQLite with synchronous=NORMAL in WAL mode: a committed write survives a process crash."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)

    async def secret(self, name: str, size: int = 32) -> bytes:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (name,)).fetchone()
        if row:
            return bytes(row[0])
        self._db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (name, os.urandom(size)))
        return bytes(self._db.execute("SELECT value FROM meta WHERE key = ?", (name,)).fetchone()[0])

    async def record_decisions(self, rows: list[IssuedDecision]) -> None:
        if not rows:
            return
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT INTO decisions (decision_id, session_id, entity_id, type, action, label, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(r.decision_id, r.session_id, r.entity_id, r.type, r.action, r.label, r.created_at) for r in rows],
            )

    async def report(
        self, session_id: str, decision_id: str, outcome: str, detail: str | None, now: float
    ) -> tuple[ReportStatus, IssuedDecision | None]:
        row = self._db.execute(f"SELECT {_COLS} FROM decisions WHERE decision_id = ?", (decision_id,)).fetchone()
        if row is None or row[1] != session_id:
            return "unknown", None
        cur = self._db.execute(
            "UPDATE decisions SET outcome = ?, detail = ?, reported_at = ? WHERE decision_id = ? AND outcome IS NULL",
            (outcome, detail, now, decision_id),
        )
        if cur.rowcount == 0:
            return "duplicate", IssuedDecision(*row)
        rec = IssuedDecision(*row)
        rec.outcome, rec.detail = outcome, detail
        return "accepted", rec

    async def recent_decisions(
        self, session_id: str, entity_ids: list[str], limit: int = 8
    ) -> dict[str, list[IssuedDecision]]:
        out: dict[str, list[IssuedDecision]] = {}
        for eid in entity_ids:
            rows = self._db.execute(
                f"SELECT {_COLS} FROM decisions WHERE session_id = ? AND entity_id = ?"
                " ORDER BY created_at DESC LIMIT ?",
                (session_id, eid, limit),
            ).fetchall()
            if rows:
                out[eid] = [IssuedDecision(*r) for r in rows]
        return out

    async def create_session(self, rec: SessionRecord) -> None:
        self._db.execute(
            "INSERT INTO sessions (session_id, client_id, created_at, expires_at, ended) VALUES (?, ?, ?, ?, ?)",
            (rec.session_id, rec.client_id, rec.created_at, rec.expires_at, int(rec.ended)),
        )

    async def get_session(self, session_id: str) -> SessionRecord | None:
        row = self._db.execute(
            "SELECT session_id, client_id, created_at, expires_at, ended FROM sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        return SessionRecord(row[0], row[1], row[2], row[3], bool(row[4])) if row else None

    async def end_session(self, session_id: str) -> None:
        self._db.execute("UPDATE sessions SET ended = 1 WHERE session_id = ?", (session_id,))

    async def live_sessions(self, client_id: str, now: float) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM sessions WHERE client_id = ? AND ended = 0 AND expires_at > ?", (client_id, now)
        ).fetchone()
        return int(row[0])

    async def put_scope(self, session_id: str, name: str, spec: bytes) -> None:
        self._db.execute(
            "INSERT INTO scopes (session_id, name, spec) VALUES (?, ?, ?)"
            " ON CONFLICT (session_id, name) DO UPDATE SET spec = excluded.spec",
            (session_id, name, spec),
        )

    async def scopes(self, session_id: str) -> dict[str, bytes]:
        rows = self._db.execute("SELECT name, spec FROM scopes WHERE session_id = ?", (session_id,)).fetchall()
        return {r[0]: bytes(r[1]) for r in rows}

    async def close(self) -> None:
        self._db.close()
