"""The PostgreSQL pool, made to wait for a connection it holds when the server refuses it one more.

asyncpg's pool opens a connection whenever every open one is busy and it is under its ``max_size``. A server
short of connections (a role's ``CONNECTION LIMIT``, ``max_connections`` taken by other clients) refuses it
with ``too many connections``, and each request that needed that connection failed (a 503) though the
connections the pool already held would be free a few milliseconds later. Here a refusal lowers how many
requests may hold a connection at once to the connections the pool has open; the others wait for one of
those, up to the store's wait. The limit climbs back by one a ``GROW_S`` (a single probe connection), so a
server that grants more again is used again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

GROW_S = 5.0  # after a refusal, how long before one more connection is tried
RETRY_S = 0.05  # with no connection of its own open, the first pause before asking the server again


def _refused(e: BaseException) -> bool:
    """Whether the server refused a new connection for want of slots (SQLSTATE 53300), not for a fault."""
    return getattr(e, "sqlstate", None) == "53300"


class GatedPool:
    """An asyncpg pool whose callers wait for a connection, within ``wait_s``, rather than fail on a refusal."""

    def __init__(self, pool: Any, size: int, wait_s: float) -> None:
        self._pool = pool
        self.size = size
        self.limit = size  # how many may hold or open a connection at once
        self.wait_s = wait_s
        self._inside = 0
        self._changed = asyncio.Condition()
        self._refused_at: float | None = None

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        """A connection, waited for up to ``wait_s`` in all; asyncio.TimeoutError when none came."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        pause = RETRY_S
        while True:
            async with asyncio.timeout_at(deadline):
                await self._enter()
                try:
                    con = await self._pool.acquire()
                except BaseException as e:
                    await self._leave()
                    if not _refused(e):
                        raise
                    if self._lower():  # none of ours to wait for: the server may free one of another's
                        await asyncio.sleep(min(pause, max(0.0, deadline - loop.time())))
                        pause = min(pause * 2, 1.0)
                    continue
            break
        try:
            yield con
        finally:
            try:
                await self._pool.release(con)
            finally:
                await self._leave()

    def _lower(self) -> bool:
        """After a refusal, at most the connections held; True when the pool holds none to wait for."""
        self._refused_at = asyncio.get_running_loop().time()
        held = self._pool.get_size()
        self.limit = max(1, min(self.limit, held))
        return held == 0

    def _may_enter(self) -> bool:
        if self._inside < self.limit:
            return True
        at = self._refused_at
        if self.limit < self.size and at is not None and asyncio.get_running_loop().time() - at >= GROW_S:
            self.limit += 1  # one probe: if the server refuses it, the limit drops back
            self._refused_at = asyncio.get_running_loop().time()
            return True
        return False

    async def _enter(self) -> None:
        async with self._changed:
            await self._changed.wait_for(self._may_enter)
            self._inside += 1

    async def _leave(self) -> None:
        async with self._changed:
            self._inside -= 1
            self._changed.notify_all()  # each checks the limit again; a lost wake-up would wait out wait_s

    async def fetch(self, sql: str, *args: Any) -> Any:
        """The rows of one statement, on a connection waited for."""
        async with self.acquire() as db:
            return await db.fetch(sql, *args)

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        """The first row of one statement, on a connection waited for."""
        async with self.acquire() as db:
            return await db.fetchrow(sql, *args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        """The first value of one statement, on a connection waited for."""
        async with self.acquire() as db:
            return await db.fetchval(sql, *args)

    async def execute(self, sql: str, *args: Any) -> Any:
        """The status of one statement, on a connection waited for."""
        async with self.acquire() as db:
            return await db.execute(sql, *args)

    async def close(self) -> None:
        """Close every connection."""
        await self._pool.close()
