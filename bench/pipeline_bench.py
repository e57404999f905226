"""What a decide request costs inside the service, without HTTP: where (b) of decide_bench spends its time.

Parse, session, pipeline and encoding of one request, in-process on one core, the service as
`npcmind serve` builds it (SQLite file store, commit before the answer), its provider the scripted server
on a local port:

- hits: the bench body of decide_bench (b), every entity a cache hit, for batches of 1, 4 and 16
  entities; the difference between the batch sizes separates the cost per request from the cost per
  entity;
- misses: 16 entities whose observations change on every request, so each one goes to the provider
  (the scripted server runs in a thread of this process, so its own work is included).

Run: python bench/pipeline_bench.py [--requests 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]
from inprocess import started_service  # noqa: E402
from npcmind.protocol.a2g import DecideRequest  # noqa: E402
from npcmind.protocol.validate import parse  # noqa: E402
from npcmind.testing.scripted import ScriptedServer  # noqa: E402
from probe import cpu_probe  # noqa: E402
from support import bee, decide_body  # noqa: E402


def _body(n: int, distance: float | None = None) -> dict[str, Any]:
    ents = [bee(f"b{i}", position=[i * 7.5, i * 3.0]) for i in range(n)]
    if distance is not None:
        for i, e in enumerate(ents):
            e["observation"]["distance_to_player"] = distance + i * 10
    return decide_body(*ents, client_id="bench")


async def _run(base_url: str, requests: int) -> dict[str, float]:
    svc = await started_service(base_url, cache_entries=2_000_000)

    async def one(raw: bytes) -> bytes:
        req = parse(raw, DecideRequest)
        session = await svc.guard.session(None, req.client_id)
        return msgspec.json.encode(await svc.pipeline.decide(session, req))

    async def p50(bodies: list[bytes], cached: bool) -> float:
        times = []
        for raw in bodies:
            t0 = time.perf_counter()
            out = json.loads(await one(raw))
            times.append(time.perf_counter() - t0)
            assert all(d.get("cached") is cached for d in out["decisions"]), out
        return statistics.median(times) * 1e6

    out: dict[str, float] = {}
    for n in (1, 4, 16):
        raw = json.dumps(_body(n)).encode()
        for _ in range(3):  # the first answers give each bee an action its neighbours then show
            await one(raw)
        out[f"hit {n}"] = await p50([raw] * requests, cached=True)
    misses = [json.dumps(_body(16, 1000.0 + k * 200)).encode() for k in range(requests // 4)]
    out["miss 16"] = await p50(misses, cached=False)
    await svc.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=3000)
    args = ap.parse_args()
    with ScriptedServer() as provider:
        r = asyncio.run(_run(provider.base_url, args.requests))
    print(cpu_probe())
    print(f"Python {sys.version.split()[0]}; in-process, one core; p50 of {args.requests} requests")
    for n in (1, 4, 16):
        print(f"decide, {n:>2} cache hits:                 {r[f'hit {n}']:7.0f} us")
    per_entity = (r["hit 16"] - r["hit 1"]) / 15
    print(f"  per request {r['hit 1'] - per_entity:.0f} us + per entity {per_entity:.1f} us")
    print(f"decide, 16 misses (provider in-process): {r['miss 16']:7.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
