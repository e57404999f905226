"""The one provider call of a batch, streamed: back-off, a call slot, the deadline, the failures and the call's
metrics, apart from the pipeline that maps its pieces to decisions.

A call runs in a task of its own and puts its pieces on a queue as the provider gives them (each entity's choice
as soon as it is written, then an ``Ended``): the pipeline reads them at its own pace, writes a decision as soon as
its entity's piece is there, and cancels the task when its client leaves.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any

from npcmind.answer import Choice
from npcmind.config import Settings
from npcmind.decide.prompt import EntityPrompt
from npcmind.failures import FailureLog
from npcmind.local.metrics import Metrics
from npcmind.local.pipeline import PipelineState
from npcmind.protocol.a2g import FallbackCode, ModelReply
from npcmind.providers.base import Picked, Provider, ProviderAnswer, ProviderCall, ProviderError
from npcmind.shared.base import CachedChoice, Shared

log = logging.getLogger("npcmind.decide")  # the pipeline's logger: what operators filter on


@dataclass(frozen=True, slots=True)
class Fell:
    """Why one entity falls back to the game's native AI: the code the game reads, the reason a person reads."""

    code: FallbackCode
    reason: str


@dataclass(frozen=True, slots=True)
class Ended:
    """The call is over: what it gave back (for GET /v1/prompt), and either its whole answer (the entities it
    never picked are decided from it) or why every entity not picked yet falls back."""

    reply: ModelReply
    answer: ProviderAnswer | None = None
    fell: Fell | None = None


Piece = Picked | Ended


def _entities(n: int) -> str:
    return "1 entity falls" if n == 1 else f"{n} entities fall"


def picked(choice: Choice, ep: EntityPrompt) -> CachedChoice | Fell:
    """One entity's choice as the model wrote it: legal, declined, or outside its options. The same rule for a
    streamed piece and for an entity of the whole answer."""
    if choice.refused:
        return Fell("refused", "the model declined to choose")
    if choice.action is None or choice.action not in ep.options:
        return Fell("invalid_choice", f"the model chose {choice.action!r}, not a legal action"[:200])
    return CachedChoice(choice.action, choice.confidence)


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
        else:
            out.append(picked(choice, ep))
    return out


class ProviderCalls:
    """The provider calls of one process: admission, the deadline, and what a failed call is said and counted as."""

    def __init__(
        self, provider: Provider, settings: Settings, metrics: Metrics, shared: Shared, local: PipelineState[Any]
    ) -> None:
        self.provider = provider
        self.settings = settings
        self.metrics = metrics
        self.shared = shared
        self.local = local  # the process's call slots, and whether a call has succeeded since start
        self._deadline = settings.deadline_ms / 1000
        self.failures = FailureLog(log, "provider call")
        self._busy = FailureLog(log, "wait for a provider slot")  # what to tune, at most every 10 s
        self._unread: set[type[Exception]] = set()  # answers the adapter failed to read, by exception type

    def start(self, call: ProviderCall, n: int, streamed: bool) -> tuple[asyncio.Task[None], asyncio.Queue[Piece]]:
        """The call of ``n`` entities, running: its task (cancel it when the answer is no longer wanted) and the
        queue its pieces come on, the last an ``Ended``. Only a streamed answer streams the call: the JSON answer
        waits for every entity anyway, so its call is today's, read whole (a choice written before the answer
        broke stands in a stream, and the JSON answer stays what it was)."""
        out: asyncio.Queue[Piece] = asyncio.Queue()
        return asyncio.get_running_loop().create_task(self._run(call, n, out, streamed)), out

    async def whole(self, call: ProviderCall, n: int) -> Ended:
        """The call of ``n`` entities read whole and awaited in line: what the JSON answer of a batch with nothing
        to keep meanwhile (no cache hit) makes, without a task and a queue."""
        return await self._ended(call, n, None)

    async def _run(self, call: ProviderCall, n: int, out: asyncio.Queue[Piece], streamed: bool) -> None:
        """The call in its task, and whatever happens an ``Ended`` on the queue: the pipeline reads until one comes
        (a streamed call's pieces before it)."""
        out.put_nowait(await self._ended(call, n, out if streamed else None))

    async def _ended(self, call: ProviderCall, n: int, out: asyncio.Queue[Piece] | None) -> Ended:
        """How the call ended, never an exception: ``out`` (a streamed call) has each entity's piece meanwhile."""
        since = time.perf_counter()
        try:
            return await self._call(call, n, out)
        except Exception as e:  # a bug of ours around the call (back-off, admission, metrics): said once a kind
            if type(e) not in self._unread:
                self._unread.add(type(e))
                log.error("provider call could not be made (a bug: please report it with this traceback)", exc_info=e)
            return _fell("unavailable", f"provider call could not be made: {e.__class__.__name__}", since)

    async def _call(self, call: ProviderCall, n: int, out: asyncio.Queue[Piece] | None) -> Ended:
        """Back-off, a slot, then the call within the deadline, streamed when ``out`` takes its pieces; every way
        it ends is one ``Ended``."""
        t_call = time.perf_counter()  # from the admission wait, then from the call itself
        wait = await self.shared.backed_off() - time.time()
        if wait > 0:  # calling now would only be refused again, and count against the game's rate limit
            return _fell("unavailable", f"the provider asked to wait (HTTP 429 Retry-After): {wait:.1f} s more", t_call)
        if not await self.local.acquire():
            self._busy.failed(
                f"all {self.settings.max_concurrent_calls} provider calls still running after "
                f"{self.settings.admission_wait_ms} ms, so {_entities(n)} back with `busy`; if the "
                "provider takes more calls at once, raise NPCMIND_MAX_CONCURRENT_CALLS (or NPCMIND_ADMISSION_WAIT_MS)"
            )
            return _fell("busy", "service at capacity: no provider slot within the admission wait", t_call)
        t_call = time.perf_counter()
        written: list[Picked] = []
        try:
            async with asyncio.timeout(self._deadline) as scope:
                if out is None:  # a whole answer is read when it comes
                    answer = await self.provider.decide(call)
                else:  # a paced stream reads by the deadline
                    answer = await self._pieces(dataclasses.replace(call, read_by=scope.when()), out, written)
        except Exception as e:  # an answer the adapter could not read must not become a 5xx either
            return _fell("unavailable", await self._failed(e, n - len(written), len(written)), t_call)
        finally:
            self.local.release()
        elapsed = time.perf_counter() - t_call
        self._record("ok", answer, elapsed)
        self.failures.succeeded()
        self.local.answered = True
        ms = round(elapsed * 1000)
        reply = ModelReply(answer.raw, None, ms, answer.input_tokens, answer.cached_tokens, answer.output_tokens)
        return Ended(reply, answer)

    async def _pieces(self, call: ProviderCall, out: asyncio.Queue[Piece], written: list[Picked]) -> ProviderAnswer:
        """Each entity's piece onto the queue (and ``written``) as the provider streams it, then the whole answer.
        The provider's stream is closed however this ends (its connection goes back or is dropped)."""
        pieces = self.provider.stream(call)
        try:
            async for piece in pieces:
                if isinstance(piece, ProviderAnswer):
                    return piece
                written.append(piece)
                out.put_nowait(piece)
        finally:
            if isinstance(pieces, AsyncGenerator):
                await pieces.aclose()
        raise ProviderError("the provider's stream ended before its whole answer")

    async def _failed(self, e: Exception, n: int, written: int) -> str:
        """Why a provider call gave no (more) answer, for the ``n`` entities it had not written; counted, and logged
        at the failures' rate (a call never made, for want of a provider or a key, is not a failed call)."""
        if isinstance(e, TimeoutError):
            self._record("timeout")
            reason = f"provider timed out after {self.settings.deadline_ms} ms"
            self.failures.failed(
                f"{reason}, {n} entit{'y' if n == 1 else 'ies'} in the call; NPCMIND_DEADLINE_MS sets the deadline "
                "(a local model on a small machine may need more, or smaller batches)"
            )
            if written:  # the entities written stand: the reason is this entity's
                return f"not written by the deadline of {self.settings.deadline_ms} ms (NPCMIND_DEADLINE_MS)"
            return reason
        if isinstance(e, ProviderError):
            if self.provider.ready:  # else no call was made (no provider, no key): none is counted as failed
                self._record("error")
                self.failures.failed(str(e))
            if e.retry_after is not None:  # every process waits: each would only be refused again
                await self.shared.back_off(time.time() + e.retry_after)
            return str(e) if not written else f"the provider's stream was cut: {e}"[:300]
        self._record("error")
        if type(e) not in self._unread:  # a bug of ours: its traceback once, then at the failures' rate
            self._unread.add(type(e))
            log.error("provider answer could not be read (a bug: please report it with this traceback)", exc_info=e)
        reason = f"provider answer could not be read: {e.__class__.__name__}"
        self.failures.failed(reason)
        return reason

    def _record(self, outcome: str, answer: ProviderAnswer | None = None, elapsed: float = 0.0) -> None:
        """A provider call's metrics, all in one place: its outcome, and for an answer its latency and tokens."""
        name = self.provider.name
        self.metrics.provider_calls.labels(name, outcome).inc()
        if answer is not None:
            self.metrics.provider_latency.labels(name).observe(elapsed)
            self.metrics.tokens_in.inc(answer.input_tokens)
            self.metrics.tokens_cached.inc(answer.cached_tokens)
            self.metrics.tokens_out.inc(answer.output_tokens)


def _fell(code: FallbackCode, reason: str, since: float) -> Ended:
    """A call that gave no answer: every entity in it falls back for the same reason."""
    return Ended(ModelReply(None, reason, round((time.perf_counter() - since) * 1000)), fell=Fell(code, reason))
