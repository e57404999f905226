"""Pick the provider from flags and environment, so `--provider auto` does what a developer expects."""

from __future__ import annotations

import os
from collections.abc import Mapping

import yarl

from npcmind.config import Settings
from npcmind.providers.anthropic import ANTHROPIC_URL, AnthropicProvider
from npcmind.providers.base import NoProvider, Provider
from npcmind.providers.openai import OPENAI_URL, OpenAIProvider
from npcmind_client.urls import http_url

CHOICES = ("auto", "openai", "anthropic", "none")


def make_provider(settings: Settings, env: Mapping[str, str] | None = None) -> Provider:
    """auto: OpenAI if OPENAI_API_KEY is set (or --base-url names a server), else Anthropic if
    ANTHROPIC_API_KEY is set, else none: the service runs and every decision falls back."""
    env = os.environ if env is None else env
    kind = settings.provider
    if kind not in CHOICES:
        raise ValueError(f"--provider must be one of {', '.join(CHOICES)}, not {kind!r}")
    if settings.base_url is not None:  # given empty is a mistake, not the provider's own URL
        base_url(settings.base_url)
    if kind == "auto":
        if env.get(settings.api_key_env or "OPENAI_API_KEY") or settings.base_url:
            kind = "openai"
        elif env.get(settings.api_key_env or "ANTHROPIC_API_KEY"):
            kind = "anthropic"
        else:
            kind = "none"
    if kind == "openai":
        mode = settings.answer_format if settings.answer_format in ("numbered", "enum") else None
        return OpenAIProvider(
            api_key=env.get(settings.api_key_env or "OPENAI_API_KEY") or None,
            base_url=settings.base_url or OPENAI_URL,
            model=settings.model,
            mode=mode,  # type: ignore[arg-type]
            logprobs=settings.logprobs,
            calls=settings.max_concurrent_calls,
        )
    if kind == "anthropic":
        return AnthropicProvider(
            api_key=env.get(settings.api_key_env or "ANTHROPIC_API_KEY") or None,
            base_url=settings.base_url or ANTHROPIC_URL,
            model=settings.model,
            calls=settings.max_concurrent_calls,
        )
    return NoProvider()


def base_url(url: str, example: str = "http://127.0.0.1:11434/v1") -> str:
    """--base-url checked whole at start (a ValueError naming the flag): a URL no call could reach would only
    fail each call, later and unsaid."""
    url = http_url(url, "--base-url", example)
    try:
        parsed = yarl.URL(url)
        parsed.port  # noqa: B018  # read: a port out of range is a ValueError only then
    except ValueError as e:
        raise ValueError(f"--base-url {url!r} is not a URL: {e}, as in {example}") from None
    host = parsed.host or ""
    if not host or any(c.isspace() for c in host):
        raise ValueError(f"--base-url {url!r} names no host, as in {example}")
    return url


def describe(p: Provider) -> str:
    """One line for the start banner and /v1/health."""
    if p.name == "none":
        return 'no provider configured: every decision will fall back with "unavailable"'
    where = getattr(p, "base_url", "")
    state = "ready" if p.ready else 'NOT READY (no API key): every decision will fall back with "unavailable"'
    refused = getattr(p, "dropped", ())
    if refused:
        state += f"; not sent because the model refused them: {', '.join(refused)}"
    form = getattr(p, "format_form", None)
    mode = f"{p.mode} (sent as {form})" if form else p.mode
    return f"{p.name} model={p.model} at {where}, answer format {mode}, {state}"
