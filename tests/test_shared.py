"""Shared soft state on the real Redis (and in memory): one cache, one rate, one revocation list, one back-off,
and deciding on without Redis when it goes away. Each test uses a key prefix of its own and removes its keys."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import REDIS, logged, until
from npcmind.http.server import free_port
from npcmind.shared import MemoryShared, open_shared
from npcmind.shared import redis as shared_redis
from npcmind.shared.base import CachedChoice
from npcmind.shared.redis import RedisShared

SLOW_MACHINE_S = 30.0  # a call's timeout: a loaded machine is not a lost Redis (a stopped one refuses at once)


def _redis_reachable(url: str) -> str | None:
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except Exception as e:
        return f"no Redis at {url} ({e}); set NPCMIND_TEST_REDIS"
    return None


@pytest.fixture()
def prefix() -> Iterator[str]:
    """A key prefix of this test's own on the shared Redis, its keys removed afterwards."""
    why = _redis_reachable(REDIS)
    if why:
        pytest.skip(why)
    p = f"npcmind-test-{uuid.uuid4().hex[:10]}:"
    yield p
    import redis

    r = redis.Redis.from_url(REDIS)
    for key in r.scan_iter(f"{p}*"):
        r.delete(key)


def two(prefix: str) -> tuple[RedisShared, RedisShared]:
    """Two processes' views of one Redis."""
    return tuple(RedisShared(REDIS, prefix=prefix, timeout_s=SLOW_MACHINE_S) for _ in range(2))  # type: ignore[return-value]


def test_a_choice_cached_by_one_process_is_a_hit_at_another_until_its_ttl(prefix: str) -> None:
    async def go() -> None:
        a, b = two(prefix)
        await a.start()
        await b.start()
        await a.cache("game-1", [("k1", CachedChoice("flee", 0.9), 60_000), ("k2", CachedChoice("idle", None), 1)])
        await asyncio.sleep(0.01)  # k2's 1 ms are over
        assert await b.cached("game-1", ["k1", "k2", "k3"]) == [CachedChoice("flee", 0.9), None, None]
        assert await b.cached("game-2", ["k1"]) == [None]  # another client's cache is its own
        await a.close()
        await b.close()

    asyncio.run(go())


@pytest.mark.fast
def test_a_clients_rate_holds_across_processes(prefix: str) -> None:
    """N processes let through what one does: 3 views of one bucket at 10 a second pass a burst of 20 in all."""

    async def go() -> tuple[int, float]:
        views = [RedisShared(REDIS, prefix=prefix, timeout_s=SLOW_MACHINE_S) for _ in range(3)]
        for v in views:
            await v.start()
        passed, t0 = 0, time.monotonic()
        for i in range(90):  # one burst, as fast as the machine goes
            passed += await views[i % 3].take("game-1", "s_1", 10.0, 10.0 / 16) == 0
        elapsed = time.monotonic() - t0
        for v in views:
            await v.close()
        return passed, elapsed

    passed, elapsed = asyncio.run(go())
    # a bucket of 20 (twice the rate), plus what refills while the 90 calls run (10 a second), however long
    assert 20 <= passed <= 20 + 10 * elapsed + 1, (passed, elapsed)


@pytest.mark.fast
def test_a_session_revoked_at_one_process_is_revoked_at_every_other(prefix: str) -> None:
    async def go() -> None:
        a, b = two(prefix)
        await a.start()
        await b.start()
        assert await b.revoked("s1") is False
        await a.revoke("s1", time.time() + 60)
        assert await b.revoked("s1") is True and await b.revoked("s2") is False
        await a.back_off(time.time() + 30)
        assert await b.backed_off() > time.time() + 25
        await a.close()
        await b.close()

    asyncio.run(go())


@pytest.mark.fast
def test_a_process_knows_when_another_served_its_session_meanwhile(prefix: str) -> None:
    """As Colyseus owns a room: the process that served a session last may trust what it holds of it."""

    async def go() -> list[bool | None]:
        a, b = two(prefix)
        await a.start()
        await b.start()
        seen = [await a.claim("s1", "A"), await a.claim("s1", "A"), await b.claim("s1", "B"), await a.claim("s1", "A")]
        await a.close()
        await b.close()
        return seen

    # new to A (nothing to trust yet), A again, taken over by B, and A must not trust what it kept
    assert asyncio.run(go()) == [False, True, False, False]


def test_many_requests_at_once_wait_their_turn_for_a_connection_and_redis_stays_up(prefix: str) -> None:
    """redis-py's pool holds 100 connections and raised "Too many connections" for the 101st call in flight: a
    process with more requests at once (512 through HAProxy in bench/scale_bench.py) took Redis for gone, and
    for a second every request rebuilt its session from the store. Now 300 calls at once all answer."""

    async def go() -> tuple[list[bool | None], str | None]:
        a = RedisShared(REDIS, prefix=prefix, timeout_s=SLOW_MACHINE_S)
        await a.start()
        answers = await asyncio.gather(*(a.revoked(f"s{i}") for i in range(300)))
        problem = a.problem()
        await a.close()
        return answers, problem

    answers, problem = asyncio.run(go())
    assert problem is None
    assert answers == [False] * 300


@pytest.mark.fast
def test_in_memory_it_is_this_process_alone() -> None:
    async def go() -> None:
        m = MemoryShared(10)
        await m.cache("c", [("k", CachedChoice("flee", None), 60_000)])
        assert await m.cached("c", ["k", "z"]) == [CachedChoice("flee", None), None]
        assert [await m.take("c", "s", 1.0, 0.5) == 0 for _ in range(3)] == [True, True, False]
        await m.revoke("s", time.time() + 10)
        assert await m.revoked("s") is True and await m.revoked("t") is False
        assert m.problem() is None
        assert await m.claim("s", "me") is True  # one process serves every session: what it holds is current

    asyncio.run(go())
    with pytest.raises(ValueError, match="use redis://HOST:PORT/N"):
        open_shared("http://localhost:6379")


class OwnRedis:
    """A redis-server of the test's own on a free port, to stop and start again."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.tmp = tmp
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.tmp),
            ],
            stdout=subprocess.DEVNULL,
        )
        until(lambda: _redis_reachable(self.url) is None, "redis-server did not start", 30)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@pytest.fixture()
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server here (apt-get install redis-server)")
    r = OwnRedis(tmp_path)
    r.start()
    yield r
    r.stop()


async def _until(check: Any, what: str) -> None:
    """Wait for a condition; the deadline only bounds a hang."""
    deadline = time.monotonic() + 30
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


def test_without_redis_it_answers_as_one_process_says_so_once_and_recovers(own_redis: OwnRedis) -> None:
    async def go() -> None:
        s = RedisShared(own_redis.url, prefix="t:", timeout_s=SLOW_MACHINE_S)
        await s.start()
        await s.cache("c", [("k", CachedChoice("flee", None), 60_000)])
        with logged("npcmind.shared") as said:
            own_redis.stop()
            # a process that never saw the entry
            fresh = RedisShared(own_redis.url, prefix="t:", timeout_s=SLOW_MACHINE_S)
            await fresh.start()
            assert fresh.problem() is not None and "unreachable" in str(fresh.problem())
            for _ in range(3):
                assert await fresh.cached("c", ["k"]) == [None]  # a miss, not an error
                assert await fresh.revoked("s") is None  # not known: the store decides
                assert await fresh.take("c", "s", 5.0, 1.0) == 0  # this process's own bucket
                assert await fresh.claim("s", "me") is None  # not known: rebuild from the store
            await s.cache("c", [("k2", CachedChoice("idle", None), 60_000)])  # kept in memory, no error
            assert await s.cached("c", ["k2"]) == [CachedChoice("idle", None)]
            lost = [line for line in said if "unreachable" in line]
            assert len(lost) == 2, said  # once for each of the two processes, not once a call
            own_redis.start()

            async def back() -> bool:
                return fresh.problem() is None and s.problem() is None

            await _until(back, "the probe did not find Redis again")
            assert any("is back" in line for line in said), said
        await s.revoke("s9", time.time() + 60)
        assert await fresh.revoked("s9") is True  # shared again
        await s.close()
        await fresh.close()

    asyncio.run(go())


def test_calls_waiting_for_a_connection_when_redis_pauses_fail_at_once_not_a_timeout_each(
    own_redis: OwnRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A paused Redis (SIGSTOP) answers nothing: the calls holding the pool's connections wait their timeout, and
    the first to fail says Redis is down. The calls queued for a connection meanwhile used to go on to Redis
    each in turn, one more timeout a pool's worth (450 requests at once, 100 connections: 5 s, not 1 s); now
    they fail at once. Counted, not timed: only the calls that held a connection reach Redis."""
    monkeypatch.setattr(shared_redis, "POOL", 4)
    sent = 0

    async def go() -> list[bool | None]:
        s = RedisShared(own_redis.url, prefix="t:", timeout_s=2.0)
        await s.start()
        exists = s.link.client.exists

        async def counted(*keys: str) -> Any:
            nonlocal sent
            sent += 1
            return await exists(*keys)

        s.link.client.exists = counted  # what revoked() asks Redis
        assert own_redis.proc is not None
        own_redis.proc.send_signal(signal.SIGSTOP)
        try:
            answers = await asyncio.gather(*(s.revoked(f"s{i}") for i in range(5 * 4)))
        finally:
            own_redis.proc.send_signal(signal.SIGCONT)
        await s.close()
        return answers

    assert asyncio.run(go()) == [None] * 20  # every call answers: "the shared state cannot say"
    assert sent <= 4, sent  # at most the pool's worth went to the paused Redis; the rest knew it was down


@pytest.mark.fast
def test_a_session_keeps_its_share_of_the_clients_rate_in_memory() -> None:
    """The clock stands still: client rate 8 (bucket 16), 4 sessions, a share of 2 (bucket 4) each. A floods:
    its share, then what the client's bucket holds. B and C each still get their whole share, and nothing
    more; the client as a whole never passes its own bucket by more than the shares it owes."""

    async def go() -> None:
        m = MemoryShared(10, clock=lambda: 100.0)
        a = [await m.take("c", "a", 8.0, 2.0) == 0 for _ in range(100)]
        assert a.count(True) == 16 and a[:16] == [True] * 16
        for s in ("b", "d"):  # two of the other three sessions
            assert [await m.take("c", s, 8.0, 2.0) == 0 for _ in range(5)] == [True] * 4 + [False]
        assert await m.take("c", "a", 8.0, 2.0) > 0  # the client's bucket owes what B and C took

    asyncio.run(go())


@pytest.mark.fast
def test_a_session_keeps_its_share_across_processes(prefix: str) -> None:
    """Two processes on one Redis: session A floods through both; session B's request within its share goes.
    The rates are low enough (a client token every 50 s, a session's every 100 s) that nothing refills
    while the test runs, however slow the machine."""

    async def go() -> None:
        views = [RedisShared(REDIS, prefix=prefix, timeout_s=SLOW_MACHINE_S) for _ in range(2)]
        for v in views:
            await v.start()
        flood = [await views[i % 2].take("game-1", "a", 0.02, 0.01) == 0 for i in range(20)]
        assert flood.count(True) <= 2 and False in flood, flood
        assert await views[1].take("game-1", "b", 0.02, 0.01) == 0
        assert await views[0].take("game-1", "b", 0.02, 0.01) > 0
        for v in views:
            assert v.problem() is None, v.problem()
            await v.close()

    asyncio.run(go())
