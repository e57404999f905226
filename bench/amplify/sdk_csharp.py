"""The C# SDK's reads (clients/csharp), each fed a hostile input of size n, 8n and 64n in its own Mono process.

Each surface compiles clients/csharp/Examples~/Bench/Amplify.cs with the SDK's sources into a temp dir (never into
the package folder) and runs it once a size with `child`: the program makes the input, warms the same path up (the
JIT), then times the read itself and says whether it was refused or stopped at a cap. The seconds are the read's
(for a stream, the longest Tick() of the game loop: the frame it held); the memory is the process's peak above the
same program fed a tiny input. The caps are clients/csharp/README.md's Limits.

`python bench/amplify/sdk_csharp.py --tick [--phase-s 10]` runs the other figure the issue asks for: the console
game's Tick() percentiles at 60 Hz against a hostile server standing in for the service (HostileServer below).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the harness's package is bench/amplify
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from amplify.core import Cost, Feed, Surface, child

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "csharp"
PROGRAM = PACKAGE / "Examples~" / "Bench" / "Amplify.cs"


BOUNCY_CASTLE = PACKAGE / "Runtime" / "Plugins" / "BouncyCastle.Crypto.dll"  # the SDK's Ed25519 (build.sh's BC)


def csharp_exe(into: Path, runtime: Path, program: Path) -> Path:
    """``program`` and the SDK's sources (``runtime``) as one exe in ``into``, beside the Bouncy Castle DLL it
    loads (mcs at C# 7.0, as build.sh compiles; a compile error says what mcs said)."""
    exe = into / (program.stem + ".exe")
    cmd = ["mcs", "-langversion:7", "-nologo", "-nowarn:1591", "-target:exe", f"-out:{exe}", f"-r:{BOUNCY_CASTLE}"]
    cmd += ["-r:System.Net.Http.dll", "-r:System.Numerics.dll", *map(str, sorted(runtime.glob("*.cs")))]
    done = subprocess.run([*cmd, str(program)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"mcs: {(done.stdout + done.stderr)[-800:]}")
    shutil.copy(BOUNCY_CASTLE, into)
    return exe


def compile_amplify(into: Path) -> Path:
    """The bench program and the SDK's sources as one exe in ``into``."""
    return csharp_exe(into, PACKAGE / "Runtime", PROGRAM)


def mono_surface(mode: str) -> Callable[[], AbstractContextManager[Feed]]:
    """A surface's start: the program compiled once, its peak memory on a tiny input read, then a feed a size."""

    @contextmanager
    def start() -> Iterator[Feed]:
        if shutil.which("mcs") is None or shutil.which("mono") is None:
            raise RuntimeError("no mcs or mono here (Debian: mono-devel)")
        with tempfile.TemporaryDirectory(prefix="npcmind-amplify-cs-") as tmp:
            exe = compile_amplify(Path(tmp))
            floor = min(child(["mono", str(exe), mode, "1"]).peak_bytes for _ in range(2))

            def feed(n: int) -> Cost:
                ran = child(["mono", str(exe), mode, str(n)])
                if ran.code != 0:
                    raise RuntimeError(ran.out.decode(errors="replace")[-800:])
                said = json.loads(ran.out.decode().strip().splitlines()[-1])
                seconds = float(said.get("hold", said["seconds"]))
                note = f"{said['note']} (process {ran.seconds:.2f} s CPU)"
                return Cost(seconds, max(0, ran.peak_bytes - floor), bool(said["capped"]), note[:160])

            yield feed

    return start


SURFACES: list[Surface] = [
    Surface(
        name="C# SDK: Json.Parse of one number of n digits",
        unit="digits",
        base=20_000,
        cap="linear: 800 significant digits read exactly, the rest as one sticky digit (Doubles.KeptDigits)",
        start=mono_surface("number"),
    ),
    Surface(
        name="C# SDK: Policy.Load of a policy file of n bytes (one threshold of n digits)",
        unit="bytes",
        base=512 * 1024,
        cap="Policy.MaxBytes 16 MiB, refused past it; loaded on the sender's thread, never in Tick()",
        start=mono_surface("policy"),
        cap_at=16 * 1024 * 1024,
    ),
    Surface(
        name="C# SDK: HttpClientSender and Transport reading a 500 of n bytes",
        unit="bytes",
        base=8 * 1024 * 1024,
        cap="Limits.MaxErrorBytes 64 KiB (answers 1 MiB): not read past it, an error naming the cap",
        start=mono_surface("error"),
        cap_at=64 * 1024,
    ),
    Surface(
        name="C# SDK: Tick() over a stream of n lines for ids never asked",
        unit="lines",
        base=1_000,
        cap="Limits.MaxStreamLines 65 (and MaxStreamBytes 1 MiB): the stream stopped there, read off the frame",
        start=mono_surface("stream"),
        cap_at=65,
    ),
    Surface(
        name="C# SDK: Tick() over 16 stream lines with confidences of n digits",
        unit="digits",
        base=7_500,
        cap="Lines.MaxLine 64 KiB a line (dropped past it), MaxStreamBytes 1 MiB a stream; read off the frame",
        start=mono_surface("confidence"),
        cap_at=64 * 1024,
    ),
]


# --- Tick() of a game at 60 Hz against a hostile server ------------------------------------------------------------

DIGITS = "123456789" * 20_000
PHASES = ["baseline", "policy", "confidences", "unknown-ids", "error-body"]
DRONE = {"actions": ["patrol", "chase", "recharge", "hold"]}


def hostile_policy(digits: int = 100_000) -> bytes:
    """A policy for the game's drones whose eight thresholds are numbers of ``digits`` digits (about 800 kB)."""
    number = "0." + DIGITS[:digits]
    tree = {
        "feature": [0, 0, 0, 0, 0, 0, 0, 0, -1],
        "threshold": ["N"] * 8 + [0],
        "left": [1, 2, 3, 4, 5, 6, 7, 8, -1],
        "right": [8, 8, 8, 8, 8, 8, 8, 8, -1],
        "value": [[]] * 8 + [[0.3, 0.3, 0.2, 0.2]],
    }
    types = {"drone": {**DRONE, "features": [{"source": "observation", "field": "battery", "encoding": "number"}],
                       "trees": [tree]}}  # fmt: skip
    doc = {"format": "npcmind-policy", "format_version": 1, "manifest_version": "v1", "types": types}
    return json.dumps(doc).replace('"N"', number).encode()


class HostileServer(ThreadingHTTPServer):
    """Stands in for the service: manifest, health and telemetry as it answers them, and per phase a hostile
    answer to /v1/decide and /v1/policy (``phase`` is set by the driver)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Hostile)
        self.phase = "baseline"
        self.policy = hostile_policy()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Hostile(BaseHTTPRequestHandler):
    """One request to the hostile server."""

    server: HostileServer

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, media: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", media)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, status: int, media: str, chunks: Iterator[bytes]) -> None:
        """Bytes until the chunks end or the client hangs up (no length: the connection's close ends it)."""
        self.send_response(status)
        self.send_header("content-type", media)
        self.send_header("connection", "close")
        self.end_headers()
        try:
            for chunk in chunks:
                self.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self) -> None:
        if self.path.startswith("/v1/health"):
            self._send(200, b'{"status": "ok", "deadline_ms": 2000}')
        elif self.path.startswith("/v1/manifest"):
            manifest = {"defaults": {"ttl_ms": 1500, "refresh_ms": 500}, "types": {"drone": DRONE}}
            self._send(200, json.dumps({"version": "v1", "manifest": manifest}).encode())
        elif self.path.startswith("/v1/policy") and self.server.phase == "policy":
            self._send(200, self.server.policy)
        else:
            self._send(404, b'{"error": {"code": "not_found", "message": "none"}}')

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if not self.path.startswith("/v1/decide"):
            self._send(200, b"{}")
            return
        ask = json.loads(body)
        ids, epoch, phase = [e["id"] for e in ask["entities"]], ask["epoch"], self.server.phase
        if phase == "error-body":  # 600 MB announced and sent, until the client stops reading
            self.send_response(500)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(600 * 2**20))
            self.end_headers()
            block = b"x" * 65536
            try:
                for _ in range(600 * 16):
                    self.wfile.write(block)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        self._stream(200, "application/x-ndjson", self._lines(phase, ids, epoch))

    @staticmethod
    def _line(entity: str, confidence: str = "0.9") -> bytes:
        return (
            f'{{"id": "{entity}", "source": "AI", "action": "patrol", "label": "Patrol", "confidence": {confidence},'
            f' "ttl_ms": 1500, "decision_id": "d-{entity}", "cached": false}}\n'
        ).encode()

    def _lines(self, phase: str, ids: list[str], epoch: int) -> Iterator[bytes]:
        if phase == "unknown-ids":  # without end
            block = b"".join(self._line(f"nobody-{i}") for i in range(100))
            while True:
                yield block
        confidence = "0." + DIGITS[:60_000] if phase == "confidences" else "0.9"
        for entity in ids:
            yield self._line(entity, confidence)
        yield json.dumps({"a2g": "0.1", "epoch": epoch, "latency_ms": 1}).encode() + b"\n"


def game_exe(into: Path, runtime: Path) -> Path:
    """The console game of tests/test_csharp.py compiled with the SDK's sources (``runtime``) into ``into``."""
    return csharp_exe(into, runtime, PACKAGE / "Examples~" / "Console" / "Game.cs")


def tick_run(phase_s: float, phases: list[str], runtime: Path) -> dict[str, Any]:
    """The game's report of one run through ``phases`` against the hostile server (its peak memory added)."""
    server = HostileServer()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="npcmind-tick-cs-") as tmp:
        exe = game_exe(Path(tmp), runtime)
        cmd = ["mono", str(exe), server.url, "policy-every-ms=500"]
        game = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert game.stdin is not None and game.stdout is not None
        try:
            assert game.stdout.readline().strip() == "ready", "the game did not run its first frame"
            for phase in phases:
                server.phase = phase
                game.stdin.write(f"phase {phase}\n")
                game.stdin.flush()
                time.sleep(phase_s)
            game.stdin.write("end\n")
            game.stdin.flush()
            out = game.stdout.read()
            _, status, usage = os.wait4(game.pid, 0)
            game.returncode = os.waitstatus_to_exitcode(status)
            err = game.stderr.read() if game.stderr else ""
        finally:
            if game.poll() is None:
                game.kill()
            server.shutdown()
    if game.returncode != 0 or not out.strip():
        raise RuntimeError(f"the game failed (exit {game.returncode}):\n{err[-3000:]}")
    report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    report["peak_mb"] = usage.ru_maxrss / 1024
    report["said"] = sorted({line for line in err.splitlines() if line.startswith("npcmind: ")})
    return report


def main() -> None:
    """Print the game's Tick() percentiles per hostile phase (the issue's figure: p99 under 16 ms)."""
    ap = argparse.ArgumentParser(description="Tick() of the C# console game against a hostile server")
    ap.add_argument("--tick", action="store_true", help="run the hostile server and the game (the only mode)")
    ap.add_argument("--phase-s", type=float, default=10.0, help="seconds a phase")
    ap.add_argument("--phases", default=",".join(PHASES), help="which phases, in order (comma-separated)")
    ap.add_argument("--runtime", type=Path, default=PACKAGE / "Runtime", help="the SDK's sources (another checkout's)")
    args = ap.parse_args()
    if not args.tick:
        ap.error("--tick: the surfaces run from bench/amplification_bench.py --only 'c# sdk'")
    phases = args.phases.split(",")
    report = tick_run(args.phase_s, phases, args.runtime)
    print(f"Tick() of the C# console game, 20 drones at 60 Hz, against a hostile server; phases of {args.phase_s:g} s")
    head = zip(["frames", "p50 ms", "p99 ms", "max ms", "AI", "native", "thrown"], [7, 9, 9, 9, 6, 8, 8], strict=True)
    print(f"{'phase':<14}" + "".join(f"{h:>{w}}" for h, w in head) + "  policy")
    for name in phases:
        p, t = report[name], report[name]["tick_ms"]
        print(f"{name:<14}{p['frames']:>7}{t['p50']:>9.3f}{t['p99']:>9.3f}{t['max']:>9.3f}{p['ai']:>6}{p['native']:>8}"
              f"{p['thrown']:>8}  {'in use' if p.get('service_policy') else '-'}")  # fmt: skip
    print(f"peak resident memory of the game: {report['peak_mb']:.0f} MB; stats {json.dumps(report['stats'])}")
    for line in report["said"]:
        print(f"  said: {line[:200]}")


if __name__ == "__main__":
    main()
