"""The test suite, N times in a row, while other processes keep every core busy: a suite that passes only on a
quiet machine blocks every landing, so this is how a flaky test is found before CI finds it.

    python bench/suite_under_load.py --runs 5 [--out DIR] [-- pytest args]

The load is bounded: one busy loop a core, each a child of this script, stopped when the runs end (and after
--max-minutes whatever happens). It prints each run's result and time, and exits 1 if any run failed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _burn(until: float) -> None:
    """Spin until the deadline: one core's worth of load, like `stress --cpu 1`."""
    x = 0
    while time.monotonic() < until:
        for i in range(100_000):
            x += i


def main() -> int:
    """Run the suite under load and report each run."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2, help="busy loops (default: one a core)")
    parser.add_argument("--max-minutes", type=float, default=180, help="stop the load after this, whatever happens")
    parser.add_argument("--out", type=Path, help="a folder to keep each run's whole output in (run-N.txt)")
    parser.add_argument("pytest_args", nargs="*", default=["-q", "-p", "no:cacheprovider"])
    args = parser.parse_args()
    until = time.monotonic() + args.max_minutes * 60
    burners = [multiprocessing.Process(target=_burn, args=(until,), daemon=True) for _ in range(args.cores)]
    for b in burners:
        b.start()
    failed = 0
    try:
        for run in range(1, args.runs + 1):
            t0 = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", *args.pytest_args], cwd=ROOT, capture_output=True, text=True
            )
            if args.out:
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / f"run-{run}.txt").write_text(proc.stdout + proc.stderr)
            last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "(no output)"
            print(f"run {run}/{args.runs}: exit {proc.returncode} in {time.monotonic() - t0:.0f} s: {last}", flush=True)
            if proc.returncode != 0:
                failed += 1
                print("\n".join(line for line in proc.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))))
    finally:
        for b in burners:
            b.terminate()
    print(f"{args.runs - failed} of {args.runs} runs passed with {args.cores} busy loops beside them")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
