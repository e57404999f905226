"""Several npcmind processes behind HAProxy against one process, on one machine, in one run.

Every row is the hosted profile (session tokens, the client's request rate checked) under `wrk` with one
thread; each request carries one of many session tokens in turn, so HAProxy's hash on Authorization spreads
them over the processes. Rows, each run once a round, back to back:

  hits  1 process, SQLite                `npcmind serve` alone: no load balancer, no Redis (the baseline)
  hits  1 process, PostgreSQL            the same on the shared store, no Redis: what the store costs a request
  hits  1 process, PostgreSQL + Redis    the cluster's first process, asked directly: what Redis costs
  hits  1 of 2 behind HAProxy            `Cluster` of 2 on PostgreSQL + Redis, its second process in maintenance
  hits  2 behind HAProxy                 the same cluster, both processes
  300 ms  1 of 2 / 2 behind HAProxy      every request a cache miss, answered by the scripted provider in 300 ms

A hits row sends the same 16-bee decide body on every session, every decision a cache hit (warmed first;
the bench checks every process's counters); a 300 ms row asks for one bee whose observation changes on every
request, on sessions of another client, with a fixed number of connections. Before a row each session is
asked once, untimed by wrk: a session that moved to another process is rebuilt from the store on its next
request, and the rows time the steady state. The CPU time of every process involved (each npcmind process,
HAProxy, this deployment's PostgreSQL backends and the server's own processes, redis-server, and wrk) is
read from /proc before and after each row and divided by the requests wrk counted. The scripted provider
stands in for a remote model: its CPU is shown apart and counted in no total. Ratios are taken within a
round (its rows ran back to back) and the median over the rounds is reported.

Run: python bench/scale_bench.py [--seconds 5] [--rounds 3] [--sessions 256] [--slow-connections 512]
(needs wrk, haproxy, a PostgreSQL server and a Redis server; --postgres and --redis say where)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
from capacity_bench import _decisions  # noqa: E402
from decide_bench import cpu_seconds, wait_up  # noqa: E402
from npcmind.cluster import Cluster  # noqa: E402
from npcmind.http.server import ServiceProcess, free_port  # noqa: E402
from npcmind.sessions.clients import hash_key, new_key  # noqa: E402
from npcmind.shared.redis import TIMEOUT_S, RedisShared  # noqa: E402
from probe import cpu_probe  # noqa: E402
from support import FOREST, bee, decide_body  # noqa: E402

# the same body on every request, each request the next session's token: prepared once, so wrk spends little
LUA_HITS = r"""
local tokens = TOKENS
local reqs = {}
local i = 0
init = function(args)
  local body = io.open("BODY"):read("*a")
  for k, t in ipairs(tokens) do
    reqs[k] = wrk.format("POST", nil, {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. t}, body)
  end
end
request = function()
  i = i + 1
  return reqs[i % #reqs + 1]
end
"""

# one bee a request, its distance new on every request (FIRST: where this row's counter starts; the manifest's
# quantum is 10): a cache miss
LUA_MISS = r"""
local tokens = TOKENS
local i = FIRST
request = function()
  i = i + 1
  local body = string.format('{"client_id":"slow","epoch":1,"world":{"player_hp_fraction":0.4,"repellent":false},' ..
    '"scope":"forest_boss","scope_state":{"boss_phase":2},"entities":[{"id":"m1","type":"bee",' ..
    '"observation":{"hp_fraction":0.5,"distance_to_player":%d,"sees_player":true,"current_action":"chase"},' ..
    '"legal_actions":["idle","wander","chase","flee"]}]}', i * 10)
  local headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. tokens[i % #tokens + 1]}
  return wrk.format("POST", nil, headers, body)
end
"""

COMPONENTS = ("npcmind", "haproxy", "postgres", "redis")  # what a request costs the deployment; wrk apart
Runs = dict[str, list[dict[str, float]]]  # each row's figures, a dict a round


# --- processes and their CPU time -------------------------------------------------------------------------


def listener_pid(port: int) -> int:
    """The process listening on a local TCP port (from /proc/net/tcp*), to read a server's CPU time."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f[9])
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in {f"socket:[{i}]" for i in inodes} for fd in fds):
                return int(pid)
        except OSError:
            continue
    raise SystemExit(f"no process of this machine's that this bench can see listens on port {port}")


def children_of(parent: int) -> list[int]:
    """Every process whose parent is ``parent`` (the PostgreSQL server's own processes and backends)."""
    out = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            out.append(int(pid))
    return out


def switches(pids: list[int]) -> int:
    """Context switches of these processes so far: fewer a request means more requests served a wake-up."""
    n = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        n += sum(int(m) for m in re.findall(r"^(?:non)?voluntary_ctxt_switches:\s+(\d+)$", status, re.M))
    return n


def machine_busy() -> float:
    """CPU seconds every core of the machine has spent busy so far (/proc/stat): what other work took meanwhile."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) / os.sysconf("SC_CLK_TCK")


def cpu_of(pids: list[int]) -> dict[int, float]:
    """CPU seconds of each process still alive."""
    out = {}
    for pid in pids:
        try:
            out[pid] = cpu_seconds(pid)
        except OSError:
            continue
    return out


@dataclass
class Postgres:
    """The PostgreSQL server and this bench's schema on it; the backends of other applications are left out."""

    url: str
    schema: str = field(default_factory=lambda: f"scale_bench_{uuid.uuid4().hex[:10]}")

    @property
    def store(self) -> str:
        """The store URL every npcmind process of the bench gets: its own schema and an application name."""
        return f"{self.url}?schema={self.schema}&application_name={self.schema}"

    async def _fetch(self, sql: str) -> list[tuple[object, ...]]:
        import asyncpg

        db = await asyncpg.connect(self.url, timeout=10)
        try:
            return [tuple(r) for r in await db.fetch(sql)]
        finally:
            await db.close()

    def pids(self) -> list[int]:
        """The server's processes (postmaster, WAL writer, checkpointer...) and the bench's own backends."""
        port = urllib.parse.urlsplit(self.url).port or 5432
        postmaster = listener_pid(port)
        rows = asyncio.run(self._fetch("SELECT pid, application_name, backend_type FROM pg_stat_activity"))
        others = {r[0] for r in rows if r[2] == "client backend" and r[1] != self.schema}
        return [postmaster, *(p for p in children_of(postmaster) if p not in others)]

    def drop(self) -> None:
        """The bench's schema and everything in it: nothing of a run stays on the server."""
        asyncio.run(self._fetch(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE'))


# --- what a row runs against ------------------------------------------------------------------------------


@dataclass
class Target:
    """Where a row's load goes, the npcmind processes that serve it and the shared servers it uses."""

    url: str
    processes: list[str]  # each npcmind process's own URL (warm-up, counters)
    pids: list[int]
    haproxy: int | None = None
    postgres: Postgres | None = None
    redis: int | None = None

    def pids_now(self) -> dict[str, list[int]]:
        """Every process of this deployment, by component, as they are now (PostgreSQL's backends come and go)."""
        return {
            "npcmind": self.pids,
            "haproxy": [self.haproxy] if self.haproxy else [],
            "postgres": self.postgres.pids() if self.postgres else [],
            "redis": [self.redis] if self.redis else [],
        }


@dataclass
class Row:
    """One line of the table: its target, its load, and what to do before it (HAProxy's maintenance)."""

    key: str
    label: str
    target: Target
    script: Callable[[int], str]  # the Lua script for the round given
    connections: int
    hits: bool
    before: Callable[[], None] = lambda: None
    settle: Callable[[], list[float]] = lambda: []  # one request a session, untimed by wrk: its latencies


def first_requests(url: str, tokens: list[str], body: Callable[[], bytes]) -> list[float]:
    """One request a session, one after another, in ms: a session that moved to another process since its last
    request is rebuilt from the store on this one (the ownership check), so the rows time none of that."""
    out = []
    with httpx.Client(base_url=url, timeout=60) as http:
        for t in tokens:
            t0 = time.perf_counter()
            r = http.post(
                "/v1/decide",
                content=body(),
                headers={"content-type": "application/json", "authorization": f"Bearer {t}"},
            )
            out.append((time.perf_counter() - t0) * 1000)
            r.raise_for_status()
    return sorted(out)


def all_at_once(url: str, tokens: list[str], body: Callable[[], bytes]) -> list[float]:
    """One request a session, all at once (a 300 ms row's sessions: one after another would take 300 ms each)."""

    async def go() -> None:
        limits = httpx.Limits(max_connections=len(tokens))
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
            sent = [
                http.post(
                    "/v1/decide",
                    content=body(),
                    headers={"content-type": "application/json", "authorization": f"Bearer {t}"},
                )
                for t in tokens
            ]
            for r in await asyncio.gather(*sent):
                r.raise_for_status()

    asyncio.run(go())
    return []


def miss_body(counter: Iterator[int]) -> Callable[[], bytes]:
    """The 300 ms rows' body (one bee, cache miss), at distances no row uses."""
    return lambda: json.dumps(
        decide_body(
            bee("m1", observation={**bee("x")["observation"], "distance_to_player": 10 * next(counter)}),
            client_id="slow",
            epoch=1,
        )
    ).encode()


def write_clients(path: Path, sessions: int) -> dict[str, str]:
    """The clients file: `bench` (the cache-hit rows) and `slow` (the 300 ms rows), never limited by rate, on the
    example manifest with decisions cached for an hour: at its 12 s, every connection of a hits row missed at
    once when an entry ran out (the hits rows measure the hit path; the 300 ms rows the miss path)."""
    manifest = path.parent / "forest.yaml"
    text = FOREST.read_text()
    assert "ttl_ms: 12000" in text, "the example manifest's cache time changed: change the bench"
    manifest.write_text(text.replace("ttl_ms: 12000", "ttl_ms: 3600000"))
    keys = {"bench": new_key(), "slow": new_key()}
    lines = ["clients:"]
    for cid, key in keys.items():
        lines.append(
            f"  - {{client_id: {cid}, manifest: {manifest}, key_sha256: {hash_key(key)}, "
            f"max_sessions: {sessions}, requests_per_second: 1000000}}"
        )
    path.write_text("\n".join(lines) + "\n")
    return keys


def open_sessions(url: str, client_id: str, key: str, n: int) -> list[str]:
    """``n`` session tokens of one client, opened at ``url``."""
    with httpx.Client(base_url=url, timeout=30) as http:
        out = []
        for _ in range(n):
            r = http.post("/v1/session", json={"client_id": client_id}, headers={"authorization": f"Bearer {key}"})
            r.raise_for_status()
            out.append(str(r.json()["session_token"]))
    return out


def warm(urls: list[str], tokens: list[str], body: bytes) -> None:
    """Three requests a session at every process: from the third on the situation repeats, so all are hits."""
    headers = {"content-type": "application/json"}
    for url in urls:
        with httpx.Client(base_url=url, timeout=30) as http:
            for _ in range(3):
                for t in tokens:
                    http.post("/v1/decide", content=body, headers={**headers, "authorization": f"Bearer {t}"})
    for url in urls:
        for t in tokens:
            r = httpx.post(f"{url}/v1/decide", content=body, headers={**headers, "authorization": f"Bearer {t}"})
            answers = r.json()["decisions"]
            if not all(d.get("cached") for d in answers):
                raise SystemExit(f"not every decision is a cache hit after the warm-up at {url}: {answers}")


def counts(target: Target, token: str) -> list[dict[str, float]]:
    """Each npcmind process's decisions so far, by fallback code, and its cache hits (as `hits`)."""
    out = []
    for url in target.processes:
        text = httpx.get(f"{url}/metrics", headers={"authorization": f"Bearer {token}"}).text
        got = _decisions(text)
        hits = re.search(r"^npcmind_decision_cache_hits_total ([\d.e+]+)$", text, re.M)
        got["hits"] = float(hits.group(1)) if hits else 0.0
        out.append(got)
    return out


# --- one row ----------------------------------------------------------------------------------------------


def wrk(url: str, script: Path, conns: int, seconds: int) -> tuple[dict[str, float], str]:
    """One wrk run (one thread: the machine has two cores), the CPU time wrk itself spent, and wrk's output."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    done = subprocess.run(
        ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--timeout", "30s", "--latency", "-s", str(script), url],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"wrk failed on {url}: {done.stderr}{done.stdout}")
    out = done.stdout
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)

    def ms(label: str) -> float:
        m = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if not m:
            return float("nan")
        v, unit = float(m.group(1)), m.group(2)
        return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v

    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    figures = {
        "errors": float(non2xx.group(1) if non2xx else 0) + sum(float(x) for x in (socket.groups() if socket else ())),
        "n": float(re.search(r"(\d+) requests in", out).group(1)),  # type: ignore[union-attr]
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        "p50": ms("50"),
        "p99": ms("99"),
        "wall": wall,
        "wrk_s": (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime),
    }
    return figures, out


def spent(before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]) -> dict[str, float]:
    """CPU seconds each component spent between two readings; a process new since the first counts from zero."""
    return {c: sum(t - before[c].get(pid, 0.0) for pid, t in after[c].items()) for c in after}


def measure(row: Row, rnd: int, tmp: Path, seconds: int, token: str, provider: int) -> dict[str, float]:
    """One run of ``row``: throughput, latency, CPU a request by component, and each process's share."""
    row.before()
    first = row.settle()
    script = tmp / f"{row.key}-{rnd}.lua"
    script.write_text(row.script(rnd))
    c0 = counts(row.target, token)
    pids0 = row.target.pids_now()
    cpu0 = {c: cpu_of(pids) for c, pids in pids0.items()}
    s0 = switches([p for c in COMPONENTS for p in pids0[c]])
    p0, m0 = cpu_seconds(provider), machine_busy()
    r, said = wrk(f"{row.target.url}/v1/decide", script, row.connections, seconds)
    p1, m1 = cpu_seconds(provider), machine_busy()
    pids1 = row.target.pids_now()
    cpu1 = {c: cpu_of(pids) for c, pids in pids1.items()}
    s1 = switches([p for c in COMPONENTS for p in pids1[c]])
    c1 = counts(row.target, token)
    n = r["n"]
    used = spent(cpu0, cpu1)
    out = {**r, **{c: used[c] / n * 1e6 for c in COMPONENTS}}
    if first:
        out["first_p50"], out["first_max"] = statistics.median(first), first[-1]
    out["total"] = sum(out[c] for c in COMPONENTS)
    out["switches"] = (s1 - s0) / n  # a backend of PostgreSQL new since s0 counts whole: a few, against thousands
    out["wrk"] = r["wrk_s"] / n * 1e6
    out["provider"] = (p1 - p0) / n * 1e6
    out["cores"] = (sum(used.values()) + r["wrk_s"] + p1 - p0) / r["wall"]
    out["others"] = max(0.0, (m1 - m0) / r["wall"] - out["cores"])  # other work on the machine meanwhile
    decided = [
        sum(v for k, v in b.items() if k != "hits") - sum(v for k, v in a.items() if k != "hits")
        for a, b in zip(c0, c1, strict=True)
    ]
    out["share"] = max(decided) / (sum(decided) or 1)  # the busiest process's share of the decisions
    if row.hits and r["errors"]:
        raise SystemExit(f"{row.label}: wrk saw failures\n{said}")
    if row.hits:
        missed = sum(decided) - sum(b["hits"] - a["hits"] for a, b in zip(c0, c1, strict=True))
        if missed:
            raise SystemExit(f"{row.label}: {missed:.0f} decisions were not cache hits: {c0} {c1}")
    else:
        fell = sum(b.get(k, 0) - a.get(k, 0) for a, b in zip(c0, c1, strict=True) for k in b if k not in ("AI", "hits"))
        out["fallback"] = 100 * fell / (sum(decided) or 1)
        out["cached"] = 100 * sum(b["hits"] - a["hits"] for a, b in zip(c0, c1, strict=True)) / (sum(decided) or 1)
    return out


# --- the deployments --------------------------------------------------------------------------------------


@dataclass
class Setup:
    """Everything the rows run against, started once and stopped (and cleaned) at the end."""

    sqlite: Target
    postgres: Target
    cluster: Target
    lb: Cluster
    bench: dict[str, list[str]]  # the cache-hit rows' tokens, by store ("sqlite", "postgresql")
    slow: list[str]  # the 300 ms rows' tokens (PostgreSQL)
    provider: subprocess.Popen[bytes]
    provider_url: str
    prefix: str  # the cluster's keys in Redis


def _serve_args(store: str, clients: Path, provider: str) -> list[str]:
    return ["--profile", "hosted", "--clients", str(clients), "--store", store, "--provider", "openai",
            "--base-url", f"{provider}/v1", "--model", "scripted"]  # fmt: skip


@contextmanager
def started(args: argparse.Namespace, tmp: Path) -> Iterator[Setup]:
    """The scripted provider, one process on SQLite, one on PostgreSQL, and a cluster of two; the schema and the
    Redis keys are gone and every process stopped when this exits, however it exits."""
    pg = Postgres(args.postgres)
    prefix = f"scale-bench-{uuid.uuid4().hex[:10]}"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    with ExitStack() as stack:
        port = free_port()
        provider = subprocess.Popen(
            [sys.executable, "-m", "npcmind.cli", "scripted-provider", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            env=env,
        )
        stack.callback(provider.wait, 10)
        stack.callback(provider.terminate)
        purl = f"http://127.0.0.1:{port}"
        wait_up(f"{purl}/_script", provider)  # type: ignore[arg-type]
        clients = tmp / "clients.yaml"
        keys = write_clients(clients, args.sessions)
        single = ServiceProcess(_serve_args(f"sqlite:///{tmp}/bench.db", clients, purl))
        stack.callback(single.stop)
        stack.callback(pg.drop)  # after every process is stopped
        on_pg = ServiceProcess(_serve_args(pg.store, clients, purl))
        stack.callback(on_pg.stop)
        redis_url = f"{args.redis}?prefix={prefix}"
        stack.callback(forget_redis, args.redis, prefix)
        (tmp / "cluster").mkdir()
        lb = Cluster([*_serve_args(pg.store, clients, purl), "--redis", redis_url], 2, workdir=str(tmp / "cluster"))
        stack.callback(lb.stop)
        lb.start()
        redis_pid = listener_pid(urllib.parse.urlsplit(args.redis).port or 6379)
        yield Setup(
            sqlite=Target(single.url, [single.url], [single.proc.pid]),
            postgres=Target(on_pg.url, [on_pg.url], [on_pg.proc.pid], postgres=pg),
            cluster=Target(
                lb.url,
                [f"http://127.0.0.1:{p}" for p in lb.ports],
                [p.pid for p in lb.procs if p is not None],
                haproxy=lb.haproxy.pid if lb.haproxy else None,
                postgres=pg,
                redis=redis_pid,
            ),
            lb=lb,
            bench={
                "sqlite": open_sessions(single.url, "bench", keys["bench"], args.sessions),
                "postgresql": open_sessions(on_pg.url, "bench", keys["bench"], args.sessions),
            },
            slow=open_sessions(on_pg.url, "slow", keys["slow"], args.sessions),
            provider=provider,
            provider_url=purl,
            prefix=prefix,
        )


async def _redis_calls(url: str, prefix: str, n: int) -> float:
    """CPU microseconds the Redis calls of one hosted request (revoked, take, claim) cost the process making them."""
    shared = RedisShared(url, prefix=f"{prefix}:")
    await shared.start()
    try:
        t0 = time.process_time()
        for _ in range(n):
            await shared.revoked("s_bench")
            await shared.take("bench", "s_bench", 1e6, 1e6)
            await shared.claim("s_bench", "p_bench")
        assert shared.problem() is None, shared.problem()
        return (time.process_time() - t0) / n * 1e6
    finally:
        await shared.close()


def redis_calls(url: str, prefix: str, n: int = 2000) -> float:
    """As `npcmind serve` runs them: on uvloop."""
    import uvloop

    return uvloop.run(_redis_calls(url, prefix, n))


def forget_redis(url: str, prefix: str) -> None:
    """Delete every key the bench's cluster wrote under its prefix."""
    import redis

    r = redis.Redis.from_url(url)
    for key in r.scan_iter(f"{prefix}:*", count=1000):
        r.delete(key)
    r.close()


# --- the run and its report -------------------------------------------------------------------------------


def rows(s: Setup, args: argparse.Namespace, body: Path) -> list[Row]:
    """The table's rows, in the order each round runs them."""

    def hits(tokens: list[str]) -> Callable[[int], str]:
        return lambda rnd: LUA_HITS.replace("TOKENS", _lua(tokens)).replace("BODY", str(body))

    def miss(k: int) -> Callable[[int], str]:  # row k of 2 in round rnd: ten million distances of its own
        return lambda rnd: LUA_MISS.replace("TOKENS", _lua(s.slow)).replace("FIRST", str((rnd * 2 + k) * 10**7))

    def one() -> None:
        s.lb.admin("set server processes/n2 state maint")

    def two() -> None:
        s.lb.admin("set server processes/n2 state ready")

    def settle(t: Target, tokens: list[str], body_for: Callable[[], bytes]) -> Callable[[], list[float]]:
        return lambda: first_requests(t.url, tokens, body_for)

    def settle_slow() -> list[float]:
        return all_at_once(s.cluster.url, s.slow, fresh)

    c, slow, pg = args.connections, args.slow_connections, s.bench["postgresql"]
    direct = dataclasses.replace(s.cluster, url=s.cluster.processes[0], haproxy=None)  # the cluster's first process
    same = body.read_bytes
    fresh = miss_body(itertools.count(900_000_000))
    return [
        Row("sqlite", "hits: 1 process, SQLite", s.sqlite, hits(s.bench["sqlite"]), c, True),
        Row("pg", "hits: 1 process, PostgreSQL", s.postgres, hits(pg), c, True),
        Row("redis", "hits: 1 process, PostgreSQL + Redis", direct, hits(pg), c, True, settle=settle(direct, pg, same)),
        Row("lb1", "hits: 1 of 2 behind HAProxy", s.cluster, hits(pg), c, True, one, settle(s.cluster, pg, same)),
        Row("lb2", "hits: 2 behind HAProxy", s.cluster, hits(pg), c, True, two, settle(s.cluster, pg, same)),
        Row("slow1", "300 ms: 1 of 2 behind HAProxy", s.cluster, miss(1), slow, False, one, settle_slow),
        Row("slow2", "300 ms: 2 behind HAProxy", s.cluster, miss(2), slow, False, two, settle_slow),
    ]


def _lua(tokens: list[str]) -> str:
    return "{" + ", ".join(f'"{t}"' for t in tokens) + "}"


def ratio(runs: Runs, num: str, den: str, f: str = "rps", g: str = "") -> str:
    """The median over the rounds of num's ``f`` / den's ``g`` (default the same field), and their range."""
    rs = sorted(a[f] / b[g or f] for a, b in zip(runs[num], runs[den], strict=True))
    return f"{statistics.median(rs):.2f} ({rs[0]:.2f}-{rs[-1]:.2f})" if len(rs) > 1 else f"{rs[0]:.2f}"


def med(runs: Runs, key: str, f: str) -> float:
    """A row's figure as the table shows it: the median over the rounds."""
    return statistics.median(r[f] for r in runs[key])


COLUMNS = (  # heading, field, format
    ("req/s", "rps", "{:.0f}"),
    ("p50 ms", "p50", "{:.1f}"),
    ("p99 ms", "p99", "{:.1f}"),
    ("npcmind", "npcmind", "{:.0f}"),
    ("haproxy", "haproxy", "{:.0f}"),
    ("postgres", "postgres", "{:.0f}"),
    ("redis", "redis", "{:.0f}"),
    ("total", "total", "{:.0f}"),
    ("wrk", "wrk", "{:.0f}"),
    ("provider", "provider", "{:.0f}"),
    ("switches", "switches", "{:.1f}"),
    ("cores", "cores", "{:.2f}"),
    ("others", "others", "{:.2f}"),
    ("busiest", "share", "{:.2f}"),
)


def report(table: list[Row], runs: Runs, args: argparse.Namespace) -> None:
    """The table (medians of the rounds), what each layer adds, then the targets (ratios within one round)."""
    print(f"{'':36} {'':26} {'CPU us a request; total: the deployment, wrk and the provider apart':<62} per request")
    print(f"{'row':36}" + "".join(f"{h:>9}" for h, _, _ in COLUMNS))
    for row in table:
        cells = "".join(f"{fmt.format(med(runs, row.key, f)):>9}" for _, f, fmt in COLUMNS)
        print(f"{row.label:36}{cells}")
    fell = max(r["fallback"] for k in ("slow1", "slow2") for r in runs[k])
    failed = sum(r["errors"] for k in ("slow1", "slow2") for r in runs[k])
    cached = max(r["cached"] for k in ("slow1", "slow2") for r in runs[k])
    print(
        f"(300 ms rows: at most {fell:.1f}% of decisions fell back and {cached:.1f}% came from the cache in any run;"
        f" {failed:.0f} requests failed in all)"
    )
    steps = [("sqlite", ""), ("pg", "PostgreSQL"), ("redis", "Redis"), ("lb1", "HAProxy"), ("lb2", "a second process")]
    added = ", ".join(
        f"{name} {med(runs, key, 'total') - med(runs, before, 'total'):+.0f}"
        for (before, _), (key, name) in itertools.pairwise(steps)
    )
    print(f"CPU us a request each step adds (medians of the total): {added}")
    print("each session's first request before a row, one at a time (when it moved, it is rebuilt from the store):")
    for row in table:
        if "first_p50" in runs[row.key][0]:
            worst = max(r["first_max"] for r in runs[row.key])
            print(f"  {row.label:36} p50 {med(runs, row.key, 'first_p50'):6.1f} ms, at most {worst:7.1f} ms")
    targets(runs, args)


def targets(runs: Runs, args: argparse.Namespace) -> None:
    """The ratios the issue's targets name, met or not, and the ones that say why."""
    print("ratios: the median of the rounds' ratios (lowest-highest)")
    met = {True: "met", False: "not met"}
    through = statistics.median(a["rps"] / b["rps"] for a, b in zip(runs["lb2"], runs["sqlite"], strict=True))
    print(
        f"all-hit throughput, 2 behind HAProxy / 1 process on SQLite: {ratio(runs, 'lb2', 'sqlite')}"
        f"   target >= 1.4: {met[through >= 1.4]}"
    )
    print(f"  2 behind HAProxy / 1 of 2 behind HAProxy: {ratio(runs, 'lb2', 'lb1')}")
    whole = med(runs, "lb2", "total") + med(runs, "lb2", "wrk")
    ceiling = (os.cpu_count() or 1) * 1e6 / whole
    print(
        f"  the ceiling on {os.cpu_count()} cores doing nothing else: {ceiling:.0f} req/s at {whole:.0f} us a request"
        f" (the deployment and wrk), {ceiling / med(runs, 'sqlite', 'rps'):.2f} of 1 process on SQLite"
    )
    cost = statistics.median(a["total"] / b["npcmind"] for a, b in zip(runs["lb2"], runs["sqlite"], strict=True))
    print(
        "CPU a request, every process of the deployment / 1 process on SQLite: "
        f"2 behind HAProxy {ratio(runs, 'lb2', 'sqlite', 'total', 'npcmind')}   target <= 1.5: {met[cost <= 1.5]}"
    )
    print(f"  1 of 2 behind HAProxy {ratio(runs, 'lb1', 'sqlite', 'total', 'npcmind')}")
    store = {k: med(runs, k, "npcmind") + med(runs, k, "postgres") for k in ("sqlite", "pg")}
    print(
        f"the store, PostgreSQL against SQLite (1 process, no Redis): CPU a request {store['pg']:.0f} us against "
        f"{store['sqlite']:.0f} (npcmind {med(runs, 'pg', 'npcmind'):.0f} + postgres {med(runs, 'pg', 'postgres'):.0f}"
        f"), {ratio(runs, 'pg', 'sqlite', 'total', 'total')}; throughput {ratio(runs, 'pg', 'sqlite')}"
    )
    print(
        f"300 ms provider, {args.slow_connections} connections: throughput 2 / 1 = {ratio(runs, 'slow2', 'slow1')},"
        f" p99 {med(runs, 'slow1', 'p99'):.0f} ms with 1 process, {med(runs, 'slow2', 'p99'):.0f} ms with 2"
    )


def run(args: argparse.Namespace, tmp: Path, body: Path) -> tuple[list[Row], Runs, int, float]:
    """Every row once a round; then what the Redis calls of a request cost and how often Redis was lost."""
    runs: Runs = {}
    with started(args, tmp) as s:
        warm([*s.sqlite.processes], s.bench["sqlite"], body.read_bytes())
        warm([*s.postgres.processes, *s.cluster.processes], s.bench["postgresql"], body.read_bytes())
        httpx.put(f"{s.provider_url}/_script", json={"delay_ms": 300}).raise_for_status()
        table = rows(s, args, body)
        for rnd in range(args.rounds):
            for row in table:
                token = s.bench["sqlite"][0] if row.key == "sqlite" else s.bench["postgresql"][0]
                runs.setdefault(row.key, []).append(measure(row, rnd, tmp, args.seconds, token, s.provider.pid))
            print(f"round {rnd + 1} of {args.rounds} done", file=sys.stderr)
        lost = sum(log.read_text().count("unreachable") for log in (tmp / "cluster").glob("*.log"))
        calls = redis_calls(args.redis, s.prefix)
    return table, runs, lost, calls


def main() -> int:
    """`python bench/scale_bench.py`: the run, then its table and ratios."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5, help="wrk's time a row (default 5)")
    ap.add_argument("--rounds", type=int, default=3, help="every row once a round; medians are reported")
    ap.add_argument("--sessions", type=int, default=256, help="session tokens a client, used in turn (default 256)")
    ap.add_argument("--connections", type=int, default=32, help="wrk's connections in the cache-hit rows")
    ap.add_argument("--slow-connections", type=int, default=512, help="wrk's connections in the 300 ms rows")
    ap.add_argument("--postgres", default="postgresql://root@127.0.0.1:5432/test", help="a PostgreSQL database")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="a Redis database")
    ap.add_argument("--keep", action="store_true", help="keep the run's directory (the cluster's logs) to read")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped, it still cleans up (schema, keys, processes)
    for tool in ("wrk", "haproxy"):
        if not shutil.which(tool):
            raise SystemExit(f"the bench needs {tool}: apt-get install {tool}")
    print(cpu_probe())
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    tmp = Path(tempfile.mkdtemp(prefix="npcmind-scale-"))
    body = tmp / "body.json"
    hits = decide_body(*[bee(f"b{i}", position=[i * 7.5, i * 3.0]) for i in range(16)], client_id="bench")
    body.write_text(json.dumps(hits))
    try:
        table, runs, lost, calls = run(args, tmp, body)
    finally:
        if args.keep:
            print(f"kept: {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"wrk: 1 thread, {args.connections} connections (hits rows), {args.slow_connections} (300 ms rows); "
        f"{args.seconds} s a row, {args.rounds} rounds, medians; {args.sessions} sessions a client, one token a "
        f"request in turn; Python {sys.version.split()[0]}"
    )
    report(table, runs, args)
    print(
        f"the Redis calls of one hosted request (revoked, take, claim), in-process on uvloop: {calls:.0f} us of CPU;"
        f" the cluster's processes lost Redis {lost} times (a call over {TIMEOUT_S * 1000:.0f} ms counts as lost)"
    )
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
