"""What the store's file costs a decision, and what forgetting old ones (NPCMIND_RETENTION_H) costs the loop.

In-process, the SQLite store as `npcmind serve` opens it: N requests of 16 decisions (ids, entity ids,
actions and labels of the example manifest's bees), one commit each, back to back, with the largest size
of the WAL (the checkpoints must keep up) and the longest time the event loop was held between two of its
turns (a ticker task measures it). Then the file's size a decision, prune of all of them with the loop's
longest hold, and the same N requests again: the file stays the size it was, its free pages reused.

With --fresh every decision is a fresh one (a cache miss), and the store keeps its features as well, as the
service does for the learned cascade (docs/policy.md): world, observation, legal actions, action, confidence.
With --read the features row also keeps what the model read, as the service does for `npcmind replay`
(docs/replay.md): the request's entities as sent, part 5's lines and each entity's context lines (three
neighbours each here), built by the keeper's own read_of; its time a request is printed apart.

Run: python bench/store_bench.py [--requests 20000] [--fresh] [--read]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from npcmind.decide.ids import DecisionIds
from npcmind.decide.prompt import EntityContext, EntityPrompt
from npcmind.decide.read import read_of
from npcmind.manifest import load
from npcmind.protocol.a2g import DecideEntity, DecideRequest
from npcmind.storage.base import DecisionFeatures, IssuedDecision, RequestFeatures, features_row, small_compress
from npcmind.storage.sqlite import SqliteStore
from probe import cpu_probe

ROOT = Path(__file__).resolve().parents[1]


FRESH = False  # --fresh: every decision a cache miss, its features kept too
READ = False  # --read: and what the model read (implies --fresh)
READ_S: list[float] = []  # the keeper's time to build each request's read
ZIP_S: list[float] = []  # and to compress it
ROW_S: list[float] = []  # the features row without it, for a ratio a loaded machine does not change much
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
    f = RequestFeatures("game-1", "sha256:" + "5" * 64, at, WORLD, None, learned)
    if READ:
        batch = _asked(seq, r, names)
        batch.entity_of = {seq + i: f"{28000 + (r * 16 + i) % 500}" for i in range(16)}
        t0 = time.perf_counter()
        f.read = read_of(batch, f)
        READ_S.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        small_compress(f.read)  # as features_row does in the commit
        ZIP_S.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        features_row(RequestFeatures(f.client_id, f.manifest_version, at, WORLD, None, learned))  # without the read
        ROW_S.append(time.perf_counter() - t0)
    return f


def _asked(seq: int, r: int, names: list[str]) -> Any:
    """The batch read_of reads: the request's 16 bees as the game sent them, each with three neighbours."""
    entities = []
    for i in range(16):
        eid = str(28000 + (r * 16 + i) % 500)
        obs = {
            "hp_fraction": 0.333 + i / 100,
            "distance_to_player": 96.4 + i,
            "sees_player": i % 3 > 0,
            "current_action": names[i % len(names)],
        }
        e = DecideEntity(eid, "bee", obs, names, position=[100.0 + i * 7, 200.0 - i * 3])
        near = "; ".join(
            f'bee "{28000 + (r * 16 + i + k) % 500}" d={20 * k} state="alive" action=chase hp_fraction=0.35 '
            f'distance_to_player={90 + k} sees_player=true current_action="chase"'
            for k in range(1, 4)
        )
        ctx = EntityContext([f"nearby: {near}"], [])
        entities.append((i, EntityPrompt(i + 1, e, names, "", "", False, ctx), ""))
    req = DecideRequest("game-1", 7, WORLD, [e.entity for _, e, _ in entities], "forest", None)
    situation = [
        "POPULATION: bee alive=40 seen=52 gone=12; boss alive=1 seen=1 gone=0",
        'OBSERVED: player "p1" state="alive" hp_fraction=0.4 near: bee=6',
    ]
    prompt = SimpleNamespace(mode="numbered", situation=situation)
    session = SimpleNamespace(manifest=SimpleNamespace(file=SimpleNamespace(scopes={"forest": None})))
    return SimpleNamespace(asked=entities, req=req, chain=[], session=session, prompt=prompt, read_at=0)


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
        kind += " and what the model read" if READ else ""
        print(f"{requests} requests of 16 {kind}, back to back: {write_s / requests * 1e6:.0f} us a request to record")
        print(f"  the WAL at most {largest / 1e6:.1f} MB; the loop held at most {held.most * 1000:.2f} ms at a time")
        per = f"{first / n:.0f} bytes a decision, {first / requests:.0f} a request"
        print(f"  the file after them: {first / 1e6:.1f} MB, {per}")
        if READ_S:
            built, zipped = statistics.median(READ_S) * 1e6, statistics.median(ZIP_S) * 1e6
            row = statistics.median(ROW_S) * 1e6
            print(
                f"  what the model read: built in {built:.0f} us a request (keep.py), compressed in {zipped:.0f} us "
                f"(medians): {(built + zipped) / row:.1f}x the features row's {row:.0f} us (encoded and compressed)"
            )

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
    ap.add_argument("--read", action="store_true", help="and what the model read, for replay (implies --fresh)")
    args = ap.parse_args()
    global FRESH, READ
    FRESH = args.fresh or args.read
    READ = args.read
    print(cpu_probe())
    asyncio.run(_run(args.requests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
