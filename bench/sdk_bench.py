"""What the reference decision SDK costs a game frame: `track()` for every entity, then `tick()`.

Only those calls are timed, not the game's building of what each entity sees.

A game calls both on its own thread every frame, so their cost comes out of the frame budget (16.7 ms
at 60 fps). The service runs in its own process (`npcmind serve`, the scripted provider behind it), so
the figures are the client's own work: scheduling, building requests, applying answers, telemetry.
The game's clock advances 1/60 s a frame; bees spread out so that each is asked on its refresh and the
population changes once a second (one bee leaves, one comes).

Run: python bench/sdk_bench.py [--frames 600]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
from npcmind.http.server import ServiceProcess, free_port  # noqa: E402
from npcmind.sdk import DecideClient, DecideOptions  # noqa: E402
from probe import cpu_probe  # noqa: E402

FOREST = ROOT / "examples" / "forest.yaml"
LEGAL = ["idle", "wander", "chase", "flee"]


class Clock:
    """The game's clock: a frame is 1/60 s, whatever the machine does."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def frames(url: str, n: int, count: int) -> tuple[list[float], DecideClient]:
    clock = Clock()
    world = {"player_hp_fraction": 0.5, "repellent": False}
    c = DecideClient(url, "sdk-bench", options=DecideOptions(world=world, epoch=1), clock=clock)
    costs = []
    born = n
    alive = [f"b{i}" for i in range(n)]
    for f in range(count):
        seen = [  # the game's own work: what each bee sees this frame (not timed)
            (eid, {"hp_fraction": 0.5, "distance_to_player": float((k + f) % 100 * 10), "sees_player": True,
                   "current_action": "chase"}, [k * 40.0, (k // 25) * 40.0])
            for k, eid in enumerate(alive)
        ]  # fmt: skip
        t0 = time.perf_counter()
        for eid, obs, pos in seen:
            c.track(eid, "bee", obs, LEGAL, position=pos)
        c.observe("hero", "player", {"hp_fraction": 0.5}, position=[0.0, 0.0])
        c.tick()
        costs.append(time.perf_counter() - t0)
        clock.t += 1 / 60
        if f % 60 == 59:  # once a second one bee dies and another comes
            c.untrack(alive.pop(0))
            alive.append(f"b{born}")
            born += 1
        time.sleep(0.002)  # let the workers and the service run, as the rest of a frame would
    c.wait()
    return costs, c


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=600)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="npcmind-sdk-bench-"))
    pp = free_port()
    provider = subprocess.Popen(
        [sys.executable, "-m", "npcmind.cli", "scripted-provider", "--port", str(pp)], stdout=subprocess.DEVNULL
    )
    service = None
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{pp}/_requests", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise SystemExit("the scripted provider did not start") from None
                time.sleep(0.1)
        args_ = ["--manifest", str(FOREST), "--store", f"sqlite:///{tmp}/sdk.db", "--provider", "openai"]
        service = ServiceProcess([*args_, "--base-url", f"http://127.0.0.1:{pp}/v1", "--model", "scripted"])
        rows = []
        for n in (16, 100, 1000):
            costs, c = frames(service.url, n, args.frames)
            s = c.stats
            rows.append((n, costs, s))
            c.close()
    finally:
        if service is not None:
            service.stop()
        provider.terminate()
        provider.wait(timeout=10)
    print(cpu_probe())
    print(f"Python {sys.version.split()[0]}; {args.frames} frames of 1/60 s game time; track() every entity + tick()")
    head = f"{'entities':>8} {'frame p50 ms':>13} {'p99 ms':>8} {'max ms':>8}"
    print(f"{head} {'requests':>9} {'AI':>7} {'fallbacks':>10}")
    for n, costs, s in rows:
        ms = sorted(x * 1000 for x in costs)
        fallbacks = sum(s.fallbacks.values())
        print(
            f"{n:>8} {statistics.median(ms):>13.3f} {ms[int(len(ms) * 0.99)]:>8.3f} {ms[-1]:>8.3f} "
            f"{s.requests:>9} {s.ai:>7} {fallbacks:>10}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
