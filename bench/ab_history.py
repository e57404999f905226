"""Which change cost what: instructions a decide request along main's history, counted by callgrind (issue 43).

Time on this shared machine varies 2x; the count of instructions a request runs does not (to a few tenths of a
percent between runs). For each commit sampled on the first-parent history from the baseline to main, the commit's
code is checked out in a worktree of its own and served (`npcmind serve`, run by this checkout's Python with the
commit's `src` first on the path) under valgrind's callgrind, its counting switched on only while a fixed number of
requests is answered over real HTTP, then off: the server side's instructions a request, cached and uncached. A
step between two samples is then looked at commit by commit (`--range A..B`).

Two caveats. Instructions are not time: a C routine that the CPU runs with special instructions natively (OpenSSL's
SHA-256 with SHA-NI) runs its generic code under valgrind, so a change to such a routine reads worse here than it
is: each count is also given without the hash routines (OpenSSL's, hashlib's wrapper of them, its BLAKE2b), which
compares the rest. And a commit that did not run is skipped (its line says so).

Run: python bench/ab_history.py [--every 8] [--range 90fae6b..main] [--requests 150]   (needs valgrind)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab import BASELINE, ROOT, free_port
from support import bee, decide_body


def _body(k: int, cached: bool) -> bytes:
    ents = [bee(f"b{i}", position=[i * 7.5, i * 3.0]) for i in range(16)]
    if not cached:  # every request's observations new: every entity a model call
        for i, e in enumerate(ents):
            e["observation"]["distance_to_player"] = 1000 + k * 200 + i * 10
    return json.dumps(decide_body(*ents, client_id="bench")).encode()


def counted(tree: Path, provider: str, cached: bool, n: int) -> tuple[float, float] | None:
    """The server's instructions a request over ``n`` requests and the share of them in hash routines, or None
    when the commit did not serve."""
    tmp = Path(tempfile.mkdtemp(prefix="npcmind-history-"))
    port = free_port()
    env = {**os.environ, "NPCMIND_CACHE_ENTRIES": "2000000", "PYTHONHASHSEED": "0"}
    env["PYTHONPATH"] = f"{tree}/src:{tree}/clients/python/src"
    argv = ["--manifest", f"{tree}/examples/forest.yaml", "--store", f"sqlite:///{tmp}/s.db", "--port", str(port)]
    argv += ["--provider", "openai", "--base-url", f"{provider}/v1", "--model", "scripted"]
    err = (tmp / "err").open("w")
    srv = subprocess.Popen(
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={tmp}/cg.out",
            sys.executable,
            "-m",
            "npcmind.cli",
            "serve",
            *argv,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=err,
    )
    http = httpx.Client(timeout=120)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if srv.poll() is not None or time.monotonic() > deadline:
                return None
            try:
                http.get(f"{url}/v1/health")
                break
            except httpx.HTTPError:
                time.sleep(0.5)
        bodies = [_body(k, cached) for k in range(n + 20)]
        for b in bodies[:20]:  # warm: the cache filled, every bee a chosen action its neighbours show
            http.post(f"{url}/v1/decide", content=b, headers={"content-type": "application/json"})
        subprocess.run(["callgrind_control", "-i", "on", str(srv.pid)], capture_output=True, check=False)
        for b in bodies[20:]:
            r = http.post(f"{url}/v1/decide", content=b, headers={"content-type": "application/json"})
            if r.status_code != 200:
                return None
        subprocess.run(["callgrind_control", "-i", "off", str(srv.pid)], capture_output=True, check=False)
    finally:
        srv.send_signal(signal.SIGINT)
        srv.wait(120)
        err.close()
    total = [line for line in (tmp / "err").read_text().splitlines() if "Collected" in line]
    if not total:
        return None
    return int(total[0].split()[-1]) / n, hashing_share(tmp / "cg.out")


HASHING = re.compile(r"libcrypto|_hashlib|_blake2")  # OpenSSL (SHA-256), its hashlib wrapper, hashlib's BLAKE2b


def hashing_share(out: Path) -> float:
    """The share of a count in hash routines, which valgrind runs as generic code: OpenSSL's SHA-256 uses the
    CPU's SHA instructions natively (2x BLAKE2b's speed on this machine) and none under valgrind, so the count
    with them misstates a change between the two; the count without them compares the rest."""
    listing = subprocess.run(
        ["callgrind_annotate", "--threshold=100", str(out)], capture_output=True, text=True, check=False
    ).stdout
    total = hashing = 0
    for line in listing.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$", line)
        if m is None:
            continue
        n = int(m.group(1).replace(",", ""))
        if "PROGRAM TOTALS" in line:
            total = n
        elif HASHING.search(m.group(2)):
            hashing += n
    return hashing / total if total else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--range", default=f"{BASELINE}..main")
    ap.add_argument("--every", type=int, default=8, help="sample every this many first-parent commits")
    ap.add_argument("--requests", type=int, default=150)
    args = ap.parse_args()
    first = args.range.split("..")[0]
    commits = subprocess.run(
        ["git", "-C", str(ROOT), "rev-list", "--first-parent", "--reverse", args.range],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    sampled = [first] + [c for i, c in enumerate(commits, 1) if i % args.every == 0 or c == commits[-1]]
    tree = Path(tempfile.mkdtemp(prefix="npcmind-history-tree-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), first], check=True)
    port = free_port()
    provider = subprocess.Popen(
        [sys.executable, "-m", "npcmind.cli", "scripted-provider", "--port", str(port)], stdout=subprocess.DEVNULL
    )
    try:
        time.sleep(2)
        print(
            "| commit | cached: instructions a request | without hashing | uncached | without hashing | subject |\n"
            "|---|---|---|---|---|---|"
        )
        for c in sampled:
            subprocess.run(["git", "-C", str(tree), "checkout", "-q", "--detach", c], check=True)
            subject = subprocess.run(
                ["git", "-C", str(tree), "log", "-1", "--format=%h %s"], check=True, capture_output=True, text=True
            ).stdout.strip()
            hit = counted(tree, f"http://127.0.0.1:{port}", True, args.requests)
            miss = counted(tree, f"http://127.0.0.1:{port}", False, max(20, args.requests // 2))
            cells = [
                f"{x[0]:,.0f} | {x[0] * (1 - x[1]):,.0f}" if x is not None else "did not serve | -" for x in (hit, miss)
            ]
            print(f"| {subject[:7]} | {cells[0]} | {cells[1]} | {subject[8:90]} |", flush=True)
    finally:
        provider.terminate()
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
