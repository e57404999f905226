"""Capacity with a slow provider: 1,000 decide requests in flight on one `npcmind serve`, every call answered by
the scripted provider in 300 ms.

Both run as their own processes, as a game would meet them: `npcmind serve` and `npcmind scripted-provider`
(`PUT /_script {"delay_ms": 300}`). Load comes from `wrk`, a third process: 1,000 connections, each sending its
next request as soon as the last is answered, so 1,000 requests are in flight all the time. Every request asks
for one bee never asked about before, a cache miss, so every request is one provider call. Per row: the share of
decisions that fell back with `busy` (the service's /metrics), p50 and p99 latency beside the provider's 300 ms,
requests a second, the most calls the provider had in flight at once (its `GET /_calls`), and the CPU the
service and the provider spent, a request and as a share of one core.

First, a check that the scripted provider alone holds 1,000 calls in flight: 1,000 calls sent straight to it
while its script holds them, counted in flight, then let go.

Rows: NPCMIND_MAX_CONCURRENT_CALLS=32 (the default before) and the default, 1,024; `--loops uvloop asyncio`
adds the same service on asyncio's event loop (bench/capacity_app.py under uvicorn's command line), which
accepts every waiting connection at each turn where uvloop accepts one.

With --shadow SHARE, each row runs twice in turn, without and with shadow mode (a second scripted provider
--shadow-slower times slower, sent SHARE of the calls after the game's answer): the game's p99 and busy with
shadow over without, in the same run, and the shadow calls dropped (the service's /metrics).

Run: python bench/capacity_bench.py [--seconds 10] [--connections 1000 ...] [--loops uvloop asyncio]
     [--shadow 0.05 --shadow-slower 10]   (needs wrk)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import httpx

ROOT = Path(__file__).resolve().parents[1]
from decide_bench import cpu_seconds, wait_up  # noqa: E402
from npcmind.http.server import ServiceProcess, free_port  # noqa: E402
from probe import cpu_probe  # noqa: E402
from support import FOREST  # noqa: E402

# one bee a request, its id made of the row, the wrk thread and a counter: never asked before, so never cached
LUA = r"""
local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
local counter = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  counter = counter + 1
  local body = string.format('{"client_id":"game-%d","epoch":1,"world":{"player_hp_fraction":0.4,"repellent":false},' ..
    '"scope":"forest_boss","scope_state":{"boss_phase":2},"entities":[{"id":"ROW-%d-%d","type":"bee",' ..
    '"observation":{"hp_fraction":0.5,"distance_to_player":96,"sees_player":true,"current_action":"chase"},' ..
    '"legal_actions":["idle","wander","chase","flee"]}]}', counter % 50, tid, counter)
  return wrk.format(nil, nil, nil, body)
end
"""


QUIET = ["--http", "httptools", "--log-level", "warning", "--no-access-log"]  # as `npcmind serve` runs uvicorn


def _provider(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "npcmind.cli", "scripted-provider", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    wait_up(f"{url}/_script", proc)
    return proc, url


async def _held_at_once(url: str, n: int) -> int:
    """Send ``n`` calls to a provider that holds them; how many it had in flight at once before they were let go."""
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as http:
        await http.put(f"{url}/_script", json={"hold": True})
        body = {"model": "m", "messages": []}
        calls = [asyncio.ensure_future(http.post(f"{url}/v1/chat/completions", json=body)) for _ in range(n)]
        deadline = time.monotonic() + 60
        seen = 0
        while seen < n and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            seen = (await (await http.get(f"{url}/_calls")).json())["in_flight"]
        await http.put(f"{url}/_script", json={})
        answers = await asyncio.gather(*calls)
        assert all(a.status == 200 for a in answers)
        return int(seen)


def _decisions(metrics: str) -> dict[str, float]:
    """Decisions answered so far, by fallback code ("AI" for the model's)."""
    out: dict[str, float] = {}
    for line in metrics.splitlines():
        if line.startswith("npcmind_decisions_total{"):
            labels, value = line.rsplit(" ", 1)
            source = re.search(r'source="([^"]*)"', labels)
            code = re.search(r'code="([^"]*)"', labels)
            key = (code.group(1) if code else "") or (source.group(1) if source else "?")
            out[key] = out.get(key, 0.0) + float(value)
    return out


def _wrk(url: str, script: Path, conns: int, seconds: int) -> dict[str, float]:
    out = subprocess.run(
        ["wrk", "-t2", f"-c{conns}", f"-d{seconds}s", "--timeout", "60s", "--latency", "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if os.environ.get("NPCMIND_BENCH_WRK"):
        print(out, file=sys.stderr)

    def ms(label: str) -> float:
        m = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if not m:
            return float("nan")
        v, unit = float(m.group(1)), m.group(2)
        return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v

    errors = re.search(r"Socket errors: (.*)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors or non2xx:
        print(f"wrk: {errors.group(0) if errors else ''} {non2xx.group(0) if non2xx else ''}", file=sys.stderr)
    n = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    return {"n": n, "rps": rps, "p50": ms("50"), "p99": ms("99")}


def _service(
    loop: str, purl: str, calls: int, env: dict[str, str], store: str, shadow: list[str]
) -> tuple[subprocess.Popen[str], str]:
    """`npcmind serve` (uvloop), or the same app under uvicorn's command line on another event loop."""
    env = {**env, "NPCMIND_MAX_CONCURRENT_CALLS": str(calls), "NPCMIND_ACTIVITY_S": "0"}
    if loop == "uvloop":
        argv = ["--manifest", str(FOREST), "--store", store, "--provider", "openai", "--base-url", f"{purl}/v1"]
        argv += shadow
        served = ServiceProcess([*argv, "--model", "scripted"], env=env)
        return served.proc, served.url
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "capacity_app:app", "--factory", "--port", str(port), "--loop", loop, *QUIET],
        cwd=ROOT / "bench",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**env, "NPCMIND_BENCH_STORE": store, "NPCMIND_BENCH_PROVIDER": f"{purl}/v1"},
    )
    url = f"http://127.0.0.1:{port}"
    wait_up(f"{url}/v1/health", proc)  # type: ignore[arg-type]
    return proc, url


def _row(
    loop: str, calls: int, conns: int, args: argparse.Namespace, env: dict[str, str], tmp: Path, shadow: bool = False
) -> dict[str, float]:
    """One service with ``calls`` slots and its own provider, ``conns`` requests in flight for ``args.seconds``;
    with ``shadow``, shadow mode on a second provider ``args.shadow_slower`` times slower."""
    provider, purl = _provider(env)
    second: subprocess.Popen[bytes] | None = None
    service: subprocess.Popen[str] | None = None
    try:
        httpx.put(f"{purl}/_script", json={"delay_ms": args.delay_ms}).raise_for_status()
        flags: list[str] = []
        if shadow:
            second, surl = _provider(env)
            delay = round(args.delay_ms * args.shadow_slower)
            httpx.put(f"{surl}/_script", json={"delay_ms": delay}).raise_for_status()
            flags = ["--shadow-provider", "openai", "--shadow-model", "scripted", "--shadow-base-url", f"{surl}/v1"]
            flags += ["--shadow-share", str(args.shadow)]
        name = f"{loop}-{calls}-{conns}-{'shadow' if shadow else 'plain'}"
        service, url = _service(loop, purl, calls, env, f"sqlite:///{tmp}/{name}.db", flags)
        script = tmp / f"{name}.lua"
        script.write_text(LUA.replace("ROW", name))
        before = _decisions(httpx.get(f"{url}/metrics").text)
        cpu0 = cpu_seconds(service.pid), cpu_seconds(provider.pid)
        t0 = time.monotonic()
        r = _wrk(f"{url}/v1/decide", script, conns, args.seconds)
        wall = time.monotonic() - t0
        cpu1 = cpu_seconds(service.pid), cpu_seconds(provider.pid)
        metrics = httpx.get(f"{url}/metrics").text
        after = _decisions(metrics)
        most = httpx.get(f"{purl}/_calls").json()["most_in_flight"]
    finally:
        if service is not None:
            service.terminate()
            service.wait(timeout=15)
        for p in (provider, second):
            if p is not None:
                p.terminate()
                p.wait(timeout=10)
    got = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    total = sum(got.values()) or 1.0
    return {
        **r,
        "busy": 100 * got.get("busy", 0.0) / total,
        "other": 100 * sum(v for k, v in got.items() if k not in ("AI", "busy")) / total,
        "most": most,
        "cpu_us": (cpu1[0] - cpu0[0]) / max(r["n"], 1) * 1e6,
        "cpu_core": (cpu1[0] - cpu0[0]) / wall,
        "provider_us": (cpu1[1] - cpu0[1]) / max(r["n"], 1) * 1e6,
        "provider_core": (cpu1[1] - cpu0[1]) / wall,
        "shadowed": _counter(metrics, "npcmind_shadow_calls_total"),
        "dropped": _counter(metrics, "npcmind_shadow_dropped_total"),
    }


def _counter(metrics: str, name: str) -> float:
    """A counter of the service's /metrics, summed over its labels (0 when it is not there)."""
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith((name + " ", name + "{"))
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--connections", type=int, nargs="+", default=[1000], help="requests in flight, a row each")
    ap.add_argument("--delay-ms", type=int, default=300)
    ap.add_argument("--calls", type=int, nargs="+", default=[32, 1024], help="NPCMIND_MAX_CONCURRENT_CALLS rows")
    ap.add_argument("--loops", nargs="+", default=["uvloop"], choices=["uvloop", "asyncio"], help="event loops")
    ap.add_argument("--shadow", type=float, help="each row without and with shadow mode on this share of the calls")
    ap.add_argument("--shadow-slower", type=float, default=10.0, help="the shadow provider's delay over the main's")
    ap.add_argument("--rounds", type=int, default=1, help="with --shadow: rounds of the pair, alternated")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("the bench needs wrk: apt-get install wrk")
    print(cpu_probe())
    tmp = Path(tempfile.mkdtemp(prefix="npcmind-capacity-"))
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    most = max(args.connections)
    provider, purl = _provider(env)
    try:
        held = asyncio.run(_held_at_once(purl, most))
    finally:
        provider.terminate()
        provider.wait(timeout=10)
    print(f"the scripted provider alone held {held} of {most} calls in flight at once")
    print(
        f"wrk, {args.seconds} s a row, 1 bee a request, all cache misses; provider {args.delay_ms} ms a call; "
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores. wave ms: in flight x CPU a request, the time "
        "the service takes for requests that arrive together (the provider answers them together)"
    )
    columns = [  # heading, then the row's value and its format
        ("loop", "loop", "{}"),
        ("in flight", "conns", "{:.0f}"),
        ("calls", "calls", "{:.0f}"),
        ("req/s", "rps", "{:.0f}"),
        ("busy %", "busy", "{:.1f}"),
        ("other %", "other", "{:.1f}"),
        ("p50 ms", "p50", "{:.0f}"),
        ("p99 ms", "p99", "{:.0f}"),
        ("at provider", "most", "{:.0f}"),
        ("CPU us/req", "cpu_us", "{:.0f}"),
        ("core", "cpu_core", "{:.2f}"),
        ("wave ms", "wave", "{:.0f}"),
        ("provider us/req", "provider_us", "{:.0f}"),
        ("core", "provider_core", "{:.2f}"),
        ("target", "met", "{}"),
    ]
    print(" ".join(f"{h:>{len(h)}}" for h, _, _ in columns))
    target = args.delay_ms + 100
    for loop in args.loops:
        for conns in args.connections:
            for calls in args.calls:
                r = _row(loop, calls, conns, args, env, tmp)
                met = "met" if r["busy"] < 1 and r["p99"] <= target else "not met"
                wave = conns * r["cpu_us"] / 1000
                shown = {**r, "loop": loop, "calls": calls, "conns": conns, "wave": wave, "met": met}
                print(" ".join(fmt.format(shown[key]).rjust(len(h)) for h, key, fmt in columns))
    print(f"target: under 1% busy and p99 within {target} ms (the provider's {args.delay_ms} ms + 100)")
    if args.shadow:
        _shadow_rows(args, env, tmp)
    return 0


def _median(rows: list[dict[str, float]], key: str) -> float:
    values = sorted(r[key] for r in rows)
    return values[len(values) // 2]


def _shadow_rows(args: argparse.Namespace, env: dict[str, str], tmp: Path) -> None:
    """Each row without and with shadow mode, alternated for ``args.rounds``: the ratios of one run."""
    print(
        f"\nshadow mode: share {args.shadow}, the shadow provider {args.shadow_slower:g}x slower "
        f"({args.delay_ms * args.shadow_slower:.0f} ms a call); uvloop, {args.rounds} round(s) a pair"
    )
    print("in flight calls round shadow req/s busy % p50 ms p99 ms shadow done dropped")
    for conns in args.connections:
        for calls in args.calls:
            got: dict[bool, list[dict[str, float]]] = {False: [], True: []}
            for rnd in range(args.rounds):
                for on in (False, True) if rnd % 2 == 0 else (True, False):
                    r = _row("uvloop", calls, conns, args, env, tmp, shadow=on)
                    got[on].append(r)
                    print(
                        f"{conns:9d} {calls:5d} {rnd + 1:5d} {'on' if on else 'off':>6} {r['rps']:5.0f} "
                        f"{r['busy']:6.1f} {r['p50']:6.0f} {r['p99']:6.0f} {r['shadowed']:11.0f} {r['dropped']:7.0f}"
                    )

            p99 = _median(got[True], "p99") / _median(got[False], "p99")
            busy_on, busy_off = _median(got[True], "busy"), _median(got[False], "busy")
            print(
                f"{conns} in flight, {calls} calls: p99 with/without shadow {p99:.2f}x (medians), busy "
                f"{busy_on:.1f}% / {busy_off:.1f}%, shadow calls done {_median(got[True], 'shadowed'):.0f}, "
                f"dropped {_median(got[True], 'dropped'):.0f} (medians)"
            )


if __name__ == "__main__":
    sys.exit(main())
