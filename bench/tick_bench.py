"""The SDK's own cost a frame: tick() with 1,000 tracked entities, in Python, TypeScript, C# and C++, one table.

steady: a tick with nothing due (every entity decided, no refresh, no telemetry yet): what every frame costs.
wave:   a tick where every entity is due at once (a refresh wave, or a new epoch): the scheduler sorts the
        1,000, picks 64 (4 requests in flight of 16) and builds and encodes those requests.
Python: `DecideClient.tick()` for steady (the real client: transport outcomes drained, then the scheduler);
the wave is the scheduler's tick plus the JSON encoding DecideClient does on the game's thread (the worker
threads' HTTP is left out: it does not run on the game's thread). TypeScript: clients/typescript/bench/tick.mjs
(run with node when it is there), which prints one JSON line of the same shape as the Python row. C#:
clients/csharp/Examples~/Bench/Tick.cs, built by clients/csharp/Build~/build.sh and run with mono when they are there.
C++: clients/unreal/Examples/Bench/Tick.cpp (the Unreal plugin's core), built with CMake and g++ (Release).

Run: python bench/tick_bench.py [--ticks 5000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from npcmind_client import DecideClient, DecideOptions  # noqa: E402
from npcmind_client.scheduler import Scheduler  # noqa: E402
from npcmind_client.transport import encode  # noqa: E402
from probe import cpu_probe  # noqa: E402

N = 1000
OBS = {"hp_fraction": 0.5, "distance_to_player": 40.0, "sees_player": True, "current_action": "wander"}
LEGAL = ["idle", "wander", "chase", "flee"]
MANIFEST = {"types": {"bee": {"refresh_ms": 4000, "ttl_ms": 12000}}}


def decided(s: Scheduler, now: float) -> None:
    """Send what is due and answer every decide request with an AI decision, until nothing is due."""
    while requests := s.tick(now):
        for r in requests:
            if r.path == "/v1/decide" and r.body is not None:
                decisions = [
                    {"source": "AI", "id": e["id"], "action": "flee", "label": "Flee", "confidence": 0.9,
                     "ttl_ms": 12000, "decision_id": f"d-{e['id']}", "cached": False}
                    for e in r.body["entities"]
                ]  # fmt: skip
                body: Any = {"a2g": "0.1", "epoch": 0, "latency_ms": 1, "decisions": decisions}
            else:
                body = {"manifest": MANIFEST} if r.path == "/v1/manifest" else {}
            s.answer(r.ref, 200, body, {}, now)


def percentiles(samples: list[float]) -> tuple[float, float]:
    """p50 and p99, in ms."""
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.99) - 1] * 1000


def python_row(ticks: int) -> dict[str, Any]:
    """The Python SDK's figures, in the shape tick.mjs prints."""
    clock = [0.0]
    client = DecideClient("http://127.0.0.1:9", "bench", options=DecideOptions(workers=4), clock=lambda: clock[0])
    s = client._scheduler
    s.timings.known = True  # as if the manifest came: nothing but the entities is asked
    for i in range(N):
        client.track(f"e{i}", "bee", OBS, LEGAL, position=[float(i), 0.0])
    decided(s, 0.0)
    clock[0] = 0.1  # within the refresh and the telemetry period: nothing due
    steady = []
    for _ in range(ticks):
        t0 = time.perf_counter()
        client.tick()
        steady.append(time.perf_counter() - t0)
    assert s.in_flight() == 0, "the steady state sent a request"
    client.close()
    wave = []
    for k in range(max(ticks // 10, 50)):
        now = 5000.0 + k  # every entity's refresh (4000 ms) is past
        for e in s.entities.values():
            e.due = now
        t0 = time.perf_counter()
        for r in s.tick(now):
            if r.body is not None:
                encode(r.body)
        wave.append(time.perf_counter() - t0)
        for ref in [r for r, sent in s._open.items() if sent.kind == "decide"]:
            s.answer(ref, 200, {"a2g": "0.1", "epoch": 0, "latency_ms": 1, "decisions": []}, {}, now)
        for ref in list(s._open):
            s.answer(ref, 200, {}, {}, now)
    sp50, sp99 = percentiles(steady)
    wp50, wp99 = percentiles(wave)
    return {"lang": "python", "entities": N, "steady_p50_ms": sp50, "steady_p99_ms": sp99,
            "wave_p50_ms": wp50, "wave_p99_ms": wp99}  # fmt: skip


def typescript_row() -> dict[str, Any] | str:
    """tick.mjs's line, or why there is none."""
    script = ROOT / "clients" / "typescript" / "bench" / "tick.mjs"
    node = shutil.which("node")
    if not script.exists() or node is None:
        return f"not run: {script.relative_to(ROOT)} or node is missing"
    ran = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=600, cwd=script.parent.parent)
    lines = [line for line in ran.stdout.splitlines() if line.startswith("{")]
    if ran.returncode != 0 or not lines:
        return f"not run: tick.mjs failed ({ran.stderr.strip()[-300:]})"
    return dict(json.loads(lines[-1]))


def csharp_row() -> dict[str, Any] | str:
    """The C# bench's line (built here with build.sh), or why there is none."""
    package = ROOT / "clients" / "csharp"
    if shutil.which("mcs") is None or shutil.which("mono") is None:
        return "not run: mcs or mono is missing (Debian: mono-devel)"
    built = subprocess.run([str(package / "Build~" / "build.sh"), "build"], capture_output=True, text=True, timeout=600)
    if built.returncode != 0:
        return f"not run: build.sh failed ({built.stderr.strip()[-300:]})"
    ran = subprocess.run(
        ["mono", str(package / "Build~" / "out" / "NpcMindTickBench.exe")], capture_output=True, text=True, timeout=600
    )
    lines = [line for line in ran.stdout.splitlines() if line.startswith("{")]
    if ran.returncode != 0 or not lines:
        return f"not run: NpcMindTickBench.exe failed ({ran.stderr.strip()[-300:]})"
    return dict(json.loads(lines[-1]))


def cpp_row() -> dict[str, Any] | str:
    """The C++ core's line (clients/unreal/Examples/Bench/Tick.cpp, built here with CMake and g++), or why none."""
    plugin = ROOT / "clients" / "unreal"
    out = plugin / "build" / "bench"
    if shutil.which("cmake") is None or shutil.which("g++") is None:
        return "not run: cmake or g++ is missing (Debian: cmake g++)"
    for step in (["cmake", "-S", str(plugin), "-B", str(out), "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CXX_COMPILER=g++"],
                 ["cmake", "--build", str(out), "-j2", "--target", "npcmind_tick_bench"]):  # fmt: skip
        built = subprocess.run(step, capture_output=True, text=True, timeout=1200)
        if built.returncode != 0:
            return f"not run: the CMake build failed ({(built.stdout + built.stderr).strip()[-300:]})"
    ran = subprocess.run([str(out / "npcmind_tick_bench")], capture_output=True, text=True, timeout=600)
    lines = [line for line in ran.stdout.splitlines() if line.startswith("{")]
    if ran.returncode != 0 or not lines:
        return f"not run: npcmind_tick_bench failed ({ran.stderr.strip()[-300:]})"
    return dict(json.loads(lines[-1]))


def main() -> None:
    """Print the probe, then one table of the three languages."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=5000)
    args = parser.parse_args()
    print(cpu_probe())
    rows: list[tuple[str, dict[str, Any] | str]] = [
        ("python", python_row(args.ticks)),
        ("typescript", typescript_row()),
        ("csharp", csharp_row()),
        ("cpp", cpp_row()),
    ]
    print(f"tick() with {N} tracked entities (ms)")
    print(f"{'SDK':<12}{'steady p50':>12}{'steady p99':>12}{'wave p50':>12}{'wave p99':>12}")
    for lang, row in rows:
        if isinstance(row, str):
            print(f"{lang:<12}{row}")
            continue
        cells = "".join(f"{row[k]:>12.3f}" for k in ("steady_p50_ms", "steady_p99_ms", "wave_p50_ms", "wave_p99_ms"))
        print(f"{row['lang']:<12}{cells}")
    for _, row in rows:
        if not isinstance(row, str):
            print(json.dumps(row))


if __name__ == "__main__":
    main()
