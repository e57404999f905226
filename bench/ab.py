"""The standing A/B bench of the hot path (issue 43): two commits side by side, the same loads, alternating rounds.

Each side runs `npcmind serve` from its own code (the baseline from a virtualenv of its own, built once into
~/.cache/npcmind-ab/<commit>; the other side this checkout as it is, uncommitted changes included, or `--new
COMMIT`), on the same manifest and the same request bodies, against the same scripted provider; the load comes
from `wrk` in its own process and the bench code is this checkout's for both sides. Rounds alternate (A B, then
B A) so that a machine slowing down mid-run weighs on both; with `--paired`, the uncached and cached rows load
both sides at the same time instead (each its own wrk), so that a minute's slowdown weighs on both equally. A
row's CPU is the service process's own (every thread, /proc/PID/task/*/schedstat) over the requests answered.

Rows:
- uncached: POST /v1/decide, 16 bees whose observations change every request: every entity a model call;
- cached: the same body again and again: every entity a cache hit;
- 1,000 in flight: 1,000 connections, one new bee a request, the provider answering in 300 ms: p99 and
  requests a second;
- dialogue step: the NPC protocol's Finalize (the heaviest step) over HTTP;
- streamed (the new side only; the baseline does not stream): a 16-bee batch streamed beside the same batch
  unstreamed, the model writing 20 tokens a second after 300 ms; the extra CPU a line, the idle process's CPU
  over the same time taken off both.

The baseline is pinned: move it forward only with a note here of why, so every later run compares with it.
Speed is never asserted (this is a bench, not a test); `--fail-over 1.05` makes the exit status say whether a
CPU ratio passed it, for a person or a script that wants one.

Run: python bench/ab.py [--rounds 5] [--seconds 5] [--quick] [--new COMMIT] [--only cached,uncached] [--paired]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from capacity_bench import LUA as LUA_ONE_NEW_BEE  # noqa: E402
from decide_bench import LUA_MISS, LUA_STATIC, wait_up  # noqa: E402
from npc_bench import finalize_body  # noqa: E402
from probe import cpu_probe  # noqa: E402
from support import bee, decide_body  # noqa: E402

# 90fae6b: the main before the restructuring (issue 30), streaming (31), replay (33) and the trust work, whose CPU a
# request issue 43 asks to be won back. Move it forward only with a note here of why.
BASELINE = "90fae6b"
CACHE = Path.home() / ".cache" / "npcmind-ab"
STREAM_SCRIPT = {"stream_ttft_ms": 300, "stream_tokens_per_s": 20, "default": "last"}


@dataclass
class Side:
    """One side of the comparison: its name, the Python that runs its code, and its checkout."""

    name: str
    python: Path
    root: Path


def _run(cmd: list[str], **kw: object) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout  # type: ignore[call-overload,no-any-return]


def built(commit: str) -> Side:
    """A commit's code in a virtualenv of its own, built once (its source from `git archive`)."""
    sha = _run(["git", "-C", str(ROOT), "rev-parse", "--short=12", commit]).strip()
    home = CACHE / sha
    py = home / ".venv" / "bin" / "python"
    if not py.exists():
        print(f"building {commit} ({sha}) into {home} (once)", file=sys.stderr)
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(home)], input=archive, check=True)
        subprocess.run([sys.executable, "-m", "venv", str(home / ".venv")], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-e", str(home)], check=True)
    return Side(commit, py, home)


def cpu_s(pid: int) -> float:
    """CPU seconds of every thread of a process so far."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total / 1e9


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Service:
    """`npcmind serve` of one side on a fresh SQLite file, its provider the scripted one."""

    def __init__(self, side: Side, provider: str, tmp: Path, **env: str) -> None:
        self.side = side.name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = ["--manifest", str(ROOT / "examples" / "forest.yaml"), "--port", str(self.port)]
        argv += ["--store", f"sqlite:///{tmp}/{side.name}-{self.port}.db"]
        argv += ["--provider", "openai", "--base-url", f"{provider}/v1", "--model", "scripted"] if provider else []
        argv += [] if provider else ["--provider", "none"]
        env = {**os.environ, "NPCMIND_CACHE_ENTRIES": "2000000", **env}
        env.pop("OPENAI_API_KEY", None)
        self.proc = subprocess.Popen(
            [str(side.python), "-m", "npcmind.cli", "serve", *argv],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_up(f"{self.url}/v1/health", self.proc, 60)
        except BaseException:  # not up in time: not left running either
            self.stop()
            raise

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@dataclass
class Measure:
    """One row's figure on one side, a round."""

    cpu_us: float  # service CPU a request
    p99_ms: float = float("nan")
    rps: float = float("nan")


def wrk(url: str, lua: Path, conns: int, seconds: float, pid: int, threads: int = 1) -> Measure:
    """Load from wrk for ``seconds``: the service's CPU a request, p99 and requests a second."""
    before = cpu_s(pid)
    out = _run(
        ["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds:g}s", "--timeout", "60s", "--latency", "-s", str(lua), url]
    )
    used = cpu_s(pid) - before
    n = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if bad:
        raise SystemExit(f"{url}: {bad.group(1)} answers not 2xx\n{out}")
    m = re.search(r"^\s*99%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    p99 = float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)] if m else float("nan")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    return Measure(used / max(n, 1) * 1e6, p99, rps)


@dataclass
class Row:
    """A row of the table: its figures on each side, round by round."""

    what: str
    old: list[Measure] = field(default_factory=list)
    new: list[Measure] = field(default_factory=list)


def ratio_text(old: list[float], new: list[float]) -> str:
    """The median of the per-round ratios new/old, with their spread."""
    ratios = [b / a for a, b in zip(old, new, strict=True) if a > 0]
    if not ratios:
        return "-"
    return f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"


def table(rows: list[Row], old: str, new: str) -> tuple[str, list[float]]:
    """The markdown table, and the median CPU ratios (for --fail-over)."""
    out = [f"| what | old `{old}` | new `{new}` | new / old, median (min-max of the rounds) |", "|---|---|---|---|"]
    cpu_ratios = []
    for r in rows:
        if not r.old:  # a row of the new side alone (its own text)
            continue
        o = [m.cpu_us for m in r.old]
        n = [m.cpu_us for m in r.new]
        out.append(
            f"| {r.what}: service CPU a request | {statistics.median(o):,.0f} us | {statistics.median(n):,.0f} us | "
            f"{ratio_text(o, n)} |"
        )
        cpu_ratios.append(statistics.median(b / a for a, b in zip(o, n, strict=True)))
        if r.what.startswith("1,000 in flight"):
            for label, get in (("p99", lambda m: m.p99_ms), ("requests a second", lambda m: m.rps)):
                o2, n2 = [get(m) for m in r.old], [get(m) for m in r.new]
                unit = " ms" if label == "p99" else ""
                out.append(
                    f"| {r.what}: {label} | {statistics.median(o2):,.0f}{unit} | {statistics.median(n2):,.0f}{unit} | "
                    f"{ratio_text(o2, n2)} |"
                )
    return "\n".join(out), cpu_ratios


class Loads:
    """Every row's load, run on one side for one round."""

    def __init__(self, tmp: Path, provider: str, slow_provider: str, seconds: float) -> None:
        self.tmp = tmp
        self.provider = provider
        self.slow = slow_provider
        self.seconds = seconds
        body = decide_body(*[bee(f"b{i}", position=[i * 7.5, i * 3.0]) for i in range(16)], client_id="bench")
        self.body = tmp / "body.json"
        self.body.write_text(json.dumps(body))
        (tmp / "static.lua").write_text(LUA_STATIC % self.body)
        self.one = LUA_ONE_NEW_BEE
        self.round = 0

    def uncached(self, side: Side) -> Measure:
        return self._alone(side, self._uncached)

    def cached(self, side: Side) -> Measure:
        return self._alone(side, self._cached)

    def _uncached(self, svc: Service) -> Path:
        """Warm a side's service for the uncached load: its script."""
        lua = self.tmp / f"miss-{svc.side}-{self.round}.lua"  # a side's bees are new to it every round
        lua.write_text(LUA_MISS.replace("FIRST", str(1_000_000 * (self.round + 1))))
        wrk(f"{svc.url}/v1/decide", lua, 8, 1, svc.proc.pid)  # warm: connections, the provider's pool
        return lua

    def _cached(self, svc: Service) -> Path:
        """Warm a side's service for the cached load: its script. The entries live the bees' ttl_ms (12 s) and a
        hit does not renew them: the warm-up and the measured seconds must end within it."""
        for _ in range(3):  # the first answers give every bee a chosen action its neighbours then show
            httpx.post(f"{svc.url}/v1/decide", content=self.body.read_bytes(), headers=_JSON).raise_for_status()
        wrk(f"{svc.url}/v1/decide", self.tmp / "static.lua", 8, 1, svc.proc.pid)
        return self.tmp / "static.lua"

    def _alone(self, side: Side, warm: Callable[[Service], Path]) -> Measure:
        svc = Service(side, self.provider, self.tmp)
        try:
            return wrk(f"{svc.url}/v1/decide", warm(svc), 8, self.seconds, svc.proc.pid)
        finally:
            svc.stop()

    def paired(self, key: str, old: Side, new: Side) -> tuple[Measure, Measure]:
        """Both sides under the same load at the same time (``--paired``): what slows the machine meanwhile slows
        both, where rounds taken one side after the other see a shared machine's minutes differ by up to 1.5x.
        Both are started before either is warmed, and warmed in turns that alternate by round, so that neither
        waits longer between its warm-up and its measure (a cache entry lives 12 s)."""
        warm = self._uncached if key == "uncached" else self._cached
        started: list[Service] = []
        try:
            for side in (old, new):
                started.append(Service(side, self.provider, self.tmp))
            order = started if self.round % 2 == 0 else started[::-1]
            scripts = {id(svc): warm(svc) for svc in order}
            with ThreadPoolExecutor(2) as pool:
                runs = [
                    pool.submit(wrk, f"{s.url}/v1/decide", scripts[id(s)], 8, self.seconds, s.proc.pid) for s in started
                ]
                return runs[0].result(), runs[1].result()
        finally:
            for svc in started:
                svc.stop()

    def in_flight(self, side: Side) -> Measure:
        svc = Service(side, self.slow, self.tmp, NPCMIND_ACTIVITY_S="0")
        try:
            lua = self.tmp / f"one-{side.name}-{self.round}.lua"  # bees new to the side every round
            lua.write_text(self.one.replace("ROW", f"r{self.round}"))
            url = f"{svc.url}/v1/decide"
            wrk(url, lua, 1000, 2, svc.proc.pid, threads=2)  # warm: a thousand connections open, the calls' pool
            return wrk(url, lua, 1000, self.seconds * 2, svc.proc.pid, threads=2)
        finally:
            svc.stop()

    def dialogue(self, side: Side) -> Measure:
        svc = Service(side, "", self.tmp)
        try:
            http = httpx.Client(base_url=svc.url)
            step = self.tmp / f"finalize-{side.name}.json"
            step.write_bytes(finalize_body(lambda b: http.post("/npcs/mara/process", content=b, headers=_JSON).content))
            lua = self.tmp / f"npc-{side.name}.lua"
            lua.write_text(
                f'wrk.method="POST"\nwrk.headers["Content-Type"]="application/json"\nwrk.body=io.open("{step}"):read("*a")\n'
            )
            return wrk(f"{svc.url}/npcs/mara/process", lua, 8, self.seconds, svc.proc.pid)
        finally:
            svc.stop()


_JSON = {"content-type": "application/json"}


async def _batch(url: str, tag: str, streamed: bool) -> None:
    """One 16-bee batch never asked before, read to its end."""
    ents = [bee(f"{tag}-{i}", position=[i * 7.5, i * 3.0]) for i in range(16)]
    body = decide_body(*ents, client_id=f"ab-{tag}")
    headers = {"accept": "application/x-ndjson"} if streamed else {}
    async with (
        httpx.AsyncClient(timeout=120) as http,
        http.stream("POST", f"{url}/v1/decide", json=body, headers=headers) as r,
    ):
        r.raise_for_status()
        async for _ in r.aiter_raw():
            pass


async def _batches(url: str, tag: str, streamed: bool, n: int) -> None:
    """``n`` batches at once."""
    await asyncio.gather(*[_batch(url, f"{tag}-{k}", streamed) for k in range(n)])


def streamed_rows(side: Side, tmp: Path, rounds: int, batches: int) -> list[str]:
    """Streamed against unstreamed on the new side: the extra CPU a line (idle subtracted) and the window ratio."""
    from npcmind.testing.scripted import ScriptedServer

    extra, window = [], []
    with ScriptedServer() as provider:
        provider.set(**STREAM_SCRIPT)
        svc = Service(side, provider.url, tmp)
        try:
            pid = svc.proc.pid
            t0, c0 = time.monotonic(), cpu_s(pid)
            time.sleep(3)
            idle_rate = (cpu_s(pid) - c0) / (time.monotonic() - t0)
            for r in range(rounds):
                got = {}
                for streamed in (True, False) if r % 2 == 0 else (False, True):
                    t0, c0 = time.monotonic(), cpu_s(pid)

                    asyncio.run(_batches(svc.url, f"s{r}{streamed}", streamed, batches))
                    spent, took = cpu_s(pid) - c0, time.monotonic() - t0
                    got[streamed] = (spent, spent - idle_rate * took)
                extra.append((got[True][1] - got[False][1]) / batches / 16 * 1000)
                window.append(got[True][0] / got[False][0])
        finally:
            svc.stop()
    return [
        f"streamed beside unstreamed, {batches} batches of 16 at once, 20 tokens/s after 300 ms, {rounds} rounds "
        f"(idle {idle_rate * 1000:.1f} ms of CPU a second):",
        f"  extra CPU a streamed line, idle subtracted: median {statistics.median(extra):.2f} ms "
        f"({min(extra):.2f}-{max(extra):.2f})",
        f"  CPU of the window, streamed / unstreamed: median {statistics.median(window):.2f}x "
        f"({min(window):.2f}-{max(window):.2f})",
    ]


def rounds(loads: Loads, wanted: set[str], old: Side, new: Side, n: int, paired: bool) -> list[Row]:
    """Every wanted row on both sides, ``n`` rounds: in turn, the first side alternating by round, or (uncached
    and cached with ``paired``) both at once."""
    plan: list[tuple[str, str, Callable[[Side], Measure]]] = [
        ("uncached", "16 entities, every one a model call", loads.uncached),
        ("cached", "16 entities, every one a cache hit", loads.cached),
        ("in-flight", "1,000 in flight, provider 300 ms", loads.in_flight),
        ("dialogue", "dialogue step (Finalize)", loads.dialogue),
    ]
    plan = [p for p in plan if p[0] in wanted]
    rows = [Row(what) for _, what, _ in plan]
    for r in range(n):
        loads.round = r
        for row, (key, _, run) in zip(rows, plan, strict=True):
            if paired and key in ("uncached", "cached"):
                a, b = loads.paired(key, old, new)
                row.old.append(a)
                row.new.append(b)
                continue
            for side, into in ((old, row.old), (new, row.new)) if r % 2 == 0 else ((new, row.new), (old, row.old)):
                into.append(run(side))
        print(f"round {r + 1} of {n} done", file=sys.stderr)
    return rows


def main() -> int:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line a request would bury the table
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0, help="of load a row, a round")
    ap.add_argument("--quick", action="store_true", help="2 rounds of 2 s: a first look, not a figure")
    ap.add_argument("--old", default=BASELINE, help="the baseline commit (pinned: see BASELINE)")
    ap.add_argument("--new", default=None, help="a commit (default: this checkout as it is)")
    ap.add_argument("--only", default="uncached,cached,in-flight,dialogue,streamed")
    ap.add_argument("--fail-over", type=float, default=None, help="exit 1 when a median CPU ratio passes this")
    ap.add_argument(
        "--paired", action="store_true", help="the uncached and cached rows load both sides at once, not in turn"
    )
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.seconds = 2, 2.0
    if not shutil.which("wrk"):
        raise SystemExit("the bench needs wrk: apt-get install wrk")
    old = built(args.old)
    new = built(args.new) if args.new else Side("checkout", Path(sys.executable), ROOT)
    wanted = set(args.only.split(","))
    print(cpu_probe())
    how = "sides at once for uncached and cached, in turn for the rest" if args.paired else "sides alternating"
    print(f"load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds of {args.seconds:g} s a row, {how}")
    tmp = Path(tempfile.mkdtemp(prefix="npcmind-ab-"))
    py = str(Path(sys.executable))
    ports = free_port(), free_port()
    providers = [
        subprocess.Popen([py, "-m", "npcmind.cli", "scripted-provider", "--port", str(p)], stdout=subprocess.DEVNULL)
        for p in ports
    ]
    try:
        for p, proc in zip(ports, providers, strict=True):
            wait_up(f"http://127.0.0.1:{p}/_requests", proc)
        slow = f"http://127.0.0.1:{ports[1]}"
        httpx.put(f"{slow}/_script", json={"delay_ms": 300}).raise_for_status()
        loads = Loads(tmp, f"http://127.0.0.1:{ports[0]}", slow, args.seconds)
        rows = rounds(loads, wanted, old, new, args.rounds, args.paired)
    finally:
        for proc in providers:
            proc.terminate()
    text, ratios = table(rows, args.old, args.new or "this checkout")
    print(text)
    if "streamed" in wanted:
        print("\n".join(streamed_rows(new, tmp, max(2, args.rounds // 2), 4)))
    if args.fail_over is not None and any(x > args.fail_over for x in ratios):
        print(f"a CPU ratio passed {args.fail_over}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
