"""Several npcmind processes behind HAProxy on one machine: how a hosted deployment uses every core and lives
through the death of a process. `npcmind cluster` runs it; the tests and bench/scale_bench.py use it as is.

HAProxy (Debian's package) hashes each request's session token onto a process (consistent hashing, so a process
that dies moves only its own sessions), watches the answers passively (a refused connection marks a process
down at once) and checks `/v1/health` every second to take it back, and retries a request on another process
only when the connection failed, so no request is ever sent twice. `npcmind cluster` supervises its children:
a process (or HAProxy) that dies is started again after a bounded backoff while the others serve on; SIGTERM
or Ctrl-C stops every child and HAProxy, and a cluster killed with SIGKILL takes its children with it.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from npcmind.config import READ_TIMEOUT_S, Settings
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
    # a request's head must arrive whole within {http_request}, as each process cuts a request that is slower
    # (NPCMIND_READ_TIMEOUT_S): a client sending a byte a second no longer holds a connection for a minute
    timeout http-request {http_request}
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
    # one session, one process: hash the session token (hosted profile), the second word of the first
    # Authorization header as each process reads it, so `Bearer T`, `bearer T` and `BEARER  T` go alike;
    # consistent, so a process that goes away moves only its own sessions
    balance hash req.fhdr(authorization,1),word(2,' ')
    # djb2, not the default sdbm: on the token alone sdbm sent 55% of the spread test's 2,000 tokens to one
    # process of two (djb2 52.7%), and 8,000 signed tokens 51.1% (djb2 50.6%)
    hash-type consistent djb2
    option httpchk GET /v1/health
    # weight 100: each process stands 1,600 times on the hash ring; at weight 1 (16 times) random session tokens
    # went 58% to one process of two
    # passive health: a refused or reset connection marks the process down at once; the check takes it back
    default-server weight 100 check inter 1s fall 2 rise 1 observe layer4 error-limit 1 on-error mark-down
{servers}
"""


MAXCONN = 20_000  # connections HAProxy holds at once, where the machine lets it open the files for them
FIRST_RESTART_S = 1.0  # a child that died is started again after 1 s, then 2, 4, … while it keeps dying
MAX_RESTART_S = 30.0  # at most this long between two starts: a cause fixed is served again within 30 s
STABLE_S = 60.0  # a child that ran this long before it died starts again after FIRST_RESTART_S
START_S = 120.0  # a process that printed no ready line within it did not start (a slow machine's start: 10 s)
POLL_S = 0.2  # how often the supervisor looks at its children
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def haproxy_config(
    host: str,
    port: int,
    backends: list[int],
    socket_path: str = "/run/npcmind-haproxy.sock",
    maxconn: int = MAXCONN,
    read_timeout_s: float = READ_TIMEOUT_S,
) -> str:
    """The HAProxy configuration for npcmind processes listening on ``backends`` (ports on 127.0.0.1)."""
    servers = "\n".join(f"    server n{i + 1} 127.0.0.1:{p}" for i, p in enumerate(backends))
    ms = max(1, round(read_timeout_s * 1000))
    return HAPROXY_CONFIG.format(
        n=len(backends),
        maxconn=maxconn,
        socket=socket_path,
        host=host,
        port=port,
        servers=servers,
        http_request=f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms",
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


def _dies_with(parent: int) -> Callable[[], None] | None:
    """A child's pre-exec step that has Linux send it SIGTERM when the cluster dies, even by SIGKILL (nobody
    is left to stop it then: it would hold its port for ever). PR_SET_PDEATHSIG follows the thread that
    started the child: start children from a thread that lives as long as the cluster (the main one)."""
    if sys.platform != "linux":
        return None
    libc = ctypes.CDLL(None, use_errno=True)

    def arm() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the cluster died before the line above: nobody would send the signal
            os.kill(os.getpid(), signal.SIGTERM)

    return arm


def _ready_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The first line ``proc`` prints, or "" when it exits or prints nothing within ``timeout``."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else ""


def _end(proc: subprocess.Popen[str]) -> None:
    """Wait for a child told to stop; SIGKILL it when it does not within 30 s."""
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def exit_status(code: int | None) -> str:
    """How a child ended, as the log says it: ``exit status 1``, ``killed by SIGKILL``."""
    if code is None:
        return "gone"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


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
        timeout = Settings.from_env(self.env).read_timeout_s  # the processes' own cut, from their environment
        return haproxy_config(self.host, self.port, self.ports, self.socket, fitting_maxconn(), timeout)

    def start(self) -> Cluster:
        """Every process, then HAProxy; each is accepting connections when this returns. When one cannot start,
        those started are stopped again (`with` never reaches ``__exit__`` then: nobody else would stop them)."""
        try:
            for i in range(len(self.ports)):
                self.start_process(i)
            cfg = self.dir / "haproxy.cfg"
            cfg.write_text(self.config())
            self.start_haproxy()
        except BaseException:
            self.stop()
            raise
        return self

    def start_haproxy(self) -> None:
        """Start (or start again) HAProxy on the written configuration; returns once it accepts connections."""
        log = self.dir / "haproxy.log"  # a file, not a pipe nobody reads: its up/down lines would fill it
        with open(log, "a") as out:
            self.haproxy = subprocess.Popen(
                ["haproxy", "-db", "-f", str(self.dir / "haproxy.cfg")],
                stdout=subprocess.DEVNULL,
                stderr=out,
                text=True,
                preexec_fn=_dies_with(os.getpid()),
            )
        try:
            _wait_port(self.port, self.haproxy, "haproxy")
        except RuntimeError as e:  # HAProxy says why in its log
            raise RuntimeError(f"{e}: {log.read_text().strip()}") from None

    def start_process(self, i: int) -> None:
        """Start (or start again) process ``i`` on its port; returns once it printed its ready line."""
        log = open(self.dir / f"npcmind-{i + 1}.log", "a")  # noqa: SIM115 - the child holds it
        self.procs[i] = proc = subprocess.Popen(  # kept at once: a stop meanwhile stops it too
            [sys.executable, "-m", "npcmind.cli", "serve", "--port", str(self.ports[i]), *self.serve_args],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=self.env,
            preexec_fn=_dies_with(os.getpid()),
        )
        log.close()
        line = _ready_line(proc, START_S)
        if "ready on" not in line:
            proc.kill()
            _end(proc)
            self.procs[i] = None
            raise RuntimeError(self._why_not(i, line))

    def _why_not(self, i: int, line: str) -> str:
        """Why process ``i`` did not start: its log's last line when it printed nothing (it said '')."""
        path = self.dir / f"npcmind-{i + 1}.log"
        said = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()] if path.exists() else []
        why = line.strip() or (said[-1].strip() if said else "it printed nothing")
        return f"npcmind process {i + 1} (port {self.ports[i]}) did not start: {why}; see {path}"

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
        """SIGTERM every process (each stops cleanly), then HAProxy; each is waited for (none left holding a
        port), and SIGKILLed when it has not stopped within 30 s."""
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.terminate()
        for i, proc in enumerate(self.procs):
            if proc is not None:
                _end(proc)
                self.procs[i] = None
        if self.haproxy is not None:
            if self.haproxy.poll() is None:
                self.haproxy.terminate()
            _end(self.haproxy)
            self.haproxy = None

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class Restarts:
    """When one child is started again: FIRST_RESTART_S after it died, doubling while it keeps dying (or
    failing to start) up to MAX_RESTART_S; back to FIRST_RESTART_S once it ran STABLE_S."""

    started: float
    failures: int = 0
    due: float | None = None  # when it is started again; None while it runs

    def died(self, now: float) -> float:
        """Note a death (or a failed start) at ``now``; the seconds until the next start."""
        if now - self.started >= STABLE_S:
            self.failures = 0
        delay = min(MAX_RESTART_S, FIRST_RESTART_S * 2**self.failures)
        self.failures += 1
        self.due = now + delay
        return delay


class Supervisor:
    """Keeps a started cluster whole: a process or HAProxy that died is logged with its exit status and started
    again after a bounded backoff, while HAProxy routes around it and the others serve on."""

    def __init__(self, cluster: Cluster, log: TextIO | None = None) -> None:
        self.cluster = cluster
        self.log = log or sys.stderr
        now = time.monotonic()
        self.restarts = [Restarts(now) for _ in range(len(cluster.ports) + 1)]  # the processes, then HAProxy

    def run(self) -> None:
        """Supervise until a signal's exception ends it."""
        while True:
            self.check(time.monotonic())
            time.sleep(POLL_S)

    def check(self, now: float) -> None:
        """One look at every child: note the dead ones, start those whose time came."""
        for i, r in enumerate(self.restarts):
            proc = self._child(i)
            if r.due is None and (proc is None or proc.poll() is not None):
                pid = "?" if proc is None else proc.pid
                delay = r.died(now)
                status = exit_status(None if proc is None else proc.returncode)
                self._say(f"{self._name(i)} (pid {pid}) died: {status}; starting it again in {delay:g} s")
            elif r.due is not None and now >= r.due:
                self._restart(i, r)

    def _restart(self, i: int, r: Restarts) -> None:
        try:
            if i < len(self.cluster.ports):
                self.cluster.start_process(i)
            else:
                self.cluster.start_haproxy()
        except RuntimeError as e:
            delay = r.died(time.monotonic())
            self._say(f"{self._name(i)} did not start again ({e}); trying again in {delay:g} s")
            return
        r.started, r.due = time.monotonic(), None
        proc = self._child(i)
        self._say(f"{self._name(i)} started again: pid {proc.pid if proc else '?'}")

    def _child(self, i: int) -> subprocess.Popen[str] | None:
        return self.cluster.procs[i] if i < len(self.cluster.ports) else self.cluster.haproxy

    def _name(self, i: int) -> str:
        if i < len(self.cluster.ports):
            return f"process {i + 1} (port {self.cluster.ports[i]})"
        return f"haproxy (port {self.cluster.port})"

    def _say(self, line: str) -> None:
        print(f"npcmind cluster: {line}", file=self.log, flush=True)


class Stopped(Exception):
    """SIGTERM or SIGINT reached the cluster: every child is stopped, then the cluster exits."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="npcmind cluster", description=__doc__)
    p.add_argument("--processes", type=int, default=2, help="npcmind processes (default 2: one a core)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080, help="where HAProxy listens (default 8080)")
    p.add_argument("--print-config", action="store_true", help="print HAProxy's configuration and exit")
    p.add_argument("serve_args", nargs=argparse.REMAINDER, help="after --: the arguments of every npcmind serve")
    return p


def main(argv: list[str] | None = None) -> int:
    """`npcmind cluster`: N processes and HAProxy in the foreground, supervised, until SIGTERM or Ctrl-C."""
    args = _parser().parse_args(argv)
    serve = [a for a in args.serve_args if a != "--"]
    ports = [args.port + 1 + i for i in range(args.processes)]
    if args.print_config:
        print(haproxy_config(args.host, args.port, ports, read_timeout_s=Settings.from_env().read_timeout_s), end="")
        return 0
    if not any(a.startswith("--store") for a in serve) or not any(a.startswith("--redis") for a in serve):
        print(
            "npcmind cluster: every process needs the same shared --store postgresql://... and --redis redis://...",
            file=sys.stderr,
        )
        return 2
    taken = [p for p in [args.port, *ports] if not _free(args.host, p)]
    if taken:  # said before anything starts: a process's serve would say "choose --port", which is HAProxy's here
        print(
            f"npcmind cluster: port {', '.join(map(str, taken))} is taken; HAProxy takes --port {args.port} and the "
            f"processes the {args.processes} after it ({ports[0]}-{ports[-1]}): choose a --port with those free",
            file=sys.stderr,
        )
        return 2
    cluster = Cluster(serve, args.processes, args.port, args.host)
    cluster.ports = ports
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        try:
            cluster.start()
            print(
                f"npcmind cluster ready on {cluster.url}: {args.processes} processes behind haproxy on ports "
                f"{', '.join(map(str, cluster.ports))}; their logs are in {cluster.dir}; Ctrl-C or SIGTERM stops it",
                flush=True,
            )
            Supervisor(cluster).run()
        finally:
            _ignore_signals()
            cluster.stop()
    except Stopped as e:
        print(f"npcmind cluster stopped ({e}): every process and haproxy stopped; their logs are in {cluster.dir}")
        return 128 + e.signum  # as a shell reports a command ended by the signal: 130, 143
    except RuntimeError as e:  # a process or HAProxy could not start: those started are stopped
        print(f"npcmind cluster: {e}", file=sys.stderr)
        return 1
    return 1  # Supervisor.run ends only by an exception


def _free(host: str, port: int) -> bool:
    """Whether ``port`` can be listened on (by HAProxy or a process) now."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as HAProxy and uvicorn listen: TIME_WAIT is free
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _on_signal(signum: int, frame: object) -> None:
    """Turn SIGTERM and SIGINT into Stopped, once: a second one does not cut the stop short."""
    _ignore_signals()
    raise Stopped(signum)


def _ignore_signals() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)


if __name__ == "__main__":
    sys.exit(main())
