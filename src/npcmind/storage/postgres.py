"""The shared store: PostgreSQL, so that several npcmind processes keep one set of decisions, sessions and secrets.

Every process may write at once. Decision numbers come from a PostgreSQL sequence, a block of ``BLOCK`` numbers
a call, so a process asks the database once every few hundred requests and two processes never issue the same
number; numbers of different processes interleave, so retention goes by the time a decision was issued, not by
its number. As in SQLite, the requests that reach the store in the same turn of the loop share one commit, made
before any of them is answered. The schema is created at start under an advisory lock (several processes may
start together) and carries a version: a store written by a newer npcmind is refused.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
import urllib.parse
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

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
from npcmind.storage.pgpool import GatedPool

try:  # the `postgres` extra
    import asyncpg
except ImportError:  # pragma: no cover - said at start, with the command that installs it
    asyncpg = None

log = logging.getLogger("npcmind.storage")

BLOCK = 1024  # decision numbers a process takes from the sequence at once
PRUNE_CHUNK = 500  # batch rows deleted in one statement
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BYTEA NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
  session_id TEXT PRIMARY KEY, client_id TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
  expires_at DOUBLE PRECISION NOT NULL, ended BOOLEAN NOT NULL DEFAULT FALSE);
CREATE INDEX IF NOT EXISTS sessions_by_client ON sessions (client_id, expires_at);
CREATE TABLE IF NOT EXISTS scopes (
  session_id TEXT NOT NULL, name TEXT NOT NULL, spec BYTEA NOT NULL, PRIMARY KEY (session_id, name));
CREATE TABLE IF NOT EXISTS batches (
  first_seq BIGINT PRIMARY KEY, n INTEGER NOT NULL, session_id TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
  decisions BYTEA NOT NULL);
CREATE INDEX IF NOT EXISTS batches_by_session ON batches (session_id, first_seq);
CREATE INDEX IF NOT EXISTS batches_by_time ON batches (created_at);
CREATE TABLE IF NOT EXISTS outcomes (
  seq BIGINT PRIMARY KEY, session_id TEXT NOT NULL, outcome TEXT NOT NULL, detail TEXT,
  reported_at DOUBLE PRECISION NOT NULL, decided_at DOUBLE PRECISION NOT NULL);
CREATE INDEX IF NOT EXISTS outcomes_by_session ON outcomes (session_id, seq);
CREATE INDEX IF NOT EXISTS outcomes_by_time ON outcomes (decided_at);
CREATE SEQUENCE IF NOT EXISTS decision_blocks;
CREATE TABLE IF NOT EXISTS features (
  first_seq BIGINT PRIMARY KEY, client_id TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, data BYTEA NOT NULL);
CREATE INDEX IF NOT EXISTS features_by_client ON features (client_id, created_at);
CREATE INDEX IF NOT EXISTS features_by_time ON features (created_at);
CREATE TABLE IF NOT EXISTS policies (
  client_id TEXT NOT NULL, manifest_version TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, data BYTEA NOT NULL,
  PRIMARY KEY (client_id, manifest_version));
CREATE TABLE IF NOT EXISTS revocations (
  seq BIGSERIAL PRIMARY KEY, session_id TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL);
"""
_Row = tuple[str, str, str, str, str]
_decode = msgspec.json.Decoder(list[_Row]).decode
P = ParamSpec("P")
R = TypeVar("R")
_Op = Callable[Concatenate["PostgresStore", P], Coroutine[Any, Any, R]]


def _errors() -> tuple[type[BaseException], ...]:
    """What a lost connection, a stopped server or a refused statement raises."""
    return (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ConnectionError, asyncio.TimeoutError)


def _kept(op: _Op[P, R]) -> _Op[P, R]:
    """A database or connection error becomes a StoreError (a 503 that keeps nothing), logged at a readable rate."""

    @functools.wraps(op)
    async def run(self: PostgresStore, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            out = await op(self, *args, **kwargs)
        except _errors() as e:
            self.failures.failed(str(e) or e.__class__.__name__)
            raise StoreError(f"the store could not keep this request ({e}); nothing of it was kept") from e
        self.failures.succeeded()
        return out

    return run


_PLAIN = re.compile(r"[a-z_][a-z0-9_]{0,62}")  # an identifier PostgreSQL reads the same quoted or not


def check_schema_name(schema: str) -> None:
    """Refuse a name PostgreSQL would read two ways: ``CREATE SCHEMA "Rt_Case"`` made an empty schema while
    ``search_path`` folded the name to ``rt_case``, whose tables the store then used (two deployments differing
    in case shared one store); a name past 63 bytes is cut, so two long names shared one too."""
    if _PLAIN.fullmatch(schema) and not schema.startswith("pg_"):
        return
    folded = schema.lower() if schema.isascii() else ""  # what search_path read the name as
    raise ValueError(
        f"the store's ?schema= must be a plain lowercase identifier (a-z, 0-9 and _, not starting with a digit or"
        f" pg_, at most 63 characters), not {schema!r}"
        + (f"; the tables it used so far are those of ?schema={folded}" if _PLAIN.fullmatch(folded) else "")
    )


POOL_SIZE = 10  # connections a process may hold at most (?pool_size=)
POOL_WAIT_S = 5.0  # how long a request waits for one before its 503 (?pool_wait_s=): as long as its Retry-After
_OURS = ("schema", "pool_size", "pool_wait_s")  # read here, not handed to asyncpg (which took them for settings)


def pool_settings(url: str) -> tuple[int, float]:
    """The pool's size and wait from ``?pool_size=N&pool_wait_s=S``: how many connections this process may hold,
    and how long a request waits for one before a 503."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    size, wait = query.get("pool_size", [str(POOL_SIZE)])[0], query.get("pool_wait_s", [str(POOL_WAIT_S)])[0]
    if not (size.isdigit() and 1 <= int(size) <= 1000):
        raise ValueError(f"the store's ?pool_size= must be a whole number of connections, 1 to 1000, not {size!r}")
    try:
        seconds = float(wait)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 600:
        raise ValueError(f"the store's ?pool_wait_s= must be seconds, more than 0 and at most 600, not {wait!r}")
    return int(size), seconds


def parse_url(url: str) -> tuple[str, str]:
    """The DSN asyncpg takes and the schema to use (``?schema=NAME``, default ``public``): several deployments,
    or a test each, can share one database."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query)
    schema = query.get("schema", ["public"])[0]
    check_schema_name(schema)
    for name in _OURS:
        query.pop(name, None)
    rest = urllib.parse.urlencode({k: v[0] for k, v in query.items()})
    return urllib.parse.urlunsplit(parts._replace(query=rest)), schema


class PostgresStore:
    """PostgreSQL through an asyncpg pool: a commit has returned only once the server has it on disk."""

    def __init__(self, url: str, read_only: bool = False, publish: bool = False) -> None:
        if asyncpg is None:
            raise ValueError("a postgresql:// store needs the postgres extra: pip install 'npcmind[postgres]'")
        self.url = url
        self._dsn, self.schema = parse_url(url)
        self._pool_size, self._pool_wait_s = pool_settings(url)
        self._beside = read_only or publish  # distill: creates and migrates nothing
        self._read_only = read_only and not publish
        self._pool: Any = None
        self._next = 1
        self._block_end = 0  # no block yet
        self._blocks = asyncio.Lock()
        self._pending: list[tuple[list[IssuedDecision], RequestFeatures | None, asyncio.Future[None]]] = []
        self._flushing: asyncio.Task[None] | None = None
        self.failures = FailureLog(log, "store write")

    async def check(self) -> None:
        """Open and close again: the pool belongs to the loop that made it, and the server's loop is not yet."""
        await self.open()
        await self.close()

    async def open(self) -> None:
        """Connect, create the schema if it is not there, and refuse a store of a newer npcmind."""
        if self._pool is not None:
            return
        settings = {"search_path": f'"{self.schema}"'}  # quoted as created: the same exact name
        if self._read_only:  # the server itself refuses every write of a reader
            settings["default_transaction_read_only"] = "on"
        try:
            pool = await asyncpg.create_pool(
                self._dsn, min_size=1, max_size=self._pool_size, server_settings=settings, timeout=10
            )
            self._pool = GatedPool(pool, self._pool_size, self._pool_wait_s)
            if self._beside:
                await self._check_beside()
                return
            async with self._pool.acquire() as db, db.transaction():
                await db.execute("SELECT pg_advisory_xact_lock(hashtext('npcmind schema'))")
                await db.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                await db.execute(_SCHEMA)
                row = await db.fetchval("SELECT value FROM meta WHERE key = 'schema_version'")
                check_version(read_version(row, self.url), self.url)
                await db.execute(  # an older store gains the new tables and says so: an older npcmind refuses it
                    "INSERT INTO meta (key, value) VALUES ('schema_version', $1)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    str(SCHEMA_VERSION).encode(),
                )
        except _errors() as e:
            await self.close()
            raise ValueError(
                f"the store {self.url} cannot be opened: {e}; check --store and that the server runs"
            ) from None
        except ValueError:
            await self.close()
            raise

    async def _check_beside(self) -> None:
        """Beside the service, the store must exist as this npcmind writes it: a mistyped ?schema= was created
        with every table, and a version-2 store was migrated, by a distill that promised to read only."""
        async with self._pool.acquire() as db:
            if not await db.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", self.schema):
                raise ValueError(f"the store {self.url} does not exist (no schema {self.schema!r}): check --store")
            if await db.fetchval("SELECT to_regclass(format('%I.meta', $1::text))", self.schema) is None:
                raise ValueError(f"the store {self.url} is not an npcmind store (no meta table): check --store")
            row = await db.fetchval("SELECT value FROM meta WHERE key = 'schema_version'")
        check_beside(read_version(row, self.url), self.url)

    # --- decisions -----------------------------------------------------------------------------------

    @_kept
    async def allocate(self, n: int) -> int:
        if self._next + n - 1 > self._block_end:
            async with self._blocks:
                if self._next + n - 1 > self._block_end:  # another request may have taken a block meanwhile
                    block = int(await self._pool.fetchval("SELECT nextval('decision_blocks')"))
                    self._next, self._block_end = (block - 1) * BLOCK + 1, block * BLOCK
        first = self._next
        self._next += n
        return first

    async def record_decisions(self, rows: list[IssuedDecision], features: RequestFeatures | None = None) -> None:
        if not rows:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((rows, features if features is not None and features.decisions else None, fut))
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush_all())
        await fut

    async def _flush_all(self) -> None:
        """One commit for every request waiting, again while more came in during the last one."""
        await asyncio.sleep(0)  # the requests of this turn of the loop join the same commit
        while self._pending:
            batch, self._pending = self._pending, []
            values = [batch_row(rows) for rows, _, _ in batch]
            kept = [features_row(f) for _, f, _ in batch if f is not None]
            try:
                async with self._pool.acquire() as db, db.transaction():
                    await db.executemany(
                        "INSERT INTO batches (first_seq, n, session_id, created_at, decisions)"
                        " VALUES ($1, $2, $3, $4, $5)",
                        values,
                    )
                    if kept:
                        await db.executemany(
                            "INSERT INTO features (first_seq, client_id, created_at, data) VALUES ($1, $2, $3, $4)",
                            kept,
                        )
            except _errors() as e:  # every waiting request fails; none is answered as kept
                self.failures.failed(str(e) or e.__class__.__name__)
                error = StoreError(f"the store could not keep this request ({e}); nothing of it was kept")
                for _, _, fut in batch:
                    if not fut.done():
                        fut.set_exception(error)
                continue
            self.failures.succeeded()
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_result(None)

    @_kept
    async def decision(self, seq: int) -> IssuedDecision | None:
        row = await self._pool.fetchrow(
            "SELECT b.first_seq, b.n, b.session_id, b.created_at, b.decisions, o.outcome, o.detail"
            " FROM (SELECT * FROM batches WHERE first_seq <= $1 ORDER BY first_seq DESC LIMIT 1) b"
            " LEFT JOIN outcomes o ON o.seq = $1",
            seq,
        )
        if row is None or seq >= row[0] + row[1]:
            return None
        did, eid, typ, action, label = _decode(row[4])[seq - row[0]]
        return IssuedDecision(seq, did, row[2], eid, typ, action, label, row[3], row[5], row[6])

    @_kept
    async def set_outcome(self, seq: int, outcome: str, detail: str | None, now: float) -> bool:
        rec = await self.decision(seq)
        if rec is None:
            return False
        status = await self._pool.execute(
            "INSERT INTO outcomes (seq, session_id, outcome, detail, reported_at, decided_at)"
            " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (seq) DO NOTHING",
            seq,
            rec.session_id,
            outcome,
            detail,
            now,
            rec.created_at,
        )
        return bool(status.endswith(" 1"))

    @_kept
    async def session_decisions(self, session_id: str, limit: int) -> list[IssuedDecision]:
        rows = await self._pool.fetch(
            "SELECT first_seq, created_at, decisions, n FROM batches WHERE session_id = $1"
            " ORDER BY first_seq DESC LIMIT $2",
            session_id,
            limit,  # a batch holds at least one decision: never more rows than decisions are asked for
        )
        out: list[IssuedDecision] = []
        for first, at, raw, _ in rows:
            for i, (did, eid, typ, action, label) in reversed(list(enumerate(_decode(raw)))):
                out.append(IssuedDecision(first + i, did, session_id, eid, typ, action, label, at))
            if len(out) >= limit:
                break
        out = out[:limit]
        if out:
            by_seq = {d.seq: d for d in out}
            for seq, outcome, detail in await self._pool.fetch(
                "SELECT seq, outcome, detail FROM outcomes WHERE session_id = $1 AND seq >= $2",
                session_id,
                out[-1].seq,
            ):
                d = by_seq.get(seq)
                if d is not None:
                    d.outcome, d.detail = outcome, detail
        return out

    @_kept
    async def prune(self, before: float) -> tuple[int, int]:
        decisions = 0
        while True:  # a chunk a statement, the loop free between them
            rows = await self._pool.fetch(
                "DELETE FROM batches WHERE first_seq IN"
                " (SELECT first_seq FROM batches WHERE created_at < $1 ORDER BY created_at LIMIT $2) RETURNING n",
                before,
                PRUNE_CHUNK,
            )
            decisions += sum(r[0] for r in rows)
            if len(rows) < PRUNE_CHUNK:
                break
            await asyncio.sleep(0)
        await self._pool.execute("DELETE FROM outcomes WHERE decided_at < $1", before)
        await self._pool.execute("DELETE FROM features WHERE created_at < $1", before)
        async with self._pool.acquire() as db, db.transaction():
            await db.execute(
                "DELETE FROM scopes WHERE session_id IN (SELECT session_id FROM sessions WHERE expires_at < $1)",
                before,
            )
            status = await db.execute("DELETE FROM sessions WHERE expires_at < $1", before)
            await db.execute("DELETE FROM revocations WHERE expires_at < $1", before)  # tokens expired anyway
        return decisions, int(status.split()[-1])

    # --- what a policy learns from, and the policies ----------------------------------------------

    @_kept
    async def training(self, client_id: str, since: float) -> list[TrainingRow]:
        found = await self._pool.fetch(
            "SELECT created_at, data FROM features WHERE client_id = $1 AND created_at >= $2 ORDER BY created_at",
            client_id,
            since,
        )
        out = readable_rows(client_id, ((at, data) for at, data in found))
        if out:  # numbers of several processes interleave: join by the numbers themselves
            by_seq = {r.seq: r for r in out}
            for seq, outcome in await self._pool.fetch(
                "SELECT seq, outcome FROM outcomes WHERE seq = ANY($1::bigint[])", list(by_seq)
            ):
                by_seq[seq].outcome = outcome
            spans = await self._pool.fetch(  # from the batch that holds the first decision to the one of the last
                "SELECT first_seq, n, session_id FROM batches WHERE first_seq <= $1"
                " AND first_seq >= (SELECT COALESCE(MAX(first_seq), 0) FROM batches WHERE first_seq <= $2)",
                max(by_seq),
                min(by_seq),
            )
            join_sessions(out, ((f, n, s) for f, n, s in spans))
        return out

    @_kept
    async def training_clients(self, since: float) -> list[str]:
        rows = await self._pool.fetch("SELECT DISTINCT client_id FROM features WHERE created_at >= $1", since)
        return sorted(r[0] for r in rows)

    @_kept
    async def put_policy(self, policy: StoredPolicy) -> None:
        await self._pool.execute(
            "INSERT INTO policies (client_id, manifest_version, created_at, data) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT (client_id, manifest_version) DO UPDATE SET created_at = excluded.created_at,"
            " data = excluded.data",
            policy.client_id,
            policy.manifest_version,
            policy.created_at,
            policy.data,
        )

    @_kept
    async def policy(self, client_id: str, manifest_version: str) -> StoredPolicy | None:
        row = await self._pool.fetchrow(
            "SELECT created_at, data FROM policies WHERE client_id = $1 AND manifest_version = $2",
            client_id,
            manifest_version,
        )
        return StoredPolicy(client_id, manifest_version, row[0], bytes(row[1])) if row else None

    # --- secrets, sessions, scopes ---------------------------------------------------------------

    @_kept
    async def secret(self, name: str, size: int = 32) -> bytes:
        await self._pool.execute(
            "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", name, os.urandom(size)
        )
        return bytes(await self._pool.fetchval("SELECT value FROM meta WHERE key = $1", name))

    @_kept
    async def create_session(self, rec: SessionRecord) -> None:
        await self._pool.execute(
            "INSERT INTO sessions (session_id, client_id, created_at, expires_at, ended) VALUES ($1, $2, $3, $4, $5)",
            rec.session_id,
            rec.client_id,
            rec.created_at,
            rec.expires_at,
            rec.ended,
        )

    @_kept
    async def open_session(self, rec: SessionRecord, limit: int) -> bool:
        async with self._pool.acquire() as db, db.transaction():
            await db.execute("SELECT pg_advisory_xact_lock(hashtext($1))", "npcmind sessions of " + rec.client_id)
            live = await db.fetchval(
                "SELECT COUNT(*) FROM sessions WHERE client_id = $1 AND NOT ended AND expires_at > $2",
                rec.client_id,
                rec.created_at,
            )
            if live >= limit:
                return False
            await db.execute(
                "INSERT INTO sessions (session_id, client_id, created_at, expires_at, ended)"
                " VALUES ($1, $2, $3, $4, $5)",
                rec.session_id,
                rec.client_id,
                rec.created_at,
                rec.expires_at,
                rec.ended,
            )
        return True

    @_kept
    async def get_session(self, session_id: str) -> SessionRecord | None:
        row = await self._pool.fetchrow(
            "SELECT session_id, client_id, created_at, expires_at, ended FROM sessions WHERE session_id = $1",
            session_id,
        )
        return SessionRecord(row[0], row[1], row[2], row[3], bool(row[4])) if row else None

    @_kept
    async def end_session(self, session_id: str) -> None:
        async with self._pool.acquire() as db, db.transaction():
            # one revocation at a time takes its number and commits: numbers become visible in their order, so a
            # process that read up to N never misses a smaller number committed later (sequences alone do not)
            await db.execute("SELECT pg_advisory_xact_lock(hashtext('npcmind revocations'))")
            await db.execute("UPDATE sessions SET ended = TRUE WHERE session_id = $1", session_id)
            await db.execute(
                "INSERT INTO revocations (session_id, expires_at)"
                " SELECT session_id, expires_at FROM sessions WHERE session_id = $1",
                session_id,
            )

    @_kept
    async def ended_since(self, after: int) -> tuple[int, list[tuple[str, float]]]:
        rows = await self._pool.fetch(
            "SELECT seq, session_id, expires_at FROM revocations WHERE seq > $1 ORDER BY seq", after
        )
        return (int(rows[-1][0]) if rows else after), [(r[1], float(r[2])) for r in rows]

    @_kept
    async def live_sessions(self, client_id: str, now: float) -> int:
        return int(
            await self._pool.fetchval(
                "SELECT COUNT(*) FROM sessions WHERE client_id = $1 AND NOT ended AND expires_at > $2", client_id, now
            )
        )

    @_kept
    async def put_scope(self, session_id: str, name: str, spec: bytes) -> None:
        await self._pool.execute(
            "INSERT INTO scopes (session_id, name, spec) VALUES ($1, $2, $3)"
            " ON CONFLICT (session_id, name) DO UPDATE SET spec = excluded.spec",
            session_id,
            name,
            spec,
        )

    @_kept
    async def scopes(self, session_id: str) -> dict[str, bytes]:
        rows = await self._pool.fetch("SELECT name, spec FROM scopes WHERE session_id = $1", session_id)
        return {r[0]: bytes(r[1]) for r in rows}

    async def close(self) -> None:
        if self._flushing is not None and not self._flushing.done():
            await self._flushing  # requests still waiting on a commit get it before the pool closes
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()
