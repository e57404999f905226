"""The shared store: PostgreSQL, so that several npcmind processes keep one set of decisions, sessions and secrets.

Every process may write at once. Its parts (decisions, sessions, policies, secrets) share one pool (``db.py``,
``pool.py``), each in a module of its own.
"""

from __future__ import annotations

from npcmind.storage.postgres.db import PgDb, check_schema_name, parse_url, pool_settings
from npcmind.storage.postgres.decisions import PgDecisions
from npcmind.storage.postgres.policies import PgPolicies
from npcmind.storage.postgres.secrets import PgSecrets
from npcmind.storage.postgres.sessions import PgSessions


class PostgresStore:
    """Any number of processes on one database (a schema each deployment), its parts on one pool."""

    def __init__(self, url: str, read_only: bool = False, publish: bool = False) -> None:
        self.db = PgDb(url, read_only, publish)
        self.url, self.schema, self.failures = self.db.url, self.db.schema, self.db.failures
        self.decisions = PgDecisions(self.db)
        self.sessions = PgSessions(self.db)
        self.policies = PgPolicies(self.db)
        self.secrets = PgSecrets(self.db)

    async def check(self) -> None:
        """Open and close again: the pool belongs to the loop that made it, and the server's loop is not yet."""
        await self.db.check()

    async def open(self) -> None:
        """Connect, create the schema if it is not there, and refuse a store of a newer npcmind."""
        await self.db.open()

    async def prune(self, before: float) -> tuple[int, int]:
        """Old decisions first, a chunk a statement, then expired sessions: the numbers of each forgotten."""
        decisions = await self.decisions.prune(before)
        return decisions, await self.sessions.prune(before)

    async def close(self) -> None:
        """Requests still waiting on a commit get it before the pool closes."""
        await self.decisions.close()
        await self.db.close()


__all__ = ["PostgresStore", "check_schema_name", "parse_url", "pool_settings"]
