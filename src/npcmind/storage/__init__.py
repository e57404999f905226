"""Storage backends behind one interface of four parts (decisions, sessions, policies, secrets); SQLite is the
embedded default, PostgreSQL the shared one: each a package with a module a part."""

from __future__ import annotations

from npcmind.storage.base import (
    Decisions,
    IssuedDecision,
    Policies,
    Secrets,
    SessionRecord,
    Sessions,
    Store,
    StoreError,
)


def open_store(url: str, read_only: bool = False, publish: bool = False) -> Store:
    """A store from a URL: ``sqlite:///relative.db``, ``sqlite:////absolute.db`` (one process), or
    ``postgresql://USER@HOST:PORT/DB[?schema=NAME]`` (any number of processes). ``read_only``: a reader
    beside the process that writes it (distill), which SQLite otherwise refuses as a second process; it creates
    and migrates nothing, and the store must exist at this npcmind's schema version. ``publish``: the same, but
    it may keep a policy (``policies.put``, `npcmind distill --publish`)."""
    if url.startswith("sqlite:///"):
        from npcmind.storage.sqlite import SqliteStore

        return SqliteStore(url[len("sqlite:///") :] or "npcmind.db", read_only, publish)
    if url.startswith(("postgresql://", "postgres://")):
        from npcmind.storage.postgres import PostgresStore

        return PostgresStore(url, read_only, publish)
    raise ValueError(f"unsupported store URL {url!r}: use sqlite:///PATH or postgresql://USER@HOST:PORT/DB")


__all__ = [
    "Decisions",
    "IssuedDecision",
    "Policies",
    "Secrets",
    "SessionRecord",
    "Sessions",
    "Store",
    "StoreError",
    "open_store",
]
