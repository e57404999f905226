"""Shared soft state: what every process serving one deployment must see alike, and may lose without harm.

The decision cache, request rates, session revocations and the provider's back-off live here: in the
process's memory by default (one process), or in Redis with ``--redis redis://HOST:PORT/N`` (any number).
Losing it costs cache misses and a moment of per-process rates; the store stays the authority on sessions.
"""

from __future__ import annotations

import urllib.parse

from npcmind.shared.base import Shared
from npcmind.shared.memory import MemoryShared


def open_shared(url: str | None, cache_entries: int = 100_000, timeout_ms: int = 1000) -> Shared:
    """The shared state for ``--redis URL``, or this process's memory when there is none."""
    if not url:
        return MemoryShared(cache_entries)
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(f"unsupported --redis URL {url!r}: use redis://HOST:PORT/N")
    try:
        from npcmind.shared.redis import RedisShared
    except ImportError:
        raise ValueError("--redis needs the redis extra: pip install 'npcmind[redis]'") from None

    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query)
    prefix = query.pop("prefix", ["npcmind"])[0]  # several deployments on one Redis: a prefix each
    rest = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode({k: v[0] for k, v in query.items()})))
    return RedisShared(rest, cache_entries, prefix=prefix + ":", timeout_s=timeout_ms / 1000)


__all__ = ["MemoryShared", "Shared", "open_shared"]
