"""A session ended at one process stays ended at every other, whatever the shared state (Redis) does meanwhile.

Two Guards on one store stand for two processes (SQLite: one store object, as one file has one process;
PostgreSQL: a store object each on one schema); the shared state they both see is one object standing for
Redis, which can be paused while a revocation is sent (it never arrives), flushed, restarted empty, or down.
The store is the truth: every process reads its revocations at least every NPCMIND_REVOCATION_POLL_S.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from conftest import logged, write_clients
from npcmind.context.registry import SessionRegistry
from npcmind.protocol.errors import ApiError
from npcmind.sessions.clients import load_clients
from npcmind.sessions.guard import Guard
from npcmind.sessions.tokens import TokenSigner
from npcmind.shared import MemoryShared
from npcmind.storage import Store, open_store

pytestmark = pytest.mark.fast  # the whole file is in the fast tier (docs/testing.md)


class Redisish(MemoryShared):
    """One revocation list for every Guard, as Redis is; ``state`` says what it does to calls now: "up",
    "paused" (a call times out: a revocation sent now is lost, a read cannot say) or "down" (the same, at once)."""

    def __init__(self) -> None:
        super().__init__()
        self.state = "up"

    async def revoke(self, session_id: str, until: float) -> bool:
        if self.state != "up":
            return False
        return await super().revoke(session_id, until)

    async def revoked(self, session_id: str) -> bool | None:
        return None if self.state != "up" else await super().revoked(session_id)

    def flush(self) -> None:
        """FLUSHDB, or a restart without persistence: every revocation forgotten."""
        self._revoked.clear()


class CountedSessions:
    """A store's sessions that count the reads of their revocations (the rest passes through)."""

    def __init__(self, store: Store) -> None:
        self.of = store.sessions
        self.reads = 0

    async def ended_since(self, after: int) -> tuple[int, list[tuple[str, float]]]:
        self.reads += 1
        return await self.of.ended_since(after)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.of, name)


class Counted:
    """A store that counts the reads of its revocations (the rest passes through)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.sessions = CountedSessions(store)

    @property
    def reads(self) -> int:
        """How many times the revocations were read."""
        return self.sessions.reads

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/s.db"
    return str(request.getfixturevalue("postgres_url"))


class Processes:
    """Two Guards (processes) on one store and one Redisish, and a session of game-1 opened at the first."""

    def __init__(self, stores: list[Counted], shared: Redisish, tmp_path: Path, **guard: Any) -> None:
        path, self.keys = write_clients(tmp_path, requests_per_second=100_000)
        clients = load_clients(path)
        self.stores, self.shared, self.guard, self.clients = stores, shared, guard, clients
        self.at: list[Guard] = []

    async def start(self) -> Processes:
        for store in {id(s.store): s.store for s in self.stores}.values():
            await store.open()
        signer = TokenSigner(await self.stores[0].secrets.get("session_tokens"))
        for i in range(2):
            store = self.stores[i % len(self.stores)]
            self.at.append(Guard(SessionRegistry(store), store, signer, self.shared, None, self.clients, **self.guard))
        return self

    async def open(self) -> str:
        return (await self.at[0].open(f"Bearer {self.keys['game-1']}", "game-1")).session_token

    async def status(self, i: int, token: str) -> int:
        """What process ``i`` answers a request of this session: 200 or the ApiError's status."""
        try:
            await self.at[i].claims(f"Bearer {token}")
        except ApiError as e:
            return e.status
        return 200

    async def close(self) -> None:
        for store in {id(s.store): s.store for s in self.stores}.values():
            await store.close()


def run(store_url: str, tmp_path: Path, test: Callable[[Processes], Coroutine[Any, Any, None]], **guard: Any) -> None:
    async def go() -> None:
        first = open_store(store_url)  # one SQLite file has one process: both Guards use its one store object
        second = first if store_url.startswith("sqlite") else open_store(store_url)
        stores = [Counted(first), Counted(second)]
        p = await Processes(stores, Redisish(), tmp_path, **guard).start()
        try:
            await test(p)
        finally:
            await p.close()

    asyncio.run(go())


@pytest.mark.parametrize("redis", ["paused", "flushed", "restarted", "down"])
def test_a_session_ended_at_one_process_is_refused_at_the_other_whatever_redis_did(
    store_url: str, tmp_path: Path, redis: str
) -> None:
    """The issue's case: the other process had the session at hand and Redis says "not revoked" afterwards
    (the revocation never reached it, or it forgot it); only the store knows, and it is read."""

    async def test(p: Processes) -> None:
        token = await p.open()
        assert [await p.status(i, token) for i in (0, 1)] == [200, 200]  # both have it at hand
        if redis in ("paused", "restarted", "down"):
            p.shared.state = "paused" if redis == "paused" else "down"
        with logged("npcmind.sessions") as said:
            await p.at[0].end(f"Bearer {token}")
        if redis == "flushed":
            assert await p.status(1, token) == 401  # Redis had it
            p.shared.flush()
        elif redis in ("paused", "restarted"):
            p.shared.state = "up"  # back, without the revocation
            if redis == "restarted":
                p.shared.flush()
        assert [await p.status(i, token) for i in (0, 1) for _ in range(3)] == [401] * 6
        assert bool(said) == (redis != "flushed"), said  # a revocation Redis did not take is never silent

    run(store_url, tmp_path, test, revocation_poll_s=0)


def test_a_revocation_redis_lost_holds_from_the_bound_on_and_requests_meanwhile_ask_the_store_once(
    tmp_path: Path,
) -> None:
    """NPCMIND_REVOCATION_POLL_S is the bound: a process refuses an ended session from ``poll_s`` after the
    revocation on, and no request asks the store more often than that (the clock is the test's own)."""
    now = [1000.0]

    async def test(p: Processes) -> None:
        token = await p.open()
        assert await p.status(1, token) == 200  # the other process reads the store's revocations once, at t = 0
        reads = p.stores[1].reads
        p.shared.state = "paused"
        await p.at[0].end(f"Bearer {token}")
        p.shared.state = "up"  # without the revocation
        now[0] += 4.9
        assert [await p.status(1, token) for _ in range(50)] == [200] * 50  # within the bound: no read
        assert p.stores[1].reads == reads
        now[0] += 0.1  # the bound, from the read before the revocation
        assert [await p.status(1, token) for _ in range(50)] == [401] * 50
        assert p.stores[1].reads == reads + 1  # one read for them all

    run(f"sqlite:///{tmp_path}/s.db", tmp_path, test, revocation_poll_s=5.0, clock=lambda: now[0])


def test_requests_that_arrive_together_share_one_read_of_the_revocations(tmp_path: Path) -> None:
    async def test(p: Processes) -> None:
        token = await p.open()
        before = p.stores[1].reads
        statuses = await asyncio.gather(*(p.status(1, token) for _ in range(20)))
        assert statuses == [200] * 20 and p.stores[1].reads == before + 1

    run(f"sqlite:///{tmp_path}/s.db", tmp_path, test, revocation_poll_s=3600)


def test_the_store_numbers_revocations_in_order_and_forgets_them_with_their_sessions(store_url: str) -> None:
    """What every process reads: each ended session once, after the number it read up to; a revocation whose
    session is pruned (its token long expired) is forgotten with it."""
    from npcmind.storage.base import SessionRecord

    async def go() -> None:
        store = open_store(store_url)
        await store.open()
        try:
            for sid, expires in (("old", 100.0), ("a", 5000.0), ("b", 5000.0)):
                await store.sessions.create(SessionRecord(sid, "game-1", 50.0, expires))
            assert await store.sessions.ended_since(0) == (0, [])
            await store.sessions.end("a")
            first, ended = await store.sessions.ended_since(0)
            assert first > 0 and ended == [("a", 5000.0)]
            await store.sessions.end("old")
            await store.sessions.end("b")
            upto, ended = await store.sessions.ended_since(first)
            assert upto > first and ended == [("old", 100.0), ("b", 5000.0)]
            assert await store.sessions.ended_since(upto) == (upto, [])
            ended_b = await store.sessions.get("b")
            assert ended_b is not None and ended_b.ended
            await store.prune(1000.0)
            assert [sid for sid, _ in (await store.sessions.ended_since(0))[1]] == ["a", "b"]
            await store.sessions.end("nobody")  # no such session: nothing to revoke
            assert await store.sessions.ended_since(upto) == (upto, [])
        finally:
            await store.close()

    asyncio.run(go())
