"""The cortex: whatever runs inference for the NPC on the game's side. An OpenAI-compatible server is built in."""

from __future__ import annotations

import json
import logging
from typing import Protocol

import httpx

from npcmind_client.errors import NpcMindError, TooLargeError
from npcmind_client.limits import IDENTITY, MAX_ERROR_BYTES, MAX_MODEL_BYTES, body_bytes
from npcmind_client.npc_wire import PromptConstraints
from npcmind_client.params import error_text, first_not_refused, refused_parameter
from npcmind_client.urls import http_url

log = logging.getLogger("npcmind_client.cortex")
# what the constraints ask that a model may refuse (OpenAI's reasoning models refuse all but the limit's
# other name): dropped, or the limit renamed, and asked again, instead of failing every NPC turn
OPTIONAL = ("temperature", "stop", "max_tokens", "max_completion_tokens")


class Cortex(Protocol):
    """Turns a prompt into text, honouring the constraints."""

    def complete(self, prompt: str, constraints: PromptConstraints) -> str:
        """The model's text for ``prompt``."""
        ...


class CortexError(NpcMindError):
    """Inference failed (the server is down, answered an error, or nothing usable); the message and ``url`` name
    the address tried, so a wrong port or path is seen in the first line of the error; ``status`` and ``code``
    are the model server's (its HTTP status, its error body's ``code`` or ``type``)."""

    def __init__(
        self, message: str, url: str | None = None, *, status: int | None = None, code: str | None = None
    ) -> None:
        """``url``: optional, so a game's own Cortex may raise it with a message alone."""
        super().__init__(message if url is None else f"{message} ({url})", status=status, code=code)
        self.url = url


def _code(answer: object) -> str | None:
    """The error code of an OpenAI-style error answer (``error.code``, else ``error.type``), if it has one."""
    error = answer.get("error") if isinstance(answer, dict) else None
    found = (error.get("code") or error.get("type")) if isinstance(error, dict) else None
    return found if isinstance(found, str) and found else None


class OpenAICortex:
    """Chat completions on any OpenAI-compatible server: llama.cpp, Ollama, vLLM, LM Studio, hosted APIs."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str = "local",
        api_key: str | None = None,
        timeout_ms: float = 60_000,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """``timeout_ms``: how long a model's answer may take; ``transport``: httpx's, injectable (a proxy,
        ``httpx.MockTransport`` in a test); the network otherwise."""
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self.model = model
        self.refused: set[str] = set()  # parameters this model refused: no longer sent
        base = http_url(base_url, "base_url", "http://127.0.0.1:8000/v1")
        self._http = httpx.Client(base_url=base, headers=headers, timeout=timeout_ms / 1000, transport=transport)
        self.url = f"{base.rstrip('/')}/chat/completions"  # named by every CortexError

    def _body(self, prompt: str, constraints: PromptConstraints) -> dict[str, object]:
        body: dict[str, object] = {"model": self.model, "messages": [{"role": "user", "content": prompt}]}
        if constraints.maxTokens is not None:
            limit = first_not_refused(("max_tokens", "max_completion_tokens"), self.refused)
            if limit is not None:
                body[limit] = constraints.maxTokens
        if constraints.temperature is not None and "temperature" not in self.refused:
            body["temperature"] = constraints.temperature
        if constraints.stop and "stop" not in self.refused:
            body["stop"] = constraints.stop
        return body

    def complete(self, prompt: str, constraints: PromptConstraints) -> str:
        while True:  # at most once more per optional parameter: each is refused only once
            body = self._body(prompt, constraints)
            if self._http.is_closed:
                raise CortexError("this cortex was closed: make a new one", self.url)
            status, data = self._post(body)
            if status < 400:
                break
            try:
                answer: object = json.loads(data)
            except (ValueError, RecursionError):
                answer = None
            name = refused_parameter(status, answer, body, OPTIONAL)
            if name is None:
                raise CortexError(
                    f"the cortex answered HTTP {status}: {error_text(data, answer)}",
                    self.url,
                    status=status,
                    code=_code(answer),
                )
            self.refused.add(name)
            text = data[:200].decode("utf-8", "replace")
            log.warning("the cortex model %s refused %r; it is no longer sent: %s", self.model, name, text)
        try:
            return str(json.loads(data)["choices"][0]["message"]["content"] or "")
        except (ValueError, KeyError, IndexError, TypeError, RecursionError):  # RecursionError: nested too deep
            raise CortexError(
                "the cortex answered without choices[0].message.content", self.url, status=status
            ) from None

    def _post(self, body: dict[str, object]) -> tuple[int, bytes]:
        """POST /chat/completions: its status and body, read no further than MAX_MODEL_BYTES (an error's than
        MAX_ERROR_BYTES): a CortexError past that, or when the model cannot be reached."""
        status: int | None = None
        try:
            with self._http.stream("POST", "/chat/completions", json=body, headers=IDENTITY) as r:
                status = r.status_code
                cap, name = (MAX_MODEL_BYTES, "MAX_MODEL_BYTES") if r.status_code < 400 else (MAX_ERROR_BYTES, "")
                return r.status_code, body_bytes(r, cap, "POST /chat/completions", name or "MAX_ERROR_BYTES")
        except TooLargeError as e:
            raise CortexError(str(e), self.url, status=status, code=e.code) from None
        except httpx.HTTPError as e:
            raise CortexError(f"cannot reach the cortex: {e}", self.url) from None

    def close(self) -> None:
        """Close connections."""
        self._http.close()
