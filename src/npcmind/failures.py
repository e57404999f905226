"""Failures of a dependency (the provider, the store), and events that can come once a request, in the log at a
rate a person can read.

A dependency that is down under load fails on every request; one line a request would bury the cause.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable


class FailureLog:
    """One warning at most every ``every`` seconds, with how many failures went unsaid, and one line when
    the dependency works again."""

    def __init__(self, log: logging.Logger, what: str, every: float = 10.0) -> None:
        self.log = log
        self.what = what  # "provider call": "provider call failed: ...", "provider calls succeed again"
        self.every = every
        self._last = -math.inf  # never said yet: the next failure is said whatever ``every`` is set to later
        self._unsaid = 0
        self._failing = False

    def failed(self, message: str) -> None:
        """A call failed."""
        self._failing = True
        now = time.monotonic()
        if now - self._last < self.every:
            self._unsaid += 1
            return
        self.log.warning("%s failed: %s%s", self.what, message, self._since())
        self._last, self._unsaid = now, 0

    def succeeded(self) -> None:
        """A call worked."""
        if self._failing:
            self.log.warning("%ss succeed again%s", self.what, self._since())
            self._failing, self._unsaid, self._last = False, 0, -math.inf

    def _since(self) -> str:
        return f" ({self._unsaid} more failed {self.what}s since the last line)" if self._unsaid else ""


class EventLog:
    """An event that can come once a request (a session let go past NPCMIND_MAX_SESSIONS): one line at most every
    ``every`` seconds, with how many more came since the last line. 30,000 sessions were 30,000 lines."""

    def __init__(self, log: logging.Logger, what: str, every: float = 10.0, level: int = logging.INFO) -> None:
        self.log = log
        self.what = what  # "sessions let go": "(41 more sessions let go since the last line)"
        self.every = every
        self.level = level
        self.clock: Callable[[], float] = time.monotonic
        self._last = -math.inf
        self._unsaid = 0

    def happened(self, message: str) -> None:
        """One more event; ``message`` is written when its line is due."""
        now = self.clock()
        if now - self._last < self.every:
            self._unsaid += 1
            return
        more = f" ({self._unsaid} more {self.what} since the last line)" if self._unsaid else ""
        self.log.log(self.level, "%s%s", message, more)
        self._last, self._unsaid = now, 0
