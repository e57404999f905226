"""Sessions on PostgreSQL, the scopes each added, and the numbered revocations that end them at every process."""

from __future__ import annotations

from npcmind.storage.base import SessionRecord
from npcmind.storage.postgres.db import PgPart, kept


class PgSessions(PgPart):
    """Sessions, scopes and revocations on the shared pool."""

    @kept
    async def create(self, rec: SessionRecord) -> None:
        await self.db.pool.execute(
            "INSERT INTO sessions (session_id, client_id, created_at, expires_at, ended) VALUES ($1, $2, $3, $4, $5)",
            rec.session_id,
            rec.client_id,
            rec.created_at,
            rec.expires_at,
            rec.ended,
        )

    @kept
    async def open(self, rec: SessionRecord, limit: int) -> bool:
        async with self.db.pool.acquire() as db, db.transaction():
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

    @kept
    async def get(self, session_id: str) -> SessionRecord | None:
        row = await self.db.pool.fetchrow(
            "SELECT session_id, client_id, created_at, expires_at, ended FROM sessions WHERE session_id = $1",
            session_id,
        )
        return SessionRecord(row[0], row[1], row[2], row[3], bool(row[4])) if row else None

    @kept
    async def end(self, session_id: str) -> None:
        async with self.db.pool.acquire() as db, db.transaction():
            # one revocation at a time takes its number and commits: numbers become visible in their order, so a
            # process that read up to N never misses a smaller number committed later (sequences alone do not)
            await db.execute("SELECT pg_advisory_xact_lock(hashtext('npcmind revocations'))")
            await db.execute("UPDATE sessions SET ended = TRUE WHERE session_id = $1", session_id)
            await db.execute(
                "INSERT INTO revocations (session_id, expires_at)"
                " SELECT session_id, expires_at FROM sessions WHERE session_id = $1",
                session_id,
            )

    @kept
    async def ended_since(self, after: int) -> tuple[int, list[tuple[str, float]]]:
        rows = await self.db.pool.fetch(
            "SELECT seq, session_id, expires_at FROM revocations WHERE seq > $1 ORDER BY seq", after
        )
        return (int(rows[-1][0]) if rows else after), [(r[1], float(r[2])) for r in rows]

    @kept
    async def live(self, client_id: str, now: float) -> int:
        return int(
            await self.db.pool.fetchval(
                "SELECT COUNT(*) FROM sessions WHERE client_id = $1 AND NOT ended AND expires_at > $2", client_id, now
            )
        )

    @kept
    async def put_scope(self, session_id: str, name: str, spec: bytes) -> None:
        await self.db.pool.execute(
            "INSERT INTO scopes (session_id, name, spec) VALUES ($1, $2, $3)"
            " ON CONFLICT (session_id, name) DO UPDATE SET spec = excluded.spec",
            session_id,
            name,
            spec,
        )

    @kept
    async def scopes(self, session_id: str) -> dict[str, bytes]:
        rows = await self.db.pool.fetch("SELECT name, spec FROM scopes WHERE session_id = $1", session_id)
        return {r[0]: bytes(r[1]) for r in rows}

    @kept
    async def prune(self, before: float) -> int:
        async with self.db.pool.acquire() as db, db.transaction():
            await db.execute(
                "DELETE FROM scopes WHERE session_id IN (SELECT session_id FROM sessions WHERE expires_at < $1)",
                before,
            )
            status = await db.execute("DELETE FROM sessions WHERE expires_at < $1", before)
            await db.execute("DELETE FROM revocations WHERE expires_at < $1", before)  # tokens expired anyway
        return int(status.split()[-1])
