"""Where a decide request's CPU goes, stage by stage, on both sides of bench/ab.py (issue 43).

Each side serves the cached and the uncached load of bench/ab.py while py-spy samples the service (`pip install
py-spy`); each sample is given to the innermost stage on its stack (a function of the side's own code, matched
by name: the restructuring renamed them, so each stage lists both names), and a stage's share of the samples is
its share of the service CPU a request that the same run measured. One round a side: a profile, not a ratio
(bench/ab.py gives those).

Run: python bench/ab_stages.py [--seconds 8] [--old 90fae6b] [--new COMMIT]
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab import BASELINE, ROOT, Loads, Service, Side, built, free_port, wait_up, wrk

# stage: the functions (module path fragment and name) whose samples are the stage's, innermost wins
STAGES: dict[str, list[str]] = {
    "parse (body, JSON, schema)": ["http/app.py:read_session_body", "protocol/validate.py:parse"],
    "validate (manifest rules)": ["decide/validate.py:check_request"],
    "situation (scene, memory)": ["situation.py:SceneSituation.", "context/hub.py:ContextHub."],
    "prompt (render)": ["decide/prompt.py:PromptBuilder.", "decide/pipeline.py:DecidePipeline._prompt"],
    "tokens (budget)": ["providers/tokens.py:count"],
    "cache (keys, lookup)": ["decide/prompt.py:Prompt.cache_key", "DecidePipeline._lookup", "MemoryShared.cached"],
    "provider call": ["providers/", "decide/calls.py:", "DecidePipeline._call"],
    "keep (ids, store, memory)": [
        "decide/keep.py:",
        "decide/ids.py:",
        "storage/",
        "decide/read.py:",
        "DecidePipeline._remember",
        "local/pipeline.py:",
    ],
    "pipeline (the rest of decide)": ["decide/pipeline.py:"],
    "respond (encode, send)": ["http/app.py:json_response", "litestar/response/"],
}
JSON = {"content-type": "application/json"}
FRAME = re.compile(r"(\S+) \((.*?):\d+\)")
PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")  # on PATH, or beside this Python


def stage_of(stack: str) -> str:
    """The innermost stage on a sampled stack (py-spy's raw format), else the HTTP stack and the event loop."""
    found = "http and event loop"
    for frame in stack.split(";"):
        m = FRAME.match(frame)
        if not m:
            continue
        where = re.sub(r".*/(site-packages|src)/", "", m.group(2)) + ":" + m.group(1)
        for stage, marks in STAGES.items():
            if any(mark in where for mark in marks):
                found = stage
                break
    return found


def stages(raw: Path) -> dict[str, float]:
    """Each stage's share of the samples of a py-spy raw profile."""
    count: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if n.isdigit():
            count[stage_of(stack)] += int(n)
    total = sum(count.values()) or 1
    return {k: v / total for k, v in count.items()}


def profiled(side: Side, run: str, loads: Loads, seconds: float, tmp: Path) -> tuple[float, dict[str, float]]:
    """The side's CPU a request under one load, and its stages' shares."""
    svc = Service(side, loads.slow if run == "in-flight" else loads.provider, tmp)
    try:
        url = f"{svc.url}/v1/decide"
        if run == "cached":
            lua = tmp / "static.lua"
            for _ in range(3):  # the first answers give every bee a chosen action its neighbours then show
                httpx.post(url, content=loads.body.read_bytes(), headers=JSON).raise_for_status()
        else:
            from decide_bench import LUA_MISS

            lua = tmp / f"stages-miss-{side.name}.lua"
            lua.write_text(LUA_MISS.replace("FIRST", "5000000"))
        wrk(url, lua, 8, 1, svc.proc.pid)
        raw = tmp / f"{side.name}-{run}.txt"
        spy = subprocess.Popen(
            [
                PY_SPY,
                "record",
                "-p",
                str(svc.proc.pid),
                "-r",
                "250",
                "-f",
                "raw",
                "-o",
                str(raw),
                "-d",
                f"{seconds:.0f}",
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        m = wrk(url, lua, 8, seconds, svc.proc.pid)
        spy.wait(60)
        return m.cpu_us, stages(raw)
    finally:
        svc.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--old", default=BASELINE)
    ap.add_argument("--new", default=None)
    args = ap.parse_args()
    if not Path(PY_SPY).exists() or not shutil.which("wrk"):
        raise SystemExit("the profile needs py-spy (pip install py-spy) and wrk (apt-get install wrk)")
    old = built(args.old)
    new = built(args.new) if args.new else Side("checkout", Path(sys.executable), ROOT)
    tmp = Path(tempfile.mkdtemp(prefix="npcmind-stages-"))
    port = free_port()
    provider = subprocess.Popen(
        [sys.executable, "-m", "npcmind.cli", "scripted-provider", "--port", str(port)], stdout=subprocess.DEVNULL
    )
    try:
        wait_up(f"http://127.0.0.1:{port}/_requests", provider)
        loads = Loads(tmp, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}", args.seconds)
        for run in ("cached", "uncached"):
            (o_cpu, o), (n_cpu, n) = (profiled(s, run, loads, args.seconds, tmp) for s in (old, new))
            print(f"\n{run}: service CPU a request {o_cpu:,.0f} us (old `{args.old}`) and {n_cpu:,.0f} us (new)")
            print(f"| stage | old `{args.old}` | new | new - old |\n|---|---|---|---|")
            for stage in [*STAGES, "http and event loop"]:
                a, b = o.get(stage, 0.0) * o_cpu, n.get(stage, 0.0) * n_cpu
                print(f"| {stage} | {a:,.0f} us | {b:,.0f} us | {b - a:+,.0f} us |")
    finally:
        provider.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
