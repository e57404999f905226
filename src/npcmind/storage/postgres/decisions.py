"""Issued decisions on PostgreSQL, written by any number of processes at once.

Decision numbers come from a PostgreSQL sequence, a block of ``BLOCK`` numbers a call, so a process asks the
database once every few hundred requests and two processes never issue the same number; numbers of different
processes interleave, so retention goes by the time a decision was issued, not by its number. As in SQLite, the
requests that reach the store in the same turn of the loop share one commit, made before any of them is answered.
"""

from __future__ import annotations

import asyncio

import msgspec

from npcmind.storage.base import (
    MANIFEST_EVERY_S,
    IssuedDecision,
    RequestFeatures,
    StoreError,
    batch_row,
    features_row,
    manifest_rows,
)
from npcmind.storage.postgres.db import PgDb, PgPart, errors, kept

BLOCK = 1024  # decision numbers a process takes from the sequence at once
PRUNE_CHUNK = 500  # batch rows deleted in one statement
_Row = tuple[str, str, str, str, str]
_decode = msgspec.json.Decoder(list[_Row]).decode


class PgDecisions(PgPart):
    """Decisions and outcomes on the shared pool; numbers a block at a time from the database's sequence."""

    def __init__(self, db: PgDb) -> None:
        super().__init__(db)
        self._next = 1
        self._block_end = 0  # no block yet
        self._blocks = asyncio.Lock()
        self._pending: list[tuple[list[IssuedDecision], RequestFeatures | None, asyncio.Future[None]]] = []
        self._flushing: asyncio.Task[None] | None = None

    @kept
    async def allocate(self, n: int) -> int:
        if self._next + n - 1 > self._block_end:
            async with self._blocks:
                if self._next + n - 1 > self._block_end:  # another request may have taken a block meanwhile
                    block = int(await self.db.pool.fetchval("SELECT nextval('decision_blocks')"))
                    self._next, self._block_end = (block - 1) * BLOCK + 1, block * BLOCK
        first = self._next
        self._next += n
        return first

    async def record(
        self, rows: list[IssuedDecision], features: RequestFeatures | None = None, more: bool = False
    ) -> None:
        if not rows and (features is None or not features.decisions):
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((rows, features if features is not None and features.decisions else None, fut))
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush_all())
        await fut

    async def _flush_all(self) -> None:
        """One commit for every request waiting, again while more came in during the last one."""
        await asyncio.sleep(0)  # the requests of this turn of the loop join the same commit
        while self._pending:
            batch, self._pending = self._pending, []
            values = [batch_row(rows) for rows, _, _ in batch if rows]
            learned = [features_row(f) for _, f, _ in batch if f is not None]
            manifests = manifest_rows(f for _, f, _ in batch if f is not None)
            try:
                async with self.db.pool.acquire() as db, db.transaction():
                    if values:
                        await db.executemany(
                            "INSERT INTO batches (first_seq, n, session_id, created_at, decisions)"
                            " VALUES ($1, $2, $3, $4, $5)",
                            values,
                        )
                    if learned:
                        await db.executemany(
                            "INSERT INTO features (first_seq, client_id, created_at, data, prompt)"
                            " VALUES ($1, $2, $3, $4, $5)",
                            learned,
                        )
                    if manifests:
                        await db.executemany(
                            "INSERT INTO manifests (version, used_at, data) VALUES ($1, $2, $3) ON CONFLICT (version)"
                            " DO UPDATE SET used_at = greatest(manifests.used_at, excluded.used_at)",
                            manifests,
                        )
            except errors() as e:  # every waiting request fails; none is answered as kept
                self.db.failures.failed(str(e) or e.__class__.__name__)
                error = StoreError(f"the store could not keep this request ({e}); nothing of it was kept")
                for _, _, fut in batch:
                    if not fut.done():
                        fut.set_exception(error)
                continue
            self.db.failures.succeeded()
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_result(None)

    @kept
    async def get(self, seq: int) -> IssuedDecision | None:
        row = await self.db.pool.fetchrow(
            "SELECT b.first_seq, b.n, b.session_id, b.created_at, b.decisions, o.outcome, o.detail"
            " FROM (SELECT * FROM batches WHERE first_seq <= $1 ORDER BY first_seq DESC LIMIT 1) b"
            " LEFT JOIN outcomes o ON o.seq = $1",
            seq,
        )
        if row is None or seq >= row[0] + row[1]:
            return None
        did, eid, typ, action, label = _decode(row[4])[seq - row[0]]
        return IssuedDecision(seq, did, row[2], eid, typ, action, label, row[3], row[5], row[6])

    @kept
    async def set_outcome(self, seq: int, outcome: str, detail: str | None, now: float) -> bool:
        rec = await self.get(seq)
        if rec is None:
            return False
        status = await self.db.pool.execute(
            "INSERT INTO outcomes (seq, session_id, outcome, detail, reported_at, decided_at)"
            " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (seq) DO NOTHING",
            seq,
            rec.session_id,
            outcome,
            detail,
            now,
            rec.created_at,
        )
        return bool(status.endswith(" 1"))

    @kept
    async def of_session(self, session_id: str, limit: int) -> list[IssuedDecision]:
        rows = await self.db.pool.fetch(
            "SELECT first_seq, created_at, decisions, n FROM batches WHERE session_id = $1"
            " ORDER BY first_seq DESC LIMIT $2",
            session_id,
            limit,  # a batch holds at least one decision: never more rows than decisions are asked for
        )
        out: list[IssuedDecision] = []
        for first, at, raw, _ in rows:
            for i, (did, eid, typ, action, label) in reversed(list(enumerate(_decode(raw)))):
                out.append(IssuedDecision(first + i, did, session_id, eid, typ, action, label, at))
            if len(out) >= limit:
                break
        out = out[:limit]
        if out:
            by_seq = {d.seq: d for d in out}
            for seq, outcome, detail in await self.db.pool.fetch(
                "SELECT seq, outcome, detail FROM outcomes WHERE session_id = $1 AND seq >= $2",
                session_id,
                out[-1].seq,
            ):
                d = by_seq.get(seq)
                if d is not None:
                    d.outcome, d.detail = outcome, detail
        return out

    @kept
    async def prune(self, before: float) -> int:
        decisions = 0
        while True:  # a chunk a statement, the loop free between them
            rows = await self.db.pool.fetch(
                "DELETE FROM batches WHERE first_seq IN"
                " (SELECT first_seq FROM batches WHERE created_at < $1 ORDER BY created_at LIMIT $2) RETURNING n",
                before,
                PRUNE_CHUNK,
            )
            decisions += sum(r[0] for r in rows)
            if len(rows) < PRUNE_CHUNK:
                break
            await asyncio.sleep(0)
        await self.db.pool.execute("DELETE FROM outcomes WHERE decided_at < $1", before)
        await self.db.pool.execute("DELETE FROM features WHERE created_at < $1", before)
        # a manifest a row still kept was rendered with was kept again at most MANIFEST_EVERY_S before that row
        await self.db.pool.execute("DELETE FROM manifests WHERE used_at < $1", before - MANIFEST_EVERY_S)
        return decisions

    async def close(self) -> None:
        """Requests still waiting on a commit get it before the pool closes."""
        if self._flushing is not None and not self._flushing.done():
            await self._flushing
