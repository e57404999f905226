"""What keeping a streamed line costs the SQLite store: a commit of its own, or an append to the pending file.

A streamed batch of 16 gives a line an entity, each kept before it goes out; the batch's last line comes with
the features its fresh decisions were made from. In one process, the store as `npcmind serve` opens it, each
line's `record` is timed with the thread's CPU clock after the process slept ``--gap`` seconds (a model writes a
part every 50-300 ms: the store's code runs cold, as in the service), the two ways alternated batch by batch:
- commit: every line its own SQLite transaction (WAL, synchronous=NORMAL), as before the pending file;
- pending: the lines before the last appended to `<store>.pending`, committed with the last (the service's way).
Also the WAL's bytes a batch (no checkpoint runs within the bench's commits).

Run: python bench/pending_bench.py [--batches 12] [--gap 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "bench")]
from npcmind.storage.base import DecisionFeatures, IssuedDecision, RequestFeatures  # noqa: E402
from npcmind.storage.sqlite import SqliteStore  # noqa: E402
from probe import cpu_probe  # noqa: E402

N = 16
OBS = {"hp_fraction": 0.5, "distance_to_player": 12.0, "sees_player": True, "current_action": "idle"}


def _row(seq: int, k: int) -> IssuedDecision:
    return IssuedDecision(seq, f"d_{seq:012d}_abcdefgh", "sess-0123456789", f"bee-{k}", "bee", "chase", "Chase", 1e9)


def _features(first: int) -> RequestFeatures:
    made = [DecisionFeatures(first + k, "bee", None, OBS, None, ["idle", "chase"], "chase", 0.9) for k in range(N)]
    return RequestFeatures("game-1", "sha256:m", 1e9, {"player_hp_fraction": 0.5}, None, made)


async def _batch(store: SqliteStore, gap: float) -> tuple[list[float], float, int]:
    """One batch of 16 lines: each line's CPU (us), the last line's, and the WAL's growth in bytes."""
    wal = Path(store.path + "-wal")
    before = wal.stat().st_size if wal.exists() else 0
    first = await store.decisions.allocate(N)
    lines: list[float] = []
    last = 0.0
    for k in range(N):
        await asyncio.sleep(gap)
        t = time.thread_time_ns()
        if k < N - 1:
            await store.decisions.record([_row(first + k, k)], more=True)
            lines.append((time.thread_time_ns() - t) / 1000)
        else:
            await store.decisions.record([_row(first + k, k)], _features(first))
            last = (time.thread_time_ns() - t) / 1000
    return lines, last, wal.stat().st_size - before


async def _run(batches: int, gap: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stores = {"commit": SqliteStore(Path(tmp) / "commit.db"), "pending": SqliteStore(Path(tmp) / "pending.db")}
        stores["commit"].decisions._file = None  # every line its own commit, as before the pending file
        got: dict[str, list[tuple[list[float], float, int]]] = {name: [] for name in stores}
        try:
            for store in stores.values():  # warm: the statements prepared, the files there
                await _batch(store, 0)
            for b in range(batches):
                for name in stores if b % 2 == 0 else reversed(stores):
                    got[name].append(await _batch(stores[name], gap))
        finally:
            for store in stores.values():
                await store.close()
    print(f"{batches} batches of {N} lines each way, alternated; {gap * 1000:.0f} ms asleep before each line")
    print("way       a line before the last, us (median)   the last, us   a batch's lines, ms   WAL a batch")
    for name, runs in got.items():
        lines = [x for r in runs for x in r[0]]
        per_batch = statistics.median(sum(r[0]) + r[1] for r in runs) / 1000
        print(
            f"{name:9s} {statistics.median(lines):38.1f} {statistics.median(r[1] for r in runs):14.1f} "
            f"{per_batch:21.2f} {statistics.median(r[2] for r in runs) / 1024:9.1f} KiB"
        )


def main() -> int:
    """Print the two ways' CPU a line and a batch."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--gap", type=float, default=0.1, help="seconds asleep before each line")
    args = ap.parse_args()
    print(cpu_probe())
    asyncio.run(_run(args.batches, args.gap))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
