"""What one call for a batch saves against one call for each entity, on a real model.

The model is SmolLM2-135M behind llama-cpp-python's OpenAI-compatible server (the `model` extra), on this
machine's CPU. `npcmind serve` runs in its own process in front of it. Each round decides the same N bees
twice: once as one decide request (one provider call), and once as N requests of one bee (N calls). The
bees' observations differ from bee to bee and from round to round, so that nothing comes from the
decision cache. Each way has its own session, so neither sees the other's memory. The token counts are
the server's own (`usage`), as `GET /v1/prompt` shows them. Wall time is what the game waits, in all.

Run: python bench/model_bench.py [--entities 16] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
from localmodel import ALIAS, AVAILABLE, MISSING, model_server  # noqa: E402
from npcmind.http.server import ServiceProcess  # noqa: E402
from probe import cpu_probe  # noqa: E402
from support import FOREST, bee, decide_body  # noqa: E402


def _bees(n: int, round_: int) -> list[dict[str, Any]]:
    """N bees, each in its own situation, none seen in an earlier round."""
    return [
        bee(
            f"b{i}",
            observation={
                "hp_fraction": round(0.05 * i, 2),
                "distance_to_player": 20.0 + 10 * i + 200 * round_,
                "sees_player": i % 2 == 0,
                "current_action": "chase",
            },
        )
        for i in range(n)
    ]


def _ask(http: httpx.Client, client_id: str, ents: list[dict[str, Any]]) -> dict[str, float]:
    """One decide request: the game's wait, the provider's time and the server's token counts."""
    t0 = time.perf_counter()
    r = http.post("/v1/decide", json=decide_body(*ents, client_id=client_id))
    wall = time.perf_counter() - t0
    r.raise_for_status()
    decisions = r.json()["decisions"]
    reply = http.get("/v1/prompt", params={"client_id": client_id}).json()["reply"]
    if reply["error"]:
        raise RuntimeError(f"the model call failed: {reply['error']}")
    return {
        "wall": wall,
        "provider": reply["latency_ms"] / 1000,
        "input": reply["input_tokens"],
        "output": reply["output_tokens"],
        "ai": sum(d["source"] == "AI" for d in decisions),
    }


def _sum(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: sum(r[k] for r in rows) for k in rows[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entities", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    if not AVAILABLE:
        print(MISSING, file=sys.stderr)
        return 2
    print(cpu_probe())
    print(f"{os.cpu_count()} cores; SmolLM2-135M-Instruct Q4_1, llama-cpp-python's server; {args.entities} bees")
    tmp = Path(tempfile.mkdtemp(prefix="npcmind-model-"))
    with model_server(tmp / "model.log", n_ctx=8192) as url:
        provider = ["--provider", "openai", "--base-url", url, "--model", ALIAS]
        svc = ServiceProcess(
            ["--manifest", str(FOREST), "--store", f"sqlite:///{tmp}/m.db", *provider],
            env={"NPCMIND_DEADLINE_MS": "600000"},
        )
        try:
            http = httpx.Client(base_url=svc.url, timeout=900)
            _ask(http, "warm-up", _bees(1, 99))  # loads the model's weights; the format is settled here too
            batch: list[dict[str, float]] = []
            single: list[dict[str, float]] = []
            for k in range(args.rounds):
                ents = _bees(args.entities, k)
                batch.append(_ask(http, f"batch-{k}", ents))
                single.append(_sum([_ask(http, f"single-{k}", [e]) for e in ents]))
        finally:
            svc.stop()
    n = args.entities * args.rounds
    print(f"{'':26}{'wall s':>9}{'model s':>9}{'input tok':>11}{'output tok':>11}{'AI':>6}")
    for name, rows in ((f"{args.entities} in 1 call", batch), (f"{args.entities} in {args.entities} calls", single)):
        s = _sum(rows)
        print(
            f"{name + ', per round':26}{s['wall'] / args.rounds:9.2f}{s['provider'] / args.rounds:9.2f}"
            f"{s['input'] / args.rounds:11.0f}{s['output'] / args.rounds:11.0f}{s['ai'] / args.rounds:6.0f}"
        )
    b, s1 = _sum(batch), _sum(single)
    print(
        f"one call against one a bee: wall time {b['wall'] / s1['wall']:.2f}, input tokens "
        f"{b['input'] / s1['input']:.2f}, output tokens {b['output'] / s1['output']:.2f}; "
        f"input tokens a decision {b['input'] / n:.0f} against {s1['input'] / n:.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
