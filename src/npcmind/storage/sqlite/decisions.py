"""Issued decisions on SQLite: one row a request, and one commit for the requests of a turn of the loop, made
before any of them is answered; a streamed batch's groups before its last are appended to the pending file
(pending.py) and committed with it. Decisions older than the retention are forgotten in small transactions."""

from __future__ import annotations

import asyncio
import logging
import sqlite3

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
from npcmind.storage.sqlite.db import SqliteDb, SqlitePart, failure, kept
from npcmind.storage.sqlite.pending import PendingFile, Row

# one batch row holds a request's decisions as JSON: [[decision_id, entity_id, type, action, label], ...]
log = logging.getLogger("npcmind.storage")
_Row = tuple[str, str, str, str, str]
_decode = msgspec.json.Decoder(list[_Row]).decode
PRUNE_CHUNK = 200  # batch rows deleted in one transaction: about a millisecond of the loop each
COMMIT_WITHIN_S = 1.0  # a pending row (a stream its client left, say) waits at most this long for its commit
COMMIT_PAST_BYTES = 256 * 1024  # a pending file this full is committed at once (its limit is 16 times that)


_INSERT_BATCH = "INSERT INTO batches (first_seq, n, session_id, created_at, decisions) VALUES (?, ?, ?, ?, ?)"
_READ_BACK = "INSERT OR IGNORE" + _INSERT_BATCH[len("INSERT") :]  # a crash may come after a commit, before emptying
_INSERT_FEATURES = "INSERT INTO features (first_seq, client_id, created_at, data, prompt) VALUES (?, ?, ?, ?, ?)"
_INSERT_MANIFEST = (
    "INSERT INTO manifests (version, used_at, data) VALUES (?, ?, ?) ON CONFLICT (version)"
    " DO UPDATE SET used_at = max(used_at, excluded.used_at)"
)


class SqliteDecisions(SqlitePart):
    """Decisions and outcomes in the shared file; numbers handed out by this process alone (one a file)."""

    def __init__(self, db: SqliteDb) -> None:
        super().__init__(db)
        self._file = None if db.read_only or db.path == ":memory:" else PendingFile(db.path)
        self._given: list[Row] = []  # rows in the pending file, not yet committed
        self._timer: asyncio.TimerHandle | None = None
        if self._file is not None:
            try:
                self._read_back(self._file)
            except BaseException:  # the start stops: the file is kept for the next one, its descriptor let go
                self._file.close()
                raise
        last = db.conn.execute("SELECT first_seq + n - 1 FROM batches ORDER BY first_seq DESC LIMIT 1").fetchone()
        self._seq = max(int(last[0]) if last else 0, self._pruned_upto())
        self._pending: list[tuple[list[IssuedDecision], RequestFeatures | None, asyncio.Future[None]]] = []
        self._flush_scheduled = False

    async def allocate(self, n: int) -> int:
        first = self._seq + 1
        self._seq += n
        return first

    def _read_back(self, file: PendingFile) -> None:
        """Commit the rows a crash left in the pending file, before any number is handed out (a ValueError that
        names the file when they cannot be: the file is kept for the next start)."""
        rows = file.read_back()
        if rows:
            try:
                with self.db.conn:
                    self.db.conn.execute("BEGIN")
                    self.db.conn.executemany(_READ_BACK, rows)
            except sqlite3.Error as e:
                raise ValueError(
                    f"the {len(rows)} streamed rows in {file.path} cannot be put back into the store ({e}); "
                    "the file is kept: free the disk and start again"
                ) from None
            log.info("store: %d streamed rows given out before a crash put back from %s", len(rows), file.path)
        file.empty()

    async def record(
        self, rows: list[IssuedDecision], features: RequestFeatures | None = None, more: bool = False
    ) -> None:
        if not rows and (features is None or not features.decisions):
            return
        loop = asyncio.get_running_loop()
        if more and features is None and self._file is not None:  # a streamed group before its batch's last
            row = batch_row(rows)
            try:
                self._file.append(row)
            except StoreError as e:
                self.db.failures.failed(str(e.__cause__ or e))
                raise
            self._given.append(row)
            if self._file.size > COMMIT_PAST_BYTES and not self._flush_scheduled:  # many streams at once
                self._flush_scheduled = True
                loop.call_soon(self.flush)
            elif self._timer is None:
                self._timer = loop.call_later(COMMIT_WITHIN_S, self._commit_given)
            return
        fut: asyncio.Future[None] = loop.create_future()
        self._pending.append((rows, features if features is not None and features.decisions else None, fut))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self.flush)
        await fut

    def _commit_given(self) -> None:
        """The pending file's rows committed, when no batch's last group has taken them within the second."""
        self._timer = None
        self.flush()
        if self._given and self._timer is None:  # the commit failed: again a second later
            self._timer = asyncio.get_running_loop().call_later(COMMIT_WITHIN_S, self._commit_given)

    def _visible(self) -> None:
        """Commit the pending file's rows before a read, which must see every decision given out: a StoreError
        (the read is answered 503, to be asked again) while they cannot be committed."""
        if self._given:
            self.flush()
        if self._given:
            raise StoreError("the store cannot commit the decisions it gave out on a stream yet; ask again")

    def flush(self) -> None:
        """Commit every request waiting, and the pending file's rows, in one transaction, and answer each (close()
        calls it too)."""
        batch, self._pending = self._pending, []
        self._flush_scheduled = False
        given = self._given
        if not batch and not given:  # close() flushed them already
            return
        values = given + [batch_row(rows) for rows, _, _ in batch if rows]
        learned = [features_row(f) for _, f, _ in batch if f is not None]
        manifests = manifest_rows(f for _, f, _ in batch if f is not None)
        try:
            if len(values) == 1 and not learned and not manifests:  # one statement is its own transaction
                self.db.conn.execute(_INSERT_BATCH, values[0])  # (a streamed answer commits an entity at a time)
            else:
                with self.db.conn:
                    self.db.conn.execute("BEGIN")
                    if values:
                        self.db.conn.executemany(_INSERT_BATCH, values)
                    if learned:
                        self.db.conn.executemany(_INSERT_FEATURES, learned)
                    if manifests:
                        self.db.conn.executemany(_INSERT_MANIFEST, manifests)
        except Exception as exc:  # disk full, file gone: every waiting request fails, none is answered as kept
            self.db.failures.failed(str(exc))
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(failure(exc))
            return
        self.db.failures.succeeded()
        for _, _, fut in batch:
            if not fut.done():
                fut.set_result(None)
        self.db.committed()
        if given and self._file is not None:
            self._given = []
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._file.empty()

    def close(self) -> None:
        """Commit what waits, then close the pending file (removed when empty: nothing waits in it)."""
        self.flush()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._file is not None:
            self._file.close()

    @kept
    async def get(self, seq: int) -> IssuedDecision | None:
        self._visible()
        row = self.db.conn.execute(
            "SELECT first_seq, n, session_id, created_at, decisions FROM batches WHERE first_seq <= ?"
            " ORDER BY first_seq DESC LIMIT 1",
            (seq,),
        ).fetchone()
        if row is None or seq >= row[0] + row[1]:
            return None
        did, eid, typ, action, label = _decode(row[4])[seq - row[0]]
        d = IssuedDecision(seq, did, row[2], eid, typ, action, label, row[3])
        found = self.db.conn.execute("SELECT outcome, detail FROM outcomes WHERE seq = ?", (seq,)).fetchone()
        if found:
            d.outcome, d.detail = found
        return d

    @kept
    async def set_outcome(self, seq: int, outcome: str, detail: str | None, now: float) -> bool:
        rec = await self.get(seq)
        if rec is None:
            return False
        with self.db.conn:
            self.db.conn.execute("BEGIN")
            cur = self.db.conn.execute(
                "INSERT OR IGNORE INTO outcomes (seq, session_id, outcome, detail, reported_at) VALUES (?, ?, ?, ?, ?)",
                (seq, rec.session_id, outcome, detail, now),
            )
        self.db.committed()
        return bool(cur.rowcount)

    @kept
    async def of_session(self, session_id: str, limit: int) -> list[IssuedDecision]:
        self._visible()
        out: list[IssuedDecision] = []
        rows = self.db.conn.execute(
            "SELECT first_seq, created_at, decisions FROM batches WHERE session_id = ? ORDER BY first_seq DESC",
            (session_id,),
        )
        for first, at, raw in rows:
            for i, (did, eid, typ, action, label) in reversed(list(enumerate(_decode(raw)))):
                out.append(IssuedDecision(first + i, did, session_id, eid, typ, action, label, at))
            if len(out) >= limit:
                break
        rows.close()
        out = out[:limit]
        if out:
            by_seq = {d.seq: d for d in out}
            for seq, outcome, detail in self.db.conn.execute(
                "SELECT seq, outcome, detail FROM outcomes WHERE session_id = ? AND seq >= ?", (session_id, out[-1].seq)
            ):
                d = by_seq.get(seq)
                if d is not None:
                    d.outcome, d.detail = outcome, detail
        return out

    def _pruned_upto(self) -> int:
        """The last decision number forgotten by prune: numbering goes on above it even if no batch is left."""
        row = self.db.conn.execute("SELECT value FROM meta WHERE key = 'pruned_upto'").fetchone()
        return int(bytes(row[0]).decode()) if row else 0

    @kept
    async def prune(self, before: float) -> int:
        self._visible()
        decisions = 0
        while True:  # oldest first, a chunk a transaction, the loop free between chunks
            rows = self.db.conn.execute(
                "SELECT first_seq, n, created_at FROM batches ORDER BY first_seq LIMIT ?", (PRUNE_CHUNK,)
            ).fetchall()
            old = 0
            while old < len(rows) and rows[old][2] < before:  # numbers follow time: the old ones come first
                old += 1
            if not old:
                break
            upto = rows[old - 1][0] + rows[old - 1][1] - 1
            with self.db.conn:
                self.db.conn.execute("BEGIN")
                self.db.conn.execute("DELETE FROM batches WHERE first_seq <= ?", (upto,))
                self.db.conn.execute("DELETE FROM outcomes WHERE seq <= ?", (upto,))
                self.db.conn.execute("DELETE FROM features WHERE first_seq <= ?", (upto,))
                self.db.conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('pruned_upto', ?)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(upto).encode(),),  # above every number forgotten before: those batches are gone
                )
            self.db.committed()  # a prune writes many pages: its commits count toward the next checkpoint
            decisions += sum(r[1] for r in rows[:old])
            if old < len(rows):
                break
            await asyncio.sleep(0)
        # a manifest a row still kept was rendered with was kept again at most MANIFEST_EVERY_S before that row
        self.db.write("DELETE FROM manifests WHERE used_at < ?", (before - MANIFEST_EVERY_S,))
        return decisions
