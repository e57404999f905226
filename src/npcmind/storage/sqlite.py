"""The embedded default store: one SQLite file in WAL mode, safe against kill -9 once a call returned.

All SQL runs on one writer thread with its own connection (sqlite3 releases the GIL while it works, so
the event loop keeps serving). Decisions are appended under sequence numbers and committed in groups:
requests that arrive while a commit is running share the next one, and each request returns only
after the commit that holds its rows.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, TypeVar

from npcmind.storage.base import IssuedDecision, SessionRecord

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
  session_id TEXT PRIMARY KEY, client_id TEXT NOT NULL, created_at REAL NOT NULL,
  expires_at REAL NOT NULL, ended INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS scopes (
  session_id TEXT NOT NULL, name TEXT NOT NULL, spec BLOB NOT NULL, PRIMARY KEY (session_id, name));
CREATE TABLE IF NOT EXISTS decisions (
  seq INTEGER PRIMARY KEY, decision_id TEXT NOT NULL, session_id TEXT NOT NULL, entity_id TEXT NOT NULL,
  type TEXT NOT NULL, action TEXT NOT NULL, label TEXT NOT NULL, created_at REAL NOT NULL,
  outcome TEXT, detail TEXT, reported_at REAL);
CREATE INDEX IF NOT EXISTS decisions_by_session ON decisions (session_id, seq);
"""
_COLS = "seq, decision_id, session_id, entity_id, type, action, label, created_at, outcome, detail"


def _lock(path: str) -> IO[str] | None:
    """Hold an exclusive lock next to the file: a second npcmind on the same store would hand out the same
    decision numbers, so it must fail at start with a clear message instead."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks here
        return None
    f = open(path + ".lock", "a+")  # noqa: SIM115 - held open for the store's lifetime
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise ValueError(
            f"the store {path} is in use by another npcmind process; give each process its own --store"
        ) from None
    return f


class SqliteStore:
    """SQLite, WAL, synchronous=NORMAL: a committed write survives a crash of the process."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock_file: IO[str] | None = None
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._lock_file = _lock(self.path)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)
        self._seq = int(self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM decisions").fetchone()[0])
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="npcmind-sqlite")
        self._pending: list[tuple[list[IssuedDecision], asyncio.Future[None]]] = []
        self._flushing = False

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, self._db)

    async def secret(self, name: str, size: int = 32) -> bytes:
        def op(db: sqlite3.Connection) -> bytes:
            db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (name, os.urandom(size)))
            return bytes(db.execute("SELECT value FROM meta WHERE key = ?", (name,)).fetchone()[0])

        return await self._run(op)

    async def allocate(self, n: int) -> int:
        first = self._seq + 1
        self._seq += n
        return first

    async def record_decisions(self, rows: list[IssuedDecision]) -> None:
        if not rows:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((rows, fut))
        self._kick()
        await fut

    def _kick(self) -> None:
        if self._flushing or not self._pending:
            return
        batch, self._pending = self._pending, []
        self._flushing = True
        loop = asyncio.get_running_loop()
        values = [
            (r.seq, r.decision_id, r.session_id, r.entity_id, r.type, r.action, r.label, r.created_at)
            for rows, _ in batch
            for r in rows
        ]
        done: Future[None] = self._thread.submit(self._insert, values)
        done.add_done_callback(lambda f: loop.call_soon_threadsafe(self._flushed, batch, f))

    def _insert(self, values: list[tuple[Any, ...]]) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT INTO decisions (seq, decision_id, session_id, entity_id, type, action, label, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                values,
            )

    def _flushed(self, batch: list[tuple[list[IssuedDecision], asyncio.Future[None]]], f: Future[None]) -> None:
        self._flushing = False
        exc = f.exception()
        for _, fut in batch:
            if fut.done():
                continue
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(None)
        self._kick()

    async def decision(self, seq: int) -> IssuedDecision | None:
        row = await self._run(lambda db: db.execute(f"SELECT {_COLS} FROM decisions WHERE seq = ?", (seq,)).fetchone())
        return IssuedDecision(*row) if row else None

    async def set_outcome(self, seq: int, outcome: str, detail: str | None, now: float) -> bool:
        cur = await self._run(
            lambda db: db.execute(
                "UPDATE decisions SET outcome = ?, detail = ?, reported_at = ? WHERE seq = ? AND outcome IS NULL",
                (outcome, detail, now, seq),
            )
        )
        return bool(cur.rowcount)

    async def session_decisions(self, session_id: str, limit: int) -> list[IssuedDecision]:
        def op(db: sqlite3.Connection) -> list[IssuedDecision]:
            rows = db.execute(
                f"SELECT {_COLS} FROM decisions WHERE session_id = ? ORDER BY seq DESC LIMIT ?", (session_id, limit)
            ).fetchall()
            return [IssuedDecision(*r) for r in rows]

        return await self._run(op)

    async def create_session(self, rec: SessionRecord) -> None:
        await self._run(
            lambda db: db.execute(
                "INSERT INTO sessions (session_id, client_id, created_at, expires_at, ended) VALUES (?, ?, ?, ?, ?)",
                (rec.session_id, rec.client_id, rec.created_at, rec.expires_at, int(rec.ended)),
            )
        )

    async def get_session(self, session_id: str) -> SessionRecord | None:
        row = await self._run(
            lambda db: db.execute(
                "SELECT session_id, client_id, created_at, expires_at, ended FROM sessions WHERE session_id = ?",
                (session_id,),
            ).fetchone()
        )
        return SessionRecord(row[0], row[1], row[2], row[3], bool(row[4])) if row else None

    async def end_session(self, session_id: str) -> None:
        await self._run(lambda db: db.execute("UPDATE sessions SET ended = 1 WHERE session_id = ?", (session_id,)))

    async def live_sessions(self, client_id: str, now: float) -> int:
        row = await self._run(
            lambda db: db.execute(
                "SELECT COUNT(*) FROM sessions WHERE client_id = ? AND ended = 0 AND expires_at > ?", (client_id, now)
            ).fetchone()
        )
        return int(row[0])

    async def put_scope(self, session_id: str, name: str, spec: bytes) -> None:
        await self._run(
            lambda db: db.execute(
                "INSERT INTO scopes (session_id, name, spec) VALUES (?, ?, ?)"
                " ON CONFLICT (session_id, name) DO UPDATE SET spec = excluded.spec",
                (session_id, name, spec),
            )
        )

    async def scopes(self, session_id: str) -> dict[str, bytes]:
        rows = await self._run(
            lambda db: db.execute("SELECT name, spec FROM scopes WHERE session_id = ?", (session_id,)).fetchall()
        )
        return {r[0]: bytes(r[1]) for r in rows}

    async def close(self) -> None:
        self._thread.shutdown(wait=True)
        self._db.close()
        if self._lock_file is not None:
            self._lock_file.close()  # releases the lock
            self._lock_file = None
