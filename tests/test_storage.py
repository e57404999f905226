"""The SQLite store on a real file: group commits, checkpoints, migration (what every store promises, SQLite
included, is in test_store_contract.py)."""

from __future__ import annotations

import asyncio
import sqlite3
import string
from pathlib import Path
from typing import Any

import pytest

from conftest import FOREST, bee, cli, decide_body, logged
from npcmind.decide.ids import DecisionIds
from npcmind.storage.base import SCHEMA_VERSION, SessionRecord
from npcmind.storage.sqlite import SqliteStore
from npcmind.storage.sqlite import db as sqlite_db
from stores import issued as _issued


@pytest.mark.fast
def test_requests_in_one_turn_of_the_loop_share_one_commit(tmp_path: Path) -> None:
    async def run() -> int:
        s = SqliteStore(tmp_path / "g.db")
        seqs = [await s.decisions.allocate(2) for _ in range(5)]
        await asyncio.gather(*(s.decisions.record([_issued(q, "s", "a"), _issued(q + 1, "s", "b")]) for q in seqs))
        commits = s.db._commits
        assert len(await s.decisions.of_session("s", 100)) == 10
        await s.close()
        return commits

    assert asyncio.run(run()) == 1


@pytest.mark.fast
def test_the_wal_is_checkpointed_off_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_db, "CHECKPOINT_EVERY", 10)
    path = tmp_path / "c.db"

    async def run() -> tuple[int, int]:
        s = SqliteStore(path)
        for _ in range(9):
            await s.decisions.record([_issued(await s.decisions.allocate(1), "s", "a")])
        before = path.stat().st_size  # everything so far lives in the WAL only
        assert s.db._checkpointing is None
        await s.decisions.record([_issued(await s.decisions.allocate(1), "s", "a")])
        assert s.db._checkpointing is not None
        s.db._checkpointing.join()
        after = path.stat().st_size
        await s.close()
        return before, after

    before, after = asyncio.run(run())
    assert after > before  # the checkpoint thread copied the WAL's pages into the database file


def _wal_salt(wal: Path) -> bytes:
    """The WAL header's salt: SQLite changes it each time the WAL starts over from its first frame."""
    with wal.open("rb") as f:
        return f.read(32)[16:24]


def test_every_finished_checkpoint_starts_the_wal_over_under_writes_that_never_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint on its own thread never catches up with a loop that commits all the time, and SQLite starts
    the WAL over only after a checkpoint that copied all of it: the WAL grew by every commit for ever.

    How many commits a checkpoint thread takes depends on the disk and the machine's load, so this asserts what
    does not: once a checkpoint has finished (its last part runs on the loop), the next commit writes a WAL that
    started over. A bound on the WAL's size in bytes failed CI once on a loaded machine."""
    monkeypatch.setattr(sqlite_db, "CHECKPOINT_EVERY", 50)
    path = tmp_path / "w.db"
    wal = Path(str(path) + "-wal")

    async def run() -> tuple[int, list[tuple[bytes, bytes]]]:
        s = SqliteStore(path)
        seen: list[tuple[bytes, bytes]] = []  # (salt when a checkpoint was running, salt after it finished)
        running: Any = None
        started = b""
        for i in range(1, 3001):  # back to back, as a game under load
            await s.decisions.record([_issued(await s.decisions.allocate(16), "s", f"e{i % 16}")])
            if running is not None and not running.is_alive():
                # its last part was queued on the loop before it ended, so it ran before the next commit
                await s.decisions.record([_issued(await s.decisions.allocate(16), "s", "after")])
                seen.append((started, _wal_salt(wal)))
                running = None
            if running is None and s.db._checkpointing is not None and s.db._checkpointing.is_alive():
                running, started = s.db._checkpointing, _wal_salt(wal)
        if running is not None:  # a loaded machine: the last one is waited for, then checked the same way
            running.join()
            await asyncio.sleep(0)
            await s.decisions.record([_issued(await s.decisions.allocate(16), "s", "after")])
            seen.append((started, _wal_salt(wal)))
        largest = wal.stat().st_size
        await s.close()
        return largest, seen

    largest, seen = asyncio.run(run())
    assert seen, "no checkpoint ran in 3,000 commits"
    stayed = [k for k, (before, after) in enumerate(seen) if before == after]
    assert not stayed, stayed  # each one started the WAL over
    assert largest < sqlite_db.WAL_LIMIT


@pytest.mark.fast
def test_commits_of_scopes_sessions_and_reports_count_toward_a_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only decide commits were counted: 20,480 scope commits left 356 MB of WAL, 300 decides and 4,800 reports 47."""
    monkeypatch.setattr(sqlite_db, "CHECKPOINT_EVERY", 10)

    async def run() -> list[str]:
        s = SqliteStore(tmp_path / "s.db")
        started = []
        await s.decisions.record([_issued(await s.decisions.allocate(1), "s", "a")])
        for name, write in [
            ("scopes", lambda i: s.sessions.put_scope("s", f"room{i}", b"{}")),
            ("reports", lambda i: s.decisions.set_outcome(1, "success", None, 1.0)),
            ("sessions", lambda i: s.sessions.create(SessionRecord(f"s{i}", "c", 1.0, 2.0, False))),
        ]:
            if s.db._checkpointing is not None:
                s.db._checkpointing.join()
            s.db._checkpointing = None
            for i in range(12):
                await write(i)
            if s.db._checkpointing is not None:
                started.append(name)
        await s.close()
        return started

    assert asyncio.run(run()) == ["scopes", "reports", "sessions"]


@pytest.mark.fast
def test_a_store_of_the_first_schema_is_moved_over(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE decisions (seq INTEGER PRIMARY KEY, decision_id TEXT NOT NULL, session_id TEXT NOT NULL,"
        " entity_id TEXT NOT NULL, type TEXT NOT NULL, action TEXT NOT NULL, label TEXT NOT NULL,"
        " created_at REAL NOT NULL, outcome TEXT, detail TEXT, reported_at REAL)"
    )
    db.execute("INSERT INTO decisions VALUES (1, 'd_1', 's', 'a', 'bee', 'idle', 'Idle', 1.0, 'success', NULL, 2.0)")
    db.execute("INSERT INTO decisions VALUES (2, 'd_2', 's', 'b', 'bee', 'flee', 'Flee', 1.5, NULL, NULL, NULL)")
    db.commit()
    db.close()

    async def run() -> None:
        s = SqliteStore(path)
        assert [(d.seq, d.outcome) for d in await s.decisions.of_session("s", 10)] == [(2, None), (1, "success")]
        assert await s.decisions.allocate(1) == 3
        assert await s.decisions.set_outcome(2, "failure", "blocked", 3.0)
        await s.close()

    asyncio.run(run())
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "decisions" not in tables and {"batches", "outcomes"} <= tables


@pytest.mark.fast
def test_decision_ids_of_a_batch_are_consecutive_and_bound_to_their_session() -> None:
    import base64
    import hashlib

    secret = b"k" * 32
    ids = DecisionIds(secret)
    issued = ids.issue_many(41, "s1", 3)
    assert len(set(issued)) == 3 and [DecisionIds.seq_of(d) for d in issued] == [41, 42, 43]
    assert [ids.verify(d, "s1") for d in issued] == [41, 42, 43]
    assert ids.verify(issued[0], "s2") is None and DecisionIds(b"j" * 32).verify(issued[0], "s1") is None
    # an id of the first form (a MAC over session and entity too, which only the stored decision could check)
    # is an id of no decision: taking it would need the store's lookup that a forged id must not cost
    head = (7).to_bytes(6, "big") + b"\x01" * 6
    mac = hashlib.blake2b(b"s1\x00a\x00" + head, key=secret, digest_size=12).digest()
    assert ids.verify("d_" + base64.urlsafe_b64encode(head + mac).decode(), "s1") is None


@pytest.mark.fast
def test_a_decision_id_with_any_character_changed_is_not_ours() -> None:
    """The lenient decoder read `+/` as `-_` and skipped stray characters: an id spelt otherwise was accepted as
    the decision it was issued for. The sequence number 2**48 - 1 spells `______`, so `/` for `_` is tried too."""
    ids = DecisionIds(b"k" * 32)
    issued = ids.issue_many(2**48 - 1, "s1", 1) + ids.issue_many(5, "s1", 1)
    assert issued[0].startswith("d________")
    alphabet = set(string.ascii_letters + string.digits + "-_")
    taken, read = [], []
    for did in issued:
        assert ids.verify(did, "s1") is not None
        for i, was in enumerate(did):
            for c in map(chr, range(0x20, 0x7F)):
                changed = did[:i] + c + did[i + 1 :]
                if c != was and ids.verify(changed, "s1") is not None:
                    taken.append(changed)
                if i >= 2 and c not in alphabet and DecisionIds.seq_of(changed) is not None:
                    read.append(changed)
    assert taken == [] and read == []


@pytest.mark.parametrize(("make", "says"), [("text", "file is not a database"), ("under_a_file", "File exists")])
def test_a_store_that_cannot_be_opened_is_one_line_not_a_traceback(tmp_path: Path, make: str, says: str) -> None:
    (tmp_path / "notes.txt").write_text("not a database, " * 1000)
    path = tmp_path / "notes.txt" if make == "text" else tmp_path / "notes.txt" / "npcmind.db"
    r = cli("serve", "--manifest", str(FOREST), "--store", f"sqlite:///{path}")
    assert r.returncode == 2, r.stderr
    assert f"the store {path} cannot be opened" in r.stderr and says in r.stderr and "--store" in r.stderr
    assert "Traceback" not in r.stderr


def test_the_service_says_what_it_forgot(start_service: Any, scripted: Any) -> None:
    import time

    svc = start_service(provider="openai", base_url=scripted.base_url, retention_h=0.0005)  # 1.8 s, every 0.45 s
    with logged("npcmind") as said:
        assert svc.decide(decide_body(bee("a"), bee("b"))).status_code == 200
        deadline = time.monotonic() + 10
        while not any(line.startswith("store: forgot") for line in said) and time.monotonic() < deadline:
            time.sleep(0.1)
    assert "store: forgot 2 decisions issued more than 0.0005 h ago (NPCMIND_RETENTION_H)" in said, said


@pytest.mark.fast
def test_a_store_of_schema_2_gains_the_feature_tables_and_says_it_is_the_newest(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    asyncio.run(SqliteStore(path).close())
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (b"2",))
    db.execute("DROP TABLE features")
    db.execute("DROP TABLE policies")
    db.commit()
    db.close()
    asyncio.run(SqliteStore(path).close())
    db = sqlite3.connect(path)
    assert (
        bytes(db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]) == b"%d" % SCHEMA_VERSION
    )
    assert db.execute("SELECT COUNT(*) FROM features").fetchone() == (0,)
    db.close()


@pytest.mark.fast
def test_a_store_of_schema_3_keeps_its_features_and_gains_what_the_model_read(tmp_path: Path) -> None:
    """Version 4 adds a column to features and the manifests table: a version-3 file's rows stay, readable."""
    from npcmind.storage.base import DecisionFeatures, RequestFeatures, features_row

    path = tmp_path / "s.db"
    asyncio.run(SqliteStore(path).close())
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (b"3",))
    db.execute("DROP TABLE features")
    db.execute("DROP TABLE manifests")
    db.execute(
        "CREATE TABLE features (first_seq INTEGER PRIMARY KEY, client_id TEXT NOT NULL, created_at REAL NOT NULL,"
        " data BLOB NOT NULL)"
    )
    f = DecisionFeatures(7, "bee", None, {"hp_fraction": 0.5}, None, ["idle"], "idle", None)
    db.execute(
        "INSERT INTO features VALUES (?, ?, ?, ?)", features_row(RequestFeatures("c", "m", 1.0, {}, None, [f]))[:4]
    )
    db.commit()
    db.close()

    async def go() -> None:
        store = SqliteStore(path)
        assert [r.seq for r in await store.policies.training("c", 0.0)] == [7]
        assert await store.policies.reads("c", 0.0) == []  # kept before replay: nothing the model read
        await store.close()

    asyncio.run(go())
    db = sqlite3.connect(path)
    assert bytes(db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]) == b"4"
    assert db.execute("SELECT COUNT(*) FROM manifests").fetchone() == (0,)
    db.close()


@pytest.mark.fast
def test_a_reader_opens_a_store_another_process_writes_and_cannot_write(tmp_path: Path) -> None:
    """distill reads a live store: the writer's lock refuses a second writer, never a reader."""
    from npcmind.storage import open_store
    from npcmind.storage.base import DecisionFeatures, RequestFeatures, StoreError

    async def go() -> None:
        writer = SqliteStore(tmp_path / "s.db")
        seq = await writer.decisions.allocate(1)
        f = DecisionFeatures(seq, "bee", None, {"hp_fraction": 0.5}, None, ["idle"], "idle", None)
        await writer.decisions.record([_issued(seq, "s", "a")], RequestFeatures("c", "m", 1.0, {}, None, [f]))
        reader = open_store(f"sqlite:///{tmp_path}/s.db", read_only=True)
        assert [r.seq for r in await reader.policies.training("c", 0.0)] == [seq]
        with pytest.raises(StoreError, match="could not keep"):
            await reader.secrets.get("x")
        await reader.close()
        await writer.close()

    asyncio.run(go())
    with pytest.raises(ValueError, match="does not exist"):
        SqliteStore(tmp_path / "none.db", read_only=True)


@pytest.mark.fast
def test_the_lock_beside_a_sqlite_store_goes_when_it_closes_and_still_keeps_out_a_second_process(
    tmp_path: Path,
) -> None:
    """`play.db.lock` stayed in the folder after the demo stopped (issue 40): the lock file is removed as the store
    closes, and while it is open a second store on the file is refused, as before; one opened after it may write."""
    import subprocess
    import sys

    path = tmp_path / "play.db"
    lock = tmp_path / "play.db.lock"
    second = [sys.executable, "-c", f"from npcmind.storage.sqlite import SqliteStore; SqliteStore({str(path)!r})"]

    async def first() -> None:
        s = SqliteStore(path)
        assert lock.exists()
        other = subprocess.run(second, capture_output=True, text=True)  # another process, while this one holds it
        assert other.returncode != 0 and "in use by another npcmind process" in other.stderr, other.stderr
        await s.close()

    asyncio.run(first())
    assert not lock.exists(), "the lock file stayed after the store closed"
    again = subprocess.run([*second[:2], second[2] + ".db.close()"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert not lock.exists() and (tmp_path / "play.db").exists()
