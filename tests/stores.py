"""What the store tests share (test_store_contract.py, test_storage.py): a decision as issued, a store opened on
a URL, and a look at a table no method of the store reads back, on either backend."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from npcmind.storage import Store, open_store
from npcmind.storage.base import IssuedDecision
from npcmind.storage.postgres import PostgresStore
from npcmind.storage.sqlite import SqliteStore


def run(coro: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """One test step in an event loop of its own, as one process would run it."""
    return asyncio.run(coro())


async def opened(url: str) -> Store:
    """A store opened as the service opens it."""
    store = open_store(url)
    await store.open()
    return store


def issued(seq: int, sid: str, eid: str, action: str = "idle", at: float | None = None) -> IssuedDecision:
    """A decision of a bee as the pipeline issues it (at 1000.0 unless said)."""
    return IssuedDecision(seq, f"d_{seq}", sid, eid, "bee", action, action.title(), at if at is not None else 1000.0)


async def rows(store: Store, table: str) -> int:
    """How many rows a table holds, on either backend: what prune left of a table no method reads in whole."""
    if isinstance(store, SqliteStore):
        return int(store.db.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    assert isinstance(store, PostgresStore)
    return int(await store.db.pool.fetchval(f"SELECT COUNT(*) FROM {table}"))
