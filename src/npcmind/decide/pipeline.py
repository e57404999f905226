"""The decide pipeline: validate, record, render, budget, cache, one provider call, map, issue ids.

Every entity is decided on its own: one over-budget, refused or invalid entity falls back alone, and a
failed provider call touches only the entities that were in it. One code path streams: each entity's decision
is final, stored and given out as soon as its part of the answer is written (docs/streaming.md); the JSON answer
collects the same decisions into the request's order (its provider call read whole, as it always was).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from npcmind import A2G_VERSION
from npcmind.answer import AnswerMode
from npcmind.config import Settings
from npcmind.decide.batch import AfterAnswer, Asked, Batch, Outcome, SessionContext, Situation
from npcmind.decide.calls import Ended, Fell, Piece, ProviderCalls, map_choices, picked
from npcmind.decide.ids import DecisionIds
from npcmind.decide.keep import Keeper
from npcmind.decide.prompt import EntityContext, EntityPrompt, KeyState, Prompt, PromptBuilder
from npcmind.decide.validate import check_request
from npcmind.local.metrics import Metrics
from npcmind.local.pipeline import PipelineState
from npcmind.manifest import Manifest
from npcmind.manifest.model import ScopeSpec
from npcmind.protocol.a2g import (
    AIDecision,
    DecideEnd,
    DecideEntity,
    DecideRequest,
    DecideResponse,
    Decision,
    FallbackDecision,
    PromptView,
    SeenEntity,
)
from npcmind.protocol.errors import ApiError
from npcmind.providers import tokens
from npcmind.providers.base import Picked, Provider, ProviderCall
from npcmind.shared.base import CachedChoice, Shared
from npcmind.shared.memory import MemoryShared
from npcmind.storage.base import Store, StoreError

log = logging.getLogger("npcmind.decide")
# the fallback of every entity still undecided when its session ended (DELETE /v1/session) during the answer
ENDED = "the session ended (DELETE /v1/session) before this entity's part of the answer was written"


@dataclass(slots=True)
class LastBatch:
    """A session's last decide request as GET /v1/prompt shows it: the batch, every entity of it decided, and when
    an unstreamed answer went out whole. Kept as it was left, read only when asked for (most never are). A batch
    that made no model call also keeps (a reference) the session's last one that did, which the view shows."""

    batch: Batch
    done_ms: int
    model: LastBatch | None = None

    def sent_ms(self) -> dict[str, int]:
        """When each decision went out: a streamed one on its line, an unstreamed one with the whole answer."""
        b = self.batch
        return dict(b.sent_ms) if b.streamed else dict.fromkeys((e.id for e in b.req.entities), self.done_ms)


def answer_order(entities: Sequence[DecideEntity]) -> list[int]:
    """The request's entities in the order the prompt lists them, so the model answers the most urgent first:
    higher ``urgency`` first, then those with a ``trigger`` (a fresh event), then the request's order."""
    keys = [(-e.urgency, e.trigger is None, i) for i, e in enumerate(entities)]
    keys.sort()
    return [i for _, _, i in keys]


class DecidePipeline:
    """One instance per service; shared by every session."""

    def __init__(
        self,
        provider: Provider,
        store: Store,
        ids: DecisionIds,
        settings: Settings,
        metrics: Metrics,
        situation: Situation | None = None,
        shared: Shared | None = None,
        after: AfterAnswer | None = None,
    ) -> None:
        self.provider = provider
        self.after = after  # shadow mode, told of each answered batch once the game has it
        self.store = store
        self.ids = ids
        self.settings = settings
        self.metrics = metrics
        self.situation = situation
        self.shared: Shared = shared if shared is not None else MemoryShared(settings.cache_entries)
        self.mode: AnswerMode = provider.mode
        self.local: PipelineState[LastBatch] = PipelineState(
            settings.max_concurrent_calls, settings.admission_wait_ms / 1000
        )
        self.calls = ProviderCalls(provider, settings, metrics, self.shared, self.local)
        self._failures = self.calls.failures  # the provider call's failure log, as tests and operators knew it
        self._builders: dict[str, PromptBuilder] = {}
        self.keeper = Keeper(store, ids, metrics, situation)
        self._broken: set[type[Exception]] = set()  # bugs after a stream's 200, by exception type: said once

    def builder(self, manifest: Manifest) -> PromptBuilder:
        """The prompt builder of a manifest version (its static part 1 is rendered once)."""
        b = self._builders.get(manifest.version)
        if b is None:
            b = self._builders[manifest.version] = PromptBuilder(manifest, self.mode)
        return b

    async def decide(self, session: SessionContext, req: DecideRequest) -> DecideResponse:
        """Answer one decide request whole (a 422 ApiError if it breaks the manifest): the stream collected into the
        request's order, or, when no entity needs the model, its one group settled in line."""
        batch = await self.begin(session, req)
        if batch.asked:
            async with contextlib.aclosing(self.stream(batch)) as groups:
                async for _ in groups:
                    pass
        else:  # no model call (every entity from the cache or over its budget): one group, kept in line
            try:
                await self.keeper.settle(batch, list(batch.known.items()))
            finally:
                self._finish(batch)
        decided = [batch.decisions[i] for i in range(len(req.entities))]
        return DecideResponse(A2G_VERSION, req.epoch, batch.ms(), decided)

    async def begin(self, session: SessionContext, req: DecideRequest, streamed: bool = False) -> Batch:
        """Everything that can refuse the request (a 422 ApiError if it breaks the manifest), done before a stream's
        200: the scene takes the entities, the prompt is rendered in the answer's order, and what needs no model
        (the cache, the budget) is known."""
        t0 = time.perf_counter()
        now = time.time()
        manifest = session.manifest
        problems = check_request(req, manifest, session.scopes)
        if problems:
            raise ApiError.invalid(problems)
        if self.situation is not None:
            await self.situation.observe(session, req, now)
        chain = manifest.scope_chain(req.scope, session.scopes) if req.scope else []
        order = answer_order(req.entities)
        prompt = await self._prompt(session, req, chain, now, order)
        key_base = prompt.key_base(manifest.version, manifest.chain_key(req.scope, chain))
        counts, known, asked = await self._sort(session, prompt, order, key_base)
        return Batch(session, req, chain, now, t0, prompt, counts, known, asked, streamed)

    async def stream(self, batch: Batch) -> AsyncGenerator[list[Decision], None]:
        """The entities' decisions as soon as they are final and kept in the store, a group at a time (what was
        settled together: a step of an async generator a group, not an entity): those that need no model first,
        while the provider call starts, then each asked one as the model writes it. A StoreError means nothing
        of the group it came with was kept (the JSON answer becomes a 503, a stream's lines ``streamed`` says)."""
        task: asyncio.Task[None] | None = None
        pieces: asyncio.Queue[Piece] | _Ready
        try:
            if batch.asked:
                asked = [ep for _, ep, _ in batch.asked]
                call = provider_call(batch.prompt, asked, self.settings.max_output_tokens)
                if batch.streamed or batch.known:  # pieces as they come, or hits kept while the call runs
                    task, pieces = self.calls.start(call, len(batch.asked), batch.streamed)
                else:  # nothing to do meanwhile: the whole answer awaited in line, no task and no queue
                    pieces = _Ready(await self.calls.whole(call, len(batch.asked)))
            if batch.known:
                yield await self.keeper.settle(batch, list(batch.known.items()))
            if batch.asked:
                async for group in self._answers(batch, pieces, call.max_output_tokens):
                    if batch.session.ended():  # DELETE /v1/session meanwhile: no decision is issued to it any more
                        yield self._rest(batch, ENDED)
                        return  # the call is cancelled below
                    yield await self.keeper.settle(batch, group)
                if batch.keep:
                    await self.shared.cache(batch.session.client_id, batch.keep)
                if self.after is not None and batch.reply is not None and batch.reply.error is None:
                    self.after.offer(batch)
        finally:
            if task is not None:
                task.cancel()  # the client left before the answer: the call is no longer wanted
            self._finish(batch)

    def _finish(self, batch: Batch) -> None:
        """A batch's end, however it ended: what was decided counted (whether or not it all went out), and the
        batch kept for GET /v1/prompt when whole."""
        self.keeper.count(list(batch.decisions.values()))
        self._remember(batch)

    async def streamed(self, batch: Batch) -> AsyncGenerator[Decision | DecideEnd, None]:
        """The lines of a streamed answer: every entity's decision, then the end. Nothing fails a stream once its
        200 is sent: whatever goes wrong (the store, a bug) becomes ``unavailable`` lines for the entities without
        one, said once in the log, and the last line is still written."""
        try:
            async with contextlib.aclosing(self.stream(batch)) as groups:
                async for group in groups:
                    for d in group:
                        yield d
        except Exception as e:
            rest = self._rest(batch, self._broke(e))
            self.keeper.count(rest)  # those stream() had not decided when it failed
            for d in rest:
                yield d
        yield DecideEnd(A2G_VERSION, batch.req.epoch, batch.ms(), batch.sent_ms)

    def _broke(self, e: Exception) -> str:
        """Why the entities of a stream left without a line fall back; a bug's traceback is logged once per kind
        (a store failure the store has said already)."""
        if isinstance(e, StoreError):
            return f"{e}; run your own AI and ask again"[:300]
        if type(e) not in self._broken:
            self._broken.add(type(e))
            log.error("a streamed decide request failed (a bug: please report it with this traceback)", exc_info=e)
        return "internal error; the service logged it"

    def _rest(self, batch: Batch, reason: str) -> list[Decision]:
        """``unavailable`` for every entity of the batch without a decision yet."""
        types = batch.session.manifest.types
        out: list[Decision] = []
        for i, e in enumerate(batch.req.entities):
            if i not in batch.decisions:
                d = batch.decisions[i] = FallbackDecision(e.id, "unavailable", reason, types[e.type].ttl_ms)
                batch.sent_ms[e.id] = batch.ms()
                out.append(d)
        self._remember(batch)
        return out

    async def _prompt(
        self,
        session: SessionContext,
        req: DecideRequest,
        chain: list[tuple[str, ScopeSpec]],
        now: float,
        order: list[int],
    ) -> Prompt:
        """The batch's prompt: parts 1-3, parts 4-5 with the situation's lines, each entity's parts 6-7 in the
        answer's order (parts 1-3 do not depend on it: the provider's prompt cache is untouched)."""
        b = self.builder(session.manifest)
        situation_lines: list[str] = []
        contexts: dict[str, EntityContext] = {}
        if self.situation is not None:
            situation_lines, contexts = await self.situation.view(session, req, now)
        entities = [req.entities[i] for i in order]
        return Prompt(
            static=b.static(chain, [e.profile for e in req.entities if e.profile]),
            shared=b.shared(req, chain, situation_lines),
            entities=[b.entity(k + 1, e, contexts.get(e.id)) for k, e in enumerate(entities)],
            mode=self.mode,
            situation=situation_lines,
        )

    async def _sort(
        self, session: SessionContext, prompt: Prompt, order: list[int], key_base: KeyState
    ) -> tuple[dict[int, int], dict[int, Outcome], list[Asked]]:
        """Each entity's tokens, and what becomes of it before any call: over its budget, answered from the
        cache, or to be asked (under the key its answer is cached by), in the prompt's order. The budget comes
        first, as the protocol says (an entity over it falls back whether or not the cache holds it); its keys are
        looked up with the others' so that the count knows which texts come again: a hit's text is counted
        through the memo, a miss's (new, most likely) without filling it."""
        types = session.manifest.types
        counts: dict[int, int] = {}
        known: dict[int, Outcome] = {}
        keyed = [
            (i, ep, *prompt.cache_keys(key_base, ep, session.session_id if ep.private else None))
            for i, ep in zip(order, prompt.entities, strict=True)
        ]
        asked: list[Asked] = []
        encoding = self.provider.encoding
        for (i, ep, key, own), hit in zip(keyed, await self._lookup(session.client_id, keyed), strict=True):
            budget = types[ep.entity.type].max_input_tokens
            n_tokens = counts[ep.number] = (tokens.count if hit is not None else tokens.count_once)(encoding, ep.text)
            if n_tokens > budget:
                known[i] = Fell("budget", f"entity input is {n_tokens} tokens, over max_input_tokens {budget}")
            elif hit is not None:
                known[i] = hit
            else:  # an answer made with the session's memory is kept for this session alone
                asked.append((i, ep, own if own is not None else key))
        return counts, known, asked

    async def _lookup(
        self, client_id: str, within: list[tuple[int, EntityPrompt, str, str | None]]
    ) -> list[CachedChoice | None]:
        """Each entity's live entry: its session's own first (made with the memory it shows), else the shared
        one (made from texts every session may send: a choice made without memory is no session's secret)."""
        if not within:
            return []
        keys = [key for _, _, key, _ in within] + [own for _, _, _, own in within if own is not None]
        got = await self.shared.cached(client_id, keys)
        out, j = got[: len(within)], len(within)  # the shared keys' entries, then the own keys' in their order
        for k, (_, _, _, own) in enumerate(within):
            if own is not None:
                out[k], j = got[j] or out[k], j + 1
        return out

    async def _answers(
        self, batch: Batch, pieces: asyncio.Queue[Piece] | _Ready, max_output_tokens: int
    ) -> AsyncIterator[list[tuple[int, Outcome]]]:
        """The asked entities' outcomes as the call's pieces come, a group for what came together (an unstreamed
        answer is one group): a piece as soon as its entity is written, the rest from the whole answer or the
        reason the call ended without one. Ends with the call."""
        pending = {ep.number: (i, ep) for i, ep, _ in batch.asked}
        keys = {i: key for i, _, key in batch.asked}
        ended = False
        while not ended:
            got = [await pieces.get()]
            while not pieces.empty():
                got.append(pieces.get_nowait())
            group: list[tuple[int, Outcome]] = []
            for piece in got:
                if isinstance(piece, Picked):  # a number not asked, or given twice, is not the model's to add
                    found = pending.pop(piece.number, None)
                    if found is not None:
                        group.append((found[0], picked(piece.choice, found[1])))
                    continue
                ended, batch.reply = True, piece.reply
                rest = list(pending.values())
                pending.clear()
                outs = (
                    map_choices(piece.answer, [ep for _, ep in rest], max_output_tokens)
                    if piece.answer is not None
                    else [piece.fell or Fell("unavailable", "no answer")] * len(rest)
                )
                group += [(i, o) for (i, _), o in zip(rest, outs, strict=True)]
            types = batch.session.manifest.types
            batch.keep += [
                (keys[i], o, types[batch.req.entities[i].type].ttl_ms) for i, o in group if isinstance(o, CachedChoice)
            ]
            if group:
                yield group

    def _remember(self, batch: Batch) -> None:
        """Keep a batch every entity of which was decided, for GET /v1/prompt."""
        if len(batch.decisions) >= len(batch.req.entities):  # else the client left first: no whole batch to show
            last, sid = LastBatch(batch, batch.ms()), batch.session.session_id
            if not batch.asked and (before := self.local.last(sid)) is not None:  # no call: keep the last that made one
                last.model = before if before.batch.asked else before.model
            self.local.remember(sid, last)

    def seen_sessions(self) -> list[str]:
        """The sessions whose last batch is kept, most recent first (for a 404 that names them)."""
        return self.local.sessions()

    def seen(self, session_id: str) -> PromptView | None:
        """What the model saw in this session's last decide request (and what was not sent, and why)."""
        last = self.local.last(session_id)
        if last is None:
            return None
        if last.model is not None:  # served from the cache (or over budget) since the last model call: show that one
            view = _view(last.model)
            view.cached_since = last.batch.now
            return view
        return _view(last)


def _view(last: LastBatch) -> PromptView:
    """A kept batch as GET /v1/prompt shows it."""
    batch = last.batch
    prompt, sent = batch.prompt, {ep.number for _, ep, _ in batch.asked}
    asked = [ep for ep in prompt.entities if ep.number in sent]
    decided = {d.id: d for d in batch.decisions.values()}
    sent_ms = last.sent_ms()
    entities = [_seen(ep, batch, sent, sent_ms, decided[ep.entity.id]) for ep in prompt.entities]
    return PromptView(batch.now, prompt.static, prompt.user_text(asked) if asked else None, entities, batch.reply)


class _Ready:
    """The pieces of a call that has ended, as a queue holding its ``Ended`` (the JSON answer's call awaited in
    line reads through the same ``_answers`` as a call running in its task)."""

    __slots__ = ("_ended",)

    def __init__(self, ended: Ended) -> None:
        self._ended: Ended | None = ended

    async def get(self) -> Piece:
        """The ``Ended``, once."""
        ended, self._ended = self._ended, None
        if ended is None:  # a call ends once: _answers stops at its Ended
            raise asyncio.QueueEmpty
        return ended

    def empty(self) -> bool:
        """Nothing after the ``Ended``."""
        return self._ended is None

    def get_nowait(self) -> Piece:
        """Never called: ``empty`` is true once the ``Ended`` is read."""
        raise asyncio.QueueEmpty


def _seen(ep: EntityPrompt, batch: Batch, sent: set[int], sent_ms: dict[str, int], d: Decision) -> SeenEntity:
    """One entity of the last batch as GET /v1/prompt shows it."""
    return SeenEntity(
        ep.entity.id,
        ep.number,
        batch.counts.get(ep.number, 0),
        ep.number in sent,
        "AI" if isinstance(d, AIDecision) else "FALLBACK",
        d.code if isinstance(d, FallbackDecision) else ("cached" if d.cached else None),
        ep.text,
        d.action if isinstance(d, AIDecision) else None,
        d.reason if isinstance(d, FallbackDecision) else None,
        sent_ms.get(ep.entity.id),
    )


@lru_cache(maxsize=256)
def prefix_key(static: str) -> str:
    """The provider's prompt-cache key of a static prefix: a few kilobytes hashed once, not once a call."""
    return "npcmind-" + hashlib.sha256(static.encode()).hexdigest()[:24]


def provider_call(prompt: Prompt, asked: list[EntityPrompt], max_output_tokens: int) -> ProviderCall:
    """What the provider is sent: the static prefix, the asked entities' parts and their options."""
    return ProviderCall(
        system=prompt.static,
        user=prompt.user_text(asked),
        entities=[(ep.number, ep.options) for ep in asked],
        mode=prompt.mode,
        prefix_key=prefix_key(prompt.static),
        # an answer takes under 16 tokens an entity; a reasoning model also spends the limit on thinking
        max_output_tokens=max_output_tokens or 32 + 16 * len(asked),
    )
