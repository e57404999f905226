"""The TypeScript SDK's reads of the service (issue 39): what a hostile server costs the game, fed n, 8n, 64n.

Each feed runs ``clients/typescript/bench/amplify.mjs`` in Node (``child``): a decide answer whose confidence
has n digits (JSON.parse is linear; the answer is read no further than 1 MiB), GET /v1/policy of n bytes (read
no further than 16 MiB, loaded in the transport), an error body of n bytes (read no further than 64 KiB), and a
stream of n lines for ids never asked (ended after 16). The script reports the CPU of the read itself; the same
surface fed a tiny input is subtracted, and so is the resident memory that run added (the script's own: a
child's peak from wait4 also counts the harness's pages at spawn).

``python bench/amplify/sdk_typescript.py --tick`` measures ``tick()`` of a game in Node against the hostile
server of ``sdk_python.py`` (its own process): ``clients/typescript/bench/hostile.mjs`` prints the frame time's
p50, p99 and max, and the process's peak memory.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TS = ROOT / "clients" / "typescript"
sys.path.insert(0, str(ROOT / "bench"))

from amplify.core import Cost, Feed, Surface, child  # noqa: E402

TINY = {"number": 1, "policy": 300, "error": 1, "strays": 1}


def build() -> None:
    """The SDK compiled to dist/ (once: the scripts import it from there)."""
    if not (TS / "node_modules" / ".bin" / "tsc").exists():  # a fresh clone: the package's own tools first
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=TS, check=True, capture_output=True)
    if not (TS / "dist" / "src" / "index.js").exists():
        subprocess.run(["npm", "run", "build"], cwd=TS, check=True, capture_output=True)


def _run(surface: str, n: int) -> dict[str, object]:
    ran = child(["node", "bench/amplify.mjs", surface, str(n)], cwd=str(TS))
    if ran.code != 0:
        raise RuntimeError(f"amplify.mjs {surface} {n}: exit {ran.code}: {ran.out[-300:].decode(errors='replace')}")
    out: dict[str, object] = json.loads(ran.out.decode().strip().splitlines()[-1])
    return out


def start(surface: str) -> Callable[[], AbstractContextManager[Feed]]:
    """Node and the built SDK checked once, the tiny input's cost measured once, then each feed beside it."""

    @contextmanager
    def started() -> Iterator[Feed]:
        if shutil.which("node") is None:
            raise RuntimeError("node is not installed: the TypeScript SDK's surfaces need Node 20")
        build()
        base = _run(surface, TINY[surface])

        def feed(n: int) -> Cost:
            out = _run(surface, n)
            seconds = max(0.0, float(out["seconds"]) - float(base["seconds"]))  # type: ignore[arg-type]
            grown = max(0, int(out["bytes"]) - int(base["bytes"]))  # type: ignore[call-overload]
            return Cost(seconds, grown, bool(out["refused"]), str(out["note"]))

        yield feed

    return started


SURFACES: list[Surface] = [
    Surface("TypeScript SDK: a decide answer's confidence of n digits", "digits", 20_000,
            "1 MiB an answer (MAX_ANSWER_BYTES); linear parse", start("number"), cap_at=1024 * 1024),
    Surface("TypeScript SDK: GET /v1/policy of n bytes (eight long numbers)", "bytes", 300_000,
            "16,777,216 bytes (policyMaxBytes)", start("policy"), cap_at=16 * 1024 * 1024),
    Surface("TypeScript SDK: an error body of n bytes", "bytes", 16_384,
            "65,536 bytes (MAX_ERROR_BYTES)", start("error"), cap_at=64 * 1024),
    Surface("TypeScript SDK: a decide stream of n lines for ids never asked", "lines", 1_000,
            "16 stray lines (MAX_STRAY_LINES)", start("strays"), cap_at=16),
]  # fmt: skip


def main() -> None:
    """``--tick``: tick() of a game in Node against the hostile server of sdk_python.py."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tick", action="store_true", required=True)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--digits", type=int, default=100_000, help="of each of the policy's eight numbers")
    args = ap.parse_args()
    from amplify.sdk_python import start_hostile

    build()
    proc, url = start_hostile(args.digits)
    try:
        out = subprocess.run(
            ["node", "bench/hostile.mjs", url, str(args.seconds)], cwd=TS, check=True, capture_output=True
        )
        print(out.stdout.decode().strip())
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
