"""What a policy learns from on PostgreSQL (the features of fresh decisions, joined with outcomes and sessions by
their numbers, which several processes interleave), and the distilled policies."""

from __future__ import annotations

from npcmind.storage.base import StoredPolicy, TrainingRow, join_sessions, readable_rows
from npcmind.storage.postgres.db import PgPart, kept


class PgPolicies(PgPart):
    """Training features and policies on the shared pool."""

    @kept
    async def training(self, client_id: str, since: float) -> list[TrainingRow]:
        found = await self.db.pool.fetch(
            "SELECT created_at, data FROM features WHERE client_id = $1 AND created_at >= $2 ORDER BY created_at",
            client_id,
            since,
        )
        out = readable_rows(client_id, ((at, data) for at, data in found))
        if out:  # numbers of several processes interleave: join by the numbers themselves
            by_seq = {r.seq: r for r in out}
            for seq, outcome in await self.db.pool.fetch(
                "SELECT seq, outcome FROM outcomes WHERE seq = ANY($1::bigint[])", list(by_seq)
            ):
                by_seq[seq].outcome = outcome
            spans = await self.db.pool.fetch(  # from the batch that holds the first decision to the one of the last
                "SELECT first_seq, n, session_id FROM batches WHERE first_seq <= $1"
                " AND first_seq >= (SELECT COALESCE(MAX(first_seq), 0) FROM batches WHERE first_seq <= $2)",
                max(by_seq),
                min(by_seq),
            )
            join_sessions(out, ((f, n, s) for f, n, s in spans))
        return out

    @kept
    async def reads(self, client_id: str, since: float) -> list[tuple[int, bytes]]:
        rows = await self.db.pool.fetch(
            "SELECT first_seq, prompt FROM features WHERE client_id = $1 AND created_at >= $2 AND prompt IS NOT NULL"
            " ORDER BY first_seq",
            client_id,
            since,
        )
        return [(seq, bytes(prompt)) for seq, prompt in rows]

    @kept
    async def manifest(self, version: str) -> bytes | None:
        data = await self.db.pool.fetchval("SELECT data FROM manifests WHERE version = $1", version)
        return bytes(data) if data is not None else None

    @kept
    async def training_clients(self, since: float) -> list[str]:
        rows = await self.db.pool.fetch("SELECT DISTINCT client_id FROM features WHERE created_at >= $1", since)
        return sorted(r[0] for r in rows)

    @kept
    async def put(self, policy: StoredPolicy) -> None:
        await self.db.pool.execute(
            "INSERT INTO policies (client_id, manifest_version, created_at, data) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT (client_id, manifest_version) DO UPDATE SET created_at = excluded.created_at,"
            " data = excluded.data",
            policy.client_id,
            policy.manifest_version,
            policy.created_at,
            policy.data,
        )

    @kept
    async def get(self, client_id: str, manifest_version: str) -> StoredPolicy | None:
        row = await self.db.pool.fetchrow(
            "SELECT created_at, data FROM policies WHERE client_id = $1 AND manifest_version = $2",
            client_id,
            manifest_version,
        )
        return StoredPolicy(client_id, manifest_version, row[0], bytes(row[1])) if row else None
