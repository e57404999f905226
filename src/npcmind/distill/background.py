"""`npcmind serve --distill-every HOURS`: retrain every client's policy in the background, so a game gets better
without a release. Training holds a core for seconds; it runs on a thread of its own with its own read-only
store, never on the event loop that answers decisions. Only the finished policy comes back to the loop, to
be kept in the store that GET /v1/policy reads."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable

from npcmind.manifest import Manifest
from npcmind.storage.base import Store, StoredPolicy, StoreError

log = logging.getLogger("npcmind.distill")

# A round on 100,000 decisions holds a core for 8-15 s here (docs/policy.md), and the SDKs ask for a new policy
# once a minute: rounds closer than 3 minutes would keep a core busy for policies no game could pick up sooner
# (1e-300 hours had logged 46,975 rounds in 10 s).
MIN_EVERY_H = 0.05
# The first round comes this soon after start, not a whole interval later: a service restarted more often than
# every HOURS (a deploy a day, --distill-every 24) had never trained at all. Not at once: start-up and the
# game's first requests come first.
FIRST_ROUND_S = 60.0


def _train(store_url: str, client_id: str, manifest: Manifest) -> tuple[bytes | None, list[str]]:
    """On the worker thread: read the client's decisions and train (the run's lines say what happened)."""
    from npcmind.distill.run import count, distill, read_rows

    result = distill(read_rows(store_url, client_id, None), client_id, manifest)
    data = json.dumps(result.policy, separators=(",", ":")).encode() if result.policy is not None else None
    summary = [
        f"{r.name} {count(r.decisions, 'decision')}, agreement {r.agreement:.1%}, "
        + ", ".join(f"{cov:.0%} covered at {th:g}" for th, cov, _ in r.table if th in (0.8, 0.9))
        for r in result.reports
    ]
    return data, summary or result.lines


def _said(e: BaseException) -> str:
    """An error as one line of the log: what and why, no traceback a round."""
    text = " ".join(str(e).split())
    return f"{e.__class__.__name__}: {text}" if text else e.__class__.__name__


class BackgroundDistill:
    """Every ``every_h`` hours, a new policy for each client that has decisions to learn from."""

    def __init__(
        self,
        store: Store,
        store_url: str,
        manifest_of: Callable[[str], Manifest | None],
        every_h: float,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.store = store
        self.store_url = store_url
        self.manifest_of = manifest_of
        self.every_s = every_h * 3600
        self.sleep = sleep  # the tests' clock
        self.runs = 0

    async def run(self) -> None:
        """The loop the service starts; cancelled at stop."""
        await self.sleep(min(FIRST_ROUND_S, self.every_s))
        while True:
            try:
                await self.once()
            except Exception as e:  # a failed round must not end the rounds to come
                log.warning("distill: the round failed (%s); the next one tries again", _said(e))
            await self.sleep(self.every_s)

    async def once(self) -> int:
        """One round: train and keep each client's policy; how many were kept."""
        t0 = time.monotonic()
        try:
            clients = await self.store.training_clients(0.0)
        except StoreError:  # said by the store's failure log
            return 0
        kept = failed = 0
        for client_id in clients:
            try:  # one client's failure is that client's: the others still get their policy
                kept += await self._client(client_id)
            except Exception as e:
                failed += 1
                log.warning("distill: %s: no new policy this round: %s", client_id, _said(e))
        self.runs += 1
        log.info(
            "distill: round done in %.1f s, %d of %d clients with a new policy%s",
            time.monotonic() - t0,
            kept,
            len(clients),
            f", {failed} failed" if failed else "",
        )
        return kept

    async def _client(self, client_id: str) -> int:
        """Train one client's policy and keep it unless it is the one kept already; 1 when a new one was kept."""
        from npcmind.distill.run import same_policy

        manifest = self.manifest_of(client_id)
        if manifest is None:  # a client no longer in the clients file
            return 0
        data, lines = await asyncio.to_thread(_train, self.store_url, client_id, manifest)
        if data is None:
            log.info("distill: %s: no policy (%s)", client_id, "; ".join(lines))
            return 0
        before = await self.store.policy(client_id, manifest.version)
        if before is not None and same_policy(before.data, data):  # the same file keeps its ETag: no 200 for nothing
            log.info("distill: %s: the policy is unchanged (%s)", client_id, "; ".join(lines))
            return 0
        await self.store.put_policy(StoredPolicy(client_id, manifest.version, time.time(), data))
        log.info(
            "distill: %s: policy of %d bytes kept for manifest %s: %s",
            client_id,
            len(data),
            manifest.version[:19],
            "; ".join(lines),
        )
        return 1
