"""`npcmind serve --distill-every HOURS`: retrain every client's policy in the background, so a game gets better
without a release. Training holds a core for seconds; it runs on a thread of its own with its own read-only
store, never on the event loop that answers decisions. Only the finished policy comes back to the loop, to
be kept in the store that GET /v1/policy reads."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable

from npcmind.manifest import Manifest
from npcmind.storage.base import Store, StoredPolicy, StoreError

log = logging.getLogger("npcmind.distill")


def _train(store_url: str, client_id: str, manifest: Manifest) -> tuple[bytes | None, list[str]]:
    """On the worker thread: read the client's decisions and train (the run's lines say what happened)."""
    from npcmind.distill.run import distill, read_rows

    result = distill(read_rows(store_url, client_id, None), client_id, manifest)
    data = json.dumps(result.policy, separators=(",", ":")).encode() if result.policy is not None else None
    summary = [
        f"{r.name} {r.decisions:,} decisions, agreement {r.agreement:.1%}, "
        + ", ".join(f"{cov:.0%} covered at {th:g}" for th, cov, _ in r.table if th in (0.8, 0.9))
        for r in result.reports
    ]
    return data, summary or result.lines


class BackgroundDistill:
    """Every ``every_h`` hours, a new policy for each client that has decisions to learn from."""

    def __init__(
        self, store: Store, store_url: str, manifest_of: Callable[[str], Manifest | None], every_h: float
    ) -> None:
        self.store = store
        self.store_url = store_url
        self.manifest_of = manifest_of
        self.every_s = every_h * 3600
        self.runs = 0

    async def run(self) -> None:
        """The loop the service starts; cancelled at stop."""
        while True:
            await asyncio.sleep(self.every_s)
            try:
                await self.once()
            except Exception:  # a failed round must not end the rounds to come
                log.exception("distill: the round failed; the next one tries again")

    async def once(self) -> int:
        """One round: train and keep each client's policy; how many were kept."""
        t0 = time.monotonic()
        try:
            clients = await self.store.training_clients(0.0)
        except StoreError:  # said by the store's failure log
            return 0
        kept = 0
        for client_id in clients:
            manifest = self.manifest_of(client_id)
            if manifest is None:  # a client no longer in the clients file
                continue
            data, lines = await asyncio.to_thread(_train, self.store_url, client_id, manifest)
            if data is None:
                log.info("distill: %s: no policy (%s)", client_id, "; ".join(lines))
                continue
            await self.store.put_policy(StoredPolicy(client_id, manifest.version, time.time(), data))
            kept += 1
            log.info(
                "distill: %s: policy of %d bytes kept for manifest %s: %s",
                client_id,
                len(data),
                manifest.version[:19],
                "; ".join(lines),
            )
        self.runs += 1
        log.info(
            "distill: round done in %.1f s, %d of %d clients with a new policy",
            time.monotonic() - t0,
            kept,
            len(clients),
        )
        return kept
