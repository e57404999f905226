"""The decide pipeline: validate, record, render, budget, cache, one provider call, map, issue ids.

Every entity is decided on its own: one over-budget, refused or invalid entity falls back alone, and a
failed provider call touches only the entities that were in it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from npcmind import A2G_VERSION
from npcmind.answer import AnswerMode
from npcmind.config import Settings
from npcmind.decide.ids import DecisionIds
from npcmind.decide.prompt import EntityContext, EntityPrompt, Prompt, PromptBuilder
from npcmind.decide.validate import check_request
from npcmind.failures import FailureLog
from npcmind.local.metrics import Metrics
from npcmind.local.pipeline import PipelineState
from npcmind.manifest import Manifest
from npcmind.manifest.model import ScopeSpec
from npcmind.protocol.a2g import (
    AIDecision,
    DecideRequest,
    DecideResponse,
    Decision,
    FallbackCode,
    FallbackDecision,
    ModelReply,
    PromptView,
    SeenEntity,
)
from npcmind.protocol.errors import ApiError
from npcmind.providers import tokens
from npcmind.providers.base import Provider, ProviderAnswer, ProviderCall, ProviderError
from npcmind.shared.base import CachedChoice, Shared
from npcmind.shared.memory import MemoryShared
from npcmind.storage.base import DecisionFeatures, IssuedDecision, RequestFeatures, Store

log = logging.getLogger("npcmind.decide")


@dataclass(slots=True)
class SessionContext:
    """The session a request belongs to: who asks, with which manifest, and the scopes it added."""

    session_id: str
    client_id: str
    manifest: Manifest
    scopes: Mapping[str, ScopeSpec]


class Situation(Protocol):
    """What the context layer (telemetry, space, groups, memory) gives the pipeline."""

    async def observe(self, session: SessionContext, req: DecideRequest, now: float) -> None:
        """Step 1: record what the request tells about its entities, as telemetry would."""
        ...

    async def view(
        self, session: SessionContext, req: DecideRequest, now: float
    ) -> tuple[list[str], dict[str, EntityContext]]:
        """Part 5 lines for the batch, and part 6 context for each entity."""
        ...

    def decided(self, session: SessionContext, issued: list[IssuedDecision]) -> None:
        """Learn the chosen actions (a parent's latest decision, a neighbour's action)."""
        ...


_Asked = tuple[int, EntityPrompt, str]  # an entity sent to the provider: its index, its prompt, its cache key


@dataclass(frozen=True, slots=True)
class Fell:
    """Why one entity falls back to the game's native AI: the code the game reads, the reason a person reads."""

    code: FallbackCode
    reason: str


@dataclass(slots=True)
class LastBatch:
    """A session's last decide request as GET /v1/prompt shows it: when, its prompt, each entity's tokens, the
    numbers of the entities sent to the provider, the decisions, and what the model answered."""

    at: float
    prompt: Prompt
    counts: dict[int, int]
    sent: list[int]
    decisions: list[Decision]
    reply: ModelReply | None


def _entities(n: int) -> str:
    return "1 entity falls" if n == 1 else f"{n} entities fall"


def map_choices(
    answer: ProviderAnswer, asked: Sequence[EntityPrompt], max_output_tokens: int
) -> list[CachedChoice | Fell]:
    """Each asked entity's legal choice in the model's answer, or why it falls back (the model refused the batch,
    declined this entity, skipped it, broke the format, ran out of output tokens or chose an illegal action).
    Pure, so that what an answer becomes is tested without a provider."""
    if answer.refusal is not None:
        return [Fell("refused", f"the model refused: {answer.refusal}"[:200])] * len(asked)
    missing = "the model gave no choice for this entity"
    if not answer.choices:  # nothing of it read: the model broke the format, not only skipped this entity
        missing = "the model's answer held no choice in the answer format (its text: GET /v1/prompt)"
    if answer.truncated:
        missing = (
            f"the answer stopped at its output limit of {max_output_tokens} tokens before this entity's "
            "choice; a reasoning model needs more: NPCMIND_MAX_OUTPUT_TOKENS"
        )
    out: list[CachedChoice | Fell] = []
    for ep in asked:
        choice = answer.choices.get(ep.number)
        if choice is None:
            out.append(Fell("invalid_choice", missing))
        elif choice.refused:
            out.append(Fell("refused", "the model declined to choose"))
        elif choice.action not in ep.options:
            out.append(Fell("invalid_choice", f"the model chose {choice.action!r}, not a legal action"[:200]))
        else:
            out.append(CachedChoice(choice.action, choice.confidence))
    return out


def _fell_all(asked: list[_Asked], code: FallbackCode, reason: str, since: float) -> tuple[ModelReply, list[Fell]]:
    """A call that gave no answer: every entity in it falls back for the same reason."""
    return ModelReply(None, reason, round((time.perf_counter() - since) * 1000)), [Fell(code, reason)] * len(asked)


def _features(
    session: SessionContext,
    req: DecideRequest,
    chain: list[tuple[str, ScopeSpec]],
    now: float,
    learned: list[DecisionFeatures],
) -> RequestFeatures | None:
    """What the fresh decisions of this request were made from, for ``npcmind distill``."""
    if not learned:
        return None
    m = session.manifest
    state = m.chain_fields(chain).quantize(req.scope_state) if req.scope_state else None
    return RequestFeatures(session.client_id, m.version, now, m.world.quantize(req.world), state, learned)


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
    ) -> None:
        self.provider = provider
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
        self._builders: dict[str, PromptBuilder] = {}
        self._deadline = settings.deadline_ms / 1000
        self._ai = metrics.decisions.labels("AI", "")
        self._failures = FailureLog(log, "provider call")
        self._busy = FailureLog(log, "wait for a provider slot")  # what to tune, at most every 10 s
        self._unread: set[type[Exception]] = set()  # answers the adapter failed to read, by exception type
        self._fallback = {
            code: metrics.decisions.labels("FALLBACK", code)
            for code in ("unavailable", "busy", "refused", "invalid_choice", "budget")
        }

    def builder(self, manifest: Manifest) -> PromptBuilder:
        """The prompt builder of a manifest version (its static part 1 is rendered once)."""
        b = self._builders.get(manifest.version)
        if b is None:
            b = self._builders[manifest.version] = PromptBuilder(manifest, self.mode)
        return b

    async def decide(self, session: SessionContext, req: DecideRequest) -> DecideResponse:
        """Answer one decide request (a 422 ApiError if it breaks the manifest)."""
        t0 = time.perf_counter()
        now = time.time()
        manifest = session.manifest
        problems = check_request(req, manifest, session.scopes)
        if problems:
            raise ApiError.invalid(problems)
        if self.situation is not None:
            await self.situation.observe(session, req, now)
        chain = manifest.scope_chain(req.scope, session.scopes) if req.scope else []
        prompt = await self._prompt(session, req, chain, now)
        key_base = prompt.key_base(manifest.version, manifest.chain_key(req.scope, chain))
        counts, answers, asked = await self._sort(session, prompt, key_base)
        cached = {i for i, a in answers.items() if isinstance(a, CachedChoice)}  # no call made these
        reply: ModelReply | None = None
        if asked:
            reply, fresh = await self._call(session, prompt, asked)
            answers.update((i, a) for (i, _, _), a in zip(asked, fresh, strict=True))
        decisions = await self._issue(session, req, chain, now, answers, cached)
        self._count(decisions)
        latency = round((time.perf_counter() - t0) * 1000)
        sent = [ep.number for _, ep, _ in asked]
        self.local.remember(session.session_id, LastBatch(now, prompt, counts, sent, decisions, reply))
        return DecideResponse(A2G_VERSION, req.epoch, latency, decisions)

    async def _prompt(
        self, session: SessionContext, req: DecideRequest, chain: list[tuple[str, ScopeSpec]], now: float
    ) -> Prompt:
        """The batch's prompt: parts 1-3, parts 4-5 with the situation's lines, each entity's parts 6-7."""
        b = self.builder(session.manifest)
        situation_lines: list[str] = []
        contexts: dict[str, EntityContext] = {}
        if self.situation is not None:
            situation_lines, contexts = await self.situation.view(session, req, now)
        return Prompt(
            static=b.static(chain, [e.profile for e in req.entities if e.profile]),
            shared=b.shared(req, chain, situation_lines),
            entities=[b.entity(i + 1, e, contexts.get(e.id)) for i, e in enumerate(req.entities)],
            mode=self.mode,
        )

    async def _sort(
        self, session: SessionContext, prompt: Prompt, key_base: hashlib.blake2b
    ) -> tuple[dict[int, int], dict[int, CachedChoice | Fell], list[_Asked]]:
        """Each entity's tokens, and what becomes of it before any call: over its budget, answered from the
        cache, or to be asked (under the key its answer is cached by)."""
        types = session.manifest.types
        counts: dict[int, int] = {}
        known: dict[int, CachedChoice | Fell] = {}
        within: list[tuple[int, EntityPrompt, str, str | None]] = []
        for i, ep in enumerate(prompt.entities):
            budget = types[ep.entity.type].max_input_tokens
            n_tokens = counts[ep.number] = tokens.count(self.provider.encoding, ep.text)
            if n_tokens > budget:
                known[i] = Fell("budget", f"entity input is {n_tokens} tokens, over max_input_tokens {budget}")
                continue
            own = prompt.cache_key(key_base, ep, session.session_id) if ep.private else None
            within.append((i, ep, prompt.cache_key(key_base, ep), own))
        asked: list[_Asked] = []
        for (i, ep, key, own), hit in zip(within, await self._lookup(session.client_id, within), strict=True):
            if hit is not None:
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
        hits = iter(await self.shared.cached(client_id, keys))
        shared = [next(hits) for _ in within]
        return [
            (next(hits) or hit) if own is not None else hit for (_, _, _, own), hit in zip(within, shared, strict=True)
        ]

    async def _issue(
        self,
        session: SessionContext,
        req: DecideRequest,
        chain: list[tuple[str, ScopeSpec]],
        now: float,
        answers: dict[int, CachedChoice | Fell],
        cached: set[int],
    ) -> list[Decision]:
        """Each entity's decision: its fallback, or its choice under a new decision id, recorded in the store with
        what the fresh ones were made from, and told to the situation."""
        manifest, sid = session.manifest, session.session_id
        chosen = sum(isinstance(a, CachedChoice) for a in answers.values())
        seq = await self.store.decisions.allocate(chosen)
        dids = iter(self.ids.issue_many(seq, sid, chosen))
        decisions: list[Decision] = []
        issued: list[IssuedDecision] = []
        learned: list[DecisionFeatures] = []
        for i, e in enumerate(req.entities):
            t, a = manifest.types[e.type], answers[i]
            if isinstance(a, Fell):
                decisions.append(FallbackDecision(e.id, a.code, a.reason, t.ttl_ms))
                continue
            did, label = next(dids), t.actions[a.action]
            decisions.append(AIDecision(e.id, a.action, label, a.confidence, t.ttl_ms, did, i in cached))
            issued.append(IssuedDecision(seq, did, sid, e.id, e.type, a.action, label, now))
            if i not in cached:  # a cached answer repeats one learnt already
                obs = t.fields.quantize(e.observation)
                learned.append(
                    DecisionFeatures(seq, e.type, e.profile, obs, e.trigger, e.legal_actions, a.action, a.confidence)
                )
            seq += 1
        await self.store.decisions.record(issued, _features(session, req, chain, now, learned))
        if self.situation is not None:
            self.situation.decided(session, issued)
        return decisions

    def _count(self, decisions: list[Decision]) -> None:
        """A request's decision metrics, all in one place: AI decisions, those from the cache, fallbacks by code."""
        ai = [d for d in decisions if isinstance(d, AIDecision)]
        hits = sum(d.cached for d in ai)
        if hits:
            self.metrics.cache_hits.inc(hits)
        if ai:
            self._ai.inc(len(ai))
        for code, n in Counter(d.code for d in decisions if isinstance(d, FallbackDecision)).items():
            self._fallback[code].inc(n)

    def seen_sessions(self) -> list[str]:
        """The sessions whose last batch is kept, most recent first (for a 404 that names them)."""
        return self.local.sessions()

    def seen(self, session_id: str) -> PromptView | None:
        """What the model saw in this session's last decide request (and what was not sent, and why)."""
        batch = self.local.last(session_id)
        if batch is None:
            return None
        prompt, sent = batch.prompt, batch.sent
        asked = [ep for ep in prompt.entities if ep.number in sent]
        entities = [
            SeenEntity(
                ep.entity.id,
                ep.number,
                batch.counts.get(ep.number, 0),
                ep.number in sent,
                "AI" if isinstance(d, AIDecision) else "FALLBACK",
                d.code if isinstance(d, FallbackDecision) else ("cached" if d.cached else None),
                ep.text,
                d.action if isinstance(d, AIDecision) else None,
                d.reason if isinstance(d, FallbackDecision) else None,
            )
            for ep, d in zip(prompt.entities, batch.decisions, strict=True)
        ]
        return PromptView(batch.at, prompt.static, prompt.user_text(asked) if asked else None, entities, batch.reply)

    async def _call(
        self, session: SessionContext, prompt: Prompt, asked: list[_Asked]
    ) -> tuple[ModelReply, Sequence[CachedChoice | Fell]]:
        """The one provider call of a batch: what came back, and each asked entity's choice or why it fell back;
        the legal choices are cached for the client."""
        t_call = time.perf_counter()  # from the admission wait, then from the call itself
        wait = await self.shared.backed_off() - time.time()
        if wait > 0:  # calling now would only be refused again, and count against the game's rate limit
            reason = f"the provider asked to wait (HTTP 429 Retry-After): {wait:.1f} s more"
            return _fell_all(asked, "unavailable", reason, t_call)
        if not await self.local.acquire():
            self._busy.failed(
                f"all {self.settings.max_concurrent_calls} provider calls still running after "
                f"{self.settings.admission_wait_ms} ms, so {_entities(len(asked))} back with `busy`; if the "
                "provider takes more calls at once, raise NPCMIND_MAX_CONCURRENT_CALLS (or NPCMIND_ADMISSION_WAIT_MS)"
            )
            return _fell_all(asked, "busy", "service at capacity: no provider slot within the admission wait", t_call)
        call = self._provider_call(prompt, [ep for _, ep, _ in asked])
        t_call = time.perf_counter()
        try:
            async with asyncio.timeout(self._deadline):
                answer: ProviderAnswer = await self.provider.decide(call)
        except Exception as e:  # an answer the adapter could not read must not become a 5xx either
            return _fell_all(asked, "unavailable", await self._failed(e, len(asked)), t_call)
        finally:
            self.local.release()
        elapsed = time.perf_counter() - t_call
        self._record_call("ok", answer, elapsed)
        self._failures.succeeded()
        self.local.answered = True
        picks = map_choices(answer, [ep for _, ep, _ in asked], call.max_output_tokens)
        types = session.manifest.types
        keep = [
            (key, p, types[ep.entity.type].ttl_ms)
            for (_, ep, key), p in zip(asked, picks, strict=True)
            if isinstance(p, CachedChoice)
        ]
        if keep:
            await self.shared.cache(session.client_id, keep)
        ms = round(elapsed * 1000)
        return ModelReply(answer.raw, None, ms, answer.input_tokens, answer.cached_tokens, answer.output_tokens), picks

    def _provider_call(self, prompt: Prompt, asked: list[EntityPrompt]) -> ProviderCall:
        """What the provider is sent: the static prefix, the asked entities' parts and their options."""
        return ProviderCall(
            system=prompt.static,
            user=prompt.user_text(asked),
            entities=[(ep.number, ep.options) for ep in asked],
            mode=prompt.mode,
            prefix_key="npcmind-" + hashlib.blake2b(prompt.static.encode(), digest_size=12).hexdigest(),
            # an answer takes under 16 tokens an entity; a reasoning model also spends the limit on thinking
            max_output_tokens=self.settings.max_output_tokens or 32 + 16 * len(asked),
        )

    async def _failed(self, e: Exception, n: int) -> str:
        """Why a provider call gave no answer, for every entity in it; counted, and logged at the failures' rate
        (a call never made, for want of a provider or a key, is not a failed call)."""
        if isinstance(e, TimeoutError):
            self._record_call("timeout")
            reason = f"provider timed out after {self.settings.deadline_ms} ms"
            self._failures.failed(
                f"{reason}, {n} entit{'y' if n == 1 else 'ies'} in the call; NPCMIND_DEADLINE_MS sets the deadline "
                "(a local model on a small machine may need more, or smaller batches)"
            )
            return reason
        if isinstance(e, ProviderError):
            if self.provider.ready:  # else no call was made (no provider, no key): none is counted as failed
                self._record_call("error")
                self._failures.failed(str(e))
            if e.retry_after is not None:  # every process waits: each would only be refused again
                await self.shared.back_off(time.time() + e.retry_after)
            return str(e)
        self._record_call("error")
        if type(e) not in self._unread:  # a bug of ours: its traceback once, then at the failures' rate
            self._unread.add(type(e))
            log.error("provider answer could not be read (a bug: please report it with this traceback)", exc_info=e)
        reason = f"provider answer could not be read: {e.__class__.__name__}"
        self._failures.failed(reason)
        return reason

    def _record_call(self, outcome: str, answer: ProviderAnswer | None = None, elapsed: float = 0.0) -> None:
        """A provider call's metrics, all in one place: its outcome, and for an answer its latency and tokens."""
        name = self.provider.name
        self.metrics.provider_calls.labels(name, outcome).inc()
        if answer is not None:
            self.metrics.provider_latency.labels(name).observe(elapsed)
            self.metrics.tokens_in.inc(answer.input_tokens)
            self.metrics.tokens_cached.inc(answer.cached_tokens)
            self.metrics.tokens_out.inc(answer.output_tokens)
