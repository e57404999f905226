"""Secrets on SQLite: random keys created once in the meta table and kept across restarts."""

from __future__ import annotations

import os

from npcmind.storage.sqlite.db import SqlitePart, kept


class SqliteSecrets(SqlitePart):
    """Keys in the shared file's meta table."""

    @kept
    async def get(self, name: str, size: int = 32) -> bytes:
        self.db.write("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (name, os.urandom(size)))
        return bytes(self.db.conn.execute("SELECT value FROM meta WHERE key = ?", (name,)).fetchone()[0])
