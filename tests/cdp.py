"""Headless Chromium driven over the Chrome DevTools protocol: open a page, run script in it, press keys, read
its console errors and take a screenshot. A small client on aiohttp's websocket (a test dependency already)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import aiohttp
import httpx

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    "--remote-debugging-port=0",
    "--window-size=1280,720",
]
KEY_CODES = {"ArrowLeft": 37, "ArrowUp": 38, "ArrowRight": 39, "ArrowDown": 40, "Space": 32}


class Browser:
    """One headless Chromium with one page; `with Browser(profile) as b: b.open(url)`."""

    def __init__(self, profile: Path, size: tuple[int, int] = (1280, 720)) -> None:
        assert CHROMIUM is not None
        self.errors: list[str] = []  # console errors and uncaught exceptions, as the page reported them
        self._profile = profile
        self._proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._next = 0
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._session: aiohttp.ClientSession | None = None
        self._run(self._connect(self._page_socket()))
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable")
        # the page's size exactly (a headless window's is its frame's, give or take): what the layout is judged at
        self.call(
            "Emulation.setDeviceMetricsOverride", width=size[0], height=size[1], deviceScaleFactor=1, mobile=False
        )

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _page_socket(self, deadline_s: float = 300) -> str:
        """The websocket of the browser's page, once Chromium has written its port (the deadline bounds a hang)."""
        port_file = self._profile / "DevToolsActivePort"
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError, httpx.HTTPError):
                written = port_file.read_text().split()
                if not written:  # Chromium creates the file, then writes it: read between the two, it is empty
                    raise ValueError("DevToolsActivePort not written yet")
                port = int(written[0])
                pages = [t for t in httpx.get(f"http://127.0.0.1:{port}/json/list").json() if t["type"] == "page"]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            time.sleep(0.2)
        raise TimeoutError("Chromium did not open its DevTools port")

    def _run(self, coro: Any, timeout: float = 60) -> Any:
        f: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return f.result(timeout)

    async def _connect(self, url: str) -> None:
        self._session = aiohttp.ClientSession()
        self._ws = await self._session.ws_connect(url, max_msg_size=0)
        self._loop.create_task(self._read())

    async def _read(self) -> None:
        assert self._ws is not None
        async for msg in self._ws:
            data = json.loads(msg.data)
            if "id" in data:
                waiter = self._waiting.pop(data["id"], None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(data)
            else:
                self._event(data["method"], data.get("params", {}))

    def _event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.errors.append(str(details.get("exception", {}).get("description", details.get("text"))))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(f"{params['entry']['text']} ({params['entry'].get('url', '')})")

    async def _call(self, method: str, params: dict[str, Any]) -> Any:
        assert self._ws is not None
        self._next += 1
        waiter: asyncio.Future[Any] = self._loop.create_future()
        self._waiting[self._next] = waiter
        await self._ws.send_str(json.dumps({"id": self._next, "method": method, "params": params}))
        data = await waiter
        if "error" in data:
            raise RuntimeError(f"{method}: {data['error']}")
        return data["result"]

    def call(self, method: str, **params: Any) -> Any:
        """One DevTools command and its result."""
        return self._run(self._call(method, params))

    def open(self, url: str) -> None:
        """Navigate and wait for the page's load event's script to have run."""
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'", deadline_s=60)

    def js(self, expression: str) -> Any:
        """The value of an expression in the page (JSON-able values)."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression: str, deadline_s: float = 90) -> Any:
        """Poll an expression until it is truthy; its value, or TimeoutError naming it."""
        return wait(lambda: self.js(expression), deadline_s, expression)

    def point(self, x: float, y: float) -> None:
        """Move the mouse to (x, y) of the page, as a person pointing would."""
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def key(self, code: str, down: bool) -> None:
        """Press or release a key, as the keyboard would (keydown/keyup with its code)."""
        key = {"Space": " "}.get(code, code)
        self.call(
            "Input.dispatchKeyEvent",
            type="rawKeyDown" if down else "keyUp",
            code=code,
            key=key,
            windowsVirtualKeyCode=KEY_CODES.get(code, 0),
        )

    def screenshot(self, path: Path) -> None:
        """The page as it looks now, as a PNG."""
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        """Close the socket, stop Chromium and the loop."""
        with contextlib.suppress(Exception):
            if self._ws is not None:
                self._run(self._ws.close(), timeout=10)
            if self._session is not None:
                self._run(self._session.close(), timeout=10)
        self._proc.terminate()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


def wait(condition: Callable[[], Any], deadline_s: float, what: str) -> Any:
    """The condition's first truthy value, polled until a generous deadline (never a timing assertion)."""
    deadline = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {deadline_s:g} s: {what}")
        time.sleep(0.2)
