"""How the read pace (src/npcmind/providers/pace.py) reads simulated models: reads a part, and the worst part's
lateness against the streaming target (10% of its time + 20 ms), issue 43.

A model writes a 16-part answer at a rate in characters a second after 300 ms, each part of a length drawn from
a range (an enum answer's 14-18 characters, or 12-48), maybe stalling once (1 s at 1 s, or 0.5 s at 3 s), maybe
speeding up 2.5x or slowing to 0.4x at 2 s, its characters reaching the reader one by one or in bursts of 4 or 16
(a server or proxy that buffers). The pace is asked when to read; a read takes every character come by then (or
waits for the next). 20 answers a scenario, a fixed seed. Pure arithmetic: no service, no clock.

Run: python bench/pace_bench.py [--against OTHER_PACE.py]
(another commit's pace: git show ea3eb98:src/npcmind/providers/pace.py > /tmp/pace_ea3eb98.py)
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import importlib.util
import itertools
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RATES = {"5/s": 20, "20/s": 80, "60/s": 240, "100/s": 400}  # tokens a second, as characters (about 4 a token)
SHAPES = ("enum", "mixed", "speedup", "slowdown")
STALLS: dict[str, tuple[tuple[float, float], ...]] = {
    "none": (),
    "1 s at 1 s": ((1.0, 1.0),),
    "0.5 s at 3 s": ((3.0, 0.5),),
}
BURSTS = (1, 4, 16)


def module(path: Path) -> ModuleType:
    """A pace module from a file (this checkout's, or another commit's)."""
    spec = importlib.util.spec_from_file_location(f"pace_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def answer(
    parts: list[int], cps: float, stalls: tuple[tuple[float, float], ...], burst: int, speed: Any
) -> list[float]:
    """When each character of the answer reaches the reader."""
    times: list[float] = []
    t = 0.3
    for _ in range(sum(parts)):
        for at, seconds in stalls:
            if abs(t - at) < 1 / cps:
                t += seconds
        t += 1 / (cps * (speed[1] if speed and t > speed[0] else 1))
        times.append(t)
    return [times[min(len(times) - 1, i // burst * burst + burst - 1)] for i in range(len(times))]


def read(pace_cls: Any, parts: list[int], times: list[float], least: int) -> tuple[list[tuple[float, float]], int]:
    """Each part's (written, read) times, and the reads made. A pace before ``07b3608`` was told the fewest
    characters of a part and where each completed part ended; one since, the call's parts."""
    ends = [(e, times[e - 1]) for e in itertools.accumulate(parts)]
    guessing = "part" in {f.name for f in dataclasses.fields(pace_cls)}
    pace = pace_cls(0.0, least) if guessing else pace_cls(0.0, len(parts))
    now, written, k, out, reads = 0.0, 0, 0, [], 0
    while k < len(ends):
        at = max(pace.next_read(now), now)
        if bisect.bisect_right(times, at) == written:  # nothing came by then: the read wakes with what comes next
            at = times[written]
        now, written, reads = at, bisect.bisect_right(times, at), reads + 1
        pace.written = written
        got = 0
        while k < len(ends) and ends[k][0] <= written:
            out.append((ends[k][1], now))
            k, got = k + 1, got + 1
        if got and guessing:
            pace.completed(ends[k - 1][0], got)
        elif got:
            pace.completed(got)
    return out, reads


def scenario(pace_cls: Any, rate: str, shape: str, stall: str, burst: int) -> tuple[float, float, float, float]:
    """Reads a part, the worst lateness past the target (ms; negative: within it), the mean lateness (ms), the
    last part's mean lateness (ms: how long after the whole answer the batch's last decision is read)."""
    rng = random.Random(f"{rate} {shape} {stall} {burst}")
    speed = (2.0, 2.5) if shape == "speedup" else (2.0, 0.4) if shape == "slowdown" else None
    reads = parts = 0
    worst, late, last = -1e9, 0.0, 0.0
    for _ in range(20):
        lengths = [rng.randint(12, 48) if shape == "mixed" else rng.randint(14, 18) for _ in range(16)]
        times = answer(lengths, RATES[rate], STALLS[stall], burst, speed)
        got, n = read(pace_cls, lengths, times, 12)
        reads, parts = reads + n, parts + len(lengths)
        worst = max(worst, *((r - d) - (0.1 * d + 0.02) for d, r in got))
        late += sum(r - d for d, r in got)
        last += got[-1][1] - got[-1][0]
    return reads / parts, worst * 1000, late / parts * 1000, last / 20 * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", type=Path, help="another pace module to compare with (a file)")
    args = ap.parse_args()
    paces = {"this checkout": module(ROOT / "src" / "npcmind" / "providers" / "pace.py")}
    if args.against:
        paces[str(args.against)] = module(args.against)
    print(
        "| rate | answer | stall | burst | "
        + " | ".join(f"{n}: reads a part, worst past the target, mean late, last part late" for n in paces)
        + " |"
    )
    print("|---|---|---|---|" + "---|" * len(paces))
    summary = {n: [0, 0.0, 0] for n in paces}
    for rate, shape, stall, burst in itertools.product(RATES, SHAPES, STALLS, BURSTS):
        cells = []
        for name, mod in paces.items():
            per, worst, mean, last = scenario(mod.ReadPace, rate, shape, stall, burst)
            s = summary[name]
            s[0] += 1
            s[1] += per
            s[2] += worst > 0
            cells.append(f"{per:.2f}, {worst:+.0f} ms, {mean:.0f} ms, {last:.0f} ms")
        print(f"| {rate} | {shape} | {stall} | {burst} | " + " | ".join(cells) + " |")
    for name, (n, per, over) in summary.items():
        print(f"{name}: {over} of {n} scenarios with a part past its target; {per / n:.2f} reads a part on average")
    return 0


if __name__ == "__main__":
    sys.exit(main())
