"""Shared fixtures: the scripted provider and the service, each on a real local port."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import hypothesis
import pytest

from npcmind.config import Settings
from npcmind.http.app import create_app
from npcmind.http.server import BackgroundServer
from npcmind.service import Service
from npcmind.testing.scripted import ScriptedServer
from support import BEE_OBS, BOSS_OBS, FOREST, bee, decide_body, queen, until

# the example's bodies and the polling wait live with the benches (bench/support.py, on pytest's pythonpath), which
# need them without pytest; the tests import them from here as they always have
__all__ = ["BEE_OBS", "BOSS_OBS", "FOREST", "bee", "decide_body", "queen", "until"]

# --- Hypothesis: every run tries the same examples and writes nothing into the clone ---------------------------
# A random run found a failing example in one clone, and its example database replayed it there on every run after.
# derandomize: the examples follow from each test alone, so a user's run, CI and a rerun try the same ones;
# database=None keeps none; the caches Hypothesis writes anyway (its Unicode tables, the constants of the code under
# test) go to a temporary directory removed at exit, not to .hypothesis/. No deadline and no too_slow health check:
# a machine 2-5x slower must not fail a test. print_blob: a failure prints the line that replays it.
if "HYPOTHESIS_STORAGE_DIRECTORY" not in os.environ:
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = tempfile.mkdtemp(prefix="npcmind-hypothesis-")
    atexit.register(shutil.rmtree, os.environ["HYPOTHESIS_STORAGE_DIRECTORY"], ignore_errors=True)
hypothesis.settings.register_profile(
    "npcmind",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[hypothesis.HealthCheck.too_slow],
)
hypothesis.settings.load_profile("npcmind")
# --------------------------------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, stdin: str | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`npcmind ARGS` as a user runs it, in its own process; its exit code and both outputs. The timeout only
    stops a hang: `distill` imports scikit-learn and trains, which took past 30 s in a suite run beside busy loops."""
    return subprocess.run(
        [sys.executable, "-m", "npcmind.cli", *args], input=stdin, capture_output=True, text=True, timeout=timeout
    )


# a Redis call that takes longer than NPCMIND_REDIS_TIMEOUT_MS counts as Redis being gone: on a machine with every
# core busy, 100 connections opened at once took longer than a second. Tests that are not about losing Redis
# must not take a slow machine for it (those that are stop Redis, which refuses at once; one that pauses it, which
# refuses nothing, sets the shipped 1 s itself, or each request waits these 30 s). The variable reaches the services
# tests start as processes; start_service passes the value to those in this process
REDIS_TIMEOUT_MS = int(os.environ.setdefault("NPCMIND_REDIS_TIMEOUT_MS", "30000"))
NO_SKIPS = "NPCMIND_TEST_NO_SKIPS"  # CI sets it: what a test needs (Chromium, the model extra) must be there


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """In CI a skipped test is a failure: the real-model tests were skipped in silence when the extra failed to
    install, and CI stayed green. A user without Chromium or the extra still sees them reported as skipped."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.skipped and os.environ.get(NO_SKIPS) and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped, and {NO_SKIPS} is set (CI installs what every test needs): {reason}"


POSTGRES = os.environ.get("NPCMIND_TEST_POSTGRES", "postgresql://root@127.0.0.1:5432/test")
# Redis database 13, not 0 (every program's default): the tests' keys never land among a user's
REDIS = os.environ.get("NPCMIND_TEST_REDIS", "redis://127.0.0.1:6379/13")
SERVER_URLS = {
    "NPCMIND_TEST_POSTGRES": ("postgresql://", "postgres://"),
    "NPCMIND_TEST_REDIS": ("redis://", "rediss://"),
}


def pytest_configure(config: pytest.Config) -> None:
    """A test server's variable that is not a URL stops the run at once, saying what it should be: it quietly
    skipped the tests that need the server (``NPCMIND_TEST_REDIS=7``)."""
    for name, schemes in SERVER_URLS.items():
        value = os.environ.get(name)
        if value is not None and not value.startswith(schemes):
            example = "postgresql://USER@HOST:5432/DB" if "POSTGRES" in name else "redis://HOST:6379/13"
            pytest.exit(f"{name}={value!r} is not a URL: give one such as {example} (docs/testing.md)", returncode=4)


def _postgres_problem() -> str | None:
    """None when the test server answers, else why not (the tests are then skipped; CI fails on a skip)."""

    async def ping() -> None:
        import asyncpg

        db = await asyncpg.connect(POSTGRES, timeout=5)
        await db.close()

    try:
        asyncio.run(ping())
    except Exception as e:
        return f"no PostgreSQL at {POSTGRES} ({e}); set NPCMIND_TEST_POSTGRES"
    return None


def _drop_schema(schema: str) -> None:
    async def drop() -> None:
        import asyncpg

        db = await asyncpg.connect(POSTGRES)
        await db.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await db.close()

    asyncio.run(drop())


@pytest.fixture()
def postgres_url() -> Iterator[str]:
    """A schema of this test's own on the test server, dropped afterwards."""
    why = _postgres_problem()
    if why:
        pytest.skip(why)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield f"{POSTGRES}?schema={schema}"
    _drop_schema(schema)


@pytest.fixture()
def scripted() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


class Running:
    """A service on a real port, with an HTTP client."""

    def __init__(self, server: BackgroundServer, service: Service) -> None:
        self.server = server
        self.service = service
        self.http = httpx.Client(base_url=server.url, timeout=30)

    def decide(self, body: dict[str, Any], **kw: Any) -> httpx.Response:
        return self.http.post("/v1/decide", json=body, **kw)


def service_settings(tmp: Path, manifest: Path | None = FOREST, store: str | None = None, **settings: Any) -> Settings:
    """The settings every test service starts from: the example manifest and a SQLite file of the test's own."""
    store = store or f"sqlite:///{tmp}/npcmind.db"
    settings = {"redis_timeout_ms": REDIS_TIMEOUT_MS, **settings}
    return Settings(manifest=str(manifest) if manifest else None, store=store, **settings)


@contextlib.contextmanager
def serving(settings: Settings) -> Iterator[Running]:
    """A service on a real port while the block runs: the one way a test starts one, whatever the fixture's scope."""
    service = Service(settings)
    limits = {"read_timeout_s": settings.read_timeout_s, "max_connections": settings.max_connections}
    running = Running(BackgroundServer(create_app(service), **limits).start(), service)
    try:
        yield running
    finally:
        running.http.close()
        running.server.stop()


@pytest.fixture()
def start_service(tmp_path: Path) -> Iterator[Callable[..., Running]]:
    with contextlib.ExitStack() as stack:

        def start(manifest: Path | None = FOREST, store: str | None = None, **settings: Any) -> Running:
            return stack.enter_context(serving(service_settings(tmp_path, manifest, store, **settings)))

        yield start


SCRIPTED_SVC = {"provider": "openai", "model": "scripted"}  # svc's settings beside the provider's URL


@pytest.fixture()
def svc(start_service: Callable[..., Running], scripted: ScriptedServer) -> Running:
    """The service on the example manifest, its provider the scripted server (self-hosted, enum form)."""
    return start_service(base_url=scripted.base_url, **SCRIPTED_SVC)


@pytest.fixture(scope="module")
def shared_scripted() -> Iterator[ScriptedServer]:
    """One scripted provider for a module's read-only tests (shared_svc's)."""
    with ScriptedServer() as s:
        yield s


@pytest.fixture(scope="module")
def shared_svc(tmp_path_factory: pytest.TempPathFactory, shared_scripted: ScriptedServer) -> Iterator[Running]:
    """svc, started once for a module's tests that leave its state as it was (they read, or are refused before
    anything is kept or asked of the provider): a test that changes the service's state takes `svc`, its own."""
    tmp = tmp_path_factory.mktemp("shared-svc")
    with serving(service_settings(tmp, base_url=shared_scripted.base_url, **SCRIPTED_SVC)) as running:
        yield running


class Hosted:
    """A hosted-profile service with two clients, and helpers to open sessions."""

    def __init__(self, running: Running, keys: dict[str, str]) -> None:
        self.running = running
        self.keys = keys
        self.http = running.http

    def open(self, client_id: str = "game-1") -> dict[str, Any]:
        r = self.http.post(
            "/v1/session", json={"client_id": client_id}, headers={"authorization": f"Bearer {self.keys[client_id]}"}
        )
        assert r.status_code == 200, r.text
        return dict(r.json())

    @functools.cached_property
    def token(self) -> str:
        """A session token of game-1, opened once: a client holds at most 16 sessions."""
        return str(self.open()["session_token"])

    @staticmethod
    def auth(session: dict[str, Any]) -> dict[str, str]:
        return {"authorization": f"Bearer {session['session_token']}"}


def write_clients(tmp_path: Path, **limits: Any) -> tuple[Path, dict[str, str]]:
    """A clients file with two clients on the example manifest; returns it and their keys."""
    from npcmind.sessions.clients import hash_key, new_key

    keys = {"game-1": new_key(), "game-2": new_key()}
    lines = ["clients:"]
    for cid, key in keys.items():
        extra = "".join(f", {k}: {v}" for k, v in limits.items())
        lines.append(f"  - {{client_id: {cid}, manifest: {FOREST}, key_sha256: {hash_key(key)}{extra}}}")
    path = tmp_path / "clients.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path, keys


HOSTED = {"manifest": None, "profile": "hosted", "provider": "openai"}  # hosted's settings beside clients and URL


@pytest.fixture(scope="module")
def shared_hosted(tmp_path_factory: pytest.TempPathFactory, shared_scripted: ScriptedServer) -> Iterator[Hosted]:
    """hosted, started once for a module's tests that leave it as it was (refused without a session, or reading):
    a test that opens a session or decides takes `hosted`, its own."""
    tmp = tmp_path_factory.mktemp("shared-hosted")
    path, keys = write_clients(tmp)
    with serving(service_settings(tmp, clients=str(path), base_url=shared_scripted.base_url, **HOSTED)) as running:
        yield Hosted(running, keys)


@pytest.fixture()
def hosted(start_service: Callable[..., Running], scripted: ScriptedServer, tmp_path: Path) -> Hosted:
    path, keys = write_clients(tmp_path)
    return Hosted(start_service(clients=str(path), base_url=scripted.base_url, **HOSTED), keys)


@contextlib.contextmanager
def logged(name: str) -> Iterator[list[str]]:
    """The messages a logger writes meanwhile (its own handler: the app's logging set-up replaces the root's)."""
    said: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    handler = _Keep()
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    try:
        yield said
    finally:
        logger.removeHandler(handler)
