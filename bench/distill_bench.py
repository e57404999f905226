"""`npcmind distill` on a store of 100,000 decisions, timed as a user runs it; and the bytes a decision adds.

The store is filled through the store's own API as the service fills it: requests of 16 fresh bee decisions of
the forest manifest (world, observation quantized as the cache key does, legal actions, action, confidence),
a third of them reported. The teacher is the cost bench's: a rule of the situation, a coin toss elsewhere.
Then `npcmind distill --store ... --client ... --out ...` runs in its own process, and its wall time, from
start to the file written, is the figure (target: within a minute on this machine).

Run: python bench/distill_bench.py [--decisions 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "clients" / "python" / "src")]
sys.path.append(str(ROOT / "bench"))
from npcmind.manifest import load  # noqa: E402
from npcmind.storage.base import DecisionFeatures, IssuedDecision, RequestFeatures  # noqa: E402
from npcmind.storage.sqlite import SqliteStore  # noqa: E402
from probe import cpu_probe  # noqa: E402

FOREST = ROOT / "examples" / "forest.yaml"
BEES = ["idle", "wander", "chase", "flee"]


def _decision(rng: random.Random) -> tuple[dict[str, object], str, list[str]]:
    obs = {"hp_fraction": rng.random(), "distance_to_player": rng.random() * 300, "sees_player": rng.random() < 0.8,
           "current_action": rng.choice(BEES)}  # fmt: skip
    if obs["hp_fraction"] < 0.3:  # type: ignore[operator]
        action = "flee"
    elif not obs["sees_player"]:
        action = "wander"
    elif obs["distance_to_player"] <= 60:  # type: ignore[operator]
        action = "chase"
    else:
        action = rng.choice(["chase", "idle"])
    return obs, action, BEES if obs["sees_player"] else ["idle", "wander", "flee"]


async def fill(path: Path, n: int) -> None:
    """``n`` fresh decisions of client bench, 16 a request, a third reported."""
    manifest = load(FOREST)
    fields = manifest.types["bee"].fields
    rng = random.Random(1)
    store = SqliteStore(path)
    for r in range(0, n, 16):
        first = await store.allocate(min(16, n - r))
        world = manifest.world.quantize({"player_hp_fraction": rng.random(), "repellent": rng.random() < 0.1})
        issued, learned = [], []
        for k in range(min(16, n - r)):
            obs, action, legal = _decision(rng)
            issued.append(IssuedDecision(first + k, f"d{first + k}", "s", f"b{k}", "bee", action, action, 1000.0))
            learned.append(DecisionFeatures(first + k, "bee", None, fields.quantize(obs), None, legal, action, 0.9))
        await store.record_decisions(issued, RequestFeatures("bench", manifest.version, 1000.0, world, None, learned))
        for d in issued[:5]:
            await store.set_outcome(d.seq, "done", None, 1001.0)
    await store.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--decisions", type=int, default=100_000)
    args = ap.parse_args()
    print(cpu_probe())
    tmp = Path(tempfile.mkdtemp(prefix="npcmind-distill-bench-"))
    db = tmp / "store.db"
    t0 = time.perf_counter()
    asyncio.run(fill(db, args.decisions))
    con = sqlite3.connect(db)
    (size,) = con.execute("SELECT SUM(LENGTH(data)) FROM features").fetchone()
    rows = args.decisions
    con.close()
    print(f"filled {rows:,} decisions in {time.perf_counter() - t0:.1f} s; features {size / rows:.0f} bytes a decision")
    out = tmp / "policy.json"
    cmd = [sys.executable, "-m", "npcmind.cli", "distill", "--store", f"sqlite:///{db}", "--client", "bench",
           "--out", str(out)]  # fmt: skip
    t1 = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": ":".join(sys.path[:2])}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    took = time.perf_counter() - t1
    print(done.stdout, end="")
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        return 1
    print(f"npcmind distill on {rows:,} decisions: {took:.1f} s wall, from start to {out.name} written (target: 60 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
