"""Run an ASGI app on a real port: the uvicorn settings of every server, and a server in a background thread for
tests, benches and the SDK's tools."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Literal

import uvicorn
from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string

from npcmind.config import MAX_CONNECTIONS, READ_TIMEOUT_S
from npcmind.http.accept import AcceptingServer
from npcmind.http.connections import guarded


def uvicorn_config(
    app: Any,
    host: str,
    port: int,
    *,
    read_timeout_s: float = READ_TIMEOUT_S,
    max_connections: int = MAX_CONNECTIONS,
    http: str = "auto",
    **options: Any,
) -> uvicorn.Config:
    """uvicorn's settings with what uvicorn lacks: a deadline on each request's arrival and a cap on open
    connections (`npcmind serve` and every BackgroundServer alike). ``http``: auto, httptools or h11."""
    protocol = guarded(import_from_string(HTTP_PROTOCOLS[http]), read_timeout_s, max_connections)
    return uvicorn.Config(app, host=host, port=port, http=protocol, **options)


class BackgroundServer:
    """uvicorn in a daemon thread; `port=0` picks a free port, read back after start."""

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        lifespan: Literal["auto", "on", "off"] = "on",
        **limits: Any,
    ) -> None:
        """``limits``: uvicorn_config's read_timeout_s, max_connections and http."""
        config = uvicorn_config(app, host, port, log_level="error", lifespan=lifespan, access_log=False, **limits)
        self._server = AcceptingServer(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self.app = app
        self.host = host
        self.port = port

    def start(self, timeout: float = 120) -> BackgroundServer:
        """Start and wait until the socket accepts connections."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.listening.is_set():
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        """Ask the server to exit and wait for it."""
        self._server.should_exit = True
        self._thread.join(timeout=60)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """http://host:port"""
        return f"http://{self.host}:{self.port}"


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServiceProcess:
    """`npcmind serve ARGS` as its own process on a free port, started when it printed its ready line.

    Provider keys are removed from its environment unless given in ``env``, so that it never calls a
    hosted API by accident in a test or a bench.
    """

    def __init__(self, args: list[str], env: dict[str, str] | None = None, timeout: float = 30) -> None:
        self.port = free_port()
        base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "npcmind.cli", "serve", "--port", str(self.port), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**base, **(env or {})},
        )
        assert self.proc.stdout is not None
        self.ready_line = self.proc.stdout.readline()
        if "ready on" not in self.ready_line:
            self.proc.kill()
            raise RuntimeError(f"npcmind serve did not start: {self.ready_line!r}")

    @property
    def url(self) -> str:
        """http://127.0.0.1:port"""
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        """SIGTERM and wait."""
        self.proc.terminate()
        self.proc.wait(timeout=15)

    def kill9(self) -> None:
        """SIGKILL, as a crash would, and wait."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=15)
