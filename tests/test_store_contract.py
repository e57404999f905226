"""What every store promises, on SQLite and on the real PostgreSQL alike: one suite, parametrized.

A new store object on the same URL stands for a restart (SQLite) or another process (PostgreSQL, where several
may be open at once). Each PostgreSQL test uses a schema of its own, dropped afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import POSTGRES, REDIS
from npcmind.storage import Store, open_store
from npcmind.storage import postgres as postgres_store
from npcmind.storage.base import (
    SCHEMA_VERSION,
    DecisionFeatures,
    RequestFeatures,
    SessionRecord,
    StoredPolicy,
    StoreError,
)
from npcmind.storage.postgres import decisions as postgres_decisions
from npcmind.storage.sqlite import decisions as sqlite_decisions
from stores import issued as _issued
from stores import opened, rows, run


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store's URL of each kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/s.db"
    return str(request.getfixturevalue("postgres_url"))


@pytest.mark.fast
def test_both_backends_implement_every_part_of_the_store_with_its_signatures(tmp_path: Path) -> None:
    """Each part is one protocol (a new table touches its protocol and one class a backend): both backends have
    each part, with the protocol's methods and signatures, and nothing public beyond them."""
    import inspect

    from npcmind.storage import Decisions, Policies, Secrets, Sessions
    from npcmind.storage.postgres import PostgresStore
    from npcmind.storage.sqlite import SqliteStore

    def public(cls: type) -> dict[str, inspect.Signature]:
        return {
            name: inspect.signature(fn)
            for name, fn in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_") and name not in ("flush", "close")  # what the store calls as it closes
        }

    sqlite = SqliteStore(tmp_path / "s.db")
    postgres = PostgresStore(POSTGRES)  # not opened: the parts exist before the pool
    for part, protocol in (("decisions", Decisions), ("sessions", Sessions), ("policies", Policies)):
        for store in (sqlite, postgres):
            assert public(type(getattr(store, part))) == public(protocol), (part, store)
    for store in (sqlite, postgres):
        assert public(type(store.secrets)) == public(Secrets)
    run(sqlite.close)


# --- decisions: issued decisions and their outcomes -----------------------------------------------------


@pytest.mark.fast
def test_decisions_outcomes_and_rebuild_survive_a_new_store_object(store_url: str) -> None:
    async def write() -> tuple[int, int]:
        s = await opened(store_url)
        first = await s.decisions.allocate(3)
        await s.decisions.record([_issued(first + i, "s1", f"e{i}") for i in range(3)])
        other = await s.decisions.allocate(1)
        await s.decisions.record([_issued(other, "s2", "x", "flee")])
        assert await s.decisions.set_outcome(first + 1, "success", "ok", 5.0)
        assert not await s.decisions.set_outcome(first + 1, "failure", None, 6.0)  # the first report stays
        assert not await s.decisions.set_outcome(other + 1000, "success", None, 6.0)  # no such decision
        await s.close()
        return first, other

    first, other = run(write)

    async def read() -> None:
        s = await opened(store_url)
        after = await s.decisions.allocate(1)
        assert after > other  # numbering goes on above every number issued
        if store_url.startswith("sqlite"):  # one process a file: right after the last kept decision
            assert (first, after) == (1, other + 1)
        d = await s.decisions.get(first + 1)
        assert d is not None and (d.session_id, d.entity_id, d.outcome, d.detail) == ("s1", "e1", "success", "ok")
        assert await s.decisions.get(first - 1) is None and await s.decisions.get(other + 1) is None
        recent = await s.decisions.of_session("s1", 2)
        assert [(r.seq, r.entity_id, r.outcome) for r in recent] == [
            (first + 2, "e2", None),
            (first + 1, "e1", "success"),
        ]
        assert [r.action for r in await s.decisions.of_session("s2", 10)] == ["flee"]
        await s.close()

    run(read)


def test_two_processes_on_postgresql_never_issue_the_same_number_and_see_each_others_decisions(
    postgres_url: str,
) -> None:
    """SQLite is one process a store (a second one is refused: test_storage.py); PostgreSQL takes any number."""
    store_url = postgres_url

    async def both() -> None:
        a, b = await opened(store_url), await opened(store_url)
        seqs: list[int] = []
        for i in range(300):  # past a block of numbers each
            for s, sid in ((a, "sa"), (b, "sb")):
                first = await s.decisions.allocate(4)
                seqs += range(first, first + 4)
                await s.decisions.record([_issued(first + k, sid, f"e{i}.{k}") for k in range(4)])
        assert len(seqs) == len(set(seqs)) == 2400
        last_of_a = (await a.decisions.of_session("sa", 1))[0]
        assert await b.decisions.set_outcome(last_of_a.seq, "done", None, 2.0)  # a report to another process: accepted
        seen = await a.decisions.get(last_of_a.seq)
        assert seen is not None and seen.outcome == "done"
        assert await a.secrets.get("k") == await b.secrets.get("k")  # one signing key for every process
        await a.close()
        await b.close()

    run(both)


@pytest.mark.fast
def test_requests_in_one_turn_of_the_loop_are_all_kept_and_answered(store_url: str) -> None:
    async def go() -> None:
        s = await opened(store_url)
        seqs = [await s.decisions.allocate(2) for _ in range(20)]
        await asyncio.gather(*(s.decisions.record([_issued(q, "s", "a"), _issued(q + 1, "s", "b")]) for q in seqs))
        assert len(await s.decisions.of_session("s", 100)) == 40
        await s.close()

    run(go)


# --- sessions: sessions, their scopes and revocations (revocations: test_revocation.py) ----------------


@pytest.mark.fast
def test_sessions_are_counted_ended_and_keep_their_scopes(store_url: str) -> None:
    async def go() -> None:
        s = await opened(store_url)
        await s.sessions.create(SessionRecord("s1", "c", 1.0, 100.0))
        await s.sessions.create(SessionRecord("s2", "c", 1.0, 100.0))
        await s.sessions.create(SessionRecord("s3", "other", 1.0, 100.0))
        assert await s.sessions.live("c", 50.0) == 2 and await s.sessions.live("c", 150.0) == 0
        await s.sessions.end("s1")
        rec = await s.sessions.get("s1")
        assert rec is not None and rec.ended and await s.sessions.live("c", 50.0) == 1
        assert await s.sessions.get("nope") is None
        await s.sessions.put_scope("s2", "cave", b'{"text": "a"}')
        await s.sessions.put_scope("s2", "cave", b'{"text": "b"}')  # replaced, not added
        assert await s.sessions.scopes("s2") == {"cave": b'{"text": "b"}'}
        await s.close()
        s = await opened(store_url)
        assert await s.sessions.scopes("s2") == {"cave": b'{"text": "b"}'}  # across restarts
        rec = await s.sessions.get("s1")
        assert rec is not None and rec.ended and (rec.client_id, rec.expires_at) == ("c", 100.0)
        await s.close()

    run(go)


@pytest.mark.fast
def test_a_session_is_opened_only_while_its_client_has_fewer_live_ones_than_its_limit(store_url: str) -> None:
    async def go() -> None:
        s = await opened(store_url)
        assert await s.sessions.open(SessionRecord("a", "c", 1.0, 100.0), 2)
        assert await s.sessions.open(SessionRecord("b", "c", 1.0, 50.0), 2)
        assert not await s.sessions.open(SessionRecord("x", "c", 1.0, 100.0), 2)  # the limit: not kept
        assert await s.sessions.get("x") is None
        assert await s.sessions.open(SessionRecord("o", "other", 1.0, 100.0), 2)  # a limit a client
        await s.sessions.end("a")  # an ended session frees its place
        assert await s.sessions.open(SessionRecord("y", "c", 1.0, 100.0), 2)
        assert not await s.sessions.open(SessionRecord("z", "c", 1.0, 100.0), 2)
        assert await s.sessions.open(SessionRecord("z", "c", 60.0, 100.0), 2)  # and so does an expired one
        assert await s.sessions.live("c", 60.0) == 2
        await s.close()

    run(go)


# --- secrets ------------------------------------------------------------------------------------------


@pytest.mark.fast
def test_a_secret_is_created_once_and_kept_across_restarts(store_url: str) -> None:
    async def go() -> None:
        s = await opened(store_url)
        key = await s.secrets.get("k", 16)
        assert len(key) == 16 and await s.secrets.get("k", 16) == key
        other = await s.secrets.get("other")
        assert len(other) == 32 and other != key  # a secret a name, 32 bytes unless said
        await s.close()
        s = await opened(store_url)
        assert await s.secrets.get("k", 16) == key  # across restarts
        await s.close()

    run(go)


# --- policies: what distill learns from, and the distilled policies ------------------------------------


def _features(client: str, seqs: list[int], at: float, action: str = "chase") -> RequestFeatures:
    obs = {"hp_fraction": 0.35, "distance_to_player": 120.0, "sees_player": True, "current_action": "idle"}
    decisions = [
        DecisionFeatures(q, "bee", None, obs, "hit" if k == 0 else None, ["chase", "flee"], action, 0.9)
        for k, q in enumerate(seqs)
    ]
    return RequestFeatures(client, "sha256:m1", at, {"player_hp_fraction": 0.5, "repellent": False}, None, decisions)


@pytest.mark.fast
def test_the_features_of_fresh_decisions_come_back_with_their_outcomes_and_go_with_pruning(store_url: str) -> None:
    async def write() -> list[int]:
        s = await opened(store_url)
        first = await s.decisions.allocate(3)  # one request: the first two fresh, the third from the cache
        rows = [_issued(first + i, "s1", f"e{i}", "chase", at=1001.0) for i in range(3)]
        await s.decisions.record(rows, _features("game-1", [first, first + 1], 1001.0))
        other = await s.decisions.allocate(1)  # another client's decision: never in game-1's training set
        await s.decisions.record([_issued(other, "s2", "x", at=1002.0)], _features("game-2", [other], 1002.0))
        late = await s.decisions.allocate(1)
        await s.decisions.record([_issued(late, "s1", "e9", at=1003.0)], _features("game-1", [late], 1003.0, "flee"))
        assert await s.decisions.set_outcome(first + 1, "failed", None, 1004.0)
        assert await s.decisions.set_outcome(late, "done", None, 1004.0)
        await s.close()
        return [first, late]

    first, late = run(write)

    async def read() -> None:
        s = await opened(store_url)  # a restart: the features survived it
        rows = await s.policies.training("game-1", 0.0)
        assert [(r.seq, r.action, r.outcome, r.trigger) for r in rows] == [
            (first, "chase", None, "hit"),
            (first + 1, "chase", "failed", None),
            (late, "flee", "done", "hit"),
        ]
        assert [r.session_id for r in rows] == ["s1", "s1", "s1"]  # distill bounds what one session weighs
        r = rows[0]
        assert (r.type, r.manifest_version, r.legal_actions, r.confidence) == (
            "bee",
            "sha256:m1",
            ["chase", "flee"],
            0.9,
        )
        assert r.observation["distance_to_player"] == 120.0 and r.world == {
            "player_hp_fraction": 0.5,
            "repellent": False,
        }
        assert [x.seq for x in await s.policies.training("game-1", 1002.5)] == [late]  # --since
        assert await s.policies.training("nobody", 0.0) == []
        assert await s.policies.training_clients(0.0) == ["game-1", "game-2"]
        assert await s.policies.training_clients(1002.5) == ["game-1"]
        await s.prune(1002.5)
        assert [x.seq for x in await s.policies.training("game-1", 0.0)] == [late]
        await s.close()

    run(read)


@pytest.mark.fast
def test_the_features_of_decisions_recorded_one_by_one_are_kept_once_after_them(store_url: str) -> None:
    """A streamed answer keeps each decision as it is made, and what they were made from once, with the last
    (or on its own, when the last was a fallback): training reads each decision once, with its session."""

    async def go() -> None:
        s = await opened(store_url)
        first = await s.decisions.allocate(3)
        for i in range(3):
            await s.decisions.record([_issued(first + i, "s1", f"e{i}", "chase", at=1001.0)])
        await s.decisions.record([], _features("game-1", [first, first + 1, first + 2], 1001.0))
        await s.decisions.record([], None)  # nothing at all: nothing written, nothing fails
        await s.decisions.record([], _features("game-1", [], 1001.0))
        rows = await s.policies.training("game-1", 0.0)
        assert [(r.seq, r.session_id) for r in rows] == [(first + i, "s1") for i in range(3)]
        await s.close()

    run(go)


@pytest.mark.fast
def test_what_the_model_read_and_its_manifest_come_back_and_go_with_pruning(store_url: str) -> None:
    """Replay's rows: each features row's Read comes back by its first number (compressed, as kept), the manifest
    once per version, used again later; prune forgets the reads with their decisions and a manifest unused since."""
    import zlib

    from npcmind.storage.base import MANIFEST_EVERY_S, inflate

    async def go() -> None:
        s = await opened(store_url)
        first = await s.decisions.allocate(2)
        f = _features("game-1", [first, first + 1], 1001.0)
        f.read, f.manifest = b'{"call":1}', b'{"manifest":"one"}'
        await s.decisions.record([_issued(first + i, "s1", f"e{i}", at=1001.0) for i in range(2)], f)
        late = await s.decisions.allocate(1)
        g = _features("game-1", [late], 1001.0 + 2 * MANIFEST_EVERY_S)
        g.read, g.manifest = b'{"call":2}', b'{"manifest":"one"}'  # the same version, used again
        await s.decisions.record([_issued(late, "s1", "e9", at=g.created_at)], g)
        bare = await s.decisions.allocate(1)  # a row without a read (a store written before replay) is no read
        await s.decisions.record(
            [_issued(bare, "s1", "e8", at=g.created_at)], _features("game-1", [bare], g.created_at)
        )
        await s.close()
        s = await opened(store_url)  # a restart: all of it survived
        reads = await s.policies.reads("game-1", 0.0)
        assert [(seq, inflate(data, 99)) for seq, data in reads] == [(first, b'{"call":1}'), (late, b'{"call":2}')]
        assert [seq for seq, _ in await s.policies.reads("game-1", 1002.0)] == [late]  # --since
        assert await s.policies.reads("game-2", 0.0) == []
        kept = await s.policies.manifest("sha256:m1")
        assert kept is not None and zlib.decompress(kept) == b'{"manifest":"one"}'
        assert await s.policies.manifest("sha256:none") is None
        await s.prune(1002.0)  # the first row goes; the manifest was used again later: it stays
        assert [seq for seq, _ in await s.policies.reads("game-1", 0.0)] == [late]
        assert await s.policies.manifest("sha256:m1") is not None
        await s.prune(g.created_at + 2 * MANIFEST_EVERY_S)  # every row gone, the manifest unused for longer
        assert await s.policies.reads("game-1", 0.0) == []
        assert await s.policies.manifest("sha256:m1") is None
        await s.close()

    run(go)


def _sql(url: str, *statements: str) -> None:
    """Statements run on a closed store as another tool would, on either backend (its schema named)."""
    if url.startswith("sqlite"):
        import sqlite3

        db = sqlite3.connect(url[len("sqlite:///") :])
        for st in statements:
            db.execute(st.format(""))
        db.commit()
        db.close()
        return
    _, schema = postgres_store.parse_url(url)

    async def go(db: Any) -> None:
        for st in statements:
            await db.execute(st.format(f'"{schema}".'))

    run(_pg(go))


@pytest.mark.fast
def test_a_store_of_version_3_gains_what_the_model_read_and_keeps_its_rows(store_url: str) -> None:
    """Schema 4 adds a column to features and the manifests table, as `serve` opens a version-3 store: its rows
    stay readable for distill, keep nothing to replay, and new rows keep what the model read."""
    from npcmind.storage.base import inflate

    async def older() -> None:
        s = await opened(store_url)
        first = await s.decisions.allocate(1)
        await s.decisions.record([_issued(first, "s1", "e0", at=1001.0)], _features("game-1", [first], 1001.0))
        await s.close()

    run(older)
    _sql(store_url, "ALTER TABLE {}features DROP COLUMN prompt", "DROP TABLE {}manifests")
    _set_version(store_url, b"3")

    async def newer() -> None:
        s = await opened(store_url)
        rows = await s.policies.training("game-1", 0.0)  # distill reads the older row as it did
        assert len(rows) == 1 and rows[0].action == "chase" and rows[0].session_id == "s1"
        assert await s.policies.reads("game-1", 0.0) == []  # kept before replay: nothing to replay
        late = await s.decisions.allocate(1)
        f = _features("game-1", [late], 1002.0)
        f.read, f.manifest = b'{"call":1}', b"{}"
        await s.decisions.record([_issued(late, "s1", "e1", at=1002.0)], f)
        assert [(q, inflate(b, 99)) for q, b in await s.policies.reads("game-1", 0.0)] == [(late, b'{"call":1}')]
        assert await s.policies.manifest("sha256:m1") is not None
        await s.close()

    run(newer)
    assert _version(store_url) == str(SCHEMA_VERSION).encode()


@pytest.mark.fast
def test_a_policy_is_kept_per_client_and_manifest_version_and_replaced(store_url: str) -> None:
    async def go() -> None:
        s = await opened(store_url)
        assert await s.policies.get("game-1", "sha256:m1") is None
        await s.policies.put(StoredPolicy("game-1", "sha256:m1", 10.0, b'{"v":1}'))
        await s.policies.put(StoredPolicy("game-1", "sha256:m2", 11.0, b'{"v":2}'))
        await s.policies.put(StoredPolicy("game-1", "sha256:m1", 12.0, b'{"v":3}'))
        await s.close()
        s = await opened(store_url)
        got = await s.policies.get("game-1", "sha256:m1")
        assert got is not None and (got.created_at, got.data) == (12.0, b'{"v":3}')
        other = await s.policies.get("game-1", "sha256:m2")
        assert other is not None and other.data == b'{"v":2}'
        assert await s.policies.get("game-2", "sha256:m1") is None
        await s.close()

    run(go)


# --- the store: retention, versions, readers beside the service, opening ------------------------------


@pytest.mark.fast
def test_prune_forgets_old_decisions_outcomes_and_sessions_and_numbering_goes_on(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_decisions, "PRUNE_CHUNK", 3)  # several chunks: the loop is let go between them
    monkeypatch.setattr(sqlite_decisions, "PRUNE_CHUNK", 3)

    async def write() -> int:
        s = await opened(store_url)
        seqs = []
        for i in range(10):  # decisions issued at 1001..1010
            seq = await s.decisions.allocate(1)
            seqs.append(seq)
            await s.decisions.record([_issued(seq, "s1", f"e{i}", at=1001.0 + i)])
        assert await s.decisions.set_outcome(seqs[1], "done", None, 1100.0)
        assert await s.decisions.set_outcome(seqs[8], "done", None, 1100)
        await s.sessions.create(SessionRecord("old", "c", 0.0, 1000.0))
        await s.sessions.create(SessionRecord("live", "c", 0.0, 5000.0))
        await s.sessions.put_scope("old", "cave", b"{}")
        await s.sessions.put_scope("live", "cave", b"{}")
        assert await s.prune(1008.5) == (8, 1)  # the first 8 decisions, the session that expired at 1000
        assert await s.decisions.get(seqs[7]) is None and await s.decisions.get(seqs[1]) is None
        kept = await s.decisions.get(seqs[8])
        assert kept is not None and kept.outcome == "done"
        assert await rows(s, "outcomes") == 1  # the pruned decision's outcome went with it
        assert await s.sessions.get("old") is None and await s.sessions.get("live") is not None
        assert await s.sessions.scopes("old") == {} and await s.sessions.scopes("live") == {"cave": b"{}"}
        assert await s.prune(1008.5) == (0, 0)  # nothing more to forget
        assert await s.prune(2000.0) == (2, 0)  # every decision: the numbering must still go on
        await s.close()
        return max(seqs)

    last = run(write)

    async def reopen() -> int:
        s = await opened(store_url)
        first = await s.decisions.allocate(1)
        await s.close()
        return first

    again = run(reopen)
    assert again > last  # no number is ever issued twice, though no batch is left
    if store_url.startswith("sqlite"):  # one process a file: right after the last one forgotten
        assert again == last + 1


@pytest.mark.fast
def test_a_store_written_by_a_newer_npcmind_is_refused(store_url: str) -> None:
    async def go() -> None:
        s = await opened(store_url)
        await s.secrets.get("anything")
        await s.close()

    run(go)
    newer = str(SCHEMA_VERSION + 1).encode()
    if store_url.startswith("sqlite"):
        import sqlite3

        db = sqlite3.connect(store_url[len("sqlite:///") :])
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (newer,))
        db.commit()
        db.close()
    else:

        async def bump() -> None:
            import asyncpg

            _, schema = postgres_store.parse_url(store_url)
            db = await asyncpg.connect(POSTGRES, server_settings={"search_path": schema})
            await db.execute("UPDATE meta SET value = $1 WHERE key = 'schema_version'", newer)
            await db.close()

        run(bump)
    newer_v, known = SCHEMA_VERSION + 1, SCHEMA_VERSION
    said = rf"written by a newer npcmind \(schema version {newer_v}; this npcmind knows up to {known}\)"
    with pytest.raises(ValueError, match=said):
        run(lambda: opened(store_url))


def test_a_postgresql_server_that_does_not_answer_is_one_line_at_start(tmp_path: Path) -> None:
    from conftest import FOREST, cli

    r = cli("serve", "--manifest", str(FOREST), "--store", "postgresql://root@127.0.0.1:9/test")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "the store postgresql://root@127.0.0.1:9/test cannot be opened" in r.stderr, r.stderr


def test_a_reader_beside_the_service_creates_and_migrates_nothing(store_url: str) -> None:
    """distill reads read-only: a mistyped store is one line and stays absent; an older store stays older."""
    missing = store_url.replace("s.db", "typo.db") if store_url.startswith("sqlite") else store_url + "typo"
    with pytest.raises(ValueError, match="does not exist"):
        run(lambda: opened_beside(missing))
    if store_url.startswith("sqlite"):
        assert not Path(missing[len("sqlite:///") :]).exists()
    else:
        _, schema = postgres_store.parse_url(missing)
        assert run(_pg(lambda db: db.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", schema))) is None

    async def older() -> None:
        s = await opened(store_url)
        await s.policies.put(StoredPolicy("game-1", "sha256:m1", 1.0, b"{}"))
        await s.close()

    run(older)
    _set_version(store_url, b"2")
    for publish in (False, True):
        with pytest.raises(ValueError, match=r"written by an older npcmind \(schema version 2; .*npcmind serve"):
            run(lambda publish=publish: opened_beside(store_url, publish))  # type: ignore[misc]
    assert _version(store_url) == b"2"
    _set_version(store_url, b"abc")
    with pytest.raises(ValueError, match="has a schema_version of 'abc', not a number"):
        run(lambda: opened_beside(store_url))
    with pytest.raises(ValueError, match="has a schema_version of 'abc', not a number"):
        run(lambda: opened(store_url))


def test_a_reader_cannot_write_and_a_publisher_keeps_a_policy_beside_the_service(store_url: str) -> None:
    async def go() -> None:
        service = await opened(store_url)  # the service holds the store the whole time
        reader = await opened_beside(store_url)
        with pytest.raises(StoreError):
            await reader.policies.put(StoredPolicy("game-1", "sha256:m1", 1.0, b"{}"))
        await reader.close()
        publisher = await opened_beside(store_url, publish=True)
        await publisher.policies.put(StoredPolicy("game-1", "sha256:m1", 2.0, b'{"v":1}'))
        await publisher.close()
        got = await service.policies.get("game-1", "sha256:m1")
        assert got is not None and got.data == b'{"v":1}'
        await service.close()

    run(go)


async def opened_beside(url: str, publish: bool = False) -> Store:
    store = open_store(url, read_only=not publish, publish=publish)
    await store.open()
    return store


def _pg(query: Callable[[Any], Coroutine[Any, Any, Any]]) -> Callable[[], Coroutine[Any, Any, Any]]:
    async def go() -> Any:
        import asyncpg

        db = await asyncpg.connect(POSTGRES)
        try:
            return await query(db)
        finally:
            await db.close()

    return go


def _set_version(url: str, value: bytes) -> None:
    sql = "UPDATE {}meta SET value = {} WHERE key = 'schema_version'"
    if url.startswith("sqlite"):
        import sqlite3

        db = sqlite3.connect(url[len("sqlite:///") :])
        db.execute(sql.format("", "?"), (value,))
        db.commit()
        db.close()
    else:
        _, schema = postgres_store.parse_url(url)
        run(_pg(lambda db: db.execute(sql.format(f'"{schema}".', "$1"), value)))


def _version(url: str) -> bytes:
    sql = "SELECT value FROM {}meta WHERE key = 'schema_version'"
    if url.startswith("sqlite"):
        import sqlite3

        db = sqlite3.connect(url[len("sqlite:///") :])
        (value,) = db.execute(sql.format("")).fetchone()
        db.close()
        return bytes(value)
    _, schema = postgres_store.parse_url(url)
    return bytes(run(_pg(lambda db: db.fetchval(sql.format(f'"{schema}".')))))


def test_a_schema_name_differing_only_in_case_is_refused_and_never_shares_tables(postgres_url: str) -> None:
    """``?schema=Rt_Case`` created an empty schema "Rt_Case" and used rt_case's tables (search_path folds the
    name): two deployments differing in case shared one store. Such a name is refused at start, saying which."""
    lower = postgres_url.rsplit("schema=", 1)[1]
    mixed = postgres_url.replace(f"schema={lower}", f"schema=T{lower[1:]}")  # t_… is the fixture's
    assert mixed != postgres_url and mixed.lower() == postgres_url.lower()

    async def go() -> None:
        s = await opened(postgres_url)
        await s.secrets.get("k")
        await s.close()
        with pytest.raises(ValueError, match=rf"plain lowercase identifier.*those of \?schema={lower}"):
            other = await opened(mixed)
            await other.secrets.get("k")  # today: the secret of the lowercase deployment
            await other.close()

    try:
        run(go)
    finally:
        name = mixed.rsplit("schema=", 1)[1]
        run(_pg(lambda db: db.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')))
        assert not run(_pg(lambda db: db.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", name)))


@pytest.mark.fast
@pytest.mark.parametrize("name", ["Public", "1abc", "pg_mine", "a" * 64, "a-b", "ünï"])
def test_a_schema_name_postgresql_would_read_otherwise_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="plain lowercase identifier"):
        open_store(f"{POSTGRES}?schema={name}")
    postgres_store.check_schema_name("a" * 63)  # the longest name kept whole


# --- PostgreSQL: services on one store, and the pool that waits ----------------------------------------


def test_two_services_on_one_postgresql_store_share_decisions_sessions_and_keys(
    postgres_url: str, start_service: Any, scripted: Any, tmp_path: Path
) -> None:
    """A decision issued by one process is reported to another; both sign with one key and know one session; a
    decision cached at one is a hit at the other; a session ended at one is refused at the other."""
    from conftest import bee, decide_body, write_clients

    clients, keys = write_clients(tmp_path)
    redis = f"{REDIS}?prefix=npcmind-test-{uuid.uuid4().hex[:10]}"
    common = {"profile": "hosted", "clients": str(clients), "provider": "openai", "base_url": scripted.base_url}
    common["redis"] = redis
    a = start_service(manifest=None, store=postgres_url, **common)
    b = start_service(manifest=None, store=postgres_url, **common)
    opened = a.http.post(
        "/v1/session", json={"client_id": "game-1"}, headers={"authorization": f"Bearer {keys['game-1']}"}
    )
    auth = {"authorization": f"Bearer {opened.json()['session_token']}"}
    scripted.set(choose={"x": "flee"})
    r = a.decide(decide_body(bee("x")), headers=auth)
    did = r.json()["decisions"][0]["decision_id"]
    report = {"client_id": "game-1", "reports": [{"decision_id": did, "outcome": "done"}]}
    assert b.http.post("/v1/report", json=report, headers=auth).json()["results"][0]["status"] == "accepted"
    assert a.http.post("/v1/report", json=report, headers=auth).json()["results"][0]["status"] == "duplicate"
    assert a.http.get("/v1/keys").json() == b.http.get("/v1/keys").json()  # one NPC signing key
    again = b.decide(decide_body(bee("x")), headers=auth)  # a session opened at A, used at B
    assert again.status_code == 200 and again.json()["decisions"][0]["cached"] is True, again.text
    assert b.http.delete("/v1/session", headers=auth).status_code == 200
    assert a.decide(decide_body(bee("x")), headers=auth).status_code == 401  # ended at B, refused at A
    import redis as redis_client

    r = redis_client.Redis.from_url(REDIS)
    for key in r.scan_iter(redis.rsplit("prefix=", 1)[1] + ":*"):
        r.delete(key)


def test_a_session_that_moved_away_and_back_is_rebuilt_with_what_happened_elsewhere(
    postgres_url: str, start_service: Any, scripted: Any, tmp_path: Path
) -> None:
    """A → B → A: the memory process A kept from before must not be served; the outcome reported at B shows."""
    from conftest import BEE_OBS, bee, decide_body, write_clients

    clients, keys = write_clients(tmp_path)
    prefix = f"npcmind-test-{uuid.uuid4().hex[:10]}"
    common = {"profile": "hosted", "clients": str(clients), "provider": "openai", "base_url": scripted.base_url}
    a = start_service(manifest=None, store=postgres_url, redis=f"{REDIS}?prefix={prefix}", **common)
    b = start_service(manifest=None, store=postgres_url, redis=f"{REDIS}?prefix={prefix}", **common)
    opened = a.http.post(
        "/v1/session", json={"client_id": "game-1"}, headers={"authorization": f"Bearer {keys['game-1']}"}
    )
    auth = {"authorization": f"Bearer {opened.json()['session_token']}"}

    def at(svc: Any, hp: float) -> str:
        r = svc.decide(decide_body(bee("x", observation={**BEE_OBS, "hp_fraction": hp})), headers=auth)
        assert r.status_code == 200, r.text
        return str(r.json()["decisions"][0]["decision_id"])

    first = at(a, 0.9)  # A holds the session: x remembers this decision, unreported
    at(b, 0.5)  # the session moved to B
    report = {"client_id": "game-1", "reports": [{"decision_id": first, "outcome": "failed", "detail": "stung"}]}
    assert b.http.post("/v1/report", json=report, headers=auth).json()["results"][0]["status"] == "accepted"
    at(a, 0.1)  # and back to A
    memory = next(line for line in scripted.requests[-1]["messages"][1]["content"].splitlines() if "memory:" in line)
    assert '-> failed "stung"' in memory, memory  # the outcome reported at B, read back from the store
    import redis as redis_client

    r = redis_client.Redis.from_url(REDIS)
    for key in r.scan_iter(prefix + ":*"):
        r.delete(key)


@contextlib.contextmanager
def limited(postgres_url: str) -> Iterator[str]:
    """The URL as a role of its own that PostgreSQL lets hold 2 connections at once, owning the URL's schema."""
    role = f"npcm_{uuid.uuid4().hex[:10]}"
    server, schema = postgres_url.split("?schema=", 1)

    async def on_its_database(query: Callable[[Any], Coroutine[Any, Any, Any]]) -> None:
        import asyncpg

        db = await asyncpg.connect(server)
        try:
            await query(db)
        finally:
            await db.close()

    async def make(db: Any) -> None:
        await db.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 2")
        await db.execute(f"CREATE SCHEMA {schema} AUTHORIZATION {role}")
        name = await db.fetchval("SELECT current_database()")  # the URL's, never another on the same server
        await db.execute(f'GRANT CREATE ON DATABASE "{name}" TO {role}')  # CREATE SCHEMA IF NOT EXISTS asks it

    run(lambda: on_its_database(make))
    try:
        yield postgres_url.replace("://root@", f"://{role}@", 1)
    finally:

        async def drop(db: Any) -> None:
            await db.execute(  # a connection the service left is no reason to keep the role
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role
            )
            await db.execute(f"DROP OWNED BY {role} CASCADE")  # its schema and its grant
            await db.execute(f"DROP ROLE {role}")

        run(lambda: on_its_database(drop))


@pytest.fixture()
def limited_role(postgres_url: str) -> Iterator[str]:
    """The fixture's store URL as a role of this test's own that PostgreSQL lets hold 2 connections at once."""
    with limited(postgres_url) as url:
        yield url


def test_a_server_short_of_connections_is_waited_for_not_a_503(
    limited_role: str, start_service: Any, scripted: Any
) -> None:
    """The role may hold 2 connections, the pool 8: a connection the server refused was a 503 (257 of 480
    requests, two connections open meanwhile). The pool now waits for one of those it holds."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    from conftest import bee, decide_body

    svc = start_service(
        store=limited_role + "&pool_size=8&pool_wait_s=600", provider="openai", base_url=scripted.base_url
    )
    url = svc.server.url

    def client(k: int) -> list[int]:
        codes = []
        with httpx.Client(base_url=url, timeout=120) as http:
            for i in range(10):
                r = http.post("/v1/decide", json=decide_body(bee(f"c{k}-{i}")))
                codes.append(r.status_code)
                if r.status_code != 200:
                    continue
                did = r.json()["decisions"][0]["decision_id"]
                report = {"client_id": "game-1", "reports": [{"decision_id": did, "outcome": "done"}]}
                codes.append(http.post("/v1/report", json=report).status_code)
        return codes

    with ThreadPoolExecutor(24) as pool:
        codes = [c for got in pool.map(client, range(24)) for c in got]
    assert len(codes) == 480 and set(codes) == {200}, {c: codes.count(c) for c in set(codes)}


class _ShortServer:
    """An asyncpg pool's stand-in on a server that grants ``grant`` connections and refuses one more."""

    def __init__(self, grant: int) -> None:
        self.grant, self.open, self.idle, self.refused, self.held, self.most = grant, 0, 0, 0, 0, 0
        self.refusal = asyncio.Event()

    async def acquire(self) -> object:
        import asyncpg

        await asyncio.sleep(0)  # a connection takes a turn of the loop, as a real one takes round trips
        if self.idle:
            self.idle -= 1
        elif self.open < self.grant:
            self.open += 1
        else:
            self.refused += 1
            self.refusal.set()
            raise asyncpg.exceptions.TooManyConnectionsError('too many connections for role "x"')
        self.held += 1
        self.most = max(self.most, self.held)
        return object()

    async def release(self, con: object) -> None:
        self.held -= 1
        self.idle += 1

    def get_size(self) -> int:
        return self.open


def _gated(server: _ShortServer, size: int, wait_s: float) -> Any:
    from npcmind.storage.postgres.pool import GatedPool

    return GatedPool(server, size, wait_s)


async def _use(pool: Any, n: int) -> None:
    async def one() -> None:
        async with pool.acquire():
            await asyncio.sleep(0)

    await asyncio.gather(*(one() for _ in range(n)))


@pytest.mark.fast
def test_a_refused_connection_waits_for_one_the_pool_holds() -> None:
    async def go() -> None:
        server = _ShortServer(grant=2)
        pool = _gated(server, size=8, wait_s=600)  # the wait only bounds a hang
        await _use(pool, 24)
        assert server.most == 2 and pool.limit == 2 and pool._inside == 0
        assert 1 <= server.refused <= 8  # once the limit fell, nobody asked the server for a third
        server.refused = 0
        await _use(pool, 24)
        assert server.refused == 0  # the limit is kept: no refusal a request

    run(go)


@pytest.mark.fast
def test_the_limit_climbs_back_when_the_server_grants_more(monkeypatch: pytest.MonkeyPatch) -> None:
    from npcmind.storage.postgres import pool as pgpool

    async def go() -> None:
        server = _ShortServer(grant=2)
        pool = _gated(server, size=8, wait_s=600)
        await _use(pool, 24)
        assert pool.limit == 2
        server.grant = 3  # another process let one go
        monkeypatch.setattr(pgpool, "GROW_S", 0.0)  # a probe at every wait
        await _use(pool, 24)
        assert server.open == 3 and server.most == 3 and pool.limit >= 3  # the third is used, as granted

    run(go)


@pytest.mark.fast
def test_with_no_connection_of_its_own_the_pool_asks_again_until_the_server_grants_one() -> None:
    async def go() -> None:
        server = _ShortServer(grant=0)  # other clients hold every connection
        pool = _gated(server, size=4, wait_s=600)

        async def free_one() -> None:
            await server.refusal.wait()
            server.grant = 1

        await asyncio.gather(_use(pool, 3), free_one())
        assert server.refused >= 1 and server.open == 1 and pool._inside == 0

    run(go)


@pytest.mark.fast
def test_when_no_connection_frees_in_time_the_request_fails_and_the_next_one_is_served() -> None:
    async def go() -> None:
        server = _ShortServer(grant=1)
        pool = _gated(server, size=4, wait_s=0.05)
        async with pool.acquire():  # held for the whole wait: nothing frees
            with pytest.raises(TimeoutError):
                async with pool.acquire():
                    pass
        async with pool.acquire():
            assert server.held == 1
        assert pool._inside == 0 and server.held == 0

    run(go)


@pytest.mark.fast
def test_a_store_whose_pool_settings_are_wrong_is_refused_at_start() -> None:
    for query, says in [("pool_size=0", "pool_size"), ("pool_size=x", "pool_size"), ("pool_wait_s=0", "pool_wait_s")]:
        with pytest.raises(ValueError, match=says):
            open_store(f"{POSTGRES}?schema=x&{query}")
    assert postgres_store.pool_settings(f"{POSTGRES}?pool_size=3&pool_wait_s=0.5") == (3, 0.5)
    assert "pool" not in postgres_store.parse_url(f"{POSTGRES}?schema=x&pool_size=3&pool_wait_s=0.5")[0]
