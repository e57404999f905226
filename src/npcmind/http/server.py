"""Run an ASGI app on a real local port in a background thread: for tests, benches and the SDK's tools."""

from __future__ import annotations

import threading
import time
from typing import Any, Literal

import uvicorn


class BackgroundServer:
    """uvicorn in a daemon thread; `port=0` picks a free port, read back after start."""

    def __init__(
        self, app: Any, host: str = "127.0.0.1", port: int = 0, lifespan: Literal["auto", "on", "off"] = "on"
    ) -> None:
        config = uvicorn.Config(app, host=host, port=port, log_level="error", lifespan=lifespan, access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self.host = host
        self.port = port

    def start(self, timeout: float = 15) -> BackgroundServer:
        """Start and wait until the socket accepts connections."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        """Ask the server to exit and wait for it."""
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """http://host:port"""
        return f"http://{self.host}:{self.port}"
