"""How fast this machine runs Python right now: shared 2-core machines vary, so every bench prints it."""

from __future__ import annotations

import time


def cpu_probe() -> str:
    """Seconds for ten million integer additions in a Python loop (about 0.6 s on a quiet core here)."""
    t0 = time.perf_counter()
    s = 0
    for i in range(10_000_000):
        s += i
    return f"CPU probe: 10M Python additions in {time.perf_counter() - t0:.2f} s"
