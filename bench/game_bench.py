"""A game's frame cost against a real service: Tick() times of the console game of tests/test_csharp.py or
tests/test_unreal.py (20 drones at 60 Hz: clients/csharp/Examples~/Console/Game.cs, or the C++ core's
clients/unreal/Examples/Console/Game.cpp) per phase, over phases long enough for a p99.

The live test drives the game (service, scripted provider, faults, a stopped service) and asserts the protocol;
this bench runs that very test with longer phases (NPCMIND_GAME_PHASE_S) and prints its Tick() figures, so the
figure and the test's checks come from one run and one driver. A phase of S seconds is about 60 * S frames: at
the default 20 s, a p99 is the 12th slowest of about 1,200 frames.

Run: python bench/game_bench.py [--game csharp|cpp] [--phase-s 20] [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from probe import cpu_probe

ROOT = Path(__file__).resolve().parents[1]
SHARED = "_game_of_20_drones_at_60_hz_keeps_the_protocol_through_faults_and_a_stopped_service"
TESTS = {"csharp": f"tests/test_csharp.py::test_a_csharp{SHARED}", "cpp": f"tests/test_unreal.py::test_a_cpp{SHARED}"}
NAMES = {"csharp": "C#", "cpp": "C++"}
PHASES = ["start", "ai", "provider-fault", "recovered", "service-stopped"]


def one_run(test: str, phase_s: float) -> dict[str, dict[str, float]]:
    """The game's report of one run of the live test (which must pass: a failed run is no figure)."""
    env = {**os.environ, "NPCMIND_GAME_PHASE_S": str(phase_s)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "--timeout", "600", test]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("game report: ")]
    if done.returncode != 0 or not lines:
        sys.exit(f"the live test did not pass (exit {done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}")
    report: dict[str, dict[str, float]] = json.loads(lines[-1].removeprefix("game report: "))
    return report


def main() -> None:
    """Print the Tick() percentiles of each phase, a row per run."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--game", choices=sorted(TESTS), default="csharp", help="which port's console game")
    ap.add_argument("--phase-s", type=float, default=20.0, help="seconds a phase (the test's own is 4)")
    ap.add_argument("--runs", type=int, default=1, help="runs of the live test, one after the other")
    args = ap.parse_args()
    print(cpu_probe())
    print(f"Tick() of the {NAMES[args.game]} console game, 20 drones at 60 Hz, phases of {args.phase_s:g} s (ms)")
    print("wall: Tick()'s elapsed time; CPU: its thread's CPU time (C++ only: without a loaded machine's preemptions)")
    head = f"{'run':>3}  {'phase':<16}{'frames':>7}{'p50':>9}{'p99':>9}{'max':>9}{'CPU p99':>9}{'CPU max':>9}"
    print(f"{head}  {'AI':>6}{'native':>8}")
    for run in range(1, args.runs + 1):
        load = os.getloadavg()[0]
        report = one_run(TESTS[args.game], args.phase_s)
        for name in PHASES:
            p = report[name]
            t = p["tick_ms"]
            cpu = p.get("tick_cpu_ms")
            cells = f"{cpu['p99']:>9.3f}{cpu['max']:>9.3f}" if cpu else f"{'-':>9}{'-':>9}"
            print(
                f"{run:>3}  {name:<16}{p['frames']:>7}{t['p50']:>9.3f}{t['p99']:>9.3f}{t['max']:>9.3f}{cells}"
                f"  {p['ai']:>6}{p['native']:>8}"
            )
        now = time.strftime("%H:%M UTC", time.gmtime())
        print(f"     (load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; {now})")


if __name__ == "__main__":
    main()
