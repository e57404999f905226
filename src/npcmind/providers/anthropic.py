"""Anthropic's Messages API: a forced tool call in the fixed schema, cache_control after the static prefix."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec

from npcmind import answer
from npcmind.answer import AnswerMode
from npcmind.config import MAX_CONCURRENT_CALLS
from npcmind.providers.base import (
    ProviderAnswer,
    ProviderCall,
    ProviderError,
    StreamPiece,
    listing_problem,
    usage_count,
    whole_answer,
)
from npcmind.providers.http import JsonClient

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

    def stream(self, call: ProviderCall) -> AsyncIterator[StreamPiece]:
        return whole_answer(self.decide, call)  # streamed over HTTP: issue 31

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
