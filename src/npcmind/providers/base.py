"""The provider interface: one call per batch in, one raw choice per entity out."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from npcmind.answer import AnswerMode, Choice
from npcmind_client.params import is_html


@dataclass(slots=True)
class ProviderCall:
    """One batch for the model: the static prefix, the dynamic tail and each asked entity's options."""

    system: str
    user: str
    entities: list[tuple[int, list[str]]]
    mode: AnswerMode
    prefix_key: str
    max_output_tokens: int
    read_by: float | None = None  # the event loop's time of the call's deadline: a paced stream reads by then


@dataclass(slots=True)
class ProviderAnswer:
    """The model's answer to one batch, with the token counts the provider reported."""

    choices: dict[int, Choice] = field(default_factory=dict)
    refusal: str | None = None
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    raw: str | None = None  # the answer as the model gave it, for GET /v1/prompt
    truncated: bool = False  # the answer stopped at the output limit (a reasoning model may spend it all)


@dataclass(frozen=True, slots=True)
class Picked:
    """One entity's choice in a streamed answer, final as soon as the model has written it: the pipeline
    decides that entity at once instead of waiting for the whole answer."""

    number: int
    choice: Choice


# a streamed answer: a Picked for each entity as soon as its part is complete, then the whole ProviderAnswer
# (its choices include the picked ones; an entity it adds that was never picked is decided at the end)
StreamPiece = Picked | ProviderAnswer


async def whole_answer(
    decide: Callable[[ProviderCall], Awaitable[ProviderAnswer]], call: ProviderCall
) -> AsyncIterator[StreamPiece]:
    """A stream made of one unstreamed call, for a provider or a server that cannot stream: every choice at
    once when the answer comes, then the answer."""
    for piece in as_pieces(await decide(call)):
        yield piece


def as_pieces(answer: ProviderAnswer) -> list[StreamPiece]:
    """An answer that came whole, as a stream's pieces: every choice at once, then the answer (a server that
    ignored the ask to stream answers so)."""
    return [*(Picked(number, choice) for number, choice in answer.choices.items()), answer]


def stream_cut(given: int, why: object) -> ProviderError:
    """The error for a stream that ended before its answer did: the pieces already given stand, and say so."""
    if given:
        return ProviderError(f"the provider's stream was cut after {given} entities: {why}")
    return ProviderError(f"the provider's stream was cut before any entity was written: {why}")


class ProviderError(Exception):
    """The call failed as a whole (transport, HTTP status, credentials): every entity falls back.

    ``status`` and ``body`` keep the provider's HTTP answer, so an adapter can tell a parameter the
    model refuses (which it can stop sending) from a failure it can do nothing about.
    """

    def __init__(
        self, message: str, status: int | None = None, body: object = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.retry_after = retry_after  # seconds the provider asked us to wait (a 429's Retry-After)


MAX_TOKEN_COUNT = 10**9  # no call is that large: a count beyond it is a broken server's


def usage_count(usage: Any, *path: str) -> int:
    """A token count from a provider's usage block, at ``path`` (shared by the adapters); 0 when it is missing,
    not a whole number, negative or absurd (one server's odd usage block must not cost the batch its decisions)."""
    value = usage
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKEN_COUNT:
        return 0
    return value


def listing_problem(status: int, body: Any, base_url: str, model: str | None) -> str | None:
    """What a provider's GET /models answer says about the calls to come (shared by the adapters)."""
    if status in (401, 403):
        return f'{base_url} refused the API key (HTTP {status}): every decision will fall back with "unavailable"'
    if status >= 400:
        if isinstance(body, str) and is_html(body):  # a web server's page: every call will get one too
            return (
                f"{base_url}/models answered HTTP {status} with an HTML page, not an API's answer: --base-url is "
                'likely not the address of an OpenAI-compatible API; every decision will fall back with "unavailable"'
            )
        return None  # many servers have no model list; the first call will tell
    data = body.get("data") if isinstance(body, dict) else None
    ids = (
        [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
        if isinstance(data, list)
        else []
    )
    # one listed model: a server that serves just that one (llama.cpp) answers whatever name it is sent
    if len(ids) > 1 and model not in ids and f"{model}:latest" not in ids:  # Ollama: a bare name means :latest
        shown = ", ".join(sorted(ids)[:8]) + (", ..." if len(ids) > 8 else "")
        return f"{base_url} does not list the model {model!r} (it lists {shown}); choose one with --model"
    return None


class Provider(Protocol):
    """A model behind an HTTP API that answers a batch in the form that suits it."""

    name: str
    model: str | None
    mode: AnswerMode
    encoding: str
    # the fewest tokens of a prefix the provider caches (a shorter static prefix is paid in full on every
    # call), or None where any prefix is reused (self-hosted servers) or nothing is called
    cache_minimum: int | None

    @property
    def ready(self) -> bool:
        """Whether a call can succeed at all (credentials present)."""
        ...

    async def decide(self, call: ProviderCall) -> ProviderAnswer:
        """Make the one model call for a batch; raise ProviderError when it fails as a whole."""
        ...

    def stream(self, call: ProviderCall) -> AsyncIterator[StreamPiece]:
        """The same call, streamed: each entity's choice as soon as it is written, then the whole answer;
        raise ProviderError when it fails before any piece (after one, the pieces given stand)."""
        ...

    async def check(self) -> str | None:
        """At start, without a model call: a problem that will make calls fail (key refused, unknown model),
        said before the game's first request, or None; a ProviderError when the server cannot be reached."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


class NoProvider:
    """Chosen when nothing is configured: the service runs, and every decision falls back."""

    name = "none"
    model: str | None = None
    mode: AnswerMode = "numbered"
    encoding = "o200k_base"
    cache_minimum: int | None = None
    ready = False

    async def decide(self, call: ProviderCall) -> ProviderAnswer:
        raise ProviderError("no provider configured")

    def stream(self, call: ProviderCall) -> AsyncIterator[StreamPiece]:
        return whole_answer(self.decide, call)

    async def check(self) -> str | None:
        return None  # the start banner already says every decision falls back

    async def close(self) -> None:
        return None
