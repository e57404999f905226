"""The SQLite store's pending file: a streamed batch's groups before its last are appended there, not committed
one by one, and are as kept as a commit: read back after a crash, committed with the batch's last group or
within a second, seen by every read meanwhile, and bounded."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from npcmind.storage.base import StoreError
from npcmind.storage.sqlite import SqliteStore, pending
from stores import issued

ROOT = Path(__file__).resolve().parents[1]


def committed(db: Path) -> list[int]:
    """The first numbers of the batch rows in the file, read by a connection of its own (what another process,
    or a restart, would find there)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT first_seq FROM batches ORDER BY first_seq")]
    finally:
        conn.close()


def crash_after(db: Path, groups: int) -> None:
    """A process that records ``groups`` groups of a batch not yet complete, then dies without closing (os._exit:
    what kill -9 leaves)."""
    code = f"""
        import asyncio, os, sys
        sys.path[:0] = [{str(ROOT / "tests")!r}]
        from stores import issued
        from npcmind.storage.sqlite import SqliteStore
        async def main():
            s = SqliteStore({str(db)!r})
            for k in range({groups}):
                first = await s.decisions.allocate(2)
                rows = [issued(first, "s1", f"a{{k}}"), issued(first + 1, "s1", f"b{{k}}")]
                await s.decisions.record(rows, more=True)
            os._exit(0)
        asyncio.run(main())
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True, env=env, timeout=60)


def test_groups_given_out_before_a_crash_are_put_back_before_a_number_is_handed_out(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    crash_after(db, 3)
    assert committed(db) == []  # nothing committed: the rows were in the pending file alone
    assert (tmp_path / "s.db.pending").stat().st_size > 0

    async def check() -> None:
        s = SqliteStore(db)
        try:
            got = await s.decisions.get(5)
            assert got is not None and (got.entity_id, got.decision_id) == ("a2", "d_5")
            assert len(await s.decisions.of_session("s1", 100)) == 6
            assert await s.decisions.allocate(1) == 7  # numbering goes on after the rows put back
        finally:
            await s.close()

    asyncio.run(check())
    assert committed(db) == [1, 3, 5]
    assert not (tmp_path / "s.db.pending").exists()  # emptied by the commit, removed on a clean close


def test_a_record_cut_short_or_damaged_ends_what_is_put_back(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "s.db"
    crash_after(db, 3)
    path = tmp_path / "s.db.pending"
    raw = path.read_bytes()
    third = len(raw) - len(raw) // 3  # the three records are the same size: the third begins here
    damaged = bytearray(raw)
    damaged[third + pending._HEAD.size + 2] ^= 0xFF  # a byte of the third record's body: its CRC fails
    path.write_bytes(bytes(damaged))
    asyncio.run(SqliteStore(db).close())
    assert committed(db) == [1, 3]
    assert "damaged record" in caplog.text

    crash_after(tmp_path / "t.db", 2)  # now a record cut short, as a crash in the middle of a write leaves it
    cut = tmp_path / "t.db.pending"
    cut.write_bytes(cut.read_bytes()[:-3])
    asyncio.run(SqliteStore(tmp_path / "t.db").close())
    assert committed(tmp_path / "t.db") == [1]


def test_a_pending_file_larger_than_npcmind_leaves_one_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "s.db.pending").write_bytes(b"\0" * (pending.LIMIT + pending.MAX_RECORD + 64))
    with pytest.raises(ValueError, match=r"s\.db\.pending holds .* bytes, more than npcmind ever leaves there"):
        SqliteStore(tmp_path / "s.db")


def test_rows_wait_in_the_file_until_the_batchs_last_group_or_a_read_commits_them(tmp_path: Path) -> None:
    db = tmp_path / "s.db"

    async def steps() -> None:
        s = SqliteStore(db)
        try:
            await s.decisions.record([issued(1, "s1", "a")], more=True)  # a group before the last: appended
            assert committed(db) == []
            await s.decisions.record([issued(2, "s1", "b")], more=True)
            from test_store_contract import _features

            await s.decisions.record([issued(3, "s1", "c")], _features("game-1", [1, 2, 3], 1001.0))
            assert committed(db) == [1, 2, 3]  # the last group's commit took the others with it
            assert (tmp_path / "s.db.pending").stat().st_size == 0
            await s.decisions.record([issued(4, "s1", "d")], more=True)
            assert (await s.decisions.get(4)) is not None  # a read commits what waits first
            assert committed(db) == [1, 2, 3, 4]
        finally:
            await s.close()

    asyncio.run(steps())


def test_a_row_no_last_group_takes_is_committed_within_the_second(tmp_path: Path) -> None:
    """A stream whose client left before its last line: its rows are committed by a timer, not left to a crash."""
    db = tmp_path / "s.db"

    async def steps() -> None:
        s = SqliteStore(db)
        try:
            await s.decisions.record([issued(1, "s1", "a")], more=True)
            assert s.decisions._timer is not None  # nothing else commits it: no read, no last group
            for _ in range(200):  # the timer's second, and up to 9 more on a loaded machine
                if committed(db):
                    break
                await asyncio.sleep(0.05)
            assert committed(db) == [1]
            assert (tmp_path / "s.db.pending").stat().st_size == 0
        finally:
            await s.close()

    asyncio.run(steps())


def test_a_commit_that_fails_leaves_the_rows_in_the_file_and_the_next_one_takes_them(tmp_path: Path) -> None:
    db = tmp_path / "s.db"

    async def steps() -> None:
        s = SqliteStore(db)
        try:
            await s.decisions.record([issued(1, "s1", "a")], more=True)
            real = s.decisions.db.conn
            s.decisions.db.conn = _Failing(real)  # type: ignore[assignment]
            with pytest.raises(StoreError):
                from test_store_contract import _features

                await s.decisions.record([issued(2, "s1", "b")], _features("game-1", [1, 2], 1001.0))
            assert (tmp_path / "s.db.pending").stat().st_size > 0  # row 1 still kept: it was given out
            s.decisions.db.conn = real
            assert (await s.decisions.get(1)) is not None
            assert committed(db) == [1]
        finally:
            await s.close()

    asyncio.run(steps())


def test_the_file_refuses_a_row_past_its_limit_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pending, "LIMIT", 200)

    async def steps() -> int:
        s = SqliteStore(tmp_path / "s.db")
        try:
            n = 0
            with pytest.raises(StoreError, match=r"s\.db\.pending is full"):
                while n < 100:
                    n += 1
                    await s.decisions.record([issued(n, "s1", "a" * 40)], more=True)
            assert (tmp_path / "s.db.pending").stat().st_size <= 200
            return n
        finally:
            await s.close()

    refused = asyncio.run(steps())
    assert refused > 1 and committed(tmp_path / "s.db") == list(range(1, refused))  # each row before it kept


def test_a_request_that_is_no_streamed_group_is_committed_at_once(tmp_path: Path) -> None:
    """A JSON answer of cache hits alone brings no features: it is still one commit, not a row in the file."""

    async def steps() -> None:
        s = SqliteStore(tmp_path / "s.db")
        try:
            await s.decisions.record([issued(1, "s1", "a"), issued(2, "s1", "b")])
            assert committed(tmp_path / "s.db") == [1]
            assert (tmp_path / "s.db.pending").stat().st_size == 0
        finally:
            await s.close()

    asyncio.run(steps())


def test_a_read_while_the_rows_given_out_cannot_be_committed_is_refused_not_answered_without_them(
    tmp_path: Path,
) -> None:
    async def steps() -> None:
        s = SqliteStore(tmp_path / "s.db")
        try:
            await s.decisions.record([issued(1, "s1", "a")], more=True)
            real = s.decisions.db.conn
            s.decisions.db.conn = _Failing(real)  # type: ignore[assignment]
            with pytest.raises(StoreError, match="cannot commit the decisions it gave out"):
                await s.decisions.get(1)
            with pytest.raises(StoreError):
                await s.decisions.of_session("s1", 10)
            s.decisions.db.conn = real
            got = await s.decisions.get(1)
            assert got is not None and got.entity_id == "a"
        finally:
            await s.close()

    asyncio.run(steps())


def test_a_pending_file_that_cannot_be_the_stores_stops_the_start_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "s.db.pending").mkdir()
    with pytest.raises(ValueError, match=r"s\.db\.pending (cannot be opened|is not a regular file)"):
        SqliteStore(tmp_path / "s.db")
    (tmp_path / "s.db.pending").rmdir()
    (tmp_path / "s.db.pending").symlink_to("/dev/null")  # rows "kept" there would be lost
    with pytest.raises(ValueError, match=r"s\.db\.pending cannot be opened"):
        SqliteStore(tmp_path / "s.db")
    (tmp_path / "s.db.pending").unlink()
    asyncio.run(SqliteStore(tmp_path / "s.db").close())  # the lock was let go: the store opens


def test_a_torn_record_that_cannot_be_cut_off_stops_appends_until_a_commit_empties_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def steps() -> None:
        s = SqliteStore(tmp_path / "s.db")
        try:
            await s.decisions.record([issued(1, "s1", "a")], more=True)
            real_write = os.write
            monkeypatch.setattr(pending.os, "write", lambda fd, data: real_write(fd, data[:5]))
            monkeypatch.setattr(pending.os, "ftruncate", _enospc)
            with pytest.raises(StoreError, match="disk is full"):
                await s.decisions.record([issued(2, "s1", "b")], more=True)
            monkeypatch.undo()
            with pytest.raises(StoreError, match="full or damaged"):  # not appended after the torn record
                await s.decisions.record([issued(3, "s1", "c")], more=True)
            assert (await s.decisions.get(1)) is not None  # the commit takes row 1 and empties the file
            await s.decisions.record([issued(4, "s1", "d")], more=True)
        finally:
            await s.close()
        assert committed(tmp_path / "s.db") == [1, 4]

    asyncio.run(steps())


def test_a_file_that_cannot_be_emptied_after_its_commit_still_answers_the_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def steps() -> None:
        s = SqliteStore(tmp_path / "s.db")
        try:
            await s.decisions.record([issued(1, "s1", "a")], more=True)
            monkeypatch.setattr(pending.os, "ftruncate", _enospc)
            from test_store_contract import _features

            await asyncio.wait_for(s.decisions.record([issued(2, "s1", "b")], _features("game-1", [1, 2], 1001.0)), 30)
            monkeypatch.undo()
        finally:
            await s.close()

    asyncio.run(steps())
    assert committed(tmp_path / "s.db") == [1, 2]
    assert "could not be emptied" in caplog.text


def _enospc(*_: object) -> None:
    raise OSError(28, "No space left on device")


class _Failing:
    """A connection whose writes fail as a full disk makes them fail."""

    def __init__(self, real: sqlite3.Connection) -> None:
        self.real = real

    def execute(self, sql: str, *args: object) -> object:
        if sql.startswith("BEGIN") or sql.startswith("INSERT"):
            raise sqlite3.OperationalError("database or disk is full")
        return self.real.execute(sql, *args)

    def executemany(self, sql: str, *args: object) -> object:
        raise sqlite3.OperationalError("database or disk is full")

    def __enter__(self) -> object:
        return self.real.__enter__()

    def __exit__(self, *exc: object) -> object:
        return self.real.__exit__(*exc)
