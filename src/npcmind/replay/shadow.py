"""Shadow mode: a share of the model calls sent again to a second model after the game has its answer, and the
agreement kept as the replay report counts it (docs/replay.md). Nothing the game gets waits for it or changes:
the pipeline hands over a finished batch without waiting (``offer``), a bounded queue takes it or drops it with
a count, and a few workers of its own send it; a shadow provider that fails or is slow costs the game nothing.

The figures are per client (a game's figures are its own) and per process: soft state, lost on restart, which
a replay of the store (`npcmind replay`) can always make again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from npcmind.decide.batch import Batch
from npcmind.decide.calls import Fell, map_choices
from npcmind.decide.pipeline import provider_call
from npcmind.decide.prompt import EntityPrompt, Prompt
from npcmind.decide.read import ReadCall, read_call
from npcmind.failures import FailureLog
from npcmind.local.metrics import Metrics
from npcmind.manifest import Manifest
from npcmind.protocol.a2g import AIDecision, FallbackDecision
from npcmind.providers.base import Provider, ProviderError
from npcmind.replay.kept import Kept
from npcmind.replay.render import Renderer
from npcmind.replay.report import Report, fallback_label
from npcmind.replay.run import CallResult, Replayed, failure
from npcmind.shared.base import CachedChoice

log = logging.getLogger("npcmind.shadow")

QUEUE = 256  # batches waiting for the shadow model; past it a batch is dropped (and counted), never waited for
# bounds in bytes as well as counts: any client id may be shadowed in the local profile, and a situation keeps
# both entity texts to show; at most 100 x 500 x (2 x 1,000 characters + its key): about 100 MB at the very most
MAX_CLIENTS = 100  # clients whose figures are kept (the least recently shadowed goes first)
MAX_SITUATIONS = 500  # situations told apart a client (its figures go on counting past it)
MAX_TEXT = 1000  # characters of an entity's text kept to show (a situation is told apart by its whole digest)
MAX_REST_S = 60.0  # the longest a failing shadow rests before it is tried again


@dataclass(slots=True)
class _Job:
    """One answered batch to send again: who asked, the prompt the model read and what each entity got."""

    client_id: str
    manifest: Manifest
    prompt: Prompt
    asked: list[EntityPrompt]
    decided: dict[int, str]  # entity number -> the action the game got, or "(code)" for its fallback
    read: ReadCall | None  # to render again in the shadow model's answer form (None: the same form, the same prompt)


@dataclass(slots=True)
class _Client:
    """One client's shadow figures: the report's, and what never reached the shadow model."""

    report: Report
    dropped: int = 0
    failed: int = 0


class Shadow:
    """The second model, its queue and workers, and the figures per client."""

    def __init__(
        self,
        provider: Provider,
        share: float,
        calls: int,
        timeout_s: float,
        metrics: Metrics,
        queue: int = QUEUE,
        coin: random.Random | None = None,
    ) -> None:
        self.provider = provider
        self.share = share
        self.calls = calls
        self.timeout_s = timeout_s
        self.metrics = metrics
        self._queue: asyncio.Queue[_Job] = asyncio.Queue(maxsize=queue)
        self._coin = coin or random.Random()
        self._renderer = Renderer()
        self._clients: OrderedDict[str, _Client] = OrderedDict()
        self._workers: list[asyncio.Task[None]] = []
        self._unread: set[type[Exception]] = set()
        self.failures = FailureLog(log, "shadow call")  # a shadow that fails is said at a rate, never per call
        self._backoff_s = 0.0  # after a failed call the shadow rests, 1 s doubling to 60 s: see _failed
        self._resting_until = 0.0

    def start(self) -> None:
        """Start the workers (inside the event loop)."""
        loop = asyncio.get_running_loop()
        self._workers = [loop.create_task(self._work()) for _ in range(self.calls)]

    async def stop(self) -> None:
        """Stop the workers (what is still queued is dropped: soft state) and close the provider."""
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        await self.provider.close()

    def offer(self, batch: Batch) -> None:
        """A batch the model answered, after the game has its decisions: a share of them queued, never waited for."""
        if not batch.asked or self._coin.random() >= self.share:
            return
        session = batch.session
        if self._resting():
            self._drop(session.client_id)
            return
        decided: dict[int, str] = {}
        for i, ep, _ in batch.asked:
            d = batch.decisions.get(i)
            if isinstance(d, AIDecision):
                decided[ep.number] = d.action
            elif isinstance(d, FallbackDecision):
                decided[ep.number] = fallback_label(d.code)
        same = batch.prompt.mode == self.provider.mode
        job = _Job(
            session.client_id,
            session.manifest,
            batch.prompt,
            [ep for _, ep, _ in batch.asked],
            decided,
            None if same else read_call(batch),
        )
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            self._drop(session.client_id)

    def _drop(self, client_id: str) -> None:
        self._client(client_id).dropped += 1
        self.metrics.shadow_dropped.inc()

    def _resting(self) -> bool:
        return self._resting_until > 0 and asyncio.get_running_loop().time() < self._resting_until

    def _failed(self) -> None:
        """A failed shadow call rests the shadow: what is offered meanwhile is dropped, with a count. A shadow
        that always fails (down, or a body that never ends, read to its cap each time) would otherwise take
        a worker's share of the game's event loop at every call; resting, it costs one call in 60 s at most."""
        self._backoff_s = min(MAX_REST_S, max(1.0, self._backoff_s * 2))
        self._resting_until = asyncio.get_running_loop().time() + self._backoff_s

    def report(self, client_id: str) -> dict[str, Any] | None:
        """The client's shadow figures as the replay report shows them (None: nothing shadowed for it yet)."""
        c = self._clients.get(client_id)
        if c is None:
            return None
        target = {
            "kind": "shadow",
            "client": client_id,
            "provider": self.provider.name,
            "model": self.provider.model,
            "share": self.share,
            "dropped": c.dropped,
            "failed": c.failed,
        }
        return c.report.figures(target, {})

    def _client(self, client_id: str) -> _Client:
        c = self._clients.get(client_id)
        if c is None:
            c = self._clients[client_id] = _Client(Report(MAX_SITUATIONS))
            if len(self._clients) > MAX_CLIENTS:
                self._clients.popitem(last=False)
        else:
            self._clients.move_to_end(client_id)
        return c

    async def _work(self) -> None:
        """One worker: a queued batch at a time, sent to the shadow model; nothing it meets ends it."""
        while True:
            job = await self._queue.get()
            if self._resting():  # queued before the shadow failed: dropped as the offers are
                self._drop(job.client_id)
                continue
            try:
                await self._one(job)
            except Exception as e:  # a bug of ours: said once a kind, the worker goes on
                if type(e) not in self._unread:
                    self._unread.add(type(e))
                    log.error("a shadow call failed (a bug: please report it with this traceback)", exc_info=e)

    async def _one(self, job: _Job) -> None:
        """The batch sent to the shadow model, in its answer form, and its choices counted against the game's."""
        if job.read is None:
            prompt, asked = job.prompt, job.asked
        else:
            prompt = self._renderer.render(job.read, job.manifest, self.provider.mode).prompt
            asked = prompt.entities
        call = provider_call(prompt, asked, 0)
        out = CallResult()
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout_s):
                answer = await self.provider.decide(call)
        except (ProviderError, TimeoutError) as e:
            outcome = "timeout" if isinstance(e, TimeoutError) else "error"
            self.metrics.shadow_calls.labels(outcome).inc()
            self._client(job.client_id).failed += 1
            self._failed()
            self.failures.failed(f"{self.provider.name} model {self.provider.model}: {e or 'timed out'}")
            choices: list[CachedChoice | Fell] = [Fell("unavailable", str(e))] * len(asked)
            out.error = failure(e, self.timeout_s)
        else:
            self.metrics.shadow_calls.labels("ok").inc()
            self.failures.succeeded()
            self._backoff_s = 0.0
            out.latency_ms = (time.perf_counter() - t0) * 1000
            out.tokens_in, out.tokens_out = answer.input_tokens, answer.output_tokens
            choices = map_choices(answer, asked, call.max_output_tokens)
        before = {ep.number: ep for ep in job.asked}
        for ep, o in zip(asked, choices, strict=True):
            decided = job.decided.get(ep.number)
            was = before.get(ep.number)
            if decided is None or was is None:
                continue
            kept = Kept(0, ep.number, ep.entity.type, decided, None)
            choice, code = (o.action, None) if isinstance(o, CachedChoice) else (None, o.code)
            situation = self._renderer.situation(job.manifest, job.prompt.mode, was)
            key = hashlib.blake2b(situation.encode(), digest_size=16).hexdigest()
            changed = job.read is not None
            out.decisions.append(Replayed(kept, choice, code, key, _cut(was.text), _cut(ep.text), changed))
        self._client(job.client_id).report.add(out)


def _cut(text: str) -> str:
    """An entity's text as kept to show: at most MAX_TEXT characters, the cut said."""
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"
