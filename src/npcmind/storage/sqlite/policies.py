"""What a policy learns from on SQLite (the features of fresh decisions, joined with outcomes and sessions), and
the distilled policies."""

from __future__ import annotations

from collections.abc import Collection

from npcmind.storage.base import (
    MAX_READ_BYTES,
    MAX_ROW_BYTES,
    StoredPolicy,
    TrainingRows,
    join_sessions,
    readable_rows,
    stored_limit,
)
from npcmind.storage.sqlite.db import SqlitePart, kept


class SqlitePolicies(SqlitePart):
    """Training features and policies in the shared file."""

    @kept
    async def training(self, client_id: str, since: float, situations: bool = True) -> TrainingRows:
        found = self.db.conn.execute(  # a row stored longer than its cap allows is not even handed over
            "SELECT first_seq, created_at, CASE WHEN LENGTH(data) <= ? THEN data END FROM features"
            " WHERE client_id = ? AND created_at >= ? ORDER BY first_seq",
            (stored_limit(MAX_ROW_BYTES), client_id, since),
        )
        out = readable_rows(client_id, found, situations)
        if out:
            by_seq = {r.seq: r for r in out}
            for seq, outcome in self.db.conn.execute(
                "SELECT seq, outcome FROM outcomes WHERE seq BETWEEN ? AND ?", (out[0].seq, out[-1].seq)
            ):
                r = by_seq.get(seq)
                if r is not None:
                    r.outcome = outcome
            spans = self.db.conn.execute(  # from the batch that holds the first decision to the one of the last
                "SELECT first_seq, n, session_id FROM batches WHERE first_seq <= ?"
                " AND first_seq >= (SELECT COALESCE(MAX(first_seq), 0) FROM batches WHERE first_seq <= ?)",
                (out[-1].seq, out[0].seq),
            )
            join_sessions(out, spans)
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
        found = self.db.conn.execute(  # the sizes first (a blob's length is in its row's header): no blob is read
            "SELECT first_seq, LENGTH(prompt) FROM features WHERE client_id = ? AND created_at >= ? AND first_seq > ?"
            " AND prompt IS NOT NULL ORDER BY first_seq LIMIT ?",
            (client_id, since, -1 if after is None else after, limit or -1),
        ).fetchall()
        out: list[tuple[int, bytes | None]] = []
        for seq, size in found:
            blob = None
            if seq not in skip and size <= stored_limit(MAX_READ_BYTES):
                row = self.db.conn.execute("SELECT prompt FROM features WHERE first_seq = ?", (seq,)).fetchone()
                blob = bytes(row[0]) if row and row[0] is not None else None
            out.append((seq, blob))
        return out

    @kept
    async def manifest(self, version: str) -> bytes | None:
        row = self.db.conn.execute("SELECT data FROM manifests WHERE version = ?", (version,)).fetchone()
        return bytes(row[0]) if row else None

    @kept
    async def training_clients(self, since: float) -> list[str]:
        rows = self.db.conn.execute("SELECT DISTINCT client_id FROM features WHERE created_at >= ?", (since,))
        return sorted(r[0] for r in rows)

    @kept
    async def put(self, policy: StoredPolicy) -> None:
        self.db.write(
            "INSERT INTO policies (client_id, manifest_version, created_at, data) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (client_id, manifest_version) DO UPDATE SET created_at = excluded.created_at,"
            " data = excluded.data",
            (policy.client_id, policy.manifest_version, policy.created_at, policy.data),
        )

    @kept
    async def get(self, client_id: str, manifest_version: str) -> StoredPolicy | None:
        row = self.db.conn.execute(
            "SELECT created_at, data FROM policies WHERE client_id = ? AND manifest_version = ?",
            (client_id, manifest_version),
        ).fetchone()
        return StoredPolicy(client_id, manifest_version, row[0], bytes(row[1])) if row else None
