"""The assembled service: settings, manifests, store, provider, context and pipeline wired once."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from npcmind.config import Settings
from npcmind.context.hub import ContextHub
from npcmind.context.registry import SessionRegistry
from npcmind.context.situation import SceneSituation
from npcmind.decide.ids import DecisionIds
from npcmind.decide.pipeline import DecidePipeline
from npcmind.local.metrics import Counts, Metrics, activity
from npcmind.manifest import Manifest
from npcmind.manifest import load as load_manifest
from npcmind.npc.rulesets import load_rulesets
from npcmind.npc.signing import Signer, StepTokens
from npcmind.npc.steps import NpcProcessor
from npcmind.providers import tokens
from npcmind.providers.base import Provider, ProviderError
from npcmind.providers.select import describe, make_provider
from npcmind.replay.shadow import Shadow
from npcmind.sessions.clients import Client, load_clients
from npcmind.sessions.guard import Guard
from npcmind.sessions.tokens import TokenSigner
from npcmind.shared import Shared, open_shared
from npcmind.storage import Store, StoreError, open_store

log = logging.getLogger("npcmind")
T = TypeVar("T")


WILDCARDS = ("0.0.0.0", "::", "")  # the addresses that bind every interface


def loopback(host: str) -> bool:
    """Whether only this machine can reach an address (the local profile asks no token)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def _started(part: T | None) -> T:
    """A part built by Service.start(); using it earlier is a bug."""
    if part is None:
        raise RuntimeError("service not started")
    return part


class Chores:
    """The service's background loops, off the request path: trimming sessions, forgetting old decisions, the
    activity line, and retraining local policies."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        metrics: Metrics,
        sessions: SessionRegistry,
        manifest_of: Callable[[str], Manifest | None],
    ) -> None:
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.sessions = sessions
        self.manifest_of = manifest_of
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start the loops the settings ask for (inside the event loop)."""
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._trim_every(1.0)))
        if self.settings.activity_s:
            self._tasks.append(loop.create_task(self._say_activity(self.settings.activity_s)))
        if self.settings.retention_h:
            keep = self.settings.retention_h * 3600
            self._tasks.append(loop.create_task(self._prune_every(min(600.0, keep / 4), keep)))
        if self.settings.distill_every_h:
            self._start_distill(self.settings.distill_every_h)

    def stop(self) -> None:
        """Cancel every loop."""
        for task in self._tasks:
            task.cancel()

    def _start_distill(self, every_h: float) -> None:
        """Retrain the clients' local policies every ``every_h`` hours, in a process of their own (docs/policy.md)."""
        from npcmind.distill.background import BackgroundDistill

        job = BackgroundDistill(self.store, self.settings.store, self.manifest_of, every_h)
        self._tasks.append(asyncio.get_running_loop().create_task(job.run()))
        log.info("distill: every client's local policy is retrained every %s", interval(every_h * 3600))

    async def _trim_every(self, seconds: float) -> None:
        """Keep all sessions together within NPCMIND_MAX_ENTITIES, off the request path."""
        while True:
            await asyncio.sleep(seconds)
            self.sessions.trim()

    async def _prune_every(self, seconds: float, keep: float) -> None:
        """Forget what is older than NPCMIND_RETENTION_H, so the store's file stops growing; off the request
        path, a small transaction at a time."""
        while True:
            await asyncio.sleep(seconds)
            try:
                decisions, sessions = await self.store.prune(time.time() - keep)
            except StoreError:  # said by the store's failure log; the next round tries again
                continue
            if decisions or sessions:
                what = [f"{decisions} decision{'s' * (decisions != 1)} issued"] if decisions else []
                what += [f"{sessions} session{'s' * (sessions != 1)} that expired"] if sessions else []
                log.info(
                    "store: forgot %s more than %g h ago (NPCMIND_RETENTION_H)",
                    " and ".join(what),
                    self.settings.retention_h,
                )

    async def _say_activity(self, every: float) -> None:
        """Every ``every`` seconds with decisions in them, one log line on what they were and cost."""
        log_activity = logging.getLogger("npcmind.activity")
        before, since = self.metrics.counts(), time.monotonic()
        while True:
            await asyncio.sleep(every)
            after, now = self.metrics.counts(), time.monotonic()
            line = activity(before, after, now - since)
            if line is not None:
                log_activity.info("%s", line)
            before, since = after, now


MAX_SHADOW_CALLS = 256  # shadow calls in flight at most (each may hold an answer of up to 8 MiB)
MAX_SHADOW_QUEUE = 100_000  # batches waiting for the shadow at most: past it the queue bounds nothing


def shadow_provider(settings: Settings) -> Provider | None:
    """The second model of shadow mode (--shadow-provider), or None; a ValueError naming the flag when it cannot be
    used (the service does not start with a shadow that would only ever fail)."""
    s, default = settings, Settings()
    given = [
        flag
        for flag, v in (
            ("--shadow-model", s.shadow_model is not None),
            ("--shadow-base-url", s.shadow_base_url is not None),
            ("--shadow-api-key-env", s.shadow_api_key_env is not None),
            ("--shadow-share", s.shadow_share != default.shadow_share),
            ("--shadow-calls", s.shadow_calls != default.shadow_calls),
        )  # not NPCMIND_SHADOW_QUEUE: a deployment's environment may carry it with shadow mode off
        if v
    ]
    if s.shadow_provider is None:
        if given:
            raise ValueError(f"{given[0]} belongs to shadow mode: name its provider with --shadow-provider")
        return None
    if not s.shadow_model:
        raise ValueError(f"--shadow-model: name the {s.shadow_provider} model to shadow with (none is picked for you)")
    if not 0 < s.shadow_share <= 1:
        raise ValueError(f"--shadow-share is above 0 and at most 1, not {s.shadow_share}")
    if not (1 <= s.shadow_calls <= MAX_SHADOW_CALLS and 1 <= s.shadow_queue <= MAX_SHADOW_QUEUE):
        raise ValueError(
            f"--shadow-calls is 1 to {MAX_SHADOW_CALLS} and NPCMIND_SHADOW_QUEUE 1 to {MAX_SHADOW_QUEUE}, "
            f"not {s.shadow_calls} and {s.shadow_queue}: the shadow is soft state, bounded"
        )
    flags = Settings(
        provider=s.shadow_provider,
        base_url=s.shadow_base_url,
        model=s.shadow_model,
        api_key_env=s.shadow_api_key_env,
        max_concurrent_calls=s.shadow_calls,
    )
    try:
        provider = make_provider(flags)
    except ValueError as e:
        raise ValueError(
            str(e).replace("--base-url", "--shadow-base-url").replace("--provider", "--shadow-provider")
        ) from None
    if not provider.ready:
        var = s.shadow_api_key_env or ("OPENAI_API_KEY" if s.shadow_provider == "openai" else "ANTHROPIC_API_KEY")
        raise ValueError(f"--shadow-provider {s.shadow_provider}: no API key in {var} (--shadow-api-key-env: another)")
    return provider


class Service:
    """One running npcmind: what every route handler needs."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.clients: dict[str, Client] | None = None
        if settings.distill_every_h and settings.store.startswith("sqlite:///:memory:"):
            raise ValueError(  # every round had logged a traceback: the store it reads is not there
                "--distill-every trains from the store beside the service, and sqlite:///:memory: lives only in "
                "this process's memory: give a store file (--store sqlite:///npcmind.db) or leave out --distill-every"
            )
        if settings.profile == "hosted":
            if not settings.clients:
                raise ValueError("the hosted profile needs --clients FILE (see `npcmind keygen`)")
            self.clients = load_clients(settings.clients)
        elif settings.profile != "local":
            raise ValueError(f"--profile must be local or hosted, not {settings.profile!r}")
        self.manifest: Manifest | None = load_manifest(settings.manifest) if settings.manifest else None
        if self.manifest is None and self.clients is None:
            raise ValueError("a manifest is required (--manifest FILE)")
        self.rulesets = load_rulesets(settings.rulesets)
        self.provider: Provider = make_provider(settings)
        self.shadow_provider: Provider | None = shadow_provider(settings)
        self.shadow: Shadow | None = None
        self.store: Store = open_store(settings.store)
        self.shared: Shared = open_shared(settings.redis, settings.cache_entries, settings.redis_timeout_ms)
        self.metrics = Metrics()
        self._pipeline: DecidePipeline | None = None
        self._guard: Guard | None = None
        self._hub: ContextHub | None = None
        self._npc: NpcProcessor | None = None
        self._check: asyncio.Task[None] | None = None
        self._chores: Chores | None = None
        self._run: tuple[Counts, float] | None = None
        self._provider_problem: str | None = None  # what the start-up check found

    async def start(self) -> None:
        """Load the secrets from the store and build what depends on them (inside the event loop)."""
        self._run = (self.metrics.counts(), time.monotonic())  # what the line at stop sums up
        await self.store.open()
        await self.shared.start()
        ids = DecisionIds(await self.store.secrets.get("decision_mac"))
        sessions = SessionRegistry(
            self.store, self.settings.max_session_entities, self.settings.max_sessions, self.settings.max_entities
        )
        self._hub = ContextHub(self.store, ids, sessions)
        if self.shadow_provider is not None:
            s = self.settings
            self.shadow = Shadow(
                self.shadow_provider, s.shadow_share, s.shadow_calls, s.deadline_ms / 1000, self.metrics, s.shadow_queue
            )
            self.shadow.start()
            log.info("shadow: %.3g of the model calls also go to %s", s.shadow_share, describe(self.shadow_provider))
        self._pipeline = DecidePipeline(
            self.provider,
            self.store,
            ids,
            self.settings,
            self.metrics,
            SceneSituation(sessions),
            self.shared,
            self.shadow,
        )
        signer = TokenSigner(await self.store.secrets.get("session_tokens"))
        self._guard = Guard(
            sessions, self.store, signer, self.shared, self.manifest, self.clients, self.settings.revocation_poll_s
        )
        self._npc = NpcProcessor(
            self.rulesets,
            Signer(await self.store.secrets.get("npc_ed25519_seed")),
            StepTokens(await self.store.secrets.get("npc_step_tokens")),
        )
        tokens.count(self.provider.encoding, "warm up")  # load the tokenizer table now, not on the first decision
        log.info("provider: %s", describe(self.provider))
        kept = f"{self.settings.retention_h:g} h" if self.settings.retention_h else "for ever"
        log.info("store: %s, decisions kept %s (NPCMIND_RETENTION_H)", self.settings.store, kept)
        self._say_prefix_cost()
        for manifest in {m.version: m for m in self._manifests()}.values():
            for line in self.pipeline.builder(manifest).budget_warnings(self.provider.encoding):
                log.warning("%s", line)
        if self.settings.profile == "local" and not loopback(self.settings.host):
            log.warning(
                "listening on %s with the local profile, which asks no token: anyone who reaches this machine "
                "can ask for decisions, billed to your provider key; for a service others use, --profile hosted. "
                "It answers requests whose Host is localhost, a loopback address%s or in NPCMIND_ALLOWED_HOSTS (%s)",
                self.settings.host,
                "" if self.settings.host in WILDCARDS else f", {self.settings.host}",
                ",".join(self.settings.allowed_hosts) or "none set",
            )
        if self.settings.cors_origins:
            log.info("browser pages may call from: %s (NPCMIND_CORS_ORIGINS)", ", ".join(self.settings.cors_origins))
        self._check = asyncio.get_running_loop().create_task(self._check_provider())
        self._chores = Chores(self.settings, self.store, self.metrics, self.hub.sessions, self._manifest_of)
        self._chores.start()

    def _manifest_of(self, client_id: str) -> Manifest | None:
        """The manifest a client's decisions are trained against, or None for a client no longer configured."""
        if self.clients is not None and client_id not in self.clients:
            return None
        return self.guard.manifest_for(client_id)

    def _manifests(self) -> list[Manifest]:
        """The manifest of the local profile, or each client's of the hosted one."""
        if self.manifest is not None:
            return [self.manifest]
        return [c.manifest for c in (self.clients or {}).values()]

    def _say_prefix_cost(self) -> None:
        """Say so when the manifest's static prefix is too short for the provider to cache: the design keeps
        the prefix cacheable, but a game developer who sees cached_tokens stay 0 should know why."""
        least = self.provider.cache_minimum
        if self.manifest is None or least is None:
            return
        n = self.pipeline.builder(self.manifest).static_tokens(self.provider.encoding)
        if n < least:
            log.info(
                "the manifest's static prompt prefix is %d tokens; %s caches a prefix from %d tokens, so each call "
                "pays all of it (once a batch, never once an entity)",
                n,
                self.provider.model,
                least,
            )

    async def _check_provider(self) -> None:
        """Ask the provider's model list once, in the background (the service is ready meanwhile), so a wrong
        key, an unknown model or a server that is not running is said at start, not by the first fallbacks."""
        try:
            async with asyncio.timeout(10):
                problem = await self.provider.check()
        except ProviderError as e:
            problem = f'{e}; every decision will fall back with "unavailable" until it answers'
        except Exception as e:  # a check must never stop the service
            problem = f"the provider check failed: {e.__class__.__name__}: {e}"
        if problem is not None:
            self._provider_problem = problem
            log.warning("provider check at start: %s", problem)

    async def stop(self) -> None:
        """Close connections and the store."""
        if self._check is not None:
            self._check.cancel()
        if self._chores is not None:
            self._chores.stop()
        await self.provider.close()
        if self.shadow is not None:
            await self.shadow.stop()
        elif self.shadow_provider is not None:
            await self.shadow_provider.close()
        await self.shared.close()
        await self.store.close()
        if self._run is not None:  # a clean stop says so, with what the run did: a kill -9 would say nothing
            counts, since = self._run
            seconds = time.monotonic() - since
            span = f"this run of {seconds:.0f} s"
            done = activity(counts, self.metrics.counts(), seconds, span) or f"{span}: no decisions"
            log.info(
                "stopped (%s); the store %s is closed and holds every decision answered", done, self.settings.store
            )

    @property
    def provider_problem(self) -> str | None:
        """What the start-up check found, for /v1/health, until a provider call succeeds: a server started
        after the service, or a model the server answers without listing it, must not be reported forever."""
        if self._pipeline is not None and self._pipeline.local.answered:
            return None
        return self._provider_problem

    @property
    def provider_checked(self) -> bool:
        """Whether the start-up check of the provider has finished (its finding is in provider_problem)."""
        return self._check is not None and self._check.done()

    async def provider_check_done(self) -> None:
        """Wait for the start-up check of the provider (its own timeout bounds it), so that `npcmind serve` says
        what it found before the line that says ready, not after it."""
        if self._check is not None:
            await asyncio.wait([self._check])

    @property
    def pipeline(self) -> DecidePipeline:
        """The decide pipeline (once started)."""
        return _started(self._pipeline)

    @property
    def guard(self) -> Guard:
        """Who is asking (once started)."""
        return _started(self._guard)

    @property
    def npc(self) -> NpcProcessor:
        """The NPC step machine (once started)."""
        return _started(self._npc)

    @property
    def hub(self) -> ContextHub:
        """The session writes of telemetry, scopes and reports, and the sessions they go to (once started)."""
        return _started(self._hub)


def interval(seconds: float) -> str:
    """A period as a person reads it: the demo's 15 s was "every 0.00416667 h"."""
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{seconds / 60:g} min"
    return f"{seconds / 3600:g} h"
