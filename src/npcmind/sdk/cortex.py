"""The cortex: whatever runs inference for the NPC on the game's side. An OpenAI-compatible server is built in."""

from __future__ import annotations

from typing import Protocol

import httpx

from npcmind.protocol.npc import PromptConstraints


class Cortex(Protocol):
    """Turns a prompt into text, honouring the constraints."""

    def complete(self, prompt: str, constraints: PromptConstraints) -> str:
        """The model's text for ``prompt``."""
        ...


class CortexError(Exception):
    """Inference failed (the server is down, answered an error, or nothing usable)."""


class OpenAICortex:
    """Chat completions on any OpenAI-compatible server: llama.cpp, Ollama, vLLM, LM Studio, hosted APIs."""

    def __init__(self, base_url: str, model: str = "local", api_key: str | None = None, timeout_s: float = 60) -> None:
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self.model = model
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)

    def complete(self, prompt: str, constraints: PromptConstraints) -> str:
        body: dict[str, object] = {"model": self.model, "messages": [{"role": "user", "content": prompt}]}
        if constraints.maxTokens is not None:
            body["max_tokens"] = constraints.maxTokens
        if constraints.temperature is not None:
            body["temperature"] = constraints.temperature
        if constraints.stop:
            body["stop"] = constraints.stop
        try:
            r = self._http.post("/chat/completions", json=body)
        except httpx.HTTPError as e:
            raise CortexError(f"cannot reach the cortex: {e}") from None
        if r.status_code >= 400:
            raise CortexError(f"the cortex answered HTTP {r.status_code}: {r.text[:200]}")
        try:
            return str(r.json()["choices"][0]["message"]["content"] or "")
        except (ValueError, KeyError, IndexError, TypeError):
            raise CortexError("the cortex answered without choices[0].message.content") from None

    def close(self) -> None:
        """Close connections."""
        self._http.close()
