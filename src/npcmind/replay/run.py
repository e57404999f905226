"""Replaying kept calls against one target: a provider (the same prompts, or prompts rendered again with another
manifest) or the published learned policy; at a bounded rate, with a progress line on stderr. Only the provider
the user named is ever sent anything, and the policy target sends nothing at all."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TextIO

from npcmind.answer import AnswerMode
from npcmind.decide.calls import Fell, map_choices
from npcmind.decide.pipeline import provider_call
from npcmind.decide.prompt import EntityPrompt
from npcmind.manifest import Manifest
from npcmind.providers.base import Provider, ProviderError
from npcmind.replay.kept import Kept, KeptCall
from npcmind.replay.render import Rendered, Renderer, view
from npcmind.shared.base import CachedChoice
from npcmind_client.policy import Policy


@dataclass(slots=True)
class Replayed:
    """One kept decision replayed: what was decided, what the target chose (or its fallback code), the situation
    it belongs to, both entity parts, and whether what the model read of it changed."""

    kept: Kept
    choice: str | None
    code: str | None
    situation: str
    before: str
    after: str
    changed: bool


@dataclass(slots=True)
class CallResult:
    """One call replayed: its decisions, the tokens it took, how long it took (None: no model call) and, for a call
    that failed, why."""

    decisions: list[Replayed] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: float | None = None
    error: str | None = None


class Target(Protocol):
    """What a kept call is replayed against."""

    async def replay(self, call: KeptCall, manifest: Manifest) -> CallResult:
        """The call's decisions as the target makes them."""
        ...


class ProviderTarget:
    """A provider and model: each call's prompt rendered with the kept manifest (the same prompt) or with
    ``manifest`` (another), in the answer form the provider takes, sent as one call."""

    def __init__(self, provider: Provider, manifest: Manifest | None, timeout_s: float) -> None:
        self.provider = provider
        self.manifest = manifest
        self.timeout_s = timeout_s
        self.renderer = Renderer()

    async def replay(self, call: KeptCall, manifest: Manifest) -> CallResult:
        """The call sent as one provider call; a failed call is every entity's ``unavailable``."""
        read = call.opened()
        before = self.renderer.render(read, manifest, _mode(read.mode))
        new = self.manifest or manifest
        after = self.renderer.render(read, new, self.provider.mode)
        asked = after.prompt.entities
        out = CallResult()
        outcomes: dict[int, tuple[str | None, str | None]] = {}  # (the choice, or the fallback's code)
        if asked:
            pc = provider_call(after.prompt, asked, 0)
            t0 = time.perf_counter()
            try:
                async with asyncio.timeout(self.timeout_s):
                    answer = await self.provider.decide(pc)
            except (ProviderError, TimeoutError) as e:
                outcomes = {ep.number: (None, "unavailable") for ep in asked}
                out.error = failure(e, self.timeout_s)
            else:
                out.latency_ms = (time.perf_counter() - t0) * 1000
                out.tokens_in, out.tokens_out = answer.input_tokens, answer.output_tokens
                choices = map_choices(answer, asked, pc.max_output_tokens)
                outcomes = {ep.number: _outcome(o) for ep, o in zip(asked, choices, strict=True)}
        for d in call.decisions:
            choice, code = outcomes.get(d.number, (None, "left_out"))  # the manifest replayed cannot show it
            out.decisions.append(self._one(d, choice, code, manifest, new, before, after))
        return out

    def _one(
        self,
        d: Kept,
        choice: str | None,
        code: str | None,
        old: Manifest,
        new: Manifest,
        before: Rendered,
        after: Rendered,
    ) -> Replayed:
        was = _entity(before, d.number)
        now = _entity(after, d.number)
        assert was is not None  # the kept manifest shows every entity it asked about
        changed = now is None or view(old, before.prompt, was) != view(new, after.prompt, now)
        situation = self.renderer.situation(old, before.prompt.mode, was)
        return Replayed(d, choice, code, situation, was.text, now.text if now else "", changed)


def failure(e: ProviderError | TimeoutError, timeout_s: float) -> str:
    """Why a call failed, in the report and the last line: the provider client's words, or the timeout."""
    return f"no answer within {timeout_s:g} s (--timeout)" if isinstance(e, TimeoutError) else str(e) or repr(e)


def _outcome(o: CachedChoice | Fell) -> tuple[str | None, str | None]:
    return (o.action, None) if isinstance(o, CachedChoice) else (None, o.code)


class PolicyTarget:
    """The learned policy published for the client, a version of it per manifest version; nothing is sent."""

    def __init__(self, policies: dict[str, Policy | None]) -> None:
        self.policies = policies
        self.renderer = Renderer()

    async def replay(self, call: KeptCall, manifest: Manifest) -> CallResult:
        """Each kept decision chosen by the policy of its manifest version, from the kept situation."""
        r = call.opened()
        rendered = self.renderer.render(r, manifest, _mode(r.mode))
        policy = self.policies.get(call.manifest_version)
        entities = {e.number: e.entity for e in r.entities}
        out = CallResult()
        for d in call.decisions:
            ep = _entity(rendered, d.number)
            assert ep is not None
            e = entities[d.number]
            got = (
                policy.choose(e.type, e.observation, e.legal_actions, r.world, r.scope_state, e.trigger, e.profile)
                if policy is not None
                else None
            )
            situation = self.renderer.situation(manifest, rendered.prompt.mode, ep)
            code = None if got else ("no_choice" if policy is not None else "no_policy")
            out.decisions.append(Replayed(d, got[0] if got else None, code, situation, ep.text, "", False))
        return out


def _mode(mode: str) -> AnswerMode:
    return "numbered" if mode == "numbered" else "enum"


def _entity(rendered: Rendered, number: int) -> EntityPrompt | None:
    return next((ep for ep in rendered.prompt.entities if ep.number == number), None)


class Progress:
    """One line on stderr: calls done of all, decisions, fallbacks and the rate; rewritten in place on a
    terminal, a line every tenth of the way otherwise (a CI log stays short)."""

    def __init__(self, total: int, out: TextIO = sys.stderr) -> None:
        self.total = total
        self.out = out
        self.done = 0
        self.decisions = 0
        self.fallbacks = 0
        self.t0 = time.monotonic()
        self._tty = out.isatty()
        self._step = max(1, total // 10)

    def add(self, r: CallResult) -> None:
        """Count one call replayed, and say so."""
        self.done += 1
        self.decisions += len(r.decisions)
        self.fallbacks += sum(d.code is not None for d in r.decisions)
        if self._tty or self.done % self._step == 0 or self.done == self.total:
            rate = self.done / max(time.monotonic() - self.t0, 1e-9)
            line = (
                f"replay: {self.done}/{self.total} calls, {self.decisions} decisions, "
                f"{self.fallbacks} fallbacks, {rate:.1f} calls/s"
            )
            self.out.write(("\r" + line + ("\n" if self.done == self.total else "")) if self._tty else line + "\n")
            self.out.flush()


async def replay_all(
    calls: list[tuple[KeptCall, Manifest]],
    target: Target,
    rate: float,
    in_flight: int,
    progress: Callable[[CallResult], None],
) -> list[CallResult]:
    """Every call against the target: at most ``rate`` calls begun a second and ``in_flight`` at once, results
    in the calls' order."""
    slots = asyncio.Semaphore(in_flight)
    t0 = time.monotonic()

    async def one(i: int, call: KeptCall, manifest: Manifest) -> CallResult:
        """The i-th call, begun no sooner than its place at the rate allows."""
        async with slots:
            wait = t0 + i / rate - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            r = await target.replay(call, manifest)
        progress(r)
        return r

    return list(await asyncio.gather(*(one(i, c, m) for i, (c, m) in enumerate(calls))))
