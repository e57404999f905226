"""Storage backends behind one interface; SQLite is the embedded default."""

from __future__ import annotations

from npcmind.storage.base import IssuedDecision, SessionRecord, Store, StoreError


def open_store(url: str) -> Store:
    """A store from a URL: ``sqlite:///relative.db``, ``sqlite:////absolute.db`` (one process), or
    ``postgresql://USER@HOST:PORT/DB[?schema=NAME]`` (any number of processes)."""
    if url.startswith("sqlite:///"):
        from npcmind.storage.sqlite import SqliteStore

        return SqliteStore(url[len("sqlite:///") :] or "npcmind.db")
    if url.startswith(("postgresql://", "postgres://")):
        from npcmind.storage.postgres import PostgresStore

        return PostgresStore(url)
    raise ValueError(f"unsupported store URL {url!r}: use sqlite:///PATH or postgresql://USER@HOST:PORT/DB")


__all__ = ["IssuedDecision", "SessionRecord", "Store", "StoreError", "open_store"]
