"""OpenAI-compatible chat completions: OpenAI itself, vLLM, llama.cpp server, Ollama, LM Studio."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable
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
    whole_answer,
)
from npcmind.providers.http import JsonClient, Streamed
from npcmind.providers.pace import ReadPace
from npcmind.providers.tokens import count_once, encoding_for
from npcmind_client.params import error_text, first_not_refused, refused_parameter

OPENAI_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"
log = logging.getLogger("npcmind.providers")

# Parameters that refine a call but that some models refuse with a 400 (OpenAI's reasoning models refuse
# logprobs and temperature 0; some servers know only one of the two token-limit names, or have no
# structured output). When the provider names one, npcmind stops sending it and makes the call again, so
# a game's first request is decided instead of falling back; what is lost is said once, in the log.
OPTIONAL = {
    "logprobs": "confidence is null from now on",
    "top_logprobs": "confidence still comes from the chosen token",
    "temperature": "the model samples at its own default temperature",
    "prompt_cache_key": "no prompt-cache hint is sent",
    "max_completion_tokens": "the output limit is sent as max_tokens",
    "max_tokens": "the output limit is sent as max_completion_tokens",
    # the answer format, refused form by form (FORMATS); the prompt itself says how to answer, and every
    # choice is checked against the legal actions after the fact anyway
    "response_format": "the answer format is sent in its next form",
    "json_schema": "the schema is sent as json_object with a schema, llama-cpp-python's form",
    "json_object_schema": "answers are no longer held to the legal actions by the server: plain JSON is asked "
    "for, and an illegal choice gives invalid_choice",
    "json_object": "no answer format is sent: the prompt alone asks for JSON, and an illegal choice gives "
    "invalid_choice",
    # streamed calls only (decide() never sends them)
    "stream": "this server cannot stream: a batch's decisions all come when its whole answer does",
    "stream_options": "a streamed answer carries no token counts: npcmind counts the answer's tokens itself",
}
# The forms of response_format, most useful first; a server that refuses one gets the next, then none.
# json_schema is OpenAI's (also vLLM, llama.cpp's llama-server, Ollama, LM Studio); llama-cpp-python's
# server takes the schema inside json_object and enforces it as a grammar all the same.
FORMATS = ("json_schema", "json_object_schema", "json_object")


def is_hosted(base_url: str) -> bool:
    """Hosted OpenAI caches prompt prefixes, schema included; self-hosted servers sample with a grammar."""
    return "api.openai.com" in base_url


class OpenAIProvider:
    """Chat completions with structured output, log-probabilities and prompt-cache hints."""

    name = "openai"

    def __init__(
        self,
        api_key: str | None,
        base_url: str = OPENAI_URL,
        model: str | None = None,
        mode: AnswerMode | None = None,
        logprobs: bool = True,
        calls: int = MAX_CONCURRENT_CALLS,
    ) -> None:
        self.api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.model: str | None = model or DEFAULT_MODEL
        self.hosted = is_hosted(self.base_url)
        self.mode: AnswerMode = mode or ("numbered" if self.hosted else "enum")
        self.logprobs = logprobs
        self.encoding = encoding_for(self.model, "o200k_base")
        self.cache_minimum = 1024 if self.hosted else None  # OpenAI caches prompts from 1024 tokens
        self.refused: set[str] = set()  # optional parameters this model refused: no longer sent
        # OpenAI itself wants max_completion_tokens; many self-hosted servers know only max_tokens
        self._limits = (
            ("max_completion_tokens", "max_tokens") if self.hosted else ("max_tokens", "max_completion_tokens")
        )
        self._http = JsonClient(calls)

    @property
    def ready(self) -> bool:
        return bool(self.api_key) or not self.hosted

    @property
    def dropped(self) -> list[str]:
        """The optional parameters no longer sent (the answer format's forms are told by ``format_form``)."""
        return sorted(n for n in self.refused if n not in FORMATS)

    @property
    def format_form(self) -> str:
        """How the answer format reaches the server once its usual form was refused, for the health line."""
        form = first_not_refused(FORMATS, self.refused)
        return {
            "json_schema": "",
            "json_object_schema": "json_object with a schema",
            "json_object": "plain JSON mode: the server does not hold answers to the legal actions",
        }.get(form or "", "the prompt alone: the server took no response_format")

    def request_body(self, call: ProviderCall) -> dict[str, Any]:
        """The chat-completions body for one batch."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": call.system},
                {"role": "user", "content": call.user},
            ],
            "temperature": 0,
        }
        form = first_not_refused(FORMATS, self.refused)
        if form == "json_schema":
            schema = {"name": "decisions", "strict": True, "schema": answer.schema(call.mode, call.entities)}
            body["response_format"] = {"type": form, "json_schema": schema}
        elif form == "json_object_schema":
            body["response_format"] = {"type": "json_object", "schema": answer.schema(call.mode, call.entities)}
        elif form == "json_object":
            body["response_format"] = {"type": form}
        limit = first_not_refused(self._limits, self.refused)
        if limit is not None:
            body[limit] = call.max_output_tokens
        if self.mode == "numbered":  # a fixed schema keeps the prefix cacheable: say which prefix it is
            body["prompt_cache_key"] = call.prefix_key
        if self.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = 1
        for name in self.refused:
            body.pop(name, None)
        return body

    @property
    def _headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    async def decide(self, call: ProviderCall) -> ProviderAnswer:
        if not self.ready:
            raise ProviderError("no API key for OpenAI")
        while True:  # at most once more per optional parameter: each is refused only once
            body = self.request_body(call)
            try:
                data = await self._http.post(f"{self.base_url}/chat/completions", body, self._headers, _ANSWER)
            except ProviderError as e:
                if not self._drop_refused(e, body):
                    raise
                continue
            return self.read_answer(data, call)

    def _drop_refused(self, e: ProviderError, body: dict[str, Any]) -> bool:
        """Whether the error says the model refuses an optional parameter of ``body``: then it is no longer
        sent, and the log says once what that costs."""
        name = refused_parameter(e.status, e.body, body, OPTIONAL)
        if name is None:
            return False
        if name == "response_format":  # the form sent was refused: the next one, or none
            name = first_not_refused(FORMATS, self.refused) or name
        self.refused.add(name)
        if name == "logprobs":
            self.refused.add("top_logprobs")  # it means nothing without logprobs
        log.warning(
            "%s refused the parameter %r for model %s, so npcmind stops sending it (%s): %s",
            self.base_url,
            name,
            self.model,
            OPTIONAL[name],
            e,
        )
        return True

    async def stream(self, call: ProviderCall) -> AsyncIterator[StreamPiece]:
        """The call streamed (server-sent events, as OpenAI, vLLM, llama.cpp's server and Ollama send them):
        each entity's choice as soon as its part of the answer is complete, then the whole answer."""
        if not self.ready:
            raise ProviderError("no API key for OpenAI")
        async with contextlib.AsyncExitStack() as stack:
            opened = None if "stream" in self.refused else await self._open_stream(call, stack)
            if opened is None:  # this server cannot stream: the unstreamed call, as a stream
                async for piece in whole_answer(self.decide, call):
                    yield piece
            elif opened.whole is not None:  # it answered unstreamed all the same
                for piece in as_pieces(self.read_answer(opened.whole, call)):
                    yield piece
            else:
                async for piece in self._read_stream(opened, call):
                    yield piece

    async def _open_stream(self, call: ProviderCall, stack: contextlib.AsyncExitStack) -> Streamed | None:
        """Send the streamed call, dropping each optional parameter the model refuses (before its first byte,
        as decide() does); None once the server has refused ``stream`` itself."""
        while True:
            body = {**self.request_body(call), "stream": True, "stream_options": {"include_usage": True}}
            for name in ("stream", "stream_options"):
                if name in self.refused:
                    body.pop(name)
            try:
                return await stack.enter_async_context(
                    self._http.stream(f"{self.base_url}/chat/completions", body, self._headers)
                )
            except ProviderError as e:
                if not self._drop_refused(e, body):
                    raise
                if "stream" in self.refused:
                    return None

    async def _read_stream(self, opened: Streamed, call: ProviderCall) -> AsyncIterator[StreamPiece]:
        """Feed each chunk's text to the partial reader and give every entity it completes; then the whole
        answer, read as decide() reads one. A stream that ends before its answer does raises ProviderError
        after the pieces it gave."""
        reader = answer.PartialAnswer(call.mode, call.entities)
        chunks = _Chunks()
        pace = ReadPace(asyncio.get_running_loop().time(), len(call.entities), call.read_by)
        try:
            async with contextlib.aclosing(opened.reads(pace)) as reads:  # closed at once when left early
                async for events in reads:
                    text, tokens, failed = chunks.take_all(events)
                    got = reader.feed(text, tokens)  # once a read: its chunks' texts together
                    pace.written = len(reader.text)
                    if got:
                        pace.completed(len(got))
                    for number, choice in got:
                        yield Picked(number, choice)
                    if failed is not None:  # what came before the failure stands
                        raise failed
                    if chunks.done:
                        break
        except ProviderError as e:
            raise stream_cut(len(reader.picked), e) from None
        if not chunks.done and chunks.finish is None:
            raise stream_cut(len(reader.picked), "the connection closed without the answer's end")
        out = self.read_answer(chunks.whole(reader), call)
        if chunks.usage is None:  # no usage chunk (llama-cpp-python's server sends none, or stream_options was
            # refused): the tokens the server sent, else the tokenizer's counts, so budgets and metrics still see them
            out.input_tokens = count_once(self.encoding, call.system) + count_once(self.encoding, call.user)
            out.output_tokens = len(reader.tokens) if chunks.aligned else count_once(self.encoding, reader.text)
        out.choices = {**out.choices, **reader.picked}  # what was given stands
        yield out

    async def check(self) -> str | None:
        if not self.ready:
            return None  # the start banner already says the key is missing
        headers = {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        status, body = await self._http.status_of(f"{self.base_url}/models", headers)
        slip = status == 404 and not self.base_url.endswith("/v1")  # the commonest slip: the /v1 left out
        if slip and (await self._http.status_of(f"{self.base_url}/v1/models", headers))[0] == 200:
            return (
                f"{self.base_url} has no /models but {self.base_url}/v1 has: every call will answer 404 "
                f"until the service is started with --base-url {self.base_url}/v1"
            )
        return listing_problem(status, body, self.base_url, self.model)

    def read_answer(self, data: Any, call: ProviderCall) -> ProviderAnswer:
        """Map a chat-completions answer to choices, confidence and token counts: one decoded into structs (the
        usual shape: ``_Answer``) or, field by field, any other JSON. Both go through one mapping, ``_mapped``.
        Fields the structs do not read are skipped unchecked: an answer whose ``system_fingerprint`` holds bytes
        that are not UTF-8, or whose top alternatives hold a number past a float's range, still gives its
        decisions (a decode of the whole document refused it as not JSON)."""
        if isinstance(data, _Answer):
            if not data.choices:
                raise ProviderError("provider answer has no choices[0].message")
            typed = data.choices[0]
            message = typed.message
            return _mapped(
                call, data.usage, typed.finish_reason, message.refusal, message.content or "", lambda: _tokens_of(typed)
            )
        try:
            choice = data["choices"][0]
            loose = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise ProviderError("provider answer has no choices[0].message") from None
        if not isinstance(choice, dict) or not isinstance(loose, dict):
            raise ProviderError("provider answer's choices[0].message is not an object")
        return _mapped(
            call,
            data.get("usage"),
            choice.get("finish_reason"),
            loose.get("refusal"),
            loose.get("content") or "",
            lambda: _logprob_tokens(choice),
        )

    async def close(self) -> None:
        await self._http.close()


@dataclass(slots=True)
class _Chunks:
    """What a streamed chat completion said besides its text: refusal, finish reason, usage, its end."""

    refusal: list[str] = field(default_factory=list)
    finish: str | None = None
    usage: Any = None
    done: bool = False
    # every chunk so far came with log-probabilities whose tokens spell its text: once one did not (none sent,
    # or malformed), no more tokens are kept, so a token's offset never points at the wrong text
    aligned: bool = True

    def take_all(self, events: list[bytes]) -> tuple[list[str], list[tuple[str, float]], ProviderError | None]:
        """The chunks of one read: the texts they add, their tokens, and the error of a chunk that failed (the
        chunks before it stand; those after it are not read); ``[DONE]`` ends them."""
        texts: list[str] = []
        tokens: list[tuple[str, float]] = []
        for data in events:
            if data == b"[DONE]":
                self.done = True
                break
            try:
                text, toks = self.take(data)
            except ProviderError as e:
                return texts, tokens, e
            if text:
                texts.append(text)
            tokens += toks
        return texts, tokens, None

    def take(self, data: bytes) -> tuple[str, list[tuple[str, float]]]:
        """One chunk: the text it adds and that text's tokens with their log-probabilities (none if not sent).
        A chunk of the usual shape is decoded straight into it (a few dozen of them a batch); any other is read
        field by field, as tolerant of each as an unstreamed answer."""
        try:
            chunk = _CHUNK.decode(data)
        except msgspec.ValidationError:  # not the usual shape: read loosely, or said why not
            return self._take_loose(data)
        except (msgspec.DecodeError, RecursionError):
            raise ProviderError(f"a streamed chunk is not JSON: {data[:100]!r}") from None
        if chunk.error is not None:
            return self._take_loose(data)  # the failure's text, as the loose reading says it
        if chunk.usage:
            self.usage = chunk.usage
        choice = chunk.choices[0] if chunk.choices else None
        if choice is None:
            return "", []
        self.finish = choice.finish_reason or self.finish
        delta = choice.delta
        if delta is None:
            return "", []
        if delta.refusal is not None:
            self.refusal.append(delta.refusal)
        text = delta.content
        if text is None:
            return "", []
        if not self.aligned:
            return text, []
        sent = choice.logprobs.content if choice.logprobs is not None else None
        tokens = [(t.token, t.logprob) for t in sent] if sent else []
        if any(lp > 0 for _, lp in tokens):  # a probability is at most 1: none of them counts
            tokens = []
        if "".join(t for t, _ in tokens) != text:
            self.aligned = False
            tokens = []
        return text, tokens

    def _take_loose(self, data: bytes) -> tuple[str, list[tuple[str, float]]]:
        """One chunk of any shape, each field checked on its own (``take``'s reading of the unusual ones)."""
        try:
            chunk = msgspec.json.decode(data)
        except (msgspec.DecodeError, RecursionError):
            raise ProviderError(f"a streamed chunk is not JSON: {data[:100]!r}") from None
        if not isinstance(chunk, dict):
            raise ProviderError(f"a streamed chunk is not an object: {data[:100]!r}")
        if chunk.get("error") is not None:  # a server's failure mid-answer (vLLM, llama.cpp)
            raise ProviderError(f"the provider failed mid-answer: {error_text(data, chunk)}")
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        self.finish = choice.get("finish_reason") or self.finish
        delta = choice.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        if isinstance(delta.get("refusal"), str):
            self.refusal.append(delta["refusal"])
        text = delta.get("content")
        if not isinstance(text, str):
            return "", []
        tokens = _logprob_tokens(choice) if self.aligned else []
        if self.aligned and "".join(t for t, _ in tokens) != text:
            self.aligned = False
            tokens = []
        return text, tokens

    def whole(self, reader: answer.PartialAnswer) -> dict[str, Any]:
        """The answer as an unstreamed chat completion, for read_answer (the same reading as decide()'s)."""
        message = {"content": reader.text, "refusal": "".join(self.refusal) or None}
        logprobs = {"content": [{"token": t, "logprob": lp} for t, lp in reader.tokens]}
        return {
            "choices": [{"message": message, "finish_reason": self.finish, "logprobs": logprobs}],
            "usage": self.usage,
        }


class _Token(msgspec.Struct):
    """One token of a streamed chunk with its log-probability (its top alternatives are not read)."""

    token: str
    logprob: float


class _Logprobs(msgspec.Struct):
    """A streamed chunk's log-probabilities."""

    content: list[_Token] | None = None


class _Delta(msgspec.Struct):
    """What a streamed chunk adds to the message."""

    content: str | None = None
    refusal: str | None = None


class _ChunkChoice(msgspec.Struct):
    """A streamed chunk's first choice."""

    delta: _Delta | None = None
    logprobs: _Logprobs | None = None
    finish_reason: str | None = None


class _Chunk(msgspec.Struct):
    """A chat-completion chunk of the usual shape, decoded in one pass (the fields npcmind reads; the rest are
    skipped)."""

    choices: list[_ChunkChoice] | None = None
    usage: Any = None
    error: Any = None


_CHUNK = msgspec.json.Decoder(_Chunk)


class _Message(msgspec.Struct):
    """An unstreamed answer's message."""

    content: str | None = None
    refusal: str | None = None


class _AnswerChoice(msgspec.Struct):
    """An unstreamed answer's first choice."""

    message: _Message  # required: a choice without one is said by the tolerant reading
    logprobs: _Logprobs | None = None
    finish_reason: str | None = None


class _Answer(msgspec.Struct):
    """A chat completion of the usual shape, decoded in one pass (the fields npcmind reads; the rest, each token's
    ``bytes`` and ``top_logprobs`` among them, are skipped)."""

    choices: list[_AnswerChoice]
    usage: Any = None


_ANSWER = msgspec.json.Decoder(_Answer)


def _mapped(
    call: ProviderCall,
    usage: Any,
    finish: Any,
    refusal: Any,
    text: Any,
    tokens: Callable[[], list[tuple[str, float]]],
) -> ProviderAnswer:
    """An answer's choices, confidences and counts from its parts, however they were decoded: a refusal (or a
    content filter) gives no choices; a text that is not a string gives nothing; ``tokens`` is read only for text."""
    out = ProviderAnswer(
        input_tokens=usage_count(usage, "prompt_tokens"),
        cached_tokens=usage_count(usage, "prompt_tokens_details", "cached_tokens"),
        output_tokens=usage_count(usage, "completion_tokens"),
        truncated=finish == "length",
    )
    if refusal or finish == "content_filter":
        out.refusal = out.raw = str(refusal or "content filter")
        return out
    if not isinstance(text, str):
        return out
    out.raw = text
    out.choices = answer.parse(text, call.mode, call.entities, cut=out.truncated)
    for n, p in answer.confidences(text, tokens(), call.mode, list(out.choices)).items():
        out.choices[n].confidence = p
    return out


def _tokens_of(choice: _AnswerChoice) -> list[tuple[str, float]]:
    """A typed answer's tokens and log-probabilities, or none when one is past probability 1 (or NaN)."""
    sent = choice.logprobs.content if choice.logprobs is not None else None
    tokens = [(t.token, t.logprob) for t in sent or ()]
    within = [lp for _, lp in tokens if -math.inf <= lp <= 0]  # a list, not a generator stepped a token at a time
    return tokens if len(within) == len(tokens) else []


def _logprob_tokens(choice: dict[str, Any]) -> list[tuple[str, float]]:
    """The answer's tokens and their log-probabilities, or none at all when one entry is malformed (the
    tokens' offsets would no longer line up with the text): confidence is then null, the answer kept."""
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    out: list[tuple[str, float]] = []
    for t in content if isinstance(content, list) else ():
        lp = t.get("logprob") if isinstance(t, dict) else None
        if isinstance(lp, bool) or not isinstance(lp, int | float) or not -math.inf <= lp <= 0:
            return []  # a probability is at most 1; NaN fails the comparison too
        if not isinstance(t.get("token"), str):
            return []
        try:
            out.append((t["token"], float(lp)))
        except OverflowError:  # a whole number past a float's range is no log-probability
            return []
    return out
