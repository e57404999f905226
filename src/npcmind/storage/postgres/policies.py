"""What a policy learns from on PostgreSQL (the features of fresh decisions, joined with outcomes and sessions by
their numbers, which several processes interleave), and the distilled policies."""

from __future__ import annotations

from collections.abc import Collection

from npcmind.storage.base import (
    MAX_READ_BYTES,
    MAX_ROW_BYTES,
    RowReader,
    StoredPolicy,
    TrainingRows,
    join_sessions,
    stored_limit,
)
from npcmind.storage.postgres.db import PgPart, kept

PAGE = 256  # features rows fetched at once: a run holds a page of stored rows, not all of them


class PgPolicies(PgPart):
    """Training features and policies on the shared pool."""

    @kept
    async def training(self, client_id: str, since: float, situations: bool = True) -> TrainingRows:
        reader = RowReader(client_id, situations)
        key: tuple[float, int] = (since, -1)
        while True:  # a page at a time, by (time, first number); a row stored past its cap is not handed over
            found = await self.db.pool.fetch(
                "SELECT first_seq, created_at, CASE WHEN octet_length(data) <= $1 THEN data END FROM features"
                " WHERE client_id = $2 AND created_at >= $3 AND (created_at, first_seq) > ($4, $5)"
                " ORDER BY created_at, first_seq LIMIT $6",
                stored_limit(MAX_ROW_BYTES),
                client_id,
                since,
                key[0],
                key[1],
                PAGE,
            )
            if not all(reader.add(first, at, data) for first, at, data in found) or len(found) < PAGE:
                break
            key = (found[-1][1], found[-1][0])
        out = reader.done()
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
    async def reads(
        self,
        client_id: str,
        since: float,
        after: int | None = None,
        limit: int | None = None,
        skip: Collection[int] = (),
    ) -> list[tuple[int, bytes | None]]:
        found = await self.db.pool.fetch(  # the sizes first, then the blobs wanted: none past its cap is sent
            "SELECT first_seq, octet_length(prompt) FROM features WHERE client_id = $1 AND created_at >= $2"
            " AND first_seq > $3 AND prompt IS NOT NULL ORDER BY first_seq LIMIT $4",
            client_id,
            since,
            -1 if after is None else after,
            limit,
        )
        wanted = [seq for seq, size in found if seq not in skip and size <= stored_limit(MAX_READ_BYTES)]
        blobs: dict[int, bytes] = {}
        if wanted:
            rows = await self.db.pool.fetch(
                "SELECT first_seq, prompt FROM features WHERE first_seq = ANY($1::bigint[])", wanted
            )
            blobs = {seq: bytes(prompt) for seq, prompt in rows}
        return [(seq, blobs.get(seq)) for seq, _ in found]

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
