"""Saying a problem once: a game loop would repeat it every frame, and a log of the same line helps nobody."""

from __future__ import annotations

import logging

log = logging.getLogger("npcmind_client.decide")
MAX_KEY = 300  # a kind of problem is its key's first 300 characters: 1,000 kinds hold 300 kB at most
MAX_MESSAGE = 2000  # a line in the game's log: an error body of 64 KiB is cut here


class SayOnce:
    """Logs each kind of problem (its key) once, in at most MAX_MESSAGE characters; forgets them all past 1,000
    kinds."""

    def __init__(self) -> None:
        self._said: set[str] = set()

    def __call__(self, key: str, message: str, native: bool = True) -> None:
        """``native``: the problem leaves entities to the game's own AI, and the line says so."""
        if self.first(key):
            if len(message) > MAX_MESSAGE:
                message = message[:MAX_MESSAGE] + "…"
            log.warning("%s (the entities concerned use their native AI)" if native else "%s", message)

    def first(self, key: str) -> bool:
        """Whether ``key`` was not said yet (and now counts as said)."""
        key = key[:MAX_KEY]
        if key in self._said:
            return False
        if len(self._said) >= 1000:
            self._said.clear()
        self._said.add(key)
        return True
