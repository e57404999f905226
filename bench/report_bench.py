"""What a report of 256 forged decision ids costs the process, against one of 256 genuine ids, in one run.

In-process, the store as `npcmind serve` opens it (SQLite, or PostgreSQL with --store): a decide request's 256
decisions are kept, then reports of 256 forged ids (well-formed, their numbers those of real decisions, a MAC
of their own) and of the 256 genuine ids (already reported: `duplicate`, so every run does the same work) are
timed, with the store lookups each made. A forged id is refused by its MAC before any lookup.

Run: python bench/report_bench.py [--store postgresql://root@127.0.0.1:5432/test?schema=bench] [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import tempfile
import time
from pathlib import Path
from typing import Any

from npcmind.context.hub import ContextHub
from npcmind.context.registry import SessionRegistry
from npcmind.decide.ids import DecisionIds
from npcmind.decide.pipeline import SessionContext
from npcmind.manifest import load
from npcmind.protocol.a2g import Report, ReportRequest
from npcmind.storage import open_store
from npcmind.storage.base import IssuedDecision

FOREST = Path(__file__).resolve().parents[1] / "examples" / "forest.yaml"
N = 256


async def _timed(hub: ContextHub, session: SessionContext, ids: list[str], runs: int) -> float:
    req = ReportRequest("bench", [Report(d, "done") for d in ids])
    await hub.report(session, req)  # the genuine ones are accepted once, then duplicates
    t = time.perf_counter()
    for _ in range(runs):
        await hub.report(session, req)
    return (time.perf_counter() - t) / runs


async def main(store_url: str, runs: int) -> None:
    """Time both reports and count the lookups of the forged one."""
    store = open_store(store_url)
    await store.open()
    try:
        ids = DecisionIds(await store.secrets.get("decision_mac"))
        sid = "local:bench"
        seq = await store.decisions.allocate(N)
        genuine = ids.issue_many(seq, sid, N)
        rows = [
            IssuedDecision(seq + i, d, sid, f"b{i}", "bee", "idle", "Stay", time.time()) for i, d in enumerate(genuine)
        ]
        await store.decisions.record(rows)
        forged = [
            "d_" + base64.urlsafe_b64encode(base64.urlsafe_b64decode(d[2:])[:12] + bytes(12)).decode() for d in genuine
        ]
        hub = ContextHub(store, ids, SessionRegistry(store))
        session = SessionContext(sid, "bench", load(FOREST), {})
        real, looked = store.decisions.get, [0]

        async def counted(q: int) -> Any:
            looked[0] += 1
            return await real(q)

        store.decisions.get = counted  # type: ignore[method-assign]
        bad = await _timed(hub, session, forged, runs)
        forged_lookups, looked[0] = looked[0], 0
        good = await _timed(hub, session, genuine, runs)
        print(f"{N} forged ids: {bad * 1000:.2f} ms a report, {forged_lookups} store lookups in {runs + 1} reports")
        print(f"{N} genuine ids: {good * 1000:.2f} ms a report, {looked[0]} store lookups in {runs + 1} reports")
        print(f"forged / genuine: {bad / good:.3f}")
    finally:
        await store.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", default=None, help="a store URL (default: SQLite in a temporary directory)")
    p.add_argument("--runs", type=int, default=20)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(a.store or f"sqlite:///{tmp}/bench.db", a.runs))
