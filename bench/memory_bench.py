"""What the service holds in memory for each entity it has seen: what NPCMIND_MAX_ENTITIES is sized by.

In-process, the service as `npcmind serve` builds it; 500 sessions of 16 bees each make 9 decide requests
(so every bee has its 8 remembered decisions), and tracemalloc counts what is still held afterwards,
by module. The scripted provider runs in a thread of the same process: its own allocations are left out.
`GET /v1/prompt`'s view of each session's last batch is counted apart: it is kept for the 1,024 sessions
used last, whatever their number.

Run: python bench/memory_bench.py [--sessions 500]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tracemalloc
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from inprocess import started_service  # noqa: E402
from npcmind.protocol.a2g import DecideRequest  # noqa: E402
from npcmind.protocol.validate import parse  # noqa: E402
from npcmind.testing.scripted import ScriptedServer  # noqa: E402
from support import bee, decide_body  # noqa: E402

REQUESTS = 9  # a decision a request: the memory of 8 fills up


def _total(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot) -> int:
    return sum(
        s.size_diff
        for s in after.compare_to(before, "traceback")
        if not any(f.filename.endswith("testing/scripted.py") for f in s.traceback)
    )


async def _held(base_url: str, sessions: int) -> tuple[Counter[str], int]:
    svc = await started_service(base_url, activity_s=0)
    body = decide_body(*[bee(f"b{i}", position=[i * 7.5, i * 3.0]) for i in range(16)])

    async def one(client_id: str) -> None:
        body["client_id"] = client_id
        req = parse(json.dumps(body).encode(), DecideRequest)
        await svc.pipeline.decide(await svc.guard.session(None, client_id), req)

    for _ in range(REQUESTS):  # warm: tables, tokenizer, compiled checks
        await one("warm")
    gc.collect()
    tracemalloc.start(25)
    before = tracemalloc.take_snapshot()
    for _ in range(REQUESTS):
        for s in range(sessions):
            await one(f"game-{s}")
    gc.collect()
    with_view = _total(before, tracemalloc.take_snapshot())
    svc.pipeline.local._last.clear()  # what only GET /v1/prompt's last-batch view kept alive goes with it
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    held: Counter[str] = Counter()
    for stat in after.compare_to(before, "traceback"):
        frames = [f.filename for f in stat.traceback]  # the allocating frame last
        if any(f.endswith("testing/scripted.py") for f in frames):
            continue  # the test tool's record of what it was sent
        mine = [f for f in frames if "/npcmind/" in f]
        held[mine[-1].split("/npcmind/", 1)[1] if mine else "other (Python, libraries)"] += stat.size_diff
    view = with_view - sum(held.values())
    await svc.stop()
    return held, view


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=500)
    args = ap.parse_args()
    with ScriptedServer() as provider:
        held, view = asyncio.run(_held(provider.base_url, args.sessions))
    entities = args.sessions * 16
    print(f"Python {sys.version.split()[0]}; {args.sessions} sessions x 16 entities, {REQUESTS} decisions each")
    print(f"held for each entity seen:            {sum(held.values()) / entities:7.0f} bytes")
    for where, size in held.most_common(8):
        print(f"  {where:<34} {size / entities:7.0f}")
    print(f"the last batch's view, per entity:    {view / entities:7.0f} bytes (1,024 sessions at most)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
