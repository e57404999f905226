"""Secrets on PostgreSQL: random keys created once in the meta table, one for every process of a deployment."""

from __future__ import annotations

import os

from npcmind.storage.postgres.db import PgPart, kept


class PgSecrets(PgPart):
    """Keys in the shared meta table."""

    @kept
    async def get(self, name: str, size: int = 32) -> bytes:
        await self.db.pool.execute(
            "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", name, os.urandom(size)
        )
        return bytes(await self.db.pool.fetchval("SELECT value FROM meta WHERE key = $1", name))
