"""Calls from browser games (CORS): the origins the game's pages are served from may call the service.

A page on another origin than the service (a web build on localhost:5173, an itch.io page) is refused by
the browser unless the service answers its preflight. Litestar's CORS middleware does that; this adds the
one thing a game developer needs when it does not: a log line naming the origin and the setting to change,
since the browser shows only a generic CORS error and the service would otherwise log nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from litestar.config.cors import CORSConfig

log = logging.getLogger("npcmind.http")
_TOLD_AT_MOST = 256  # origins warned about; a page that changes port each start must not grow a set forever


@dataclass
class BrowserOrigins(CORSConfig):
    """The allowed origins (none by default), and one warning per refused origin."""

    _told: set[str] = field(default_factory=set, repr=False)

    def is_origin_allowed(self, origin: str) -> bool:
        """As Litestar decides; a refusal is logged once per origin with the fix."""
        allowed = super().is_origin_allowed(origin)
        if not allowed and origin not in self._told and len(self._told) < _TOLD_AT_MOST:
            self._told.add(origin)
            now = ", ".join(self.allow_origins) if self.allow_origins else "none set"
            if origin == "null":
                fix = "serve the page over http (python3 -m http.server) and allow that origin, or set * to allow any"
            else:
                fix = f"set NPCMIND_CORS_ORIGINS={','.join([*self.allow_origins, origin])} to allow it"
            log.warning(
                "a browser page at origin %s called npcmind and the browser was told no: browsers may call only "
                "from the origins in NPCMIND_CORS_ORIGINS (%s); %s",
                origin,
                now,
                fix,
            )
        return allowed


def browser_origins(origins: list[str]) -> BrowserOrigins:
    """The CORS settings of the service: any method and header (a hosted game sends `authorization`), and
    `retry-after` readable by the page, so a browser game can honour a 429."""
    return BrowserOrigins(allow_origins=list(origins), expose_headers=["retry-after"], max_age=600)
