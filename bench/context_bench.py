"""Telemetry ingest and the cost of the situation context, per session, on one core.

- ingest: entity updates a second through the session's scene (positions move, fields change),
  in-process and over HTTP (POST /v1/telemetry, 250 entities a body, wrk at 8 connections);
- context: observe + view (population, observed entities, nearby, parents, members, memory) for a
  batch of 16 entities in scenes of 100, 1,000 and 5,000 entities, median and p99 of 300 batches.

Run: python bench/context_bench.py   (the HTTP row needs wrk: apt-get install wrk)
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
from npcmind.context.hub import ContextHub  # noqa: E402
from npcmind.context.registry import SessionRegistry  # noqa: E402
from npcmind.context.situation import SceneSituation  # noqa: E402
from npcmind.decide.ids import DecisionIds  # noqa: E402
from npcmind.http.server import ServiceProcess  # noqa: E402
from npcmind.manifest import load  # noqa: E402
from npcmind.protocol.a2g import DecideRequest, TelemetryRequest  # noqa: E402
from npcmind.storage.base import IssuedDecision  # noqa: E402
from npcmind.storage.sqlite import SqliteStore  # noqa: E402
from probe import cpu_probe  # noqa: E402
from support import FOREST, bee, decide_body  # noqa: E402

OBS = {"hp_fraction": 0.5, "distance_to_player": 100.0, "sees_player": True, "current_action": "chase"}


def scene_entities(n: int, rng: random.Random) -> list[dict]:
    side = (n * 5000) ** 0.5  # about 5,000 square units per entity: ~25 within a radius of 200
    ents: list[dict] = [
        {"id": "player", "type": "player", "position": [side / 2, side / 2], "fields": {"hp_fraction": 0.7}}
    ]
    swarms = max(1, n // 40)
    for s in range(swarms):
        ents.append(
            {
                "id": f"swarm-{s}",
                "type": "swarm",
                "position": [rng.uniform(0, side), rng.uniform(0, side)],
                "fields": {"size": 40},
            }
        )
    for i in range(n - 1 - swarms):
        ents.append(
            {
                "id": f"bee-{i}",
                "type": "bee",
                "position": [rng.uniform(0, side), rng.uniform(0, side)],
                "parent": f"swarm-{i % swarms}",
                "state": "active",
                "action": "wander",
                "fields": OBS,
            }
        )
    return ents


async def context_cost(n: int) -> tuple[float, float]:
    rng = random.Random(n)
    m = load(FOREST)
    tmp = tempfile.mkdtemp()
    store = SqliteStore(f"{tmp}/b.db")
    sessions = SessionRegistry(store)
    hub, situation = ContextHub(store, DecisionIds(b"k" * 32), sessions), SceneSituation(sessions)
    session = await sessions.session("bench", "bench", m)
    ents = scene_entities(n, rng)
    await hub.telemetry(
        session, msgspec.convert({"client_id": "bench", "epoch": 1, "scene": "s", "entities": ents}, TelemetryRequest)
    )
    bees = [e for e in ents if e["type"] == "bee"]
    # give every bee some memory, so the memory lines are part of the cost
    st = await sessions.state("bench")
    for k, e in enumerate(bees):
        for j in range(8):
            st.memory.add(
                IssuedDecision(
                    k * 8 + j,
                    "d_x",
                    "bench",
                    e["id"],
                    "bee",
                    "chase",
                    "Fly at the player",
                    time.time() - j,
                    "done" if j % 2 else None,
                )
            )
    times = []
    for _ in range(300):
        batch = rng.sample(bees, 16)
        req = msgspec.convert(
            decide_body(*[bee(e["id"], position=e["position"], parent=e["parent"]) for e in batch]), DecideRequest
        )
        t0 = time.perf_counter()
        await situation.observe(session, req, time.time())
        _shared, per = await situation.view(session, req, time.time())
        times.append(time.perf_counter() - t0)
        assert per, "no context was built"
    await store.close()
    times.sort()
    return statistics.median(times) * 1000, times[int(len(times) * 0.99)] * 1000


async def ingest_in_process(n_updates: int = 200_000) -> float:
    rng = random.Random(1)
    m = load(FOREST)
    tmp = tempfile.mkdtemp()
    store = SqliteStore(f"{tmp}/i.db")
    sessions = SessionRegistry(store)
    hub = ContextHub(store, DecisionIds(b"k" * 32), sessions)
    session = await sessions.session("ingest", "ingest", m)
    ents = scene_entities(5000, rng)
    reqs = []
    for start in range(0, n_updates, 250):
        chunk = []
        for k in range(250):
            e = dict(ents[(start + k) % len(ents)])
            e["position"] = [e["position"][0] + rng.uniform(-5, 5), e["position"][1] + rng.uniform(-5, 5)]
            chunk.append(e)
        reqs.append(msgspec.json.encode({"client_id": "ingest", "epoch": 1, "scene": "s", "entities": chunk}))
    t0 = time.perf_counter()
    for body in reqs:
        await hub.telemetry(session, msgspec.json.decode(body, type=TelemetryRequest))
    rate = n_updates / (time.perf_counter() - t0)
    await store.close()
    return rate


def ingest_http(seconds: int = 5) -> float | None:
    if not shutil.which("wrk"):
        return None
    tmp = Path(tempfile.mkdtemp())
    svc = ServiceProcess(["--manifest", str(FOREST), "--store", f"sqlite:///{tmp}/h.db", "--provider", "none"])
    try:
        ents = scene_entities(250, random.Random(2))
        (tmp / "t.json").write_text(json.dumps({"client_id": "bench", "epoch": 1, "scene": "s", "entities": ents}))
        (tmp / "t.lua").write_text(
            'wrk.method="POST"\nwrk.headers["Content-Type"]="application/json"\n'
            f'wrk.body=io.open("{tmp}/t.json"):read("*a")\n'
        )
        out = subprocess.run(
            ["wrk", "-t1", "-c8", f"-d{seconds}s", "-s", str(tmp / "t.lua"), f"{svc.url}/v1/telemetry"],
            capture_output=True,
            text=True,
        ).stdout
        rps = float(out.split("Requests/sec:")[1].split()[0])
        return rps * len(ents)
    finally:
        svc.stop()


def main() -> int:
    print(cpu_probe())
    print(f"{os.cpu_count()} cores; Python {sys.version.split()[0]}")
    rate = asyncio.run(ingest_in_process())
    print(f"telemetry ingest, in-process:          {rate:>10,.0f} entity updates/s")
    http = ingest_http()
    if http is not None:
        print(f"telemetry ingest, HTTP (250 a body):   {http:>10,.0f} entity updates/s")
    print()
    print(f"{'scene entities':>15} {'context for 16, p50 ms':>22} {'p99 ms':>8}")
    for n in (100, 1000, 5000):
        p50, p99 = asyncio.run(context_cost(n))
        print(f"{n:>15,} {p50:>22.3f} {p99:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
