"""The embedded default store: one SQLite file in WAL mode, safe against kill -9 once a call returned.

Every statement is small and indexed, so it runs right on the event loop: handing it to a thread and
back cost about 100 µs here, three times the work itself. Issued decisions are one row per request,
and the requests that reach the store in the same turn of the loop share one commit, made before any
of them is answered. Commits never wait on the disk (WAL, synchronous=NORMAL, which survives a crash of
the process); the checkpoints that do wait on it run on a thread of their own with a second connection,
and the loop copies only the last few commits. Decisions older than the retention are forgotten in small
transactions (``prune``), so neither the file nor its WAL grows without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import IO, Any, Concatenate, ParamSpec, TypeVar

import msgspec

from npcmind.failures import FailureLog
from npcmind.storage.base import (
    SCHEMA_VERSION,
    IssuedDecision,
    RequestFeatures,
    SessionRecord,
    StoredPolicy,
    StoreError,
    TrainingRow,
    batch_row,
    check_beside,
    check_version,
    features_row,
    join_sessions,
    read_version,
    readable_rows,
)

log = logging.getLogger("npcmind.storage")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
  session_id TEXT PRIMARY KEY, client_id TEXT NOT NULL, created_at REAL NOT NULL,
  expires_at REAL NOT NULL, ended INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS scopes (
  session_id TEXT NOT NULL, name TEXT NOT NULL, spec BLOB NOT NULL, PRIMARY KEY (session_id, name));
CREATE TABLE IF NOT EXISTS batches (
  first_seq INTEGER PRIMARY KEY, n INTEGER NOT NULL, session_id TEXT NOT NULL, created_at REAL NOT NULL,
  decisions BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS batches_by_session ON batches (session_id, first_seq);
CREATE TABLE IF NOT EXISTS outcomes (
  seq INTEGER PRIMARY KEY, session_id TEXT NOT NULL, outcome TEXT NOT NULL, detail TEXT, reported_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS outcomes_by_session ON outcomes (session_id, seq);
CREATE INDEX IF NOT EXISTS sessions_by_client ON sessions (client_id, expires_at);
CREATE TABLE IF NOT EXISTS features (
  first_seq INTEGER PRIMARY KEY, client_id TEXT NOT NULL, created_at REAL NOT NULL, data BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS features_by_client ON features (client_id, first_seq);
CREATE TABLE IF NOT EXISTS policies (
  client_id TEXT NOT NULL, manifest_version TEXT NOT NULL, created_at REAL NOT NULL, data BLOB NOT NULL,
  PRIMARY KEY (client_id, manifest_version));
CREATE TABLE IF NOT EXISTS revocations (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, expires_at REAL NOT NULL);
"""
# revocations: AUTOINCREMENT, so a number is never handed out twice even after prune deleted the newest row
# one batch row holds a request's decisions as JSON: [[decision_id, entity_id, type, action, label], ...]
_Row = tuple[str, str, str, str, str]
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(list[_Row]).decode
CHECKPOINT_EVERY = 1000  # commits between two checkpoints (SQLite's own default is 1000 pages)
WAL_LIMIT = 32 * 1024 * 1024  # bytes the WAL file is cut back to when it starts over
PRUNE_CHUNK = 200  # batch rows deleted in one transaction: about a millisecond of the loop each
P = ParamSpec("P")
R = TypeVar("R")


def _failure(exc: Exception) -> StoreError:
    return StoreError(f"the store could not keep this request ({exc}); nothing of it was kept")


_Op = Callable[Concatenate["SqliteStore", P], Coroutine[Any, Any, R]]


def _kept(op: _Op[P, R]) -> _Op[P, R]:
    """An SQLite or disk error (disk full, file gone) becomes a StoreError, logged at a readable rate."""

    @functools.wraps(op)
    async def run(self: SqliteStore, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            out = await op(self, *args, **kwargs)
        except (sqlite3.Error, OSError) as e:
            self.failures.failed(str(e))
            raise _failure(e) from e
        self.failures.succeeded()
        return out

    return run


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


def _migrate(db: sqlite3.Connection) -> None:
    """Move rows of the first schema (one row a decision) into batches and outcomes, once."""
    if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'decisions'").fetchone():
        return
    with db:
        db.execute("BEGIN")
        rows = db.execute(
            "SELECT seq, decision_id, session_id, entity_id, type, action, label, created_at, outcome, detail,"
            " reported_at FROM decisions ORDER BY seq"
        ).fetchall()
        for seq, did, sid, eid, typ, action, label, at, outcome, detail, reported in rows:
            db.execute(
                "INSERT INTO batches (first_seq, n, session_id, created_at, decisions) VALUES (?, 1, ?, ?, ?)",
                (seq, sid, at, _encode([(did, eid, typ, action, label)])),
            )
            if outcome is not None:
                db.execute(
                    "INSERT INTO outcomes (seq, session_id, outcome, detail, reported_at) VALUES (?, ?, ?, ?, ?)",
                    (seq, sid, outcome, detail, reported if reported is not None else at),
                )
        db.execute("DROP TABLE decisions")
    log.info("store: moved %d decisions to the batch schema", len(rows))


class SqliteStore:
    """SQLite, WAL, synchronous=NORMAL: a committed write survives a crash of the process."""

    def __init__(self, path: str | Path, read_only: bool = False, publish: bool = False) -> None:
        self.path = str(path)
        self._lock_file: IO[str] | None = None
        self._read_only = read_only or publish  # beside the service: no lock, no checkpoint of its WAL
        try:
            self._db = self._open_beside(publish) if self._read_only else self._open()
        except (sqlite3.Error, OSError, ValueError) as e:  # a bad --store is said in one line, not a traceback
            if self._lock_file is not None:
                self._lock_file.close()
            if isinstance(e, ValueError):  # in use, or written by a newer npcmind: said already
                raise
            raise ValueError(f"the store {self.path} cannot be opened: {e}; choose another --store") from None
        last = self._db.execute("SELECT first_seq + n - 1 FROM batches ORDER BY first_seq DESC LIMIT 1").fetchone()
        self._seq = max(int(last[0]) if last else 0, self._pruned_upto())
        self._pending: list[tuple[list[IssuedDecision], RequestFeatures | None, asyncio.Future[None]]] = []
        self._flush_scheduled = False
        self._commits = 0
        self._checkpointing: threading.Thread | None = None
        self._closed = False
        self.failures = FailureLog(log, "store write")

    def _open(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._lock_file = _lock(self.path)
        # check_same_thread=False: the loop that uses it may not be the thread that opened it
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=5000")
        db.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints wait on the disk: see _checkpoint
        db.execute(f"PRAGMA journal_size_limit={WAL_LIMIT}")  # the WAL file shrinks back after a burst
        db.executescript(_SCHEMA)
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        check_version(read_version(row[0] if row else None, self.path), self.path)
        _migrate(db)
        db.execute(  # an older store gains the new tables above and says so: an older npcmind then refuses it
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(SCHEMA_VERSION).encode(),),
        )
        return db

    def _open_beside(self, publish: bool) -> sqlite3.Connection:
        """A process beside the one that writes (WAL lets both run): ``npcmind distill`` on a live store, and
        the service's own background distill. It takes no lock and creates or migrates nothing; a reader's writes
        fail, a publisher (``distill --publish``) keeps only policies, one short transaction each."""
        where = Path(self.path)
        if where.is_dir():
            raise ValueError(f"the store {self.path} is a folder, not a store file: give the .db file in it")
        if not where.is_file():
            raise ValueError(f"the store {self.path} does not exist")
        mode = "rw" if publish else "ro"
        db = sqlite3.connect(f"file:{where.absolute()}?mode={mode}", uri=True, check_same_thread=False)
        db.execute("PRAGMA busy_timeout=5000")
        if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone():
            raise ValueError(f"the store {self.path} is not an npcmind store (no meta table): check --store")
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        check_beside(read_version(row[0] if row else None, self.path), self.path)
        return db

    async def check(self) -> None:
        """Checked already, in the constructor."""

    async def open(self) -> None:
        """Opened already, in the constructor: a bad --store is said before the server starts."""

    # --- decisions: one row a request, one commit a turn of the loop -------------------------------

    async def allocate(self, n: int) -> int:
        first = self._seq + 1
        self._seq += n
        return first

    async def record_decisions(self, rows: list[IssuedDecision], features: RequestFeatures | None = None) -> None:
        if not rows:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._pending.append((rows, features if features is not None and features.decisions else None, fut))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        await fut

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        self._flush_scheduled = False
        if not batch:  # close() flushed them already
            return
        values = [batch_row(rows) for rows, _, _ in batch]
        kept = [features_row(f) for _, f, _ in batch if f is not None]
        try:
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany(
                    "INSERT INTO batches (first_seq, n, session_id, created_at, decisions) VALUES (?, ?, ?, ?, ?)",
                    values,
                )
                if kept:
                    self._db.executemany(
                        "INSERT INTO features (first_seq, client_id, created_at, data) VALUES (?, ?, ?, ?)", kept
                    )
        except Exception as exc:  # disk full, file gone: every waiting request fails, none is answered as kept
            self.failures.failed(str(exc))
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(_failure(exc))
            return
        self.failures.succeeded()
        for _, _, fut in batch:
            if not fut.done():
                fut.set_result(None)
        self._committed()

    def _committed(self) -> None:
        """Count a commit of the loop; every CHECKPOINT_EVERY of them, a checkpoint."""
        self._commits += 1
        if self._commits % CHECKPOINT_EVERY == 0:
            self._checkpoint()

    def _checkpoint(self) -> None:
        """Copy the WAL into the database file on a thread, with its own connection (PASSIVE: it never
        blocks the loop's writes), then finish on the loop, so the WAL does not grow without bound."""
        if self.path == ":memory:" or (self._checkpointing is not None and self._checkpointing.is_alive()):
            return
        loop = asyncio.get_running_loop()

        def run() -> None:
            try:
                db = sqlite3.connect(self.path, isolation_level=None)
                try:
                    done = 0  # frames of the WAL copied so far
                    for _ in range(64):  # again while the loop's commits keep coming: leave it only a few to copy
                        _, _, copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                        if copied - done < 256:
                            break
                        done = copied
                finally:
                    db.close()
            except sqlite3.Error as e:  # the next checkpoint tries again
                log.warning("store: checkpoint failed: %s", e)
                return
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: close() checkpoints anyway
                loop.call_soon_threadsafe(self._finish_checkpoint)

        self._checkpointing = threading.Thread(target=run, name="npcmind-checkpoint", daemon=True)
        self._checkpointing.start()

    def _finish_checkpoint(self) -> None:
        """Copy what was committed while the thread copied the rest. SQLite starts the WAL over only after a
        checkpoint that copied all of it, which a thread never does while the loop commits all the time: under
        steady load the WAL grew by every commit (300 MB in 30 s here). On the loop no commit comes in between;
        most pages are copied already, so this holds the loop 2-3 ms here (bench/store_bench.py)."""
        if self._closed:
            return
        try:
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as e:  # the next checkpoint tries again
            log.warning("store: checkpoint failed: %s", e)

    @_kept
    async def decision(self, seq: int) -> IssuedDecision | None:
        row = self._db.execute(
            "SELECT first_seq, n, session_id, created_at, decisions FROM batches WHERE first_seq <= ?"
            " ORDER BY first_seq DESC LIMIT 1",
            (seq,),
        ).fetchone()
        if row is None or seq >= row[0] + row[1]:
            return None
        did, eid, typ, action, label = _decode(row[4])[seq - row[0]]
        d = IssuedDecision(seq, did, row[2], eid, typ, action, label, row[3])
        found = self._db.execute("SELECT outcome, detail FROM outcomes WHERE seq = ?", (seq,)).fetchone()
        if found:
            d.outcome, d.detail = found
        return d

    @_kept
    async def set_outcome(self, seq: int, outcome: str, detail: str | None, now: float) -> bool:
        rec = await self.decision(seq)
        if rec is None:
            return False
        with self._db:
            self._db.execute("BEGIN")
            cur = self._db.execute(
                "INSERT OR IGNORE INTO outcomes (seq, session_id, outcome, detail, reported_at) VALUES (?, ?, ?, ?, ?)",
                (seq, rec.session_id, outcome, detail, now),
            )
        self._committed()
        return bool(cur.rowcount)

    @_kept
    async def session_decisions(self, session_id: str, limit: int) -> list[IssuedDecision]:
        out: list[IssuedDecision] = []
        rows = self._db.execute(
            "SELECT first_seq, created_at, decisions FROM batches WHERE session_id = ? ORDER BY first_seq DESC",
            (session_id,),
        )
        for first, at, raw in rows:
            for i, (did, eid, typ, action, label) in reversed(list(enumerate(_decode(raw)))):
                out.append(IssuedDecision(first + i, did, session_id, eid, typ, action, label, at))
            if len(out) >= limit:
                break
        rows.close()
        out = out[:limit]
        if out:
            by_seq = {d.seq: d for d in out}
            for seq, outcome, detail in self._db.execute(
                "SELECT seq, outcome, detail FROM outcomes WHERE session_id = ? AND seq >= ?", (session_id, out[-1].seq)
            ):
                d = by_seq.get(seq)
                if d is not None:
                    d.outcome, d.detail = outcome, detail
        return out

    # --- what a policy learns from, and the policies ----------------------------------------------

    @_kept
    async def training(self, client_id: str, since: float) -> list[TrainingRow]:
        found = self._db.execute(
            "SELECT created_at, data FROM features WHERE client_id = ? AND created_at >= ? ORDER BY first_seq",
            (client_id, since),
        )
        out = readable_rows(client_id, found)
        if out:
            by_seq = {r.seq: r for r in out}
            for seq, outcome in self._db.execute(
                "SELECT seq, outcome FROM outcomes WHERE seq BETWEEN ? AND ?", (out[0].seq, out[-1].seq)
            ):
                r = by_seq.get(seq)
                if r is not None:
                    r.outcome = outcome
            spans = self._db.execute(  # from the batch that holds the first decision to the one of the last
                "SELECT first_seq, n, session_id FROM batches WHERE first_seq <= ?"
                " AND first_seq >= (SELECT COALESCE(MAX(first_seq), 0) FROM batches WHERE first_seq <= ?)",
                (out[-1].seq, out[0].seq),
            )
            join_sessions(out, spans)
        return out

    @_kept
    async def training_clients(self, since: float) -> list[str]:
        rows = self._db.execute("SELECT DISTINCT client_id FROM features WHERE created_at >= ?", (since,))
        return sorted(r[0] for r in rows)

    @_kept
    async def put_policy(self, policy: StoredPolicy) -> None:
        self._write(
            "INSERT INTO policies (client_id, manifest_version, created_at, data) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (client_id, manifest_version) DO UPDATE SET created_at = excluded.created_at,"
            " data = excluded.data",
            (policy.client_id, policy.manifest_version, policy.created_at, policy.data),
        )

    @_kept
    async def policy(self, client_id: str, manifest_version: str) -> StoredPolicy | None:
        row = self._db.execute(
            "SELECT created_at, data FROM policies WHERE client_id = ? AND manifest_version = ?",
            (client_id, manifest_version),
        ).fetchone()
        return StoredPolicy(client_id, manifest_version, row[0], bytes(row[1])) if row else None

    # --- retention ----------------------------------------------------------------------------------

    def _pruned_upto(self) -> int:
        """The last decision number forgotten by prune: numbering goes on above it even if no batch is left."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'pruned_upto'").fetchone()
        return int(bytes(row[0]).decode()) if row else 0

    @_kept
    async def prune(self, before: float) -> tuple[int, int]:
        decisions = 0
        while True:  # oldest first, a chunk a transaction, the loop free between chunks
            rows = self._db.execute(
                "SELECT first_seq, n, created_at FROM batches ORDER BY first_seq LIMIT ?", (PRUNE_CHUNK,)
            ).fetchall()
            old = 0
            while old < len(rows) and rows[old][2] < before:  # numbers follow time: the old ones come first
                old += 1
            if not old:
                break
            upto = rows[old - 1][0] + rows[old - 1][1] - 1
            with self._db:
                self._db.execute("BEGIN")
                self._db.execute("DELETE FROM batches WHERE first_seq <= ?", (upto,))
                self._db.execute("DELETE FROM outcomes WHERE seq <= ?", (upto,))
                self._db.execute("DELETE FROM features WHERE first_seq <= ?", (upto,))
                self._db.execute(
                    "INSERT INTO meta (key, value) VALUES ('pruned_upto', ?)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(upto).encode(),),  # above every number forgotten before: those batches are gone
                )
            self._committed()  # a prune writes many pages: its commits count toward the next checkpoint
            decisions += sum(r[1] for r in rows[:old])
            if old < len(rows):
                break
            await asyncio.sleep(0)
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute(
                "DELETE FROM scopes WHERE session_id IN (SELECT session_id FROM sessions WHERE expires_at < ?)",
                (before,),
            )
            sessions = self._db.execute("DELETE FROM sessions WHERE expires_at < ?", (before,)).rowcount
            self._db.execute("DELETE FROM revocations WHERE expires_at < ?", (before,))  # tokens expired anyway
        return decisions, sessions

    # --- secrets, sessions, scopes ---------------------------------------------------------------

    def _write(self, sql: str, params: tuple[Any, ...]) -> sqlite3.Cursor:
        """One statement, one commit, counted toward the next checkpoint like every commit of the loop: a game
        that posts scopes or reports without deciding grew the WAL for ever (356 MB after 20,480 scopes)."""
        with self._db:
            self._db.execute("BEGIN")
            cur = self._db.execute(sql, params)
        self._committed()
        return cur

    @_kept
    async def secret(self, name: str, size: int = 32) -> bytes:
        self._write("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (name, os.urandom(size)))
        return bytes(self._db.execute("SELECT value FROM meta WHERE key = ?", (name,)).fetchone()[0])

    @_kept
    async def create_session(self, rec: SessionRecord) -> None:
        self._write(
            "INSERT INTO sessions (session_id, client_id, created_at, expires_at, ended) VALUES (?, ?, ?, ?, ?)",
            (rec.session_id, rec.client_id, rec.created_at, rec.expires_at, int(rec.ended)),
        )

    @_kept
    async def open_session(self, rec: SessionRecord, limit: int) -> bool:
        with self._db:  # one transaction on the loop, no await inside: nothing comes in between
            self._db.execute("BEGIN IMMEDIATE")
            (live,) = self._db.execute(
                "SELECT COUNT(*) FROM sessions WHERE client_id = ? AND ended = 0 AND expires_at > ?",
                (rec.client_id, rec.created_at),
            ).fetchone()
            if live >= limit:
                return False
            self._db.execute(
                "INSERT INTO sessions (session_id, client_id, created_at, expires_at, ended) VALUES (?, ?, ?, ?, ?)",
                (rec.session_id, rec.client_id, rec.created_at, rec.expires_at, int(rec.ended)),
            )
        self._committed()
        return True

    @_kept
    async def get_session(self, session_id: str) -> SessionRecord | None:
        row = self._db.execute(
            "SELECT session_id, client_id, created_at, expires_at, ended FROM sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        return SessionRecord(row[0], row[1], row[2], row[3], bool(row[4])) if row else None

    @_kept
    async def end_session(self, session_id: str) -> None:
        with self._db:  # one commit: a session is ended exactly when its revocation is numbered
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("UPDATE sessions SET ended = 1 WHERE session_id = ?", (session_id,))
            self._db.execute(
                "INSERT INTO revocations (session_id, expires_at)"
                " SELECT session_id, expires_at FROM sessions WHERE session_id = ?",
                (session_id,),
            )
        self._committed()

    @_kept
    async def ended_since(self, after: int) -> tuple[int, list[tuple[str, float]]]:
        rows = self._db.execute(
            "SELECT seq, session_id, expires_at FROM revocations WHERE seq > ? ORDER BY seq", (after,)
        ).fetchall()
        return (int(rows[-1][0]) if rows else after), [(r[1], float(r[2])) for r in rows]

    @_kept
    async def live_sessions(self, client_id: str, now: float) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM sessions WHERE client_id = ? AND ended = 0 AND expires_at > ?", (client_id, now)
        ).fetchone()
        return int(row[0])

    @_kept
    async def put_scope(self, session_id: str, name: str, spec: bytes) -> None:
        self._write(
            "INSERT INTO scopes (session_id, name, spec) VALUES (?, ?, ?)"
            " ON CONFLICT (session_id, name) DO UPDATE SET spec = excluded.spec",
            (session_id, name, spec),
        )

    @_kept
    async def scopes(self, session_id: str) -> dict[str, bytes]:
        rows = self._db.execute("SELECT name, spec FROM scopes WHERE session_id = ?", (session_id,)).fetchall()
        return {r[0]: bytes(r[1]) for r in rows}

    async def close(self) -> None:
        if self._pending:  # requests still waiting on a commit get it before the file closes
            self._flush()
        self._closed = True
        if self._checkpointing is not None:
            self._checkpointing.join()
        if self.path != ":memory:" and not self._read_only:  # a reader holds no lock and writes nothing
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._db.close()
        if self._lock_file is not None:
            self._lock_file.close()  # releases the lock
            self._lock_file = None
