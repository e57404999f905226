"""Several npcmind processes behind HAProxy on one machine: how a hosted deployment uses every core and lives
through the death of a process. `npcmind cluster` runs it; the tests and bench/scale_bench.py use it as is.

HAProxy (Debian's package) hashes each request's Authorization header onto a process (consistent hashing, so
a process that dies moves only its own sessions), watches the answers passively (a refused connection marks a
process down at once) and checks `/v1/health` every second to take it back, and retries a request on another
process only when the connection failed, so no request is ever sent twice.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from npcmind.http.server import free_port

HAPROXY_CONFIG = """\
# npcmind behind HAProxy: {n} processes on one machine (`npcmind cluster --processes {n}` writes this file)
global
    maxconn {maxconn}
    stats socket {socket} mode 600 level admin

defaults
    mode http
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 10s
    # a health check may take 5 s to answer: a process slowed by a busy machine is not a process gone (one that
    # is gone refuses its connection, which marks it down at once)
    timeout check 5s
    # a request goes to another process only when its connection failed: nothing was sent, so nothing is
    # decided twice; an answer that is late or broken is the game's fallback, not a retry
    retries 3
    retry-on conn-failure
    option redispatch 1

frontend npcmind
    bind {host}:{port}
    default_backend processes

backend processes
    # one session, one process: hash the session token (hosted profile); consistent, so a process that goes
    # away moves only its own sessions
    balance hdr(Authorization)
    hash-type consistent
    option httpchk GET /v1/health
    # weight 100: each process stands 1,600 times on the hash ring; at weight 1 (16 times) random session tokens
    # went 58% to one process of two
    # passive health: a refused or reset connection marks the process down at once; the check takes it back
    default-server weight 100 check inter 1s fall 2 rise 1 observe layer4 error-limit 1 on-error mark-down
{servers}
"""


MAXCONN = 20_000  # connections HAProxy holds at once, where the machine lets it open the files for them


def haproxy_config(
    host: str,
    port: int,
    backends: list[int],
    socket_path: str = "/run/npcmind-haproxy.sock",
    maxconn: int = MAXCONN,
) -> str:
    """The HAProxy configuration for npcmind processes listening on ``backends`` (ports on 127.0.0.1)."""
    servers = "\n".join(f"    server n{i + 1} 127.0.0.1:{p}" for i, p in enumerate(backends))
    return HAPROXY_CONFIG.format(
        n=len(backends), maxconn=maxconn, socket=socket_path, host=host, port=port, servers=servers
    )


def fitting_maxconn() -> int:
    """HAProxy opens two files a connection and refuses to start when ``maxconn`` needs more than the hard
    limit of open files (20,000 on some machines: 20,000 connections need 40,031): as many as fit."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        return MAXCONN
    return max(100, min(MAXCONN, (hard - 100) // 2))


def _wait_port(port: int, proc: subprocess.Popen[str], what: str, timeout: float = 60) -> None:
    """Wait until something accepts connections on ``port``; the deadline only bounds a hang."""
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start (exit code {proc.poll()})")
        time.sleep(0.05)


class Cluster:
    """N `npcmind serve` processes on one store and one Redis, behind one HAProxy."""

    def __init__(
        self, serve_args: list[str], processes: int = 3, port: int = 0, host: str = "127.0.0.1", workdir: str = ""
    ) -> None:
        if shutil.which("haproxy") is None:
            raise RuntimeError("haproxy is not installed (Debian: apt-get install haproxy)")
        self.serve_args = serve_args
        self.host = host
        self.port = port or free_port()
        self.ports = [free_port() for _ in range(processes)]
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="npcmind-cluster-"))
        self.socket = str(self.dir / "haproxy.sock")
        self.procs: list[subprocess.Popen[str] | None] = [None] * processes
        self.haproxy: subprocess.Popen[str] | None = None
        self.env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}

    @property
    def url(self) -> str:
        """Where games connect: the load balancer."""
        return f"http://{self.host}:{self.port}"

    def config(self) -> str:
        """This cluster's HAProxy configuration."""
        return haproxy_config(self.host, self.port, self.ports, self.socket, fitting_maxconn())

    def start(self) -> Cluster:
        """Every process, then HAProxy; each is accepting connections when this returns. When one cannot start,
        those started are stopped again (`with` never reaches ``__exit__`` then: nobody else would stop them)."""
        try:
            for i in range(len(self.ports)):
                self.start_process(i)
            cfg = self.dir / "haproxy.cfg"
            cfg.write_text(self.config())
            log = self.dir / "haproxy.log"  # a file, not a pipe nobody reads: its up/down lines would fill it
            with open(log, "a") as out:
                self.haproxy = subprocess.Popen(
                    ["haproxy", "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL, stderr=out, text=True
                )
            try:
                _wait_port(self.port, self.haproxy, "haproxy")
            except RuntimeError as e:  # HAProxy says why in its log
                raise RuntimeError(f"{e}: {log.read_text().strip()}") from None
        except BaseException:
            self.stop()
            raise
        return self

    def start_process(self, i: int) -> None:
        """Start (or start again) process ``i`` on its port; returns once it printed its ready line."""
        log = open(self.dir / f"npcmind-{i + 1}.log", "a")  # noqa: SIM115 - the child holds it
        proc = subprocess.Popen(
            [sys.executable, "-m", "npcmind.cli", "serve", "--port", str(self.ports[i]), *self.serve_args],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=self.env,
        )
        log.close()
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "ready on" not in line:
            proc.kill()
            raise RuntimeError(f"npcmind process {i + 1} did not start: {line!r}; see {self.dir}/npcmind-{i + 1}.log")
        self.procs[i] = proc

    def kill9(self, i: int) -> None:
        """SIGKILL process ``i``, as a crash would."""
        proc = self.procs[i]
        if proc is not None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            self.procs[i] = None

    def admin(self, command: str) -> str:
        """A command to HAProxy's runtime API (`set server processes/n1 state maint`, `show servers state`)."""
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(self.socket)
            s.sendall(command.encode() + b"\n")
            out = b""
            while chunk := s.recv(65536):
                out += chunk
        return out.decode()

    def stop(self) -> None:
        """SIGTERM every process (each stops cleanly), then HAProxy."""
        for proc in self.procs:
            if proc is not None:
                proc.terminate()
        for i, proc in enumerate(self.procs):
            if proc is not None:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                self.procs[i] = None
        if self.haproxy is not None:
            self.haproxy.terminate()
            self.haproxy.wait(timeout=30)
            self.haproxy = None

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """`npcmind cluster`: N processes and HAProxy in the foreground until Ctrl-C."""
    p = argparse.ArgumentParser(prog="npcmind cluster", description=__doc__)
    p.add_argument("--processes", type=int, default=2, help="npcmind processes (default 2: one a core)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080, help="where HAProxy listens (default 8080)")
    p.add_argument("--print-config", action="store_true", help="print HAProxy's configuration and exit")
    p.add_argument("serve_args", nargs=argparse.REMAINDER, help="after --: the arguments of every npcmind serve")
    args = p.parse_args(argv)
    serve = [a for a in args.serve_args if a != "--"]
    if args.print_config:
        ports = [args.port + 1 + i for i in range(args.processes)]
        print(haproxy_config(args.host, args.port, ports), end="")
        return 0
    if not any(a.startswith("--store") for a in serve) or not any(a.startswith("--redis") for a in serve):
        print(
            "npcmind cluster: every process needs the same shared --store postgresql://... and --redis redis://...",
            file=sys.stderr,
        )
        return 2
    cluster = Cluster(serve, args.processes, args.port, args.host)
    cluster.ports = [args.port + 1 + i for i in range(args.processes)]
    with cluster:
        print(
            f"npcmind cluster ready on {cluster.url}: {args.processes} processes behind haproxy on ports "
            f"{', '.join(map(str, cluster.ports))}; their logs are in {cluster.dir}",
            flush=True,
        )
        try:
            while all(p is not None and p.poll() is None for p in cluster.procs):
                time.sleep(1)
        except KeyboardInterrupt:
            cluster.stop()
            print(f"npcmind cluster stopped: every process stopped cleanly; their logs are in {cluster.dir}")
            return 130
    print("npcmind cluster: a process stopped; see the logs in " + str(cluster.dir), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
