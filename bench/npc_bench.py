"""The NPC protocol's costs: one service step, a whole four-call run, and recall over many memories.

- step: Finalize (the heaviest step: parse, step token check, merge, rules, new token, sign), in-process and
  over HTTP, on a tape the service's own steps built (a tape is taken back only with its step token);
- run: the SDK's whole loop (IdentifyActor, QueryVector, ExecuteInference, Finalize) against a running
  service and a zero-latency cortex (the scripted server), recall and memory writes included;
- recall: the SDK's vector recall (embedding the query + scoring) over 1,000 and 10,000 memories.

Run: python bench/npc_bench.py
"""

from __future__ import annotations

import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec

ROOT = Path(__file__).resolve().parents[1]
from probe import cpu_probe  # noqa: E402

FOREST = ROOT / "examples" / "forest.yaml"
JSON = {"content-type": "application/json"}

from npcmind.http.server import ServiceProcess  # noqa: E402
from npcmind.npc.rulesets import load_rulesets  # noqa: E402
from npcmind.npc.signing import Signer, StepTokens  # noqa: E402
from npcmind.npc.steps import NpcProcessor  # noqa: E402
from npcmind.sdk import NewMemory, NpcMind, NpcStore, OpenAICortex  # noqa: E402
from npcmind.sdk.embed import shared  # noqa: E402
from npcmind.testing.scripted import ScriptedServer  # noqa: E402

TAPE = {
    "observation": "A traveller with a lantern asks about the old mine north of town.",
    "npcState": {"turns": 3, "mood": "calm"},
    "memories": [],
}
RESULTS = {
    "IdentifyActor": {
        "type": "IdentifyActorResult",
        "actor": {"npcId": "mara", "persona": "Mara, the innkeeper.", "data": {"inn": "Silver Stag"}},
    },
    "QueryVector": {
        "type": "QueryVectorResult",
        "memories": [
            {"text": f"memory {i} about the mine", "type": "knowledge", "importance": 0.5, "similarity": 0.5}
            for i in range(5)
        ],
    },
}
OUTPUT = {
    "type": "ExecuteInferenceResult",
    "generatedOutput": '{"dialogue": "The old mine? Nobody goes there.", "action": {"type": "TALK"}, '
    '"remember": ["A traveller asked about the mine."]}',
}
WORDS = [
    "mine",
    "inn",
    "bread",
    "wolf",
    "captain",
    "coin",
    "river",
    "storm",
    "harvest",
    "market",
    "daughter",
    "smith",
    "well",
    "lantern",
    "road",
    "ghost",
    "ale",
    "festival",
    "debt",
    "letter",
    "horse",
    "bridge",
    "tower",
    "king",
    "rumour",
    "shrine",
]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))] * 1000


def finalize_body(step: Callable[[bytes], bytes]) -> bytes:
    """The body of the Finalize step: the tape the first three steps returned, and the model's output."""
    body: dict[str, Any] = {"tape": TAPE}
    for _ in range(3):
        answer = msgspec.json.decode(step(msgspec.json.encode(body)))
        kind = answer["instruction"]["type"]
        body = {"tape": answer["tape"], "lastResult": OUTPUT if kind == "ExecuteInference" else RESULTS[kind]}
    return msgspec.json.encode(body)


def step_in_process(n: int = 2000) -> list[float]:
    proc = NpcProcessor(load_rulesets(), Signer(os.urandom(32)), StepTokens(os.urandom(32)))
    body = finalize_body(lambda b: msgspec.json.encode(proc.process("mara", b)))
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        proc.process("mara", body)
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    print(cpu_probe())
    print(f"{os.cpu_count()} cores; Python {sys.version.split()[0]}")
    xs = step_in_process()
    print(f"service step (Finalize), in-process:  p50 {pct(xs, 0.5):.3f} ms  p99 {pct(xs, 0.99):.3f} ms")
    tmp = Path(tempfile.mkdtemp())
    svc = ServiceProcess(["--manifest", str(FOREST), "--store", f"sqlite:///{tmp}/npc.db", "--provider", "none"])
    url = svc.url
    try:
        http = httpx.Client(base_url=url)
        body = finalize_body(lambda b: http.post("/npcs/mara/process", content=b, headers=JSON).content)
        finalized = http.post("/npcs/mara/process", content=body, headers=JSON).json()
        assert finalized["instruction"]["type"] == "Finalize" and finalized["instruction"]["valid"]
        if shutil.which("wrk"):
            (tmp / "tape.json").write_bytes(body)
            (tmp / "s.lua").write_text(
                'wrk.method="POST"\nwrk.headers["Content-Type"]="application/json"\n'
                f'wrk.body=io.open("{tmp}/tape.json"):read("*a")\n'
            )
            out = subprocess.run(
                ["wrk", "-t1", "-c1", "-d5s", "--latency", "-s", str(tmp / "s.lua"), f"{url}/npcs/mara/process"],
                capture_output=True,
                text=True,
            ).stdout
            lat = {m.group(1): m.group(2) for m in re.finditer(r"^\s+(50|99)%\s+(\S+)$", out, re.M)}
            rps = out.split("Requests/sec:")[1].split()[0]
            print(
                f"service step (Finalize), over HTTP:   p50 {lat['50']}  p99 {lat['99']} "
                f"(wrk, 1 connection, {rps} steps/s)"
            )
        with ScriptedServer() as cortex:
            store = NpcStore(tmp / "sdk.db", embedder=shared())
            store.register("mara", "Mara, the innkeeper.", {"inn": "Silver Stag"})
            mind = NpcMind(url, cortex=OpenAICortex(cortex.base_url, model="scripted"), memory=store)
            for _ in range(5):
                mind.process("mara", "A traveller asks about the old mine.")
            xs = []
            for i in range(200):
                t0 = time.perf_counter()
                out = mind.process("mara", f"A traveller asks about the {random.choice(WORDS)} (visit {i}).")
                xs.append(time.perf_counter() - t0)
                assert out.valid and out.steps == ["IdentifyActor", "QueryVector", "ExecuteInference", "Finalize"]
            print(
                f"whole four-call run (SDK):            p50 {pct(xs, 0.5):.2f} ms  p99 {pct(xs, 0.99):.2f} ms "
                f"(recall, cortex call, {out.remembered} memory writes, signature check)"
            )
    finally:
        svc.stop()
    rng = random.Random(7)
    emb = shared()
    for n in (1_000, 10_000):
        store = NpcStore(tmp / f"recall{n}.db", embedder=emb)
        store.register("mara", "Mara")
        texts = [" ".join(rng.choice(WORDS) for _ in range(8)) + f" #{i}" for i in range(n)]
        t0 = time.perf_counter()
        for k in range(0, n, 500):
            store.remember("mara", [NewMemory(t, "knowledge", 0.5) for t in texts[k : k + 500]])
        fill = time.perf_counter() - t0
        store.recall("mara", "warm up", 5, 0.0)
        xs = []
        for _ in range(200):
            q = " ".join(rng.choice(WORDS) for _ in range(6))
            t0 = time.perf_counter()
            store.recall("mara", q, 8, 0.25)
            xs.append(time.perf_counter() - t0)
        print(
            f"recall over {n:>6,} memories:          p50 {pct(xs, 0.5):.2f} ms  p99 {pct(xs, 0.99):.2f} ms "
            f"(embedding the query included; storing them took {fill:.1f} s)"
        )
    print(f"embedding one sentence:               p50 {statistics.median(_embed_times(emb)):.2f} ms")
    return 0


def _embed_times(emb: object) -> list[float]:
    out = []
    for i in range(100):
        t0 = time.perf_counter()
        emb.embed_one(f"The innkeeper remembers the traveller who paid in gold, visit {i}.")  # type: ignore[attr-defined]
        out.append((time.perf_counter() - t0) * 1000)
    return out


if __name__ == "__main__":
    sys.exit(main())
