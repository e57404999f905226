"""Shared soft state in Redis, as the LiteLLM proxy keeps its cache, limits and revocations: every process of a
deployment sees one decision cache, one request rate a client, one list of ended sessions, one back-off.

Redis may go away. Then every call answers as a single process would (a cache miss, this process's own
rate, "ask the store" for a session), the log says so once and /v1/health names it, and a probe every second
finds Redis again by itself; no request waits on a connection that is known to be down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from npcmind.shared.base import CachedChoice
from npcmind.shared.memory import MemoryShared

log = logging.getLogger("npcmind.shared")

PROBE_S = 1.0  # while Redis is down, how often a probe looks for it again
TIMEOUT_S = 1.0  # a Redis call that takes longer counts as Redis being down (NPCMIND_REDIS_TIMEOUT_MS)
POOL = 100  # connections to Redis a process holds at most
OWNED_MS = 24 * 3600 * 1000  # a session's owner is remembered this long after its last request
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(tuple[str, float | None]).decode

# a session's share and its client's bucket in one atomic step, Redis's own clock for every process: KEYS[1]
# the client's bucket, KEYS[2] the session's; ARGV the client's rate and the session's share a second. Within
# its share a request always goes (and counts in the client's bucket, which may owe one burst); past it, it
# borrows what the client's bucket holds. The answer is the milliseconds to wait (0: go); as take_shared().
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function look(key, rate)
  local cap = math.max(1, 2 * rate)
  local b = redis.call('HMGET', key, 'tokens', 'at')
  local tokens = tonumber(b[1]) or cap
  local at = tonumber(b[2]) or now
  return math.min(cap, tokens + math.max(0, now - at) * rate / 1000), cap
end
local function keep(key, tokens, rate, cap)
  redis.call('HSET', key, 'tokens', tostring(tokens), 'at', now)
  redis.call('PEXPIRE', key, math.ceil(2 * cap * 1000 / rate) + 1000)
end
local rate, share = tonumber(ARGV[1]), tonumber(ARGV[2])
local pool, pcap = look(KEYS[1], rate)
local own, ocap = look(KEYS[2], share)
local wait = 0
if own >= 1 then
  own = own - 1
  pool = math.max(-pcap, pool - 1)
elseif pool >= 1 then
  pool = pool - 1
else
  wait = math.ceil(math.min((1 - own) / share, (1 - pool) / rate) * 1000)
end
keep(KEYS[1], pool, rate, pcap)
keep(KEYS[2], own, share, ocap)
return wait
"""


class RedisLink:
    """One process's connection to Redis and whether it is up: a call while Redis is known to be down fails at
    once, the loss is said once, and a probe finds Redis again by itself."""

    def __init__(self, url: str, timeout_s: float = TIMEOUT_S) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.client: Any = None
        self.take_script: Any = None
        self._down: str | None = None
        self._probe: asyncio.Task[None] | None = None
        self._slots = asyncio.Semaphore(POOL)  # past POOL calls in flight, the next waits for one to end

    async def start(self) -> None:
        """Connect; an unreachable Redis at start is said like one lost later, and looked for again."""
        self.client = aioredis.from_url(
            self.url,
            max_connections=POOL,
            socket_timeout=self.timeout_s,
            socket_connect_timeout=self.timeout_s,
            retry_on_timeout=False,
        )
        self.take_script = self.client.register_script(_TAKE)
        try:
            await self.client.ping()
        except (RedisError, OSError) as e:
            self._lost(e)

    async def close(self) -> None:
        """Stop looking for Redis and close the connections."""
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
        if self.client is not None:
            await self.client.aclose()

    def problem(self) -> str | None:
        """Why Redis is not in use now (for /v1/health), or None while it is."""
        return self._down

    def _lost(self, e: BaseException) -> None:
        """Say once that Redis is gone and what that changes; look for it again in the background."""
        if self._down is not None:
            return
        self._down = f"Redis at {self.url} is unreachable ({e.__class__.__name__}: {e})"
        log.warning(
            "%s: deciding on without it: the decision cache and request rates are this process's own, and ended "
            "sessions are checked in the store, until it is back (looked for every %g s)",
            self._down,
            PROBE_S,
        )
        self._probe = asyncio.get_running_loop().create_task(self._look_again())

    async def _look_again(self) -> None:
        while True:
            await asyncio.sleep(PROBE_S)
            try:
                await self.client.ping()
            except (RedisError, OSError):
                continue
            log.info("Redis at %s is back: the cache, rates and revocations are shared again", self.url)
            self._down = None
            self._probe = None
            return

    async def call(self, op: Any, *args: Any, **kwargs: Any) -> Any:
        """One Redis call, or a RedisError at once while Redis is known to be down: asked again once a connection
        is free, since calls queued behind ones stuck on a paused Redis would each wait a timeout of their own
        after the first had found it down (450 at once on 100 connections: 5 timeouts, not 1)."""
        if self._down is not None:
            raise RedisError(self._down)
        async with self._slots:  # each call holds a connection; redis-py raises past its pool's, not waits
            if self._down is not None:
                raise RedisError(self._down)
            try:
                return await op(*args, **kwargs)
            except (RedisError, OSError) as e:
                self._lost(e)
                raise RedisError(str(e)) from e


class RedisShared:
    """Redis through redis-py's asyncio client; this process's memory stands in while Redis is unreachable."""

    def __init__(
        self, url: str, cache_entries: int = 100_000, prefix: str = "npcmind:", timeout_s: float = TIMEOUT_S
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.fallback = MemoryShared(cache_entries)  # used only while Redis is down
        self.link = RedisLink(url, timeout_s)

    async def start(self) -> None:
        await self.link.start()

    async def close(self) -> None:
        await self.link.close()

    def problem(self) -> str | None:
        return self.link.problem()

    # --- the decision cache ---------------------------------------------------------------------------

    def _cache_key(self, client_id: str, key: str) -> str:
        return f"{self.prefix}c:{client_id}:{key}"

    async def cached(self, client_id: str, keys: list[str]) -> list[CachedChoice | None]:
        local = [self.fallback.local.get(client_id, k) for k in keys]
        missing = [i for i, hit in enumerate(local) if hit is None]
        if not missing:
            return local
        try:
            raw = await self.link.call(self.link.client.mget, [self._cache_key(client_id, keys[i]) for i in missing])
        except RedisError:
            return local
        for i, value in zip(missing, raw, strict=True):
            if value is not None:
                action, confidence = _decode(value)
                local[i] = CachedChoice(action, confidence)
        return local

    async def cache(self, client_id: str, entries: list[tuple[str, CachedChoice, int]]) -> None:
        await self.fallback.cache(client_id, entries)
        if not entries:
            return
        pipe = self.link.client.pipeline(transaction=False)
        for key, choice, ttl_ms in entries:
            pipe.set(self._cache_key(client_id, key), _encode((choice.action, choice.confidence)), px=ttl_ms)
        with contextlib.suppress(RedisError):
            await self.link.call(pipe.execute)

    # --- rates, revocations, back-off -------------------------------------------------------------------

    async def take(self, client_id: str, session_id: str, rate: float, share: float) -> float:
        keys = [f"{self.prefix}r:{client_id}", f"{self.prefix}rs:{client_id}:{session_id}"]
        try:
            wait_ms = await self.link.call(self.link.take_script, keys, [repr(rate), repr(share)])
        except RedisError:
            return self.fallback.take_now(client_id, session_id, rate, share)
        return int(wait_ms) / 1000

    async def revoke(self, session_id: str, until: float) -> bool:
        await self.fallback.revoke(session_id, until)
        ttl_ms = max(1, int((until - time.time()) * 1000))
        try:
            await self.link.call(self.link.client.set, f"{self.prefix}x:{session_id}", b"1", px=ttl_ms)
        except RedisError:  # never silent: the guard logs it, and how the store still delivers it
            return False
        return True

    async def revoked(self, session_id: str) -> bool | None:
        try:
            return bool(await self.link.call(self.link.client.exists, f"{self.prefix}x:{session_id}"))
        except RedisError:
            return None

    async def claim(self, session_id: str, owner: str) -> bool | None:
        try:
            before = await self.link.call(
                self.link.client.set, f"{self.prefix}o:{session_id}", owner.encode(), px=OWNED_MS, get=True
            )
        except RedisError:
            return None
        return before is not None and before.decode() == owner

    async def back_off(self, until: float) -> None:
        await self.fallback.back_off(until)
        ttl_ms = max(1, int((until - time.time()) * 1000))
        with contextlib.suppress(RedisError):
            await self.link.call(self.link.client.set, f"{self.prefix}b", repr(until).encode(), px=ttl_ms)

    async def backed_off(self) -> float:
        try:
            value = await self.link.call(self.link.client.get, f"{self.prefix}b")
        except RedisError:
            return await self.fallback.backed_off()
        return float(value) if value is not None else 0.0
