"""Which change cost what: instructions a decide request along main's history, counted by callgrind (issue 43).

Time on this shared machine varies 2x; the count of instructions a request runs does not (to a few tenths of a
percent between runs). For each commit sampled on the first-parent history from the baseline to main, the commit's
code is checked out in a worktree of its own and served (`npcmind serve`, run by this checkout's Python with the
commit's `src` first on the path) under valgrind's callgrind, its counting switched on only while a fixed number of
requests is answered over real HTTP, then off: the server side's instructions a request, cached and uncached. A
step between two samples is then looked at commit by commit (`--range A..B`).

Two caveats. Instructions are not time: a C routine that the CPU runs with special instructions natively (OpenSSL's
SHA-256 with SHA-NI) runs its generic code under valgrind, so a change to such a routine reads worse here than it
is. And a commit that did not run is skipped (its line says so).

Run: python bench/ab_history.py [--every 8] [--range 90fae6b..main] [--requests 150]   (needs valgrind)
"""

from __future__ import annotations

import argparse
import json
import os
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


def counted(tree: Path, provider: str, cached: bool, n: int) -> float | None:
    """The server's instructions a request over ``n`` requests, or None when the commit did not serve."""
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
    return int(total[0].split()[-1]) / n if total else None


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
        print("| commit | cached: instructions a request | uncached | subject |\n|---|---|---|---|")
        for c in sampled:
            subprocess.run(["git", "-C", str(tree), "checkout", "-q", "--detach", c], check=True)
            subject = subprocess.run(
                ["git", "-C", str(tree), "log", "-1", "--format=%h %s"], check=True, capture_output=True, text=True
            ).stdout.strip()
            hit = counted(tree, f"http://127.0.0.1:{port}", True, args.requests)
            miss = counted(tree, f"http://127.0.0.1:{port}", False, max(20, args.requests // 2))
            cells = [f"{x:,.0f}" if x is not None else "did not serve" for x in (hit, miss)]
            print(f"| {subject[:7]} | {cells[0]} | {cells[1]} | {subject[8:90]} |", flush=True)
    finally:
        provider.terminate()
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
