"""Finding 7's figures for docs/bench.md: loading a hostile policy text is linear (times for an input and its
double, in one run), and a choose costs the same on a 16 MiB policy as on a small one (work bounded by the
entity's type, not the file). Python SDK, and the TypeScript SDK when Node and its build are there.

    python bench/policy_bench.py        (from the repository root; `npm run build` in clients/typescript for Node)
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))
from npcmind_client.policy import MAX_ACTIONS, MAX_TREES, Policy, PolicyError  # noqa: E402

HANDMADE = ROOT / "clients" / "conformance" / "policy" / "handmade.policy.json"
SHAPES = {
    "escaped quotes (the finding)": lambda n: '{"format":"npcmind-policy","format_version":1,"x":"' + '\\"' * (n // 2),
    "quotes": lambda n: '{"x":[' + '"' * n + "]}",
    "brackets": lambda n: "[" + "[]," * (n // 3) + "[]]",
}


def _tree(rng: random.Random, depth: int, actions: int, features: int) -> dict[str, list[Any]]:
    """A full tree of ``depth`` splits, as distill writes them (leaves: distributions)."""
    t: dict[str, list[Any]] = {k: [] for k in ("feature", "threshold", "left", "right", "value")}

    def add(d: int) -> int:
        i = len(t["feature"])
        for k, v in (("feature", -1), ("threshold", 0.0), ("left", -1), ("right", -1), ("value", [])):
            t[k].append(v)
        if d < depth:
            t["feature"][i], t["threshold"][i] = rng.randrange(features), round(rng.random(), 3)
            t["left"][i] = add(d + 1)
            t["right"][i] = add(d + 1)
        else:
            t["value"][i] = [round(rng.random() * 0.9 + 0.05, 3) for _ in range(actions)]
        return i

    add(0)
    return t


def big_policy() -> tuple[str, dict[str, Any]]:
    """A policy just under 16 MiB: distill-like types (one depth-10 tree, 8 actions) and one type at the
    bounds (32 trees of depth 8, 256 actions), beside the handmade file's bee."""
    rng = random.Random(0)
    data = json.loads(HANDMADE.read_text())
    feats = [{"source": "observation", "field": f"f{i}", "encoding": "number"} for i in range(8)]
    data["types"]["widest"] = {"actions": [f"a{i}" for i in range(MAX_ACTIONS)], "features": feats,
                               "trees": [_tree(rng, 8, MAX_ACTIONS, 8) for _ in range(MAX_TREES)]}  # fmt: skip
    one = {"actions": [f"a{i}" for i in range(8)], "features": feats, "trees": [_tree(rng, 10, 8, 8)]}
    size = len(json.dumps(data)) + len(json.dumps(one)) + 16
    i = 0
    while size < 16 * 1024 * 1024 - 200_000:
        data["types"][f"t{i}"] = one
        size += len(json.dumps(one)) + 16
        i += 1
    text = json.dumps(data)
    return text, data


def timed(f: Any, repeat: int = 1) -> float:
    t = time.perf_counter()
    for _ in range(repeat):
        f()
    return (time.perf_counter() - t) / repeat


def refuse(text: str) -> None:
    with contextlib.suppress(PolicyError):
        Policy.load(text.encode())


def python_figures(big: str) -> None:
    print("Python SDK")
    for name, shape in SHAPES.items():
        texts = [shape(n) for n in (64 * 1024, 128 * 1024, 8 * 2**20, 16 * 2**20 - 4096)]
        a, b, c, d = (timed(lambda x=x: refuse(x), 20 if len(x) < 2**20 else 3) for x in texts)
        print(
            f"  refuse {name}: 64 KB {a * 1e3:.2f} ms, 128 KB {b * 1e3:.2f} ms (x{b / a:.2f}); "
            f"8 MiB {c:.2f} s, 16 MiB {d:.2f} s (x{d / c:.2f})"
        )
    small = Policy.load(HANDMADE)
    t = timed(lambda: Policy.load(big))
    p = Policy.load(big)
    obs = {"hp_fraction": 0.3, "distance_to_player": 50, "sees_player": True, "current_action": "idle"}
    legal = ["idle", "wander", "chase", "flee"]
    s = timed(lambda: small.choose("bee", obs, legal), 20_000)
    b = timed(lambda: p.choose("bee", obs, legal), 20_000)
    wide = {f"f{i}": 0.5 for i in range(8)}
    w = timed(lambda: p.choose("widest", wide, [f"a{i}" for i in range(MAX_ACTIONS)]), 200)
    print(f"  a valid {len(big) / 2**20:.1f} MiB policy ({len(p.types)} types): loaded in {t:.2f} s")
    print(f"  choose on the bee: small file {s * 1e6:.1f} us, 16 MiB file {b * 1e6:.1f} us (x{b / s:.2f})")
    print(f"  choose on the widest type allowed (32 trees, 256 actions all legal): {w * 1e6:.0f} us")


def node_figures(big_path: Path) -> None:
    dist = ROOT / "clients" / "typescript" / "dist" / "src" / "policy.js"
    if shutil.which("node") is None or not dist.exists():
        print("TypeScript SDK: skipped (no node, or no build in clients/typescript/dist)")
        return
    script = ROOT / "bench" / "policy_bench.mjs"
    args = ["node", str(script), dist.as_uri(), str(big_path), str(HANDMADE)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    print(r.stdout.rstrip() or r.stderr[-2000:])


def main() -> None:
    big, _ = big_policy()
    python_figures(big)
    path = Path("/tmp/npcmind-policy-bench.json")
    path.write_text(big)
    try:
        node_figures(path)
    finally:
        path.unlink()


if __name__ == "__main__":
    main()
