"""Storage backends behind one interface; SQLite is the embedded default."""

from __future__ import annotations

from npcmind.storage.base import IssuedDecision, SessionRecord, Store, StoreError


def open_store(url: str) -> Store:
    """Open a store from a URL: ``sqlite:///relative.db``, ``sqlite:////absolute.db``."""
    if url.startswith("sqlite:///"):
        from npcmind.storage.sqlite import SqliteStore

        return SqliteStore(url[len("sqlite:///") :] or "npcmind.db")
    raise ValueError(f"unsupported store URL {url!r}: use sqlite:///PATH")


__all__ = ["IssuedDecision", "SessionRecord", "Store", "StoreError", "open_store"]
