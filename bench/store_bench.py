"""What the store's file costs a decision, and what forgetting old ones (NPCMIND_RETENTION_H) costs the loop.

In-process, the SQLite store as `npcmind serve` opens it: N requests of 16 decisions (ids, entity ids,
actions and labels of the example manifest's bees), one commit each, back to back, with the largest size
of the WAL (the checkpoints must keep up) and the longest time the event loop was held between two of its
turns (a ticker task measures it). Then the file's size a decision, prune of all of them with the loop's
longest hold, and the same N requests again: the file stays the size it was, its free pages reused.

With --fresh every decision is a fresh one (a cache miss), and the store keeps its features as well, as the
service does for the learned cascade (docs/policy.md): world, observation, legal actions, action, confidence.

Run: python bench/store_bench.py [--requests 20000] [--fresh]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from npcmind.decide.ids import DecisionIds
from npcmind.manifest import load
from npcmind.storage.base import DecisionFeatures, IssuedDecision, RequestFeatures
from npcmind.storage.sqlite import SqliteStore
from probe import cpu_probe

ROOT = Path(__file__).resolve().parents[1]


FRESH = False  # --fresh: every decision a cache miss, its features kept too
WORLD = {"player_hp_fraction": 0.4, "repellent": False}


def _features(seq: int, r: int, names: list[str], at: float) -> RequestFeatures:
    """What the service keeps of 16 fresh bee decisions (observations as the cache key rounds them)."""
    learned = [
        DecisionFeatures(
            seq + i,
            "bee",
            None,
            {
                "hp_fraction": (r + i) % 20 / 20,
                "distance_to_player": float((r * 16 + i) % 30 * 10),
                "sees_player": i % 3 > 0,
                "current_action": names[i % len(names)],
            },
            None,
            names,
            names[(r + i) % len(names)],
            0.9003,
        )
        for i in range(16)
    ]
    return RequestFeatures("game-1", "sha256:" + "5" * 64, at, WORLD, None, learned)


async def _write(store: SqliteStore, ids: DecisionIds, actions: dict[str, str], requests: int, at: float) -> None:
    names = list(actions)
    for r in range(requests):
        seq = await store.decisions.allocate(16)
        eids = [str(28000 + (r * 16 + i) % 500) for i in range(16)]
        dids = ids.issue_many(seq, "local:game-1", len(eids))
        rows = []
        for i, (eid, did) in enumerate(zip(eids, dids, strict=True)):
            a = names[(r + i) % len(names)]
            rows.append(IssuedDecision(seq + i, did, "local:game-1", eid, "bee", a, actions[a], at + r * 0.01))
        await store.decisions.record(rows, _features(seq, r, names, at + r * 0.01) if FRESH else None)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if not p.name.endswith(".lock"))


async def _run(requests: int) -> None:
    actions = load(ROOT / "examples" / "forest.yaml").types["bee"].actions
    ids = DecisionIds(os.urandom(32))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        wal = Path(str(path) + "-wal")
        store = SqliteStore(path)
        largest = 0
        t0 = time.perf_counter()
        with _Ticker() as held:
            for r in range(requests):  # back to back: the checkpoints must keep up with commits that never pause
                await _write(store, ids, actions, 1, 1000.0 + r * 0.01)
                if r % 100 == 0:
                    largest = max(largest, wal.stat().st_size)
        write_s = time.perf_counter() - t0
        await store.close()
        first = _size(path)
        n = requests * 16
        kind = "fresh decisions with their features" if FRESH else "decisions"
        print(f"{requests} requests of 16 {kind}, back to back: {write_s / requests * 1e6:.0f} us a request to record")
        print(f"  the WAL at most {largest / 1e6:.1f} MB; the loop held at most {held.most * 1000:.2f} ms at a time")
        per = f"{first / n:.0f} bytes a decision, {first / requests:.0f} a request"
        print(f"  the file after them: {first / 1e6:.1f} MB, {per}")

        store = SqliteStore(path)
        with _Ticker() as held:
            t0 = time.perf_counter()
            forgot, _ = await store.prune(1e12)
            prune_s = time.perf_counter() - t0
        print(
            f"prune of {forgot} decisions: {prune_s * 1000:.0f} ms in all, the loop held at most "
            f"{held.most * 1000:.2f} ms at a time"
        )
        await _write(store, ids, actions, requests, 2000.0)
        await store.close()
        again = _size(path)
        print(
            f"the file after the same {requests} requests again: {again / 1e6:.1f} MB ({again / first:.2f} of before)"
        )


class _Ticker:
    """The longest time between two turns of the event loop while the block runs: what other requests wait."""

    def __init__(self) -> None:
        self.most = 0.0
        self._done = False
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        last = time.perf_counter()
        while not self._done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            self.most = max(self.most, now - last)
            last = now

    def __enter__(self) -> _Ticker:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        self._done = True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--fresh", action="store_true", help="every decision fresh: its features kept too")
    args = ap.parse_args()
    global FRESH
    FRESH = args.fresh
    print(cpu_probe())
    asyncio.run(_run(args.requests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
