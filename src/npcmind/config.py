"""Service settings: command-line flags for what users set often, NPCMIND_* variables for tuning."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

# Provider calls in flight at once, by default. A hosted provider answers in 0.3-3 s and takes hundreds of calls
# at once, so 1,000 requests in flight need 1,000 calls: fewer slots say `busy` while the provider is idle.
MAX_CONCURRENT_CALLS = 1024
READ_TIMEOUT_S = 5.0  # a request's head and body must arrive within it
MAX_CONNECTIONS = 1000  # open at once; the process's open-file limit (ulimit -n) must be above it


def _env_int(name: str, default: int, least: int = 1) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"{name} must be an integer, not {raw!r}") from None
    if value < least:
        raise SystemExit(f"{name} must be at least {least}, not {value}")
    return value


def _env_float(name: str, default: float, least: float = 0.0) -> float:
    raw = os.environ.get(name, "").strip()
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SystemExit(f"{name} must be a number, not {raw!r}") from None
    if not math.isfinite(value) or value < least:
        raise SystemExit(f"{name} must be a finite number of at least {least:g}, not {raw}")
    return value


def _env_bool(name: str, default: bool) -> bool:
    """1/0, true/false, yes/no, on/off; anything else stops the start (a typo must not flip a setting)."""
    raw = os.environ.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise SystemExit(f"{name} must be 1 or 0 (true/false, yes/no, on/off), not {raw!r}")


def _env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """One of ``choices``; anything else stops the start, naming them."""
    raw = os.environ.get(name, "").strip()
    if raw == "":
        return default
    if raw not in choices:
        raise SystemExit(f"{name} must be {', '.join(choices[:-1])} or {choices[-1]}, not {raw!r}")
    return raw


def _env_origins(name: str) -> list[str]:
    """Browser origins (scheme://host[:port]) or ``*``; a trailing slash is dropped, since browsers never send one."""
    out: list[str] = []
    for raw in os.environ.get(name, "").split(","):
        origin = raw.strip().rstrip("/")
        if not origin:
            continue
        scheme, sep, rest = origin.partition("://")
        if origin != "*" and (not sep or scheme not in ("http", "https") or not rest or "/" in rest):
            raise SystemExit(
                f"{name}: {raw.strip()!r} is not an origin; an origin is scheme://host[:port] as the browser's "
                "address bar shows it, for example http://localhost:5173, or * for any"
            )
        out.append(origin)
    return out


def _env_hosts(name: str) -> list[str]:
    """Host names or addresses (a port is ignored), or ``*``; a URL stops the start, since a Host has no scheme."""
    out: list[str] = []
    for raw in os.environ.get(name, "").split(","):
        host = raw.strip()
        if not host:
            continue
        if "/" in host or any(c.isspace() for c in host):
            raise SystemExit(
                f"{name}: {host!r} is not a host name; write the name or address the service is reached by, "
                "without scheme or path, for example mybox.lan or 192.168.1.20, or * for any"
            )
        out.append(host)
    return out


@dataclass(slots=True)
class Settings:
    """Everything the service can be told; defaults are the documented ones."""

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
    deadline_ms: int = field(default_factory=lambda: _env_int("NPCMIND_DEADLINE_MS", 10_000))
    admission_wait_ms: int = field(default_factory=lambda: _env_int("NPCMIND_ADMISSION_WAIT_MS", 50, least=0))
    max_concurrent_calls: int = field(
        default_factory=lambda: _env_int("NPCMIND_MAX_CONCURRENT_CALLS", MAX_CONCURRENT_CALLS)
    )
    cache_entries: int = field(default_factory=lambda: _env_int("NPCMIND_CACHE_ENTRIES", 100_000, least=0))
    redis_timeout_ms: int = field(default_factory=lambda: _env_int("NPCMIND_REDIS_TIMEOUT_MS", 1000))
    # the bound on a revocation Redis lost: each process reads the store's revocations at least this often
    revocation_poll_s: float = field(default_factory=lambda: _env_float("NPCMIND_REVOCATION_POLL_S", 1.0))
    max_body_bytes: int = field(default_factory=lambda: _env_int("NPCMIND_MAX_BODY_BYTES", 256 * 1024))
    max_session_entities: int = field(
        default_factory=lambda: _env_int("NPCMIND_MAX_SESSION_ENTITIES", 20_000, least=10)
    )
    max_output_tokens: int = field(default_factory=lambda: _env_int("NPCMIND_MAX_OUTPUT_TOKENS", 0, least=0))
    max_sessions: int = field(default_factory=lambda: _env_int("NPCMIND_MAX_SESSIONS", 10_000))
    max_entities: int = field(default_factory=lambda: _env_int("NPCMIND_MAX_ENTITIES", 100_000, least=10))
    logprobs: bool = field(default_factory=lambda: _env_bool("NPCMIND_LOGPROBS", True))
    answer_format: str = field(
        default_factory=lambda: _env_choice("NPCMIND_ANSWER_FORMAT", "auto", ("auto", "numbered", "enum"))
    )
    cors_origins: list[str] = field(default_factory=lambda: _env_origins("NPCMIND_CORS_ORIGINS"))
    allowed_hosts: list[str] = field(default_factory=lambda: _env_hosts("NPCMIND_ALLOWED_HOSTS"))
    read_timeout_s: float = field(
        default_factory=lambda: _env_float("NPCMIND_READ_TIMEOUT_S", READ_TIMEOUT_S, least=0.001)
    )
    max_connections: int = field(default_factory=lambda: _env_int("NPCMIND_MAX_CONNECTIONS", MAX_CONNECTIONS))
    activity_s: int = field(default_factory=lambda: _env_int("NPCMIND_ACTIVITY_S", 10, least=0))
    retention_h: float = field(default_factory=lambda: _env_float("NPCMIND_RETENTION_H", 24.0))
    distill_every_h: float | None = None  # retrain every client's local policy this often (the distill extra)
