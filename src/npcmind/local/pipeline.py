"""The decide pipeline's per-process state: its provider calls in flight, each session's last batch, and
whether a provider call has succeeded since start. None of it is shared or needed after a restart.

The last batch is kept as a reference (rendered only when GET /v1/prompt asks for it): the pipeline says what it
is, this module only bounds how many are kept.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Generic, TypeVar

T = TypeVar("T")
KEPT = 1024  # sessions whose last batch is kept


class PipelineState(Generic[T]):
    """Admission to the provider calls of this process, and the last batch of the sessions used last."""

    def __init__(self, max_calls: int, admission_s: float, kept: int = KEPT) -> None:
        self._slots = asyncio.Semaphore(max_calls)
        self._admission = admission_s
        self._kept = kept
        self._last: OrderedDict[str, T] = OrderedDict()
        self.answered = False  # a provider call has succeeded: what the start-up check found is past

    async def acquire(self) -> bool:
        """A slot for one provider call, waiting at most the admission wait when all are taken; False: none."""
        if not self._slots.locked():
            await self._slots.acquire()
            return True
        try:
            await asyncio.wait_for(self._slots.acquire(), self._admission)
        except TimeoutError:
            return False
        return True

    def release(self) -> None:
        """The call that held a slot has ended."""
        self._slots.release()

    def remember(self, session_id: str, batch: T) -> None:
        """Keep the session's last batch, for the ``kept`` sessions used last."""
        self._last[session_id] = batch
        self._last.move_to_end(session_id)
        if len(self._last) > self._kept:
            self._last.popitem(last=False)

    def last(self, session_id: str) -> T | None:
        """The session's last batch, if it is still kept."""
        return self._last.get(session_id)

    def sessions(self) -> list[str]:
        """The sessions whose last batch is kept, most recent first (for a 404 that names them)."""
        return list(reversed(self._last))
