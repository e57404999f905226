"""How `npcmind serve` stops on a signal: cleanly, with the exit code a shell expects, whatever the machine's load."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from npcmind.http.accept import AcceptingServer


class SignalledServer(AcceptingServer):
    """uvicorn that remembers which signal stopped it, instead of raising the signal again after its clean stop.

    uvicorn restores the handlers it replaced and then raises the signal again, so that the process ends as if
    killed by it. What that raise does depends on when Python runs the restored handler: the asyncio runner's
    SIGINT handler cancels a task that may already be done, and on a loaded machine `npcmind serve` exited with
    0 after Ctrl-C (2 of 2 full test runs), where a shell expects 130. The exit code is decided here instead,
    once the server has stopped and every log line is written."""

    stopped_by: int | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.stopped_by is None:
            self.stopped_by = sig
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
            yield
            return
        replaced = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in replaced.items():
                signal.signal(sig, handler)
