"""The Python SDK's reads of the service (issue 39): what a hostile server costs the game, fed n, 8n, 64n.

Each surface drives the SDK's own code in this process (``in_process``): a decision line whose confidence has
n digits (a float: parsed in linear time) or whose ttl_ms has n digits (an integer: Python refuses past 4,300
digits), GET /v1/policy of n bytes (read no further than 16 MiB, loaded on the worker), an error body of n
bytes (read no further than 64 KiB), and a stream of n lines for ids never asked (ended after 16). Bodies come
through httpx's transport as a stream of 64 KiB chunks, so the SDK's counting reader is what is measured.

``python bench/amplify/sdk_python.py --tick`` also measures ``tick()`` of a game (60 frames a second, 100
bees) against a hostile server in its own process (``--serve PORT``): a policy of eight 100,000-digit numbers
fetched every 200 ms, decide streams whose lines carry 60,000-digit confidences then never end with lines for
unknown ids, and a 600 MB body for every telemetry and report (a 500). It prints the frame time's p50, p99 and
max, and the process's peak memory.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402

from amplify.core import Cost, Surface, in_process, simple  # noqa: E402
from npcmind_client import DecideClient, DecideOptions  # noqa: E402
from npcmind_client.limits import MAX_ERROR_BYTES, MAX_STRAY_LINES  # noqa: E402
from npcmind_client.policy import MAX_BYTES  # noqa: E402
from npcmind_client.transport import Transport  # noqa: E402
from npcmind_client.wire import Malformed, read_stream_line  # noqa: E402

NDJSON = "application/x-ndjson"
MANIFEST = {"types": {"bee": {"refresh_ms": 1000, "ttl_ms": 60_000}}}
CHUNK = 64 * 1024


def line(eid: str, confidence: str = "0.9", ttl: str = "60000") -> bytes:
    """A decision line with its numbers written as given."""
    return (
        f'{{"source":"AI","id":"{eid}","action":"flee","label":"Flee","confidence":{confidence},'
        f'"ttl_ms":{ttl},"decision_id":"d-{eid}","cached":false}}\n'
    ).encode()


def policy_of(digits: int, count: int = 8) -> bytes:
    """A policy whose one tree's thresholds are ``count`` numbers of ``digits`` digits each."""
    tree = {"feature": [-1], "threshold": ["N"], "left": [-1], "right": [-1], "value": [[1]]}
    bee = {"actions": ["flee"], "features": [], "trees": [tree]}
    doc = {"format": "npcmind-policy", "format_version": 1, "manifest_version": "v1", "types": {"bee": bee}}
    return json.dumps(doc).replace('"N"', ",".join("9" * digits for _ in range(count))).encode()


def chunks(head: bytes, piece: bytes, total: int) -> Iterator[bytes]:
    """``head``, then ``piece`` repeated, ``total`` bytes in all, in chunks of at most 64 KiB (made as read; a
    piece shorter than that is repeated whole in each chunk, so its lines stay whole)."""
    if head:
        yield head
    sent, block = len(head), piece * max(1, CHUNK // len(piece))
    while sent < total:
        at = 0
        while at < len(block) and sent < total:
            part = block[at : at + min(CHUNK, total - sent)]
            at += len(part)
            sent += len(part)
            yield part


def serving(handler: Callable[[httpx.Request], httpx.Response]) -> Transport:
    """The SDK's transport, its HTTP answered by ``handler`` in this process (a stream, as from a socket)."""
    return Transport("http://hostile.test", 60.0, 1, transport=httpx.MockTransport(handler))


def quiet() -> None:
    """The SDK says each refusal once in its log: not into the harness's table."""
    logging.getLogger("npcmind_client").setLevel(logging.CRITICAL)


def _number(n: int, integer: bool) -> Cost:
    text = line("b0", ttl="9" * n).decode() if integer else line("b0", confidence="0." + "9" * n).decode()
    return in_process(lambda: read_stream_line(text), refused=lambda e: isinstance(e, Malformed))


def _policy(n: int) -> Cost:
    body = policy_of(max(1, (n - 300) // 8))
    t = serving(lambda r: httpx.Response(200, content=chunks(b"", body, len(body))))
    got: list[Any] = []
    try:
        cost = in_process(lambda: got.append(t.call("GET", "/v1/policy?client_id=g", {})[1]))
    finally:
        t.close()
    why = str(got[0]) if got else ""
    return replace(cost, refused="larger than" in why, note=why[:100])


def _error(n: int) -> Cost:
    t = serving(lambda r: httpx.Response(500, content=chunks(b"", b"x", n), headers={"content-type": "text/html"}))
    got: list[Any] = []
    try:
        cost = in_process(lambda: got.append(t.call("POST", "/v1/telemetry", {})[1]))
    finally:
        t.close()
    why = json.dumps(got[0]) if got else ""
    return replace(cost, refused="MAX_ERROR_BYTES" in why, note=why[:100])


def _strays(n: int) -> Cost:
    """n lines for ids never asked, in one decide stream, through DecideClient (its worker and its ticks)."""
    ghosts = b"".join(line(f"ghost{i}") for i in range(64))

    def handler(r: httpx.Request) -> httpx.Response:
        if r.url.path != "/v1/decide":
            return httpx.Response(200, json={})
        total = n * len(ghosts) // 64
        return httpx.Response(200, content=chunks(b"", ghosts, total), headers={"content-type": NDJSON})

    quiet()
    options = DecideOptions(epoch=1, manifest=MANIFEST, timeout_ms=60_000, fetch_policy=False)
    c = DecideClient("http://hostile.test", "g", options=options, transport=httpx.MockTransport(handler))
    c.track("b0", "bee", {"hp": 1}, ["flee"])

    def run() -> str:
        while c.stats.streams_cut == 0:  # as a game does, a frame at a time: ended at the 17th stray line
            c.tick()
            time.sleep(0.001)
        return f"streams cut {c.stats.streams_cut}"

    try:
        cost = in_process(run)
    finally:
        c.close()
    return replace(cost, refused=n > MAX_STRAY_LINES and "cut 1" in cost.note)


SURFACES: list[Surface] = [
    Surface("Python SDK: a decision line's confidence of n digits (a float)", "digits", 20_000,
            "64 KiB a line (MAX_LINE); linear parse", simple(lambda n: _number(n, False))),
    Surface("Python SDK: a decision line's ttl_ms of n digits (an integer)", "digits", 20_000,
            "Python's int: 4,300 digits, refused past", simple(lambda n: _number(n, True)), cap_at=4_300),
    Surface("Python SDK: GET /v1/policy of n bytes (eight long numbers)", "bytes", 300_000,
            f"{MAX_BYTES:,} bytes (policy_max_bytes)", simple(_policy), cap_at=MAX_BYTES),
    Surface("Python SDK: an error body of n bytes", "bytes", 16_384,
            f"{MAX_ERROR_BYTES:,} bytes (MAX_ERROR_BYTES)", simple(_error), cap_at=MAX_ERROR_BYTES),
    Surface("Python SDK: a decide stream of n lines for ids never asked", "lines", 1_000,
            f"{MAX_STRAY_LINES} stray lines (MAX_STRAY_LINES)", simple(_strays), cap_at=MAX_STRAY_LINES),
]  # fmt: skip


# --- the hostile server, and a game's tick() against it --------------------------------------------------


class Hostile(BaseHTTPRequestHandler):
    """An npcmind that attacks its client: every answer is one of the issue's findings."""

    protocol_version = "HTTP/1.1"
    POLICY = policy_of(100_000)
    GHOSTS = b"".join(line(f"ghost{i}") for i in range(64))

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/v1/policy"):
            self._whole(200, self.POLICY)
        else:
            self._whole(200, b"{}")

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.path == "/v1/decide":
            head = b"".join(line(f"b{i}", confidence="0." + "9" * 60_000) for i in range(16))
            self._endless(200, NDJSON, head, self.GHOSTS, 2**40)
        else:  # telemetry and reports: a 600 MB error
            self._endless(500, "text/html", b"", b"x" * CHUNK, 600 * 1000 * 1000)

    def _whole(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _endless(self, status: int, kind: str, head: bytes, piece: bytes, total: int) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        try:
            for data in chunks(head, piece, total):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True


def serve(port: int, digits: int) -> None:
    """Run the hostile server on ``port`` until killed (its own process: its CPU is not the game's); its policy
    holds eight numbers of ``digits`` digits."""
    Hostile.POLICY = policy_of(digits)
    server = ThreadingHTTPServer(("127.0.0.1", port), Hostile)
    server.daemon_threads = True
    print(f"listening on {port}", flush=True)
    server.serve_forever()


def start_hostile(digits: int = 100_000) -> tuple[subprocess.Popen[bytes], str]:
    """The hostile server in a child process (its policy: eight numbers of ``digits`` digits), and its URL."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, __file__, "--serve", str(port), "--digits", str(digits)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()
    return proc, f"http://127.0.0.1:{port}"


def tick_bench(url: str, seconds: float) -> dict[str, Any]:
    """A game at 60 frames a second with 100 bees against the server at ``url``: each tick's duration."""
    options = DecideOptions(epoch=1, manifest=MANIFEST, manifest_version="v1", timeout_ms=60_000,
                            policy_refresh_ms=200, telemetry_ms=200)  # fmt: skip
    c = DecideClient(url, "hostile-bench", options=options)
    for i in range(100):
        c.track(f"b{i}", "bee", {"hp": 1}, ["flee", "chase"])
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage()[:90])  # type: ignore[method-assign]
    logging.getLogger("npcmind_client").addHandler(handler)
    samples: list[float] = []
    gaps: list[float] = []  # from one frame's start to the next: what holds the game between its ticks too
    end = time.monotonic() + seconds
    last = time.perf_counter()
    while time.monotonic() < end:
        t0 = time.perf_counter()
        gaps.append(t0 - last)
        last = t0
        c.tick()
        samples.append(time.perf_counter() - t0)
        time.sleep(max(0.0, 1 / 60 - samples[-1]))
    s = c.stats
    c.close()
    ordered, apart = sorted(samples), sorted(gaps[1:])
    return {
        "sdk": "python",
        "ticks": len(samples),
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 3),
        "max_ms": round(ordered[-1] * 1000, 3),
        "frame_p99_ms": round(apart[int(len(apart) * 0.99) - 1] * 1000, 3),
        "frame_max_ms": round(apart[-1] * 1000, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "streams_cut": s.streams_cut,
        "requests": s.requests,
        "said": said,
    }


def main() -> None:
    """``--serve PORT``: the hostile server; ``--tick``: the tick figures against it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", type=int)
    ap.add_argument("--tick", action="store_true")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--digits", type=int, default=100_000, help="of each of the policy's eight numbers")
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.digits)
        return
    proc, url = start_hostile(args.digits)
    try:
        print(json.dumps(tick_bench(url, args.seconds)))
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
