"""The embedded default store: one SQLite file in WAL mode, safe against kill -9 once a call returned.

Its parts (decisions, sessions, policies, secrets) share one connection (``db.py``), each in a module of its own.
Issued decisions are one row per request, and the requests that reach the store in the same turn of the loop
share one commit, made before any of them is answered. Decisions older than the retention are forgotten in small
transactions (``prune``), so neither the file nor its WAL grows without bound.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from npcmind.storage.sqlite.db import SqliteDb
from npcmind.storage.sqlite.decisions import SqliteDecisions
from npcmind.storage.sqlite.policies import SqlitePolicies
from npcmind.storage.sqlite.secrets import SqliteSecrets
from npcmind.storage.sqlite.sessions import SqliteSessions


class SqliteStore:
    """One file, one process (a lock beside it), its parts on one connection."""

    def __init__(self, path: str | Path, read_only: bool = False, publish: bool = False) -> None:
        self.db = SqliteDb(path, read_only, publish)
        self.path = self.db.path
        self.failures = self.db.failures
        try:
            self.decisions = SqliteDecisions(self.db)
        except BaseException:  # its pending file refused: the file and its lock let go, for the next start
            with contextlib.suppress(sqlite3.Error, OSError):
                self.db.close()
            raise
        self.sessions = SqliteSessions(self.db)
        self.policies = SqlitePolicies(self.db)
        self.secrets = SqliteSecrets(self.db)

    async def check(self) -> None:
        """Checked already, in the constructor."""

    async def open(self) -> None:
        """Opened already, in the constructor: a bad --store is said before the server starts."""

    async def prune(self, before: float) -> tuple[int, int]:
        """Old decisions first, a chunk a transaction, then expired sessions: the numbers of each forgotten."""
        decisions = await self.decisions.prune(before)
        return decisions, await self.sessions.prune(before)

    async def close(self) -> None:
        """Requests still waiting on a commit get it before the file closes."""
        self.decisions.close()
        self.db.close()


__all__ = ["SqliteStore"]
