"""Sessions on SQLite, the scopes each added, and the numbered revocations that end them."""

from __future__ import annotations

from npcmind.storage.base import SessionRecord
from npcmind.storage.sqlite.db import SqlitePart, kept


class SqliteSessions(SqlitePart):
    """Sessions, scopes and revocations in the shared file."""

    @kept
    async def create(self, rec: SessionRecord) -> None:
        self.db.write(
            "INSERT INTO sessions (session_id, client_id, created_at, expires_at, ended) VALUES (?, ?, ?, ?, ?)",
            (rec.session_id, rec.client_id, rec.created_at, rec.expires_at, int(rec.ended)),
        )

    @kept
    async def open(self, rec: SessionRecord, limit: int) -> bool:
        with self.db.conn:  # one transaction on the loop, no await inside: nothing comes in between
            self.db.conn.execute("BEGIN IMMEDIATE")
            (live,) = self.db.conn.execute(
                "SELECT COUNT(*) FROM sessions WHERE client_id = ? AND ended = 0 AND expires_at > ?",
                (rec.client_id, rec.created_at),
            ).fetchone()
            if live >= limit:
                return False
            self.db.conn.execute(
                "INSERT INTO sessions (session_id, client_id, created_at, expires_at, ended) VALUES (?, ?, ?, ?, ?)",
                (rec.session_id, rec.client_id, rec.created_at, rec.expires_at, int(rec.ended)),
            )
        self.db.committed()
        return True

    @kept
    async def get(self, session_id: str) -> SessionRecord | None:
        row = self.db.conn.execute(
            "SELECT session_id, client_id, created_at, expires_at, ended FROM sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        return SessionRecord(row[0], row[1], row[2], row[3], bool(row[4])) if row else None

    @kept
    async def end(self, session_id: str) -> None:
        with self.db.conn:  # one commit: a session is ended exactly when its revocation is numbered
            self.db.conn.execute("BEGIN IMMEDIATE")
            self.db.conn.execute("UPDATE sessions SET ended = 1 WHERE session_id = ?", (session_id,))
            self.db.conn.execute(
                "INSERT INTO revocations (session_id, expires_at)"
                " SELECT session_id, expires_at FROM sessions WHERE session_id = ?",
                (session_id,),
            )
        self.db.committed()

    @kept
    async def ended_since(self, after: int) -> tuple[int, list[tuple[str, float]]]:
        rows = self.db.conn.execute(
            "SELECT seq, session_id, expires_at FROM revocations WHERE seq > ? ORDER BY seq", (after,)
        ).fetchall()
        return (int(rows[-1][0]) if rows else after), [(r[1], float(r[2])) for r in rows]

    @kept
    async def live(self, client_id: str, now: float) -> int:
        row = self.db.conn.execute(
            "SELECT COUNT(*) FROM sessions WHERE client_id = ? AND ended = 0 AND expires_at > ?", (client_id, now)
        ).fetchone()
        return int(row[0])

    @kept
    async def put_scope(self, session_id: str, name: str, spec: bytes) -> None:
        self.db.write(
            "INSERT INTO scopes (session_id, name, spec) VALUES (?, ?, ?)"
            " ON CONFLICT (session_id, name) DO UPDATE SET spec = excluded.spec",
            (session_id, name, spec),
        )

    @kept
    async def scopes(self, session_id: str) -> dict[str, bytes]:
        rows = self.db.conn.execute("SELECT name, spec FROM scopes WHERE session_id = ?", (session_id,)).fetchall()
        return {r[0]: bytes(r[1]) for r in rows}

    @kept
    async def prune(self, before: float) -> int:
        with self.db.conn:
            self.db.conn.execute("BEGIN")
            self.db.conn.execute(
                "DELETE FROM scopes WHERE session_id IN (SELECT session_id FROM sessions WHERE expires_at < ?)",
                (before,),
            )
            sessions = self.db.conn.execute("DELETE FROM sessions WHERE expires_at < ?", (before,)).rowcount
            self.db.conn.execute("DELETE FROM revocations WHERE expires_at < ?", (before,))  # tokens expired anyway
        return sessions
