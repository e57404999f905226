"""Anthropic's Messages API: a forced tool call in the fixed schema, cache_control after the static prefix."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from npcmind import answer
from npcmind.answer import AnswerMode
from npcmind.config import MAX_CONCURRENT_CALLS
from npcmind.providers.base import (
    Picked,
    ProviderAnswer,
    ProviderCall,
    ProviderError,
    StreamPiece,
    as_pieces,
    listing_problem,
    stream_cut,
    usage_count,
)
from npcmind.providers.http import JsonClient, Streamed
from npcmind.providers.pace import ReadPace
from npcmind_client.params import error_text

ANTHROPIC_URL = "https://api.anthropic.com/v1"
DEFAULT_MODEL = "claude-haiku-4-5"
VERSION = "2023-06-01"
# The shortest prefix each model caches, from Anthropic's prompt-caching docs (2026); 1024 for the others.
CACHE_MINIMUM = {
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4-6": 2048,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
}


def cache_minimum(model: str) -> int:
    """The shortest prefix a Claude model caches (a dated model id starts with its family's name)."""
    return next((n for family, n in CACHE_MINIMUM.items() if model.startswith(family)), 1024)


class AnthropicProvider:
    """Claude models; no log-probabilities, so confidence is null."""

    name = "anthropic"
    mode: AnswerMode = "numbered"
    # Anthropic publishes no tokenizer; cl100k counts within a few percent for English game text.
    encoding = "cl100k_base"

    def __init__(
        self,
        api_key: str | None,
        base_url: str = ANTHROPIC_URL,
        model: str | None = None,
        calls: int = MAX_CONCURRENT_CALLS,
    ) -> None:
        self.api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.model: str | None = model or DEFAULT_MODEL
        self.cache_minimum: int | None = cache_minimum(self.model)
        self._http = JsonClient(calls)

    @property
    def ready(self) -> bool:
        return bool(self.api_key)

    def request_body(self, call: ProviderCall) -> dict[str, Any]:
        """The Messages body: static prefix as a cached system block, the tail as the user turn."""
        return {
            "model": self.model,
            "max_tokens": call.max_output_tokens,
            "temperature": 0,
            "system": [{"type": "text", "text": call.system, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": call.user}],
            "tools": [
                {
                    "name": "decide",
                    "description": "Give one choice per entity question.",
                    "input_schema": answer.schema(call.mode, call.entities),
                }
            ],
            "tool_choice": {"type": "tool", "name": "decide"},
        }

    async def decide(self, call: ProviderCall) -> ProviderAnswer:
        if not self.api_key:
            raise ProviderError("no API key for Anthropic")
        headers = {"x-api-key": self.api_key, "anthropic-version": VERSION}
        data = await self._http.post(f"{self.base_url}/messages", self.request_body(call), headers)
        return self.read_answer(data, call)

    async def stream(self, call: ProviderCall) -> AsyncIterator[StreamPiece]:
        """The call streamed (Messages events): each entity's choice as soon as the tool input (or text) has
        its part complete, then the whole answer, read as decide() reads one."""
        if not self.api_key:
            raise ProviderError("no API key for Anthropic")
        headers = {"x-api-key": self.api_key, "anthropic-version": VERSION}
        body = {**self.request_body(call), "stream": True}
        async with self._http.stream(f"{self.base_url}/messages", body, headers) as opened:
            if opened.whole is not None:  # a server (a proxy) that answered unstreamed all the same
                for piece in as_pieces(self.read_answer(opened.whole, call)):
                    yield piece
                return
            async for piece in self._read_events(opened, call):
                yield piece

    async def _read_events(self, opened: Streamed, call: ProviderCall) -> AsyncIterator[StreamPiece]:
        """Feed each content block's deltas to a partial reader of its own and give every entity they
        complete (the first mention counts, across blocks); then the whole answer. A stream that ends before
        message_stop, or an error event, raises ProviderError after the pieces it gave."""
        message = _Message()
        given: dict[int, answer.Choice] = {}
        pace = ReadPace(asyncio.get_running_loop().time(), len(call.entities), call.read_by)
        try:
            async with contextlib.aclosing(opened.reads(pace)) as reads:  # closed at once when left early
                async for events in reads:
                    got, failed = message.take_all(events, call)
                    before = len(given)
                    for number, choice in got:
                        if number not in given:
                            given[number] = choice
                            yield Picked(number, choice)
                    pace.written = message.written
                    if len(given) > before:
                        pace.completed(len(given) - before)
                    if failed is not None:  # what came before the failure stands
                        raise failed
                    if message.stopped:
                        break
        except ProviderError as e:
            raise stream_cut(len(given), e) from None
        if not message.stopped:
            raise stream_cut(len(given), "the connection closed before message_stop")
        out = self.read_answer(message.whole(), call)
        out.choices = {**out.choices, **given}  # what was given stands
        yield out

    async def check(self) -> str | None:
        if not self.api_key:
            return None  # the start banner already says the key is missing
        headers = {"x-api-key": self.api_key, "anthropic-version": VERSION}
        status, _ = await self._http.status_of(f"{self.base_url}/models", headers)
        return listing_problem(status, None, self.base_url, self.model)  # model aliases are not listed

    def read_answer(self, data: Any, call: ProviderCall) -> ProviderAnswer:
        """Map a Messages answer to choices and token counts."""
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            raise ProviderError("provider answer has no content list")
        usage = data.get("usage")
        out = ProviderAnswer(
            input_tokens=usage_count(usage, "input_tokens")
            + usage_count(usage, "cache_read_input_tokens")
            + usage_count(usage, "cache_creation_input_tokens"),
            cached_tokens=usage_count(usage, "cache_read_input_tokens"),
            output_tokens=usage_count(usage, "output_tokens"),
            truncated=data.get("stop_reason") == "max_tokens",
        )
        if data.get("stop_reason") == "refusal":  # its own words when it gave some, else the stop reason
            said = [b["text"] for b in data["content"] if isinstance(b, dict) and isinstance(b.get("text"), str)]
            out.refusal = " ".join(said).strip() or "stop_reason refusal"
            return out
        for block in data["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                out.raw = msgspec.json.encode(block.get("input")).decode()
                out.choices = answer.from_object(block.get("input"), call.mode, call.entities)
                return out
            if isinstance(block, dict) and block.get("type") == "text":
                out.raw = str(block.get("text", ""))
                out.choices = answer.parse(out.raw, call.mode, call.entities, cut=out.truncated)
        return out

    async def close(self) -> None:
        await self._http.close()


@dataclass(slots=True)
class _Message:
    """A Messages answer as its events build it: each content block's text (or tool input's JSON) with its
    partial reader, the stop reason and the usage."""

    blocks: list[tuple[str, answer.PartialAnswer]] = field(default_factory=list)  # (type, reader) by index
    stop_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    stopped: bool = False
    pending: list[str] = field(default_factory=list)  # the newest block's deltas not fed to its reader yet

    def take_all(
        self, events: list[bytes], call: ProviderCall
    ) -> tuple[list[tuple[int, answer.Choice]], ProviderError | None]:
        """The events of one read: the entities they complete (a block's deltas are read together), and the
        error of an event that failed (the events before it stand; those after it are not read)."""
        got: list[tuple[int, answer.Choice]] = []
        try:
            for data in events:
                got += self.take(data, call)
                if self.stopped:
                    break
        except ProviderError as e:
            return got + self.flush(), e
        return got + self.flush(), None

    @property
    def written(self) -> int:
        """The characters of the answer so far, every block's."""
        return sum(len(reader.text) for _, reader in self.blocks) + sum(map(len, self.pending))

    def flush(self) -> list[tuple[int, answer.Choice]]:
        """Feed the newest block the deltas kept for it: the entities they complete."""
        if not self.pending:
            return []
        got = self.blocks[-1][1].feed(self.pending)
        self.pending = []
        return got

    def take(self, data: bytes, call: ProviderCall) -> list[tuple[int, answer.Choice]]:
        """One event: the entities it completes (a delta is kept until ``flush``, or the next block's start)."""
        try:
            event = msgspec.json.decode(data)
        except (msgspec.DecodeError, RecursionError):
            raise ProviderError(f"a streamed event is not JSON: {data[:100]!r}") from None
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "error":  # Anthropic's failure mid-answer (overloaded_error, api_error)
            raise ProviderError(f"the provider failed mid-answer: {error_text(data, event)}")
        if kind == "message_start":
            got = event.get("message")
            usage = got.get("usage") if isinstance(got, dict) else None
            self.usage.update(usage if isinstance(usage, dict) else {})
        elif kind == "content_block_start":
            block = event.get("content_block")
            typ = block.get("type") if isinstance(block, dict) else None
            done = self.flush()  # the block before is complete
            self.blocks.append((str(typ), answer.PartialAnswer(call.mode, call.entities)))
            return done
        elif kind == "content_block_delta" and self.blocks:
            self._delta(event.get("delta"))
        elif kind == "message_delta":
            delta, usage = event.get("delta"), event.get("usage")
            self.stop_reason = delta.get("stop_reason") if isinstance(delta, dict) else None
            self.usage.update(usage if isinstance(usage, dict) else {})
        elif kind == "message_stop":
            self.stopped = True
        return []

    def _delta(self, delta: Any) -> None:
        """A content block's delta (the newest block's: Anthropic streams blocks one after another)."""
        if not isinstance(delta, dict):
            return
        text = delta.get("partial_json") if delta.get("type") == "input_json_delta" else delta.get("text")
        if isinstance(text, str):
            self.pending.append(text)

    def whole(self) -> dict[str, Any]:
        """The answer as an unstreamed message, for read_answer (the same reading as decide()'s)."""
        self.flush()
        content: list[dict[str, Any]] = []
        for typ, reader in self.blocks:
            if typ == "tool_use":
                content.append({"type": typ, "input": answer.load_partial(reader.text) if reader.text else {}})
            elif typ == "text":
                content.append({"type": typ, "text": reader.text})
        return {"content": content, "stop_reason": self.stop_reason, "usage": self.usage}
