"""The assembled service: settings, manifest, store, provider and pipeline wired once, shared by the HTTP layer."""

from __future__ import annotations

import logging

from npcmind.config import Settings
from npcmind.decide.ids import DecisionIds
from npcmind.decide.pipeline import DecidePipeline, SessionContext
from npcmind.manifest import Manifest
from npcmind.manifest import load as load_manifest
from npcmind.metrics import Metrics
from npcmind.providers import tokens
from npcmind.providers.base import Provider
from npcmind.providers.select import describe, make_provider
from npcmind.storage import Store, open_store

log = logging.getLogger("npcmind")


class Service:
    """One running npcmind: what every route handler needs."""

    def __init__(
        self,
        settings: Settings,
        manifest: Manifest | None = None,
        provider: Provider | None = None,
        store: Store | None = None,
    ) -> None:
        self.settings = settings
        if manifest is None:
            if not settings.manifest:
                raise ValueError("a manifest is required (--manifest FILE)")
            manifest = load_manifest(settings.manifest)
        self.manifest = manifest
        self.provider = provider or make_provider(settings)
        self.store = store or open_store(settings.store)
        self.metrics = Metrics()
        self.pipeline: DecidePipeline | None = None

    async def start(self) -> None:
        """Load the secrets from the store and build the pipeline (inside the event loop)."""
        ids = DecisionIds(await self.store.secret("decision_mac"))
        tokens.count(self.provider.encoding, "warm up")  # load the tokenizer table now, not on the first decision
        self.pipeline = DecidePipeline(self.provider, self.store, ids, self.settings, self.metrics)
        log.info("provider: %s", describe(self.provider))

    async def stop(self) -> None:
        """Close connections and the store."""
        await self.provider.close()
        await self.store.close()

    def decide_pipeline(self) -> DecidePipeline:
        """The pipeline, once started."""
        if self.pipeline is None:
            raise RuntimeError("service not started")
        return self.pipeline

    async def local_session(self, client_id: str) -> SessionContext:
        """The local profile keeps one implicit session per client_id."""
        return SessionContext(f"local:{client_id}", client_id, self.manifest, {})
