"""Measure /v1/decide against a minimal echo route on the same stack, in one run on one machine.

(a) decide, 16 entities, every entity a cache miss, zero-latency scripted provider (its own process)
(b) decide, 16 entities, every entity a cache hit
(c) a minimal JSON echo route (bench/echo_app.py) on the same HTTP stack, same body
(e) the echo plus one call to the scripted provider with the body of a real 16-entity batch: what (a)
    would cost if the pipeline itself were free
at 1 and 32 concurrent connections (wrk), in rounds (every row once a round, back to back), then the
ratios (a)/(c), (b)/(c), (e)/(c) within each round and their median; the CPU time the serving process
(and the provider) spent per request, read from /proc, which a noisy host disturbs less than
throughput; and
(d) prompt input tokens per entity for a batch of 1 versus a batch of 16 on the example manifest; and
(f) what the target leaves: the time a request may add to the echo's for (b)/(c) to reach 0.7, beside
    what the steps the issue asks of every request cost as the service takes them (strict decode, field
    checks, token budget, cache keys, MAC'd ids, the durable record, the answer; most of them one call
    into C each), measured in-process on the bench body just after the rounds.

Run: python bench/decide_bench.py [--seconds 5] [--rounds 3]   (needs `wrk`: apt-get install wrk)
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
from pathlib import Path
from types import SimpleNamespace

import httpx
import msgspec

ROOT = Path(__file__).resolve().parents[1]
from inprocess import started_service  # noqa: E402
from npcmind.decide.prompt import Prompt  # noqa: E402
from npcmind.decide.validate import check_request  # noqa: E402
from npcmind.http.server import ServiceProcess, free_port  # noqa: E402
from npcmind.protocol.a2g import DecideRequest  # noqa: E402
from npcmind.protocol.validate import parse  # noqa: E402
from npcmind.providers.tokens import count_once  # noqa: E402
from npcmind.storage.base import IssuedDecision  # noqa: E402
from npcmind.testing.scripted import ScriptedServer  # noqa: E402
from probe import cpu_probe  # noqa: E402
from support import FOREST, bee, decide_body  # noqa: E402

LUA_MISS = r"""
counter = FIRST
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  counter = counter + 1
  local ents = {}
  for i = 1, 16 do
    ents[i] = string.format('{"id":"b%d","type":"bee","observation":{"hp_fraction":0.5,"distance_to_player":%d,' ..
      '"sees_player":true,"current_action":"chase"},"legal_actions":["idle","wander","chase","flee"],' ..
      '"position":[%d.5,%d.0]}', i, (counter * 16 + i) * 10, i * 7, i * 3)
  end
  local body = '{"client_id":"bench","epoch":1,"world":{"player_hp_fraction":0.4,"repellent":false},' ..
    '"scope":"forest_boss","scope_state":{"boss_phase":2},"entities":[' .. table.concat(ents, ",") .. ']}'
  return wrk.format(nil, nil, nil, body)
end
"""

LUA_STATIC = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = io.open("%s"):read("*a")
"""


def wait_up(url: str, proc: subprocess.Popen[bytes], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"process for {url} exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc), to give each row its CPU cost."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(url: str, script: str, conns: int, seconds: int, server: int, provider: int) -> dict[str, float]:
    threads = 1 if conns == 1 else 2
    before = cpu_seconds(server), cpu_seconds(provider)
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds}s", "--latency", "-s", script, url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    def ms(label: str) -> float:
        m = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if not m:
            return float("nan")
        v, unit = float(m.group(1)), m.group(2)
        return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v

    after = cpu_seconds(server), cpu_seconds(provider)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    n = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise SystemExit(f"{url}: {errors.group(1)} non-2xx answers\n{out}")
    return {
        "rps": rps,
        "p50": ms("50"),
        "p99": ms("99"),
        "cpu": (after[0] - before[0]) / n * 1e6,
        "provider_cpu": (after[1] - before[1]) / n * 1e6,
    }


def tokens_per_entity() -> tuple[float, float]:
    from npcmind.decide.prompt import PromptBuilder
    from npcmind.manifest import load
    from npcmind.protocol.a2g import DecideRequest
    from npcmind.providers.tokens import count

    m = load(FOREST)
    out = []
    for n in (1, 16):
        body = decide_body(
            *[bee(f"b{i}", observation={**bee("x")["observation"], "distance_to_player": 10.0 * i}) for i in range(n)]
        )
        req = msgspec.convert(body, DecideRequest)
        b = PromptBuilder(m, "numbered")
        chain = m.scope_chain("forest_boss")
        static = b.static(chain, [])
        shared = b.shared(req, chain, [])
        ents = [b.entity(i + 1, e, None) for i, e in enumerate(req.entities)]
        total = count("o200k_base", static) + count(
            "o200k_base", shared + "ENTITIES:\n" + "".join(e.text for e in ents)
        )
        out.append(total / n)
    return out[0], out[1]


STEPS = (
    ("strict decode, less the echo's decode + encode", "decode"),
    ("field checks of 16 entities", "check"),
    ("token budget: 16 entity parts counted anew", "tokens"),
    ("16 cache keys", "keys"),
    ("16 MAC'd decision ids", "ids"),
    ("the durable record: one commit", "record"),
    ("encoding the answer", "answer"),
)


async def _steps(base_url: str, raw: bytes, n: int) -> dict[str, float]:
    """Microseconds of each step of STEPS for the bench body, with the service's own parts, median of ``n``."""
    svc = await started_service(base_url, cache_entries=2_000_000)
    req = parse(raw, DecideRequest)
    session = await svc.guard.session(None, req.client_id)
    for _ in range(3):  # as in (b): from the third request on every entity is a cache hit
        answer = await svc.pipeline.decide(session, req)
    seen = svc.pipeline.seen(session.session_id)
    assert seen is not None and all(d.cached for d in answer.decisions), answer  # type: ignore[union-attr]
    texts = [e.text for e in seen.entities]  # each entity's parts 6-7 as rendered, neighbours and memory too
    prompt = Prompt(seen.system, "", [], svc.pipeline.mode)
    # what a key hashes: the entity's part without its memory (whose times would change every key)
    keyed = [
        SimpleNamespace(
            key_text="".join(x for x in t.splitlines(True) if not x.startswith("  memory:")), private="  memory:" in t
        )
        for t in texts
    ]
    ids = [e.id for e in req.entities]
    dids = svc.pipeline.ids.issue_many(1, session.session_id, len(ids))
    rows = [
        IssuedDecision(0, d, session.session_id, i, "bee", "idle", "Stay in place", 0.0)
        for d, i in zip(dids, ids, strict=True)
    ]
    seq = 10**9

    async def record() -> None:
        nonlocal seq
        seq += len(rows)
        for r in rows:
            r.seq = seq
        await svc.store.decisions.record(rows)

    steps = {
        "decode": lambda: parse(raw, DecideRequest),
        "echo": lambda: msgspec.json.encode(msgspec.json.decode(raw)),
        "check": lambda: check_request(req, session.manifest, session.scopes),
        # a game's memory lines carry times that move: its entity parts are new texts on every request
        "tokens": lambda: [count_once(svc.pipeline.provider.encoding, t) for t in texts],
        "keys": lambda: [
            Prompt.cache_keys(base, e, session.session_id if e.private else None)  # type: ignore[arg-type]
            for base in [prompt.key_base("v", req.scope)]
            for e in keyed
        ],
        "ids": lambda: svc.pipeline.ids.issue_many(seq, session.session_id, len(ids)),
        "answer": lambda: msgspec.json.encode(answer),
    }
    out: dict[str, float] = {}
    for name, step in steps.items():
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times) * 1e6
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        await record()
        times.append(time.perf_counter() - t0)
    out["record"] = statistics.median(times) * 1e6
    out["decode"] -= out.pop("echo")
    await svc.stop()
    return out


def mandated_steps(raw: bytes, n: int = 2000) -> dict[str, float]:
    """The steps every decide request must take, in-process, with the scripted server in a thread."""
    logging.getLogger("npcmind").setLevel(logging.WARNING)
    with ScriptedServer() as provider:
        return asyncio.run(_steps(provider.base_url, raw, n))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, help="every row is run once a round; medians are reported")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("the bench needs wrk: apt-get install wrk")
    tmp = Path(tempfile.mkdtemp(prefix="npcmind-bench-"))
    py = sys.executable
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    pp, ep = free_port(), free_port()
    procs = [
        subprocess.Popen(
            [py, "-m", "npcmind.cli", "scripted-provider", "--port", str(pp)], stdout=subprocess.DEVNULL, env=env
        ),
    ]
    service: ServiceProcess | None = None
    try:
        wait_up(f"http://127.0.0.1:{pp}/_requests", procs[0])
        service = ServiceProcess(
            [
                "--manifest",
                str(FOREST),
                "--store",
                f"sqlite:///{tmp}/bench.db",
                "--provider",
                "openai",
                "--base-url",
                f"http://127.0.0.1:{pp}/v1",
                "--model",
                "scripted",
            ],
            env={"NPCMIND_CACHE_ENTRIES": "2000000"},
        )
        sp = service.port
        body = decide_body(*[bee(f"b{i}", position=[i * 7.5, i * 3.0]) for i in range(16)], client_id="bench")
        (tmp / "body.json").write_text(json.dumps(body))
        # the first answer gives every bee a chosen action, which its neighbours' `nearby` lines then show;
        # from the third request on the situation repeats and every entity is a cache hit
        for _ in range(2):
            first = httpx.post(f"http://127.0.0.1:{sp}/v1/decide", json=body).json()["decisions"]
            assert all(d["source"] == "AI" for d in first), first
        again = httpx.post(f"http://127.0.0.1:{sp}/v1/decide", json=body).json()["decisions"]
        assert all(d.get("cached") for d in again), again
        # the echo app's /echo_call replays the provider call of a 16-entity batch
        sent = httpx.get(f"http://127.0.0.1:{pp}/_requests").json()[-1]
        assert len(sent["response_format"]["json_schema"]["schema"]["properties"]) == 16, sent
        (tmp / "call.json").write_text(json.dumps(sent))
        procs.append(
            subprocess.Popen(
                [py, "-m", "uvicorn", "echo_app:app", "--port", str(ep), "--log-level", "warning", "--no-access-log"],
                cwd=ROOT / "bench",
                stdout=subprocess.DEVNULL,
                env={
                    **env,
                    "NPCMIND_BENCH_PROVIDER_URL": f"http://127.0.0.1:{pp}/v1/chat/completions",
                    "NPCMIND_BENCH_CALL_BODY": str(tmp / "call.json"),
                },
            )
        )
        wait_up(f"http://127.0.0.1:{ep}/echo", procs[-1])
        (tmp / "static.lua").write_text(LUA_STATIC % (tmp / "body.json"))
        size = len((tmp / "body.json").read_bytes())
        runs: dict[tuple[str, int], list[dict[str, float]]] = {}
        pids = {"service": service.proc.pid, "echo": procs[-1].pid, "provider": procs[0].pid}
        for rnd in range(args.rounds):
            for conns in (1, 32):
                # every (a) run starts its observations where no earlier run went: all of them are misses
                (tmp / "miss.lua").write_text(LUA_MISS.replace("FIRST", str((rnd * 2 + (conns > 1)) * 10_000_000)))
                for k, server, route, script in (
                    ("a", "service", f"http://127.0.0.1:{sp}/v1/decide", "miss.lua"),
                    ("b", "service", f"http://127.0.0.1:{sp}/v1/decide", "static.lua"),
                    ("c", "echo", f"http://127.0.0.1:{ep}/echo", "static.lua"),
                    ("e", "echo", f"http://127.0.0.1:{ep}/echo_call", "static.lua"),
                ):
                    r = wrk(route, str(tmp / script), conns, args.seconds, pids[server], pids["provider"])
                    runs.setdefault((k, conns), []).append(r)
            print(f"round {rnd + 1} of {args.rounds} done", file=sys.stderr)
        m = httpx.get(f"http://127.0.0.1:{sp}/metrics").text
        fallbacks = [
            line
            for line in m.splitlines()
            if line.startswith('npcmind_decisions_total{code="') and "AI" not in line and not line.endswith(" 0.0")
        ]
        if fallbacks:
            raise SystemExit(f"fallbacks during the bench: {fallbacks}")
    finally:
        if service is not None:
            service.stop()
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=10)
    names = {
        "a": "(a) decide, 16 misses",
        "b": "(b) decide, 16 cache hits",
        "c": "(c) JSON echo",
        "e": "(e) echo + provider call",
    }
    # the host's speed drifts over minutes: a ratio is taken within one round (its rows ran back to back),
    # and each figure reported is the median over the rounds
    rows = {key: {f: statistics.median(r[f] for r in rs) for f in rs[0]} for key, rs in runs.items()}

    def ratios(num: str, den: str, conns: int, field: str = "rps") -> list[float]:
        pairs = zip(runs[(num, conns)], runs[(den, conns)], strict=True)
        return sorted(a[field] / b[field] for a, b in pairs)

    def show(rs: list[float]) -> str:
        return f"{statistics.median(rs):.2f} ({rs[0]:.2f}-{rs[-1]:.2f})" if len(rs) > 1 else f"{rs[0]:.2f}"

    print(cpu_probe())
    print(
        f"body {size} bytes; {os.cpu_count()} cores; wrk {args.seconds}s per row, {args.rounds} rounds, medians;"
        f" Python {sys.version.split()[0]}"
    )
    print(f"{'route':28} {'conns':>5} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'CPU us/req':>11} {'provider':>9}")
    for conns in (1, 32):
        for k in "abce":
            r = rows[(k, conns)]
            provider = f"{r['provider_cpu']:>9.0f}" if k in "ae" else f"{'':>9}"
            timing = f"{r['rps']:>9.0f} {r['p50']:>8.2f} {r['p99']:>8.2f}"
            print(f"{names[k]:28} {conns:>5} {timing} {r['cpu']:>11.0f} {provider}")
    print("ratios: median of the rounds' ratios (lowest-highest)")
    for conns in (1, 32):
        print(
            f"ratio at {conns:>2} conns: (a)/(c) = {show(ratios('a', 'c', conns))}   "
            f"(b)/(c) = {show(ratios('b', 'c', conns))}   floor of (a): (e)/(c) = {show(ratios('e', 'c', conns))}"
        )
    for conns in (1, 32):
        print(
            f"CPU per request against the echo's at {conns:>2} conns (service only): "
            f"(c)/(a) = {show(ratios('c', 'a', conns, 'cpu'))}   (c)/(b) = {show(ratios('c', 'b', conns, 'cpu'))}"
        )
    one, sixteen = tokens_per_entity()
    print(
        f"(d) prompt input tokens per entity (o200k): batch 1 = {one:.0f}, batch 16 = {sixteen:.1f}, "
        f"ratio {sixteen / one:.3f}"
    )
    steps = mandated_steps((tmp / "body.json").read_bytes())
    print("(f) what (b)/(c) >= 0.7 leaves a request beyond the echo's time, and what the issue's steps cost here:")
    for conns in (1, 32):
        echo_us = 1e6 / rows[("c", conns)]["rps"]
        left = echo_us * (1 / 0.7 - 1)
        print(f"  at {conns:>2} conns: the echo takes {echo_us:5.0f} us a request; 0.7 leaves {left:4.0f} us")
    for label, key in STEPS:
        print(f"  {label:48} {steps[key]:6.1f} us")
    total = sum(steps.values())
    memo = total - steps["tokens"]
    print(f"  {'together':48} {total:6.1f} us, before the situation and the prompt are built")
    print(f"  {'as (b) pays them (its parts repeat: memoized)':48} {memo:6.1f} us")
    print(f"  {'and the commit shared, as at 32 connections':48} {memo - steps['record']:6.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
