"""Keeping a batch's decisions: each choice under a new decision id, in the store with what the fresh ones were
made from, told to the situation and counted, before any of them is given out (acknowledged means stored)."""

from __future__ import annotations

import asyncio
from collections import Counter
from operator import itemgetter

from npcmind.decide.batch import Batch, Outcome, Situation, features
from npcmind.decide.calls import Fell
from npcmind.decide.ids import DecisionIds
from npcmind.decide.read import Manifests, read_of
from npcmind.local.metrics import Metrics
from npcmind.protocol.a2g import AIDecision, Decision, FallbackDecision
from npcmind.shared.base import CachedChoice
from npcmind.storage.base import DecisionFeatures, IssuedDecision, RequestFeatures, Store


class Keeper:
    """Issues, stores and counts the decisions of every batch of one service."""

    def __init__(self, store: Store, ids: DecisionIds, metrics: Metrics, situation: Situation | None) -> None:
        self.store = store
        self.ids = ids
        self.metrics = metrics
        self.situation = situation
        self.manifests = Manifests()
        self._ai = metrics.decisions.labels("AI", "")
        self._fallback = {
            code: metrics.decisions.labels("FALLBACK", code)
            for code in ("unavailable", "busy", "refused", "invalid_choice", "budget")
        }

    async def settle(self, batch: Batch, group: list[tuple[int, Outcome]]) -> list[Decision]:
        """The decisions of entities whose outcome is final: each choice under a new decision id, kept in the store
        and told to the situation before any is given out: a decision acknowledged is a decision stored. What the
        fresh ones were made from is kept once a batch, with the group that completes it: a streamed batch
        settles a group an entity, and a features row each cost it a compressed row and a statement per entity.
        A stream's keeping is shielded: a client that leaves meanwhile leaves nothing half-kept (nor the features of
        a batch it left). The JSON answer's handler runs to its end whether or not its client is still there
        (uvicorn cancels no handler on a disconnect), so it keeps in line, without a task a batch."""
        group = sorted(group, key=itemgetter(0))  # decision numbers in the request's order within a group
        decisions, issued, learned = await self._issue(batch, group)
        batch.learned += learned
        batch.entity_of.update({d.seq: d.entity_id for d in issued})
        complete = len(batch.decisions) + len(group) >= len(batch.req.entities)
        made_from = features(batch.session, batch.req, batch.chain, batch.now, batch.learned) if complete else None
        if (issued or made_from is not None) and batch.streamed:  # a stream's client may leave at any line
            keeping = asyncio.ensure_future(self._keep(batch, issued, made_from, more=not complete))
            keeping.add_done_callback(_retrieved)  # a client gone meanwhile: its failure is no one's to read
            await asyncio.shield(keeping)
        elif issued or made_from is not None:  # the JSON answer's handler is never cancelled by its client: no task
            await self._keep(batch, issued, made_from)
        ms = batch.ms()
        for (i, _), d in zip(group, decisions, strict=True):
            batch.decisions[i] = d
            batch.sent_ms[d.id] = ms
        return decisions

    async def _issue(
        self, batch: Batch, group: list[tuple[int, Outcome]]
    ) -> tuple[list[Decision], list[IssuedDecision], list[DecisionFeatures]]:
        """Each entity's decision: its fallback, or its choice under a new decision id; the rows to keep of the
        choices, and the features of the fresh ones."""
        session, req = batch.session, batch.req
        manifest, sid = session.manifest, session.session_id
        chosen = [type(a) for _, a in group].count(CachedChoice)
        first = seq = await self.store.decisions.allocate(chosen) if chosen else 0
        dids = self.ids.issue_many(seq, sid, chosen)
        decisions: list[Decision] = []
        issued: list[IssuedDecision] = []
        learned: list[DecisionFeatures] = []
        for i, a in group:
            e = req.entities[i]
            t = manifest.types[e.type]
            if isinstance(a, Fell):
                decisions.append(FallbackDecision(e.id, a.code, a.reason, t.ttl_ms))
                continue
            cached = i in batch.known  # an answer from the cache repeats one learnt already
            did, label = dids[seq - first], t.actions[a.action]
            decisions.append(AIDecision(e.id, a.action, label, a.confidence, t.ttl_ms, did, cached))
            issued.append(IssuedDecision(seq, did, sid, e.id, e.type, a.action, label, batch.now))
            if not cached:
                obs = t.fields.quantize(e.observation)
                learned.append(
                    DecisionFeatures(seq, e.type, e.profile, obs, e.trigger, e.legal_actions, a.action, a.confidence)
                )
            seq += 1
        return decisions, issued, learned

    async def _keep(
        self, batch: Batch, issued: list[IssuedDecision], made_from: RequestFeatures | None, more: bool = False
    ) -> None:
        """Record issued decisions (with the batch's features and what the model read, when given) in one commit,
        then tell the situation (memory, scene). ``more``: a streamed group before the batch's last."""
        if made_from is not None:  # what the model read, for replay (docs/replay.md)
            made_from.read = read_of(batch, made_from)
            made_from.manifest = self.manifests.due(batch.session.manifest)
        try:
            await self.store.decisions.record(issued, made_from, more)
        except BaseException:
            if made_from is not None and made_from.manifest is not None:
                self.manifests.lost(batch.session.manifest)
            raise
        if self.situation is not None and issued:
            self.situation.decided(batch.session, issued)

    def count(self, decisions: list[Decision]) -> None:
        """A batch's decision metrics, all in one place and once a batch (a streamed batch settles a group an
        entity): AI decisions, those from the cache, fallbacks by code."""
        ai = hits = 0
        fell: Counter[str] | None = None
        for d in decisions:
            if isinstance(d, AIDecision):
                ai += 1
                hits += d.cached
            else:
                fell = fell or Counter()
                fell[d.code] += 1
        if hits:
            self.metrics.cache_hits.inc(hits)
        if ai:
            self._ai.inc(ai)
        for code, n in (fell or {}).items():
            self._fallback[code].inc(n)


def _retrieved(task: asyncio.Future[None]) -> None:
    """Read a shielded task's outcome, so that one nobody awaits any more is not logged as never retrieved."""
    if not task.cancelled():
        task.exception()
