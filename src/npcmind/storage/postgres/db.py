"""The PostgreSQL database every part of the shared store uses: the URL and its settings, the pool, and the schema,
created at start under an advisory lock (several processes may start together) with a version: a store written by
a newer npcmind is refused."""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import urllib.parse
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from npcmind.failures import FailureLog
from npcmind.storage.base import SCHEMA_VERSION, StoreError, check_beside, check_version, read_version
from npcmind.storage.postgres.pool import GatedPool

try:  # the `postgres` extra
    import asyncpg
except ImportError:  # pragma: no cover - said at start, with the command that installs it
    asyncpg = None

log = logging.getLogger("npcmind.storage")

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
  first_seq BIGINT PRIMARY KEY, client_id TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, data BYTEA NOT NULL,
  prompt BYTEA);
ALTER TABLE features ADD COLUMN IF NOT EXISTS prompt BYTEA;
CREATE TABLE IF NOT EXISTS manifests (version TEXT PRIMARY KEY, used_at DOUBLE PRECISION NOT NULL, data BYTEA NOT NULL);
CREATE INDEX IF NOT EXISTS features_by_client ON features (client_id, created_at);
CREATE INDEX IF NOT EXISTS features_by_time ON features (created_at);
CREATE TABLE IF NOT EXISTS policies (
  client_id TEXT NOT NULL, manifest_version TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, data BYTEA NOT NULL,
  PRIMARY KEY (client_id, manifest_version));
CREATE TABLE IF NOT EXISTS revocations (
  seq BIGSERIAL PRIMARY KEY, session_id TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL);
"""
P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound="PgPart")
_Op = Callable[Concatenate[S, P], Coroutine[Any, Any, R]]


def errors() -> tuple[type[BaseException], ...]:
    """What a lost connection, a stopped server or a refused statement raises."""
    return (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ConnectionError, asyncio.TimeoutError)


def kept(op: _Op[S, P, R]) -> _Op[S, P, R]:
    """A database or connection error becomes a StoreError (a 503 that keeps nothing), logged at a readable rate."""

    @functools.wraps(op)
    async def run(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            out = await op(self, *args, **kwargs)
        except errors() as e:
            self.db.failures.failed(str(e) or e.__class__.__name__)
            raise StoreError(f"the store could not keep this request ({e}); nothing of it was kept") from e
        self.db.failures.succeeded()
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


class PgDb:
    """PostgreSQL through an asyncpg pool: a commit has returned only once the server has it on disk. Every part
    of the store (decisions, sessions, policies, secrets) uses this one pool."""

    def __init__(self, url: str, read_only: bool = False, publish: bool = False) -> None:
        if asyncpg is None:
            raise ValueError("a postgresql:// store needs the postgres extra: pip install 'npcmind[postgres]'")
        self.url = url
        self._dsn, self.schema = parse_url(url)
        self.pool_size, self.pool_wait_s = pool_settings(url)
        self._beside = read_only or publish  # distill: creates and migrates nothing
        self._read_only = read_only and not publish
        self.pool: Any = None
        self.failures = FailureLog(log, "store write")

    async def check(self) -> None:
        """Open and close again: the pool belongs to the loop that made it, and the server's loop is not yet."""
        await self.open()
        await self.close()

    async def open(self) -> None:
        """Connect, create the schema if it is not there, and refuse a store of a newer npcmind."""
        if self.pool is not None:
            return
        settings = {"search_path": f'"{self.schema}"'}  # quoted as created: the same exact name
        if self._read_only:  # the server itself refuses every write of a reader
            settings["default_transaction_read_only"] = "on"
        try:
            pool = await asyncpg.create_pool(
                self._dsn, min_size=1, max_size=self.pool_size, server_settings=settings, timeout=10
            )
            self.pool = GatedPool(pool, self.pool_size, self.pool_wait_s)
            if self._beside:
                await self._check_beside()
                return
            async with self.pool.acquire() as db, db.transaction():
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
        except errors() as e:
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
        async with self.pool.acquire() as db:
            if not await db.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", self.schema):
                raise ValueError(f"the store {self.url} does not exist (no schema {self.schema!r}): check --store")
            if await db.fetchval("SELECT to_regclass(format('%I.meta', $1::text))", self.schema) is None:
                raise ValueError(f"the store {self.url} is not an npcmind store (no meta table): check --store")
            row = await db.fetchval("SELECT value FROM meta WHERE key = 'schema_version'")
        check_beside(read_version(row, self.url), self.url)

    async def close(self) -> None:
        """Close the pool (the parts flushed already)."""
        if self.pool is not None:
            pool, self.pool = self.pool, None
            await pool.close()


class PgPart:
    """A part of the store (decisions, sessions, ...) on the shared pool."""

    def __init__(self, db: PgDb) -> None:
        self.db = db
