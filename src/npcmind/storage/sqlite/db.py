"""The SQLite file every part of the embedded store shares: opening, the schema and its migration, the lock that
keeps one process a file, commits counted toward checkpoints, and the checkpoints themselves.

Every statement is small and indexed, so it runs right on the event loop: handing it to a thread and
back cost about 100 µs here, three times the work itself. Commits never wait on the disk (WAL,
synchronous=NORMAL, which survives a crash of the process); the checkpoints that do wait on it run on a thread
of their own with a second connection, and the loop copies only the last few commits.
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
from npcmind.storage.base import SCHEMA_VERSION, StoreError, check_beside, check_version, read_version

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
  first_seq INTEGER PRIMARY KEY, client_id TEXT NOT NULL, created_at REAL NOT NULL, data BLOB NOT NULL, prompt BLOB);
CREATE INDEX IF NOT EXISTS features_by_client ON features (client_id, first_seq);
CREATE TABLE IF NOT EXISTS manifests (version TEXT PRIMARY KEY, used_at REAL NOT NULL, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS policies (
  client_id TEXT NOT NULL, manifest_version TEXT NOT NULL, created_at REAL NOT NULL, data BLOB NOT NULL,
  PRIMARY KEY (client_id, manifest_version));
CREATE TABLE IF NOT EXISTS revocations (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, expires_at REAL NOT NULL);
"""
# revocations: AUTOINCREMENT, so a number is never handed out twice even after prune deleted the newest row
_encode = msgspec.json.Encoder().encode
CHECKPOINT_EVERY = 1000  # commits between two checkpoints (SQLite's own default is 1000 pages)
WAL_LIMIT = 32 * 1024 * 1024  # bytes the WAL file is cut back to when it starts over
P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound="SqlitePart")
_Op = Callable[Concatenate[S, P], Coroutine[Any, Any, R]]


def failure(exc: Exception) -> StoreError:
    """What a request whose write failed is told: nothing of it was kept."""
    return StoreError(f"the store could not keep this request ({exc}); nothing of it was kept")


def kept(op: _Op[S, P, R]) -> _Op[S, P, R]:
    """An SQLite or disk error (disk full, file gone) becomes a StoreError, logged at a readable rate."""

    @functools.wraps(op)
    async def run(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            out = await op(self, *args, **kwargs)
        except (sqlite3.Error, OSError) as e:
            self.db.failures.failed(str(e))
            raise failure(e) from e
        self.db.failures.succeeded()
        return out

    return run


def _lock(path: str) -> IO[str] | None:
    """Hold an exclusive lock next to the file: a second npcmind on the same store would hand out the same
    decision numbers, so it must fail at start with a clear message instead. The file is removed on close (it
    stayed in the user's folder): a lock taken on a file removed meanwhile is no lock, so it is taken again."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks here
        return None
    while True:
        f = open(path + ".lock", "a+")  # noqa: SIM115 - held open for the store's lifetime
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise ValueError(
                f"the store {path} is in use by another npcmind process; give each process its own --store"
            ) from None
        if _same_file(f, path + ".lock"):
            return f
        f.close()  # its holder removed it as it closed, after this opened it: take the file there now


def _same_file(f: IO[str], path: str) -> bool:
    held = os.fstat(f.fileno())
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)


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


class SqliteDb:
    """SQLite, WAL, synchronous=NORMAL: a committed write survives a crash of the process. One connection, which
    every part of the store (decisions, sessions, policies, secrets) writes through."""

    def __init__(self, path: str | Path, read_only: bool = False, publish: bool = False) -> None:
        self.path = str(path)
        self._lock_file: IO[str] | None = None
        self.read_only = read_only or publish  # beside the service: no lock, no checkpoint of its WAL
        try:
            self.conn = self._open_beside(publish) if self.read_only else self._open()
        except (sqlite3.Error, OSError, ValueError) as e:  # a bad --store is said in one line, not a traceback
            self._unlock()
            if isinstance(e, ValueError):  # in use, or written by a newer npcmind: said already
                raise
            raise ValueError(f"the store {self.path} cannot be opened: {e}; choose another --store") from None
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
        if not any(col[1] == "prompt" for col in db.execute("PRAGMA table_info(features)")):  # a version-3 store
            db.execute("ALTER TABLE features ADD COLUMN prompt BLOB")
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

    def committed(self) -> None:
        """Count a commit of the loop; every CHECKPOINT_EVERY of them, a checkpoint."""
        self._commits += 1
        if self._commits % CHECKPOINT_EVERY == 0:
            self._checkpoint()

    def _checkpoint(self) -> None:
        """Copy the WAL into the database file on a thread, with its own connection (PASSIVE: it never
        blocks the loop's writes), then finish on the loop, so the WAL does not grow without bound."""
        # one at a time, its last part on the loop included: a thread begun before the last one's finish ran held
        # the checkpoint lock, so that finish copied nothing and the WAL did not start over (seen under load)
        if self.path == ":memory:" or self._checkpointing is not None:
            return
        loop = asyncio.get_running_loop()

        def run() -> None:
            ok = True
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
                ok = False
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: close() checkpoints anyway
                loop.call_soon_threadsafe(self._finish_checkpoint, ok)

        self._checkpointing = threading.Thread(target=run, name="npcmind-checkpoint", daemon=True)
        self._checkpointing.start()

    def _finish_checkpoint(self, copied: bool) -> None:
        """Copy what was committed while the thread copied the rest. SQLite starts the WAL over only after a
        checkpoint that copied all of it, which a thread never does while the loop commits all the time: under
        steady load the WAL grew by every commit (300 MB in 30 s here). On the loop no commit comes in between;
        most pages are copied already, so this holds the loop 2-3 ms here (bench/store_bench.py)."""
        self._checkpointing = None  # the next checkpoint may begin
        if self._closed or not copied:
            return
        try:
            self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as e:  # the next checkpoint tries again
            log.warning("store: checkpoint failed: %s", e)

    def write(self, sql: str, params: tuple[Any, ...]) -> sqlite3.Cursor:
        """One statement, one commit, counted toward the next checkpoint like every commit of the loop: a game
        that posts scopes or reports without deciding grew the WAL for ever (356 MB after 20,480 scopes)."""
        with self.conn:
            self.conn.execute("BEGIN")
            cur = self.conn.execute(sql, params)
        self.committed()
        return cur

    def close(self) -> None:
        """Checkpoint what the WAL holds, close, and release the lock (the parts flushed already)."""
        self._closed = True
        if self._checkpointing is not None:
            self._checkpointing.join()
        if self.path != ":memory:" and not self.read_only:  # a reader holds no lock and writes nothing
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.close()
        self._unlock()

    def _unlock(self) -> None:
        """The lock file removed, then released (removed while held: no other process holds it meanwhile)."""
        if self._lock_file is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path + ".lock")
            self._lock_file.close()
            self._lock_file = None


class SqlitePart:
    """A part of the store (decisions, sessions, ...) on the shared file."""

    def __init__(self, db: SqliteDb) -> None:
        self.db = db
