"""Issue 39's attacks on the service, re-run with figures: what one hostile input costs everyone else.

- `chain`: an honest session asks for a cached decision 20 times a second while a hostile session of the same
  client sends the most expensive decide the bounds allow, back to back: a chain of 16 session scopes with 256
  state fields, every field in `scope_state`, one root field renamed (`POST /v1/context`) before each decide so
  nothing is reused. Figures: the honest session's p50, p99 and worst answer, and the hostile decide's own time.
  (On `b4d0548`, 280 scopes of 64 fields held the loop about 10 s a decide; they are now refused with a 422.)
- `shadow`: the game's load (32 requests in flight, each a bee never asked before: every request a model call)
  on a service in shadow mode (share 1.0), its shadow first a well-behaved model (the scripted provider), then a
  provider answering 200 with a body of spaces that never ends (bench/hostile_provider.py, JSON and SSE).
  Figures: decides a second and p99 beside the well-behaved row, and the service's resident memory at its peak
  and after.

Run: .venv/bin/python bench/attack_bench.py [chain] [shadow] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from decide_bench import wait_up
from npcmind.http.server import ServiceProcess, free_port
from support import FOREST, bee, decide_body

ROOT = Path(__file__).resolve().parents[1]


def _rss(pid: int) -> int:
    """A process's resident bytes now."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _scripted() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "npcmind.cli", "scripted-provider", "--port", str(port)], stdout=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    wait_up(f"{url}/_script", proc)
    return proc, url


def _hostile(body: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "hostile_provider.py"), "--port", str(port), "--body", body]
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            import socket

            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    return proc, url


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


# ---- chain


def _chain_scopes(rename: int) -> dict[str, Any]:
    scopes: dict[str, Any] = {}
    for k in range(15):  # under the manifest's forest: 16 scopes in the chain
        fields = {f"c{k}_{i}": {"type": "boolean"} for i in range(64)} if k < 4 else {}
        if k == 0:  # one root field renamed each time: a new definition, nothing to reuse
            fields[f"r{rename}"] = fields.pop("c0_0")
        scopes[f"c{k}"] = {"parent": f"c{k - 1}" if k else "forest", "text": f"scope {k}", "fields": fields}
    return scopes


def _chain_state(rename: int) -> dict[str, bool]:
    state = {f"c{k}_{i}": True for k in range(4) for i in range(64)}
    del state["c0_0"]
    state[f"r{rename}"] = True
    return state


async def chain(seconds: float) -> None:
    """The honest session's answers while the hostile one sends its most expensive legal decides."""
    purl_proc, purl = _scripted()
    with tempfile.TemporaryDirectory() as tmp:
        served = ServiceProcess(
            [
                "--manifest",
                str(FOREST),
                "--store",
                f"sqlite:///{tmp}/a.db",
                "--provider",
                "openai",
                "--base-url",
                f"{purl}/v1",
                "--model",
                "scripted",
            ]
        )
        try:
            honest, hostile = await _chain_run(served.url, seconds)
        finally:
            served.stop()
            purl_proc.terminate()
    print(f"chain: honest session, {len(honest)} cached decides at 20 a second beside the hostile one")
    print(
        f"  p50 {_pct(honest, 0.5) * 1000:.1f} ms, p99 {_pct(honest, 0.99) * 1000:.1f} ms, "
        f"worst {max(honest) * 1000:.1f} ms"
    )
    print(
        f"  hostile: {len(hostile)} decides of 16 scopes / 256 fields, each after a rename: p50 "
        f"{_pct(hostile, 0.5) * 1000:.1f} ms, worst {max(hostile) * 1000:.1f} ms"
    )


async def _chain_run(url: str, seconds: float) -> tuple[list[float], list[float]]:
    honest: list[float] = []
    hostile: list[float] = []
    async with aiohttp.ClientSession() as http:
        body = decide_body(bee("h1"), client_id="game-1")
        async with http.post(f"{url}/v1/decide", json=body) as r:  # cached from here on
            assert r.status == 200, await r.text()
        stop = time.monotonic() + seconds

        async def attacker() -> None:
            n = 0
            while time.monotonic() < stop:
                n += 1
                async with http.post(
                    f"{url}/v1/context", json={"client_id": "game-2", "scopes": _chain_scopes(n)}
                ) as r:
                    assert r.status == 200, await r.text()
                b = decide_body(bee(f"x{n}"), client_id="game-2", scope="c14", scope_state=_chain_state(n))
                t = time.perf_counter()
                async with http.post(f"{url}/v1/decide", json=b) as r:
                    assert r.status == 200, await r.text()
                    await r.read()
                hostile.append(time.perf_counter() - t)

        async def game() -> None:
            while time.monotonic() < stop:
                t = time.perf_counter()
                async with http.post(f"{url}/v1/decide", json=body) as r:
                    assert r.status == 200
                    await r.read()
                honest.append(time.perf_counter() - t)
                await asyncio.sleep(max(0.0, 0.05 - (time.perf_counter() - t)))

        await asyncio.gather(attacker(), game())
    return honest, hostile


# ---- shadow


async def _load(url: str, seconds: float, tag: str, pid: int) -> dict[str, float]:
    """32 requests in flight, each a bee never asked before: decides a second, p99, the peak resident memory."""
    lat: list[float] = []
    peak = [_rss(pid)]
    stop = time.monotonic() + seconds
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as http:

        async def one(worker: int) -> None:
            n = 0
            while time.monotonic() < stop:
                n += 1
                body = decide_body(bee(f"{tag}-{worker}-{n}"), client_id=f"game-{worker % 8}")
                t = time.perf_counter()
                async with http.post(f"{url}/v1/decide", json=body) as r:
                    await r.read()
                    assert r.status == 200
                lat.append(time.perf_counter() - t)

        async def watch() -> None:
            while time.monotonic() < stop:
                peak.append(_rss(pid))
                await asyncio.sleep(0.1)

        await asyncio.gather(watch(), *(one(w) for w in range(32)))
    await asyncio.sleep(2)  # the shadow's queue drains or drops
    return {"rps": len(lat) / seconds, "p99": _pct(lat, 0.99), "peak": max(peak), "after": _rss(pid)}


async def shadow(seconds: float) -> None:
    """The game's throughput and the service's memory with a well-behaved shadow and with endless bodies."""
    main_proc, main_url = _scripted()
    rows: dict[str, dict[str, float]] = {}
    try:
        for kind in ("none", "good", "json", "sse"):
            extra, side = [], None
            if kind == "good":
                side, surl = _scripted()
            elif kind != "none":
                side, surl = _hostile(kind)
            if side is not None:
                extra = [
                    "--shadow-provider",
                    "openai",
                    "--shadow-model",
                    "m",
                    "--shadow-base-url",
                    f"{surl}/v1",
                    "--shadow-share",
                    "1",
                ]
            with tempfile.TemporaryDirectory() as tmp:
                served = ServiceProcess(
                    [
                        "--manifest",
                        str(FOREST),
                        "--store",
                        f"sqlite:///{tmp}/s.db",
                        "--provider",
                        "openai",
                        "--base-url",
                        f"{main_url}/v1",
                        "--model",
                        "scripted",
                        *extra,
                    ]
                )
                try:
                    base = _rss(served.proc.pid)
                    rows[kind] = {**await _load(served.url, seconds, kind, served.proc.pid), "base": base}
                finally:
                    served.stop()
                    if side is not None:
                        side.terminate()
    finally:
        main_proc.terminate()
    good = rows["good"]
    print("shadow: 32 in flight, every request a model call, shadow share 1.0")
    print("shadow          decides/s  vs good   p99 ms   RSS start  peak   after (MB)")
    for kind, r in rows.items():
        print(
            f"  {kind:<12} {r['rps']:9.0f}  {r['rps'] / good['rps']:6.2f}  {r['p99'] * 1000:7.1f}   "
            f"{r['base'] / 1e6:6.0f} {r['peak'] / 1e6:6.0f} {r['after'] / 1e6:6.0f}"
        )


def main() -> int:
    """Run the scenarios named (all by default)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", default=["chain", "shadow"])
    ap.add_argument("--seconds", type=float, default=10)
    args = ap.parse_args()
    for name in args.scenarios:
        asyncio.run({"chain": chain, "shadow": shadow}[name](args.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
