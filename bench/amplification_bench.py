"""The standing harness of issue 39: every input surface fed hostile inputs of size n, 8n and 64n, its cost read.

No input may cost the others: its cost must be linear in its size and capped. Each module of `bench/amplify/`
lists the surfaces its owner keeps (the service's requests, the providers' answers, the store read back, the
dialogue rules, each SDK's reads); this feeds each one and prints one row a surface: CPU seconds and memory at
each size, the growth of the last step (8 is linear), and a flag:

- `SUPERLINEAR`: the last step grew more than 2.5x faster than its input (time or memory), above a noise floor;
- `NOT REFUSED`: an input past the surface's stated cap was read anyway;
- `HOLDS`: one input held the process (the event loop, the game's frame) for more than 250 ms; a surface whose
  cost is spread over many turns of the loop (a stream read as it comes) is judged on its growth alone.

Run it before every stop that touches an input path; its table goes to docs/bench.md.

Run: .venv/bin/python bench/amplification_bench.py [--only NAME] [--repeat 3] [--markdown]
"""

from __future__ import annotations

import argparse
import importlib
import math
import pkgutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import amplify
from amplify.core import Cost, Surface

FLOOR_S = 0.02  # below this a step's growth is noise, not a finding
FLOOR_BYTES = 4 << 20
HOLD_S = 0.25


def surfaces(only: str | None) -> list[Surface]:
    """Every module's SURFACES, in module order; ``only`` keeps the names that contain it."""
    found: list[Surface] = []
    for mod in sorted(pkgutil.iter_modules(amplify.__path__), key=lambda m: m.name):
        if mod.name == "core":
            continue
        found += getattr(importlib.import_module(f"amplify.{mod.name}"), "SURFACES", [])
    return [s for s in found if only is None or only.lower() in s.name.lower()]


def measure(surface: Surface, repeat: int) -> list[tuple[int, Cost]]:
    """Each size's cost: the least time and the most memory of ``repeat`` feeds (time noise only adds)."""
    rows: list[tuple[int, Cost]] = []
    with surface.start() as feed:
        for step in surface.steps:
            n = surface.base * step
            costs = [feed(n) for _ in range(repeat)]
            best = min(costs, key=lambda c: c.seconds)
            rows.append((n, Cost(best.seconds, max(c.bytes for c in costs), best.refused, best.note)))
    return rows


def flags(surface: Surface, rows: list[tuple[int, Cost]]) -> list[str]:
    """What is wrong with a surface's costs, if anything."""
    out: list[str] = []
    (n1, a), (n2, b) = rows[-2], rows[-1]
    grow = n2 / n1
    if b.seconds > FLOOR_S and b.seconds > 2.5 * grow * max(a.seconds, FLOOR_S / grow):
        out.append("SUPERLINEAR time")
    if b.bytes > FLOOR_BYTES and b.bytes > 2.5 * grow * max(a.bytes, FLOOR_BYTES / grow):
        out.append("SUPERLINEAR memory")
    if surface.cap_at is not None and any(n > surface.cap_at and not c.refused for n, c in rows):
        out.append("NOT REFUSED")
    if not surface.spread and any(c.seconds > HOLD_S for _, c in rows):
        out.append("HOLDS")
    return out


def _growth(rows: list[tuple[int, Cost]]) -> str:
    (n1, a), (n2, b) = rows[-2], rows[-1]
    if a.seconds <= 0 or b.seconds <= 0:
        return "-"
    return f"{b.seconds / a.seconds:.1f}x (n^{math.log(b.seconds / a.seconds) / math.log(n2 / n1):.2f})"


def _ms(c: Cost) -> str:
    return f"{c.seconds * 1000:,.1f} ms / {c.bytes / 1e6:,.1f} MB" + (" refused" if c.refused else "")


def main() -> int:
    """Feed every surface and print the table; exit 1 when any surface is flagged."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="keep the surfaces whose name contains this")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--markdown", action="store_true", help="print the table for docs/bench.md")
    args = ap.parse_args()
    flagged = 0
    if args.markdown:
        print("| surface | cap | n | 1 × n | 8 × n | 64 × n | last step | flag |")
        print("|---|---|---|---|---|---|---|---|")
    for surface in surfaces(args.only):
        try:
            rows = measure(surface, args.repeat)
        except Exception as exc:  # a surface that crashes is a finding, and the others still run
            flagged += 1
            print(f"{surface.name}: CRASHED {type(exc).__name__}: {exc}"[:300], flush=True)
            continue
        said = flags(surface, rows)
        flagged += bool(said)
        cells = [_ms(c) for _, c in rows]
        if args.markdown:
            n = f"{surface.base:,} {surface.unit}"
            verdict = ", ".join(said) or "ok"
            print(f"| {surface.name} | {surface.cap} | {n} | {' | '.join(cells)} | {_growth(rows)} | {verdict} |")
        else:
            print(f"{surface.name}  [{surface.cap}]", flush=True)
            for (n, c), cell in zip(rows, cells, strict=True):
                print(f"    {n:>12,} {surface.unit:<10} {cell}  {c.note}")
            print(f"    last step {_growth(rows)}  {', '.join(said) or 'ok'}", flush=True)
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
