"""Service settings: command-line flags for what users set often, NPCMIND_* variables for tuning, read at the edge."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Provider calls in flight at once, by default. A hosted provider answers in 0.3-3 s and takes hundreds of calls
# at once, so 1,000 requests in flight need 1,000 calls: fewer slots say `busy` while the provider is idle.
MAX_CONCURRENT_CALLS = 1024
READ_TIMEOUT_S = 5.0  # a request's head and body must arrive within it
MAX_CONNECTIONS = 1000  # open at once; the process's open-file limit (ulimit -n) must be above it


class SettingsError(ValueError):
    """A setting that is none of its values: the command line says it and stops, library code only raises it."""


Reader = Callable[[str, str], Any]  # (variable name, its text) -> the value, or None for the default


def _int(least: int = 1) -> Reader:
    """A whole number of at least ``least``."""

    def read(name: str, raw: str) -> int | None:
        if raw == "":
            return None
        try:
            value = int(raw)
        except ValueError:
            raise SettingsError(f"{name} must be an integer, not {raw!r}") from None
        if value < least:
            raise SettingsError(f"{name} must be at least {least}, not {value}")
        return value

    return read


def _float(least: float = 0.0) -> Reader:
    """A finite number of at least ``least``."""

    def read(name: str, raw: str) -> float | None:
        raw = raw.strip()
        if raw == "":
            return None
        try:
            value = float(raw)
        except ValueError:
            raise SettingsError(f"{name} must be a number, not {raw!r}") from None
        if not math.isfinite(value) or value < least:
            raise SettingsError(f"{name} must be a finite number of at least {least:g}, not {raw}")
        return value

    return read


def _bool(name: str, raw: str) -> bool | None:
    """1/0, true/false, yes/no, on/off; anything else stops the start (a typo must not flip a setting)."""
    raw = raw.strip().lower()
    if raw == "":
        return None
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name} must be 1 or 0 (true/false, yes/no, on/off), not {raw!r}")


def _choice(*choices: str) -> Reader:
    """One of ``choices``; anything else stops the start, naming them."""

    def read(name: str, raw: str) -> str | None:
        raw = raw.strip()
        if raw == "":
            return None
        if raw not in choices:
            raise SettingsError(f"{name} must be {', '.join(choices[:-1])} or {choices[-1]}, not {raw!r}")
        return raw

    return read


def _origins(name: str, raw_list: str) -> list[str]:
    """Browser origins (scheme://host[:port]) or ``*``; a trailing slash is dropped, since browsers never send one."""
    out: list[str] = []
    for raw in raw_list.split(","):
        origin = raw.strip().rstrip("/")
        if not origin:
            continue
        scheme, sep, rest = origin.partition("://")
        if origin != "*" and (not sep or scheme not in ("http", "https") or not rest or "/" in rest):
            raise SettingsError(
                f"{name}: {raw.strip()!r} is not an origin; an origin is scheme://host[:port] as the browser's "
                "address bar shows it, for example http://localhost:5173, or * for any"
            )
        out.append(origin)
    return out


def _hosts(name: str, raw_list: str) -> list[str]:
    """Host names or addresses (a port is ignored), or ``*``; a URL stops the start, since a Host has no scheme."""
    out: list[str] = []
    for raw in raw_list.split(","):
        host = raw.strip()
        if not host:
            continue
        if "/" in host or any(c.isspace() for c in host):
            raise SettingsError(
                f"{name}: {host!r} is not a host name; write the name or address the service is reached by, "
                "without scheme or path, for example mybox.lan or 192.168.1.20, or * for any"
            )
        out.append(host)
    return out


# The tuning variables, in the order `npcmind serve --help` lists them: (variable, Settings field, reader)
TUNING: tuple[tuple[str, str, Reader], ...] = (
    ("NPCMIND_DEADLINE_MS", "deadline_ms", _int()),
    ("NPCMIND_ADMISSION_WAIT_MS", "admission_wait_ms", _int(least=0)),
    ("NPCMIND_MAX_CONCURRENT_CALLS", "max_concurrent_calls", _int()),
    ("NPCMIND_MAX_OUTPUT_TOKENS", "max_output_tokens", _int(least=0)),
    ("NPCMIND_CACHE_ENTRIES", "cache_entries", _int(least=0)),
    ("NPCMIND_MAX_BODY_BYTES", "max_body_bytes", _int()),
    ("NPCMIND_MAX_SESSION_ENTITIES", "max_session_entities", _int(least=10)),
    ("NPCMIND_MAX_SESSIONS", "max_sessions", _int()),
    ("NPCMIND_MAX_ENTITIES", "max_entities", _int(least=10)),
    ("NPCMIND_LOGPROBS", "logprobs", _bool),
    ("NPCMIND_ANSWER_FORMAT", "answer_format", _choice("auto", "numbered", "enum")),
    ("NPCMIND_CORS_ORIGINS", "cors_origins", _origins),
    ("NPCMIND_ALLOWED_HOSTS", "allowed_hosts", _hosts),
    ("NPCMIND_READ_TIMEOUT_S", "read_timeout_s", _float(least=0.001)),
    ("NPCMIND_REDIS_TIMEOUT_MS", "redis_timeout_ms", _int()),
    ("NPCMIND_REVOCATION_POLL_S", "revocation_poll_s", _float()),
    ("NPCMIND_MAX_CONNECTIONS", "max_connections", _int()),
    ("NPCMIND_ACTIVITY_S", "activity_s", _int(least=0)),
    ("NPCMIND_RETENTION_H", "retention_h", _float()),
    ("NPCMIND_SHADOW_QUEUE", "shadow_queue", _int()),
)


@dataclass(slots=True)
class Settings:
    """Everything the service can be told, as values; defaults are the documented ones. Only `from_env`, which
    the command line calls, reads the environment: a Settings built in code means what its code says."""

    manifest: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    profile: str = "local"
    store: str = "sqlite:///npcmind.db"
    redis: str | None = None  # shared soft state (cache, rates, revocations) for several processes
    provider: str = "auto"
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    clients: str | None = None
    rulesets: str | None = None
    deadline_ms: int = 10_000
    admission_wait_ms: int = 50
    max_concurrent_calls: int = MAX_CONCURRENT_CALLS
    cache_entries: int = 100_000
    redis_timeout_ms: int = 1000
    # the bound on a revocation Redis lost: each process reads the store's revocations at least this often
    revocation_poll_s: float = 1.0
    max_body_bytes: int = 256 * 1024
    max_session_entities: int = 20_000
    max_output_tokens: int = 0
    max_sessions: int = 10_000
    max_entities: int = 100_000
    logprobs: bool = True
    answer_format: str = "auto"
    cors_origins: list[str] = field(default_factory=list)
    allowed_hosts: list[str] = field(default_factory=list)
    read_timeout_s: float = READ_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS
    activity_s: int = 10
    retention_h: float = 24.0
    distill_every_h: float | None = None  # retrain every client's local policy this often (the distill extra)
    # shadow mode (docs/replay.md): a share of the model calls sent again to a second model, after the game's answer
    shadow_provider: str | None = None
    shadow_model: str | None = None
    shadow_base_url: str | None = None
    shadow_api_key_env: str | None = None
    shadow_share: float = 0.05
    shadow_calls: int = 8  # shadow calls in flight at once
    shadow_queue: int = 256  # answered batches waiting for the shadow model; past it one is dropped, with a count

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **values: Any) -> Settings:
        """The one reader of the NPCMIND_* tuning variables (of ``env``, os.environ if not given), at the edge:
        ``values`` (the command line's flags) come on top. A variable that is none of its values raises
        SettingsError naming it, so that a typo stops the start instead of flipping a setting."""
        env = os.environ if env is None else env
        read: dict[str, Any] = {}
        for name, attribute, reader in TUNING:
            raw = env.get(name)
            if raw is not None and (value := reader(name, raw)) is not None:
                read[attribute] = value
        return cls(**{**read, **values})
