"""`npcmind distill` on a store of 100,000 decisions, timed as a user runs it; and the bytes a decision adds.

The store is filled through the store's own API as the service fills it: requests of 16 fresh bee decisions of
the forest manifest (world, observation quantized as the cache key does, legal actions, action, confidence),
a third of them reported. The teacher is the cost bench's: a rule of the situation, a coin toss elsewhere.
Then `npcmind distill --store ... --client ... --out ...` runs in its own process, and its wall time, from
start to the file written, is the figure (target: within a minute on this machine).

--hostile (issue 29, finding 2): two stores, the one above and the same with one session more, whose 160
decisions carry a scope state of 1,024 session scopes of 64 boolean fields each (65,536 fields no manifest
declares). `distill` on each: wall time and peak memory (the process's max RSS), and their ratio (target: at
most 2). Then `npcmind serve --distill-every 0.05` on the hostile store: decide's p50 and p99 (one client,
one request at a time, 16 bees a request, the scripted provider) for --seconds without a round, and again
while the first round's training process runs; the ratio (target: p99 unchanged).

Run: python bench/distill_bench.py [--decisions 100000]
     python bench/distill_bench.py --hostile [--decisions 20000] [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "clients" / "python" / "src")]
sys.path.append(str(ROOT / "bench"))
from decide_bench import wait_up  # noqa: E402
from npcmind.http.server import ServiceProcess, free_port  # noqa: E402
from npcmind.manifest import load  # noqa: E402
from npcmind.storage.base import DecisionFeatures, IssuedDecision, RequestFeatures  # noqa: E402
from npcmind.storage.sqlite import SqliteStore  # noqa: E402
from probe import cpu_probe  # noqa: E402
from support import BEE_OBS, bee, decide_body  # noqa: E402

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


HOSTILE_FIELDS = {f"s{i}_f{j}": (i + j) % 2 == 0 for i in range(1024) for j in range(64)}


async def fill_hostile(path: Path, n: int = 160) -> None:
    """One session's ``n`` decisions, 16 a request, each request's scope state setting 65,536 undeclared fields."""
    manifest = load(FOREST)
    fields = manifest.types["bee"].fields
    rng = random.Random(2)
    store = SqliteStore(path)
    for _ in range(0, n, 16):
        first = await store.decisions.allocate(16)
        world = manifest.world.quantize({"player_hp_fraction": rng.random(), "repellent": False})
        issued, learned = [], []
        for k in range(16):
            obs, action, legal = _decision(rng)
            issued.append(IssuedDecision(first + k, f"h{first + k}", "hostile", f"h{k}", "bee", action, action, 1000.0))
            learned.append(DecisionFeatures(first + k, "bee", None, fields.quantize(obs), None, legal, action, 0.9))
        features = RequestFeatures("bench", manifest.version, 1000.0, world, HOSTILE_FIELDS, learned)
        await store.decisions.record(issued, features)
    await store.close()


async def fill(path: Path, n: int) -> None:
    """``n`` fresh decisions of client bench, 16 a request, a third reported."""
    manifest = load(FOREST)
    fields = manifest.types["bee"].fields
    rng = random.Random(1)
    store = SqliteStore(path)
    for r in range(0, n, 16):
        first = await store.decisions.allocate(min(16, n - r))
        world = manifest.world.quantize({"player_hp_fraction": rng.random(), "repellent": rng.random() < 0.1})
        issued, learned = [], []
        for k in range(min(16, n - r)):
            obs, action, legal = _decision(rng)
            issued.append(IssuedDecision(first + k, f"d{first + k}", "s", f"b{k}", "bee", action, action, 1000.0))
            learned.append(DecisionFeatures(first + k, "bee", None, fields.quantize(obs), None, legal, action, 0.9))
        await store.decisions.record(issued, RequestFeatures("bench", manifest.version, 1000.0, world, None, learned))
        for d in issued[:5]:
            await store.decisions.set_outcome(d.seq, "done", None, 1001.0)
    await store.close()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": ":".join(sys.path[:2])}


def timed_distill(db: Path, out: Path) -> tuple[float, float, str]:
    """`npcmind distill` on the store in its own process: wall seconds, peak RSS in MB, and what it printed."""
    cmd = [sys.executable, "-m", "npcmind.cli", "distill", "--store", f"sqlite:///{db}", "--client", "bench",
           "--out", str(out), "--manifest", str(FOREST)]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env())
    assert proc.stdout is not None
    printed = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"distill exited {proc.returncode}: {printed}")
    return took, usage.ru_maxrss / 1024, printed


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (the service's training process, while a round runs)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ours = int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid
            if ours and b"spawn_main" in (stat.parent / "cmdline").read_bytes():  # not the resource tracker
                out.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _latencies(url: str, seconds: float | None, while_: Any = None) -> list[float]:
    """decide latencies in ms, one request at a time: for ``seconds``, or while ``while_()`` holds."""
    bodies = [
        decide_body(*[bee(f"b{r}.{i}", observation={**BEE_OBS, "hp_fraction": 0.05 * i, "distance_to_player": 10.0 * r})
                      for i in range(16)], client_id="bench")
        for r in range(30)
    ]  # fmt: skip
    out: list[float] = []
    end = time.monotonic() + (seconds or 0)
    with httpx.Client(base_url=url, timeout=60) as http:
        while (while_() if while_ is not None else time.monotonic() < end) or len(out) < 20:
            t0 = time.perf_counter()
            assert http.post("/v1/decide", json=bodies[len(out) % len(bodies)]).status_code == 200
            out.append((time.perf_counter() - t0) * 1000)
    return out


def _pct(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))]


def serving(db: Path, seconds: float) -> None:
    """decide's p50/p99 on `serve --distill-every 0.05` over the hostile store: without, then during, a round."""
    py, pp = sys.executable, free_port()
    provider = subprocess.Popen([py, "-m", "npcmind.cli", "scripted-provider", "--port", str(pp)],
                                stdout=subprocess.DEVNULL, env=_env())  # fmt: skip
    try:
        wait_up(f"http://127.0.0.1:{pp}/_requests", provider)
        args = ["--manifest", str(FOREST), "--store", f"sqlite:///{db}", "--provider", "openai", "--base-url",
                f"http://127.0.0.1:{pp}/v1", "--model", "scripted", "--distill-every", "0.05"]  # fmt: skip
        service = ServiceProcess(args, env=_env())
        try:
            pid = service.proc.pid
            quiet_end = time.monotonic() + seconds  # the first round comes a minute after start: after these
            quiet = _latencies(service.url, None, lambda: not _children(pid) and time.monotonic() < quiet_end)
            print(f"waiting for the first round (a minute after start) after {len(quiet)} requests without one")
            while not _children(pid):
                _latencies(service.url, 0.5)
            t0 = time.monotonic()
            busy = _latencies(service.url, None, lambda: bool(_children(pid)))
            took = time.monotonic() - t0
        finally:
            service.stop()
    finally:
        provider.terminate()
        provider.wait()
    q50, q99, b50, b99 = _pct(quiet, 0.5), _pct(quiet, 0.99), _pct(busy, 0.5), _pct(busy, 0.99)
    print(f"decide without a round: {len(quiet)} requests, p50 {q50:.1f} ms, p99 {q99:.1f} ms, max {max(quiet):.1f} ms")
    print(f"decide during the round ({took:.1f} s of training process): {len(busy)} requests, p50 {b50:.1f} ms, "
          f"p99 {b99:.1f} ms, max {max(busy):.1f} ms")  # fmt: skip
    print(f"p99 during / without a round: {b99 / q99:.2f}x (target: unchanged); p50 {b50 / q50:.2f}x")


def hostile(decisions: int, seconds: float) -> int:
    """Finding 2 of issue 29: distill on a clean and a hostile store, then serving while a round runs."""
    tmp = Path(tempfile.mkdtemp(prefix="npcmind-distill-hostile-"))
    clean, bad = tmp / "clean.db", tmp / "hostile.db"
    asyncio.run(fill(clean, decisions))
    shutil.copy(clean, bad)
    asyncio.run(fill_hostile(bad))
    print(f"stores: {decisions:,} decisions; the hostile one 160 more, of one session setting 65,536 scope fields")
    (ct, cm, _), (ht, hm, printed) = timed_distill(clean, tmp / "c.json"), timed_distill(bad, tmp / "h.json")
    print(printed, end="")
    print(f"distill clean:   {ct:.1f} s, peak {cm:.0f} MB")
    print(f"distill hostile: {ht:.1f} s, peak {hm:.0f} MB")
    print(f"hostile / clean: time {ht / ct:.2f}x, memory {hm / cm:.2f}x (target: at most 2x each)")
    serving(bad, seconds)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--decisions", type=int, default=None, help="100,000; 20,000 with --hostile")
    ap.add_argument("--hostile", action="store_true", help="issue 29 finding 2: a hostile store, and serving")
    ap.add_argument("--seconds", type=float, default=20.0, help="--hostile: decide without a round, this long")
    args = ap.parse_args()
    print(cpu_probe())
    if args.hostile:
        return hostile(args.decisions or 20_000, args.seconds)
    args.decisions = args.decisions or 100_000
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
