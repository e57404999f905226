"""The decide pipeline: validate, record, render, budget, cache, one provider call, map, issue ids.

Every entity is decided on its own: one over-budget, refused or invalid entity falls back alone, and a
failed provider call touches only the entities that were in it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
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
from npcmind.manifest import Manifest
from npcmind.manifest.model import ScopeSpec
from npcmind.protocol.a2g import (
    AIDecision,
    DecideRequest,
    DecideResponse,
    Decision,
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


_Seen = tuple[float, Prompt, dict[int, int], list[int], list[Decision], ModelReply | None]


def _entities(n: int) -> str:
    return "1 entity falls" if n == 1 else f"{n} entities fall"


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
        self._builders: dict[str, PromptBuilder] = {}
        self._seen: OrderedDict[str, _Seen] = OrderedDict()
        self._slots = asyncio.Semaphore(settings.max_concurrent_calls)
        self._admission = settings.admission_wait_ms / 1000
        self._deadline = settings.deadline_ms / 1000
        self._ai = metrics.decisions.labels("AI", "")
        self._failures = FailureLog(log, "provider call")
        self._busy = FailureLog(log, "wait for a provider slot")  # what to tune, at most every 10 s
        self._unread: set[type[Exception]] = set()  # answers the adapter failed to read, by exception type
        self.answered = False  # a provider call has succeeded: what the start-up check found is past
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
        b = self.builder(manifest)
        situation_lines: list[str] = []
        contexts: dict[str, EntityContext] = {}
        if self.situation is not None:
            situation_lines, contexts = await self.situation.view(session, req, now)
        prompt = Prompt(
            static=b.static(chain, [e.profile for e in req.entities if e.profile]),
            shared=b.shared(req, chain, situation_lines),
            entities=[b.entity(i + 1, e, contexts.get(e.id)) for i, e in enumerate(req.entities)],
            mode=self.mode,
        )

        results: list[Decision | None] = [None] * len(req.entities)
        fresh: dict[int, tuple[str, float | None]] = {}
        cached: dict[int, tuple[str, float | None]] = {}
        asked: list[tuple[int, EntityPrompt, str]] = []
        key_base = prompt.key_base(manifest.version, manifest.chain_key(req.scope, chain))
        counts: dict[int, int] = {}
        within: list[tuple[int, EntityPrompt, str, str | None]] = []
        for i, ep in enumerate(prompt.entities):
            t = manifest.types[ep.entity.type]
            n_tokens = counts[ep.number] = tokens.count(self.provider.encoding, ep.text)
            if n_tokens > t.max_input_tokens:
                results[i] = self._fall(
                    ep,
                    "budget",
                    f"entity input is {n_tokens} tokens, over max_input_tokens {t.max_input_tokens}",
                    t.ttl_ms,
                )
                continue
            own = prompt.cache_key(key_base, ep, session.session_id) if ep.private else None
            within.append((i, ep, prompt.cache_key(key_base, ep), own))
        for (i, ep, key, own), hit in zip(within, await self._lookup(session.client_id, within), strict=True):
            if hit is not None:
                cached[i] = (hit.action, hit.confidence)
            else:  # an answer made with the session's memory is kept for this session alone
                asked.append((i, ep, own if own is not None else key))

        reply = await self._call(session, prompt, asked, results, fresh) if asked else None

        issued: list[IssuedDecision] = []
        learned: list[DecisionFeatures] = []
        chosen = [i for i in range(len(results)) if results[i] is None]
        seq = await self.store.decisions.allocate(len(chosen))
        sid = session.session_id
        dids = self.ids.issue_many(seq, sid, len(chosen))
        for i, did in zip(chosen, dids, strict=True):
            e = req.entities[i]
            t = manifest.types[e.type]
            action, confidence = fresh[i] if i in fresh else cached[i]
            label = t.actions[action]
            results[i] = AIDecision(e.id, action, label, confidence, t.ttl_ms, did, i in cached)
            issued.append(IssuedDecision(seq, did, sid, e.id, e.type, action, label, now))
            if i in fresh:  # a cached answer repeats one learnt already
                obs = t.fields.quantize(e.observation)
                learned.append(
                    DecisionFeatures(seq, e.type, e.profile, obs, e.trigger, e.legal_actions, action, confidence)
                )
            seq += 1
        await self.store.decisions.record(issued, self._features(session, req, chain, now, learned))
        if self.situation is not None:
            self.situation.decided(session, issued)
        if cached:
            self.metrics.cache_hits.inc(len(cached))
        if issued:
            self._ai.inc(len(issued))

        latency = round((time.perf_counter() - t0) * 1000)
        decisions = [d for d in results if d is not None]
        sent = [ep.number for _, ep, _ in asked]
        self._remember_seen(session.session_id, (now, prompt, counts, sent, decisions, reply))
        return DecideResponse(A2G_VERSION, req.epoch, latency, decisions)

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

    @staticmethod
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

    def _remember_seen(self, sid: str, seen: _Seen) -> None:
        """Keep the last batch of each session (a reference, rendered only when asked for), for 1,024 sessions."""
        self._seen[sid] = seen
        self._seen.move_to_end(sid)
        if len(self._seen) > 1024:
            self._seen.popitem(last=False)

    def seen_sessions(self) -> list[str]:
        """The sessions whose last batch is kept, most recent first (for a 404 that names them)."""
        return list(reversed(self._seen))

    def seen(self, session_id: str) -> PromptView | None:
        """What the model saw in this session's last decide request (and what was not sent, and why)."""
        found = self._seen.get(session_id)
        if found is None:
            return None
        at, prompt, counts, sent, decisions, reply = found
        asked = [ep for ep in prompt.entities if ep.number in sent]
        entities = [
            SeenEntity(
                ep.entity.id,
                ep.number,
                counts.get(ep.number, 0),
                ep.number in sent,
                "AI" if isinstance(d, AIDecision) else "FALLBACK",
                d.code if isinstance(d, FallbackDecision) else ("cached" if d.cached else None),
                ep.text,
                d.action if isinstance(d, AIDecision) else None,
                d.reason if isinstance(d, FallbackDecision) else None,
            )
            for ep, d in zip(prompt.entities, decisions, strict=True)
        ]
        return PromptView(at, prompt.static, prompt.user_text(asked) if asked else None, entities, reply)

    def _fall(self, ep: EntityPrompt, code: str, reason: str, ttl_ms: int) -> FallbackDecision:
        self._fallback[code].inc()
        return FallbackDecision(ep.entity.id, code, reason, ttl_ms)  # type: ignore[arg-type]

    async def _call(
        self,
        session: SessionContext,
        prompt: Prompt,
        asked: list[tuple[int, EntityPrompt, str]],
        results: list[Decision | None],
        fresh: dict[int, tuple[str, float | None]],
    ) -> ModelReply:
        """The one provider call of a batch; fills ``results``/``fresh`` and says what came back."""
        manifest = session.manifest
        types = manifest.types
        t_call = time.perf_counter()  # from the admission wait, then from the call itself

        def fall_all(code: str, reason: str) -> ModelReply:
            for i, ep, _ in asked:
                results[i] = self._fall(ep, code, reason, types[ep.entity.type].ttl_ms)
            return ModelReply(None, reason, round((time.perf_counter() - t_call) * 1000))

        wait = await self.shared.backed_off() - time.time()
        if wait > 0:  # calling now would only be refused again, and count against the game's rate limit
            return fall_all("unavailable", f"the provider asked to wait (HTTP 429 Retry-After): {wait:.1f} s more")
        if not await self._acquire():
            self._busy.failed(
                f"all {self.settings.max_concurrent_calls} provider calls still running after "
                f"{self.settings.admission_wait_ms} ms, so {_entities(len(asked))} back with `busy`; if the "
                "provider takes more calls at once, raise NPCMIND_MAX_CONCURRENT_CALLS (or NPCMIND_ADMISSION_WAIT_MS)"
            )
            return fall_all("busy", "service at capacity: no provider slot within the admission wait")
        t_call = time.perf_counter()
        name = self.provider.name
        call = ProviderCall(
            system=prompt.static,
            user=prompt.user_text([ep for _, ep, _ in asked]),
            entities=[(ep.number, ep.options) for _, ep, _ in asked],
            mode=prompt.mode,
            prefix_key="npcmind-" + hashlib.blake2b(prompt.static.encode(), digest_size=12).hexdigest(),
            # an answer takes under 16 tokens an entity; a reasoning model also spends the limit on thinking
            max_output_tokens=self.settings.max_output_tokens or 32 + 16 * len(asked),
        )
        try:
            async with asyncio.timeout(self._deadline):
                answer: ProviderAnswer = await self.provider.decide(call)
        except TimeoutError:
            self.metrics.provider_calls.labels(name, "timeout").inc()
            reason = f"provider timed out after {self.settings.deadline_ms} ms"
            n = f"{len(asked)} entit{'y' if len(asked) == 1 else 'ies'}"
            self._failures.failed(
                f"{reason}, {n} in the call; NPCMIND_DEADLINE_MS sets the deadline "
                "(a local model on a small machine may need more, or smaller batches)"
            )
            return fall_all("unavailable", reason)
        except ProviderError as e:
            if self.provider.ready:  # else no call was made (no provider, no key): none is counted as failed
                self.metrics.provider_calls.labels(name, "error").inc()
                self._failures.failed(str(e))
            if e.retry_after is not None:  # every process waits: each would only be refused again
                await self.shared.back_off(time.time() + e.retry_after)
            return fall_all("unavailable", str(e))
        except Exception as e:  # an answer the adapter could not read must not become a 5xx
            self.metrics.provider_calls.labels(name, "error").inc()
            if type(e) not in self._unread:  # a bug of ours: its traceback once, then at the failures' rate
                self._unread.add(type(e))
                log.exception("provider answer could not be read (a bug: please report it with this traceback)")
            reason = f"provider answer could not be read: {e.__class__.__name__}"
            self._failures.failed(reason)
            return fall_all("unavailable", reason)
        finally:
            self._slots.release()
        elapsed = time.perf_counter() - t_call
        self.metrics.provider_latency.labels(name).observe(elapsed)
        self.metrics.provider_calls.labels(name, "ok").inc()
        self._failures.succeeded()
        self.answered = True
        self.metrics.tokens_in.inc(answer.input_tokens)
        self.metrics.tokens_cached.inc(answer.cached_tokens)
        self.metrics.tokens_out.inc(answer.output_tokens)
        reply = ModelReply(
            answer.raw, None, round(elapsed * 1000), answer.input_tokens, answer.cached_tokens, answer.output_tokens
        )
        if answer.refusal is not None:
            fall_all("refused", f"the model refused: {answer.refusal}"[:200])
            return reply
        missing = "the model gave no choice for this entity"
        if not answer.choices:  # nothing of it read: the model broke the format, not only skipped this entity
            missing = "the model's answer held no choice in the answer format (its text: GET /v1/prompt)"
        if answer.truncated:
            missing = (
                f"the answer stopped at its output limit of {call.max_output_tokens} tokens before this entity's "
                "choice; a reasoning model needs more: NPCMIND_MAX_OUTPUT_TOKENS"
            )
        keep: list[tuple[str, CachedChoice, int]] = []
        for i, ep, key in asked:
            t = types[ep.entity.type]
            choice = answer.choices.get(ep.number)
            if choice is None:
                results[i] = self._fall(ep, "invalid_choice", missing, t.ttl_ms)
            elif choice.refused:
                results[i] = self._fall(ep, "refused", "the model declined to choose", t.ttl_ms)
            elif choice.action not in ep.options:
                results[i] = self._fall(
                    ep, "invalid_choice", f"the model chose {choice.action!r}, not a legal action"[:200], t.ttl_ms
                )
            else:
                fresh[i] = (choice.action, choice.confidence)
                keep.append((key, CachedChoice(choice.action, choice.confidence), t.ttl_ms))
        await self.shared.cache(session.client_id, keep)
        return reply

    async def _acquire(self) -> bool:
        if not self._slots.locked():
            await self._slots.acquire()
            return True
        try:
            await asyncio.wait_for(self._slots.acquire(), self._admission)
        except TimeoutError:
            return False
        return True
