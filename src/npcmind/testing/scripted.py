"""A scripted model server that speaks the OpenAI chat-completions and Anthropic Messages protocols over HTTP.

It is a test tool, never a default: run it (`npcmind scripted-provider --port 9100`), point the service at
it (`--provider openai --base-url http://127.0.0.1:9100/v1`), and set its behaviour with
`PUT /_script` to see how your game handles every fallback, offline. It reads npcmind's prompt format
(entity lines `E1 "id"` and question lines `Q1: ... Options: ...`) to know which entity is which.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
from litestar import Litestar, Request, Response, delete, get, post, put
from litestar.response import Stream
from msgspec import Meta

from npcmind.answer import DECLINE
from npcmind.http.server import BackgroundServer
from npcmind.protocol.errors import ApiError
from npcmind.protocol.validate import parse
from npcmind.providers.tokens import count, count_once, split


class Range(msgspec.Struct, forbid_unknown_fields=True):
    """A condition on a number: every bound given must hold."""

    lt: float | None = None
    le: float | None = None
    gt: float | None = None
    ge: float | None = None

    def holds(self, v: Any) -> bool:
        """Whether the number ``v`` lies within every bound given (a value that is not a number never does)."""
        if isinstance(v, bool) or not isinstance(v, int | float):
            return False
        return (
            (self.lt is None or v < self.lt)
            and (self.le is None or v <= self.le)
            and (self.gt is None or v > self.gt)
            and (self.ge is None or v >= self.ge)
        )


class Rule(msgspec.Struct, forbid_unknown_fields=True):
    """A teacher's rule for every request: when the entity is of ``type`` and every condition of ``when`` holds
    (an observation field by its name, a world field as ``world.NAME``, scope state as ``scope.NAME``; a value
    to equal or a Range), choose ``choose``, or toss a coin among ``toss`` (those that are legal)."""

    type: str | None = None
    when: dict[str, bool | str | float | Range] = {}
    choose: str | None = None
    toss: list[str] = []

    def applies(self, typ: str, fields: dict[str, Any]) -> bool:
        """Whether the rule is for this entity's situation."""
        if self.type is not None and self.type != typ:
            return False
        for name, cond in self.when.items():
            v = fields.get(name)
            if isinstance(cond, Range):
                if not cond.holds(v):
                    return False
            elif v != cond or isinstance(v, bool) != isinstance(cond, bool):
                return False
        return True


class TextRule(msgspec.Struct, forbid_unknown_fields=True):
    """Choose ``choose`` for an entity whose part of the prompt (its lines and question) ``match`` finds: a
    script that answers by the situation, as `npcmind demo --scripted` does, rather than by entity id."""

    match: str  # a Python regular expression, searched in the entity's part
    choose: str

    def __post_init__(self) -> None:
        try:
            re.compile(self.match)  # kept in re's own cache of compiled patterns
        except re.error as e:
            raise ValueError(f"match is not a regular expression: {e}") from None


class Script(msgspec.Struct, forbid_unknown_fields=True):
    """How the server answers, until changed. Entity keys are the game's entity ids."""

    choose: dict[str, str] = {}
    when: list[TextRule] = []  # after `choose`: the first rule that matches and whose action is an option wins
    default: Literal["first", "last", "decline"] = "first"
    omit: list[str] = []
    decline: list[str] = []
    refusal: str | None = None
    malformed: bool = False
    delay_ms: Annotated[int, Meta(ge=0)] = 0
    status: Annotated[int, Meta(ge=400, le=599)] | None = None  # an HTTP error the server answers
    retry_after: Annotated[float, Meta(ge=0)] | None = None  # with status 429: the Retry-After header, in seconds
    logprob: Annotated[float, Meta(le=0)] = -0.105
    cached_tokens: Annotated[int, Meta(ge=0)] | None = None
    text: str | None = None
    body: dict[str, Any] | None = None  # answer exactly this JSON (for malformed provider answers)
    truncated: bool = False  # stop at the output limit with no answer yet, as a reasoning model can (with
    # ``text``: that text is the answer as the limit cut it)
    reject_params: list[str] = []  # chat completions: a 400 naming the first of these the request holds
    # chat completions: the response_format types the server takes (none: all). Another type is answered
    # as llama-cpp-python's server answers json_schema: a 500 carrying a pydantic validation error
    response_formats: list[str] | None = None
    models: list[str] = []  # what GET /v1/models lists (none: the service checks no model name)
    hold: bool = False  # calls wait, unanswered, until a script without hold is set: GET /_calls counts them
    rules: list[Rule] = []  # a teacher: the first rule that applies to an entity's situation decides it
    seed: int | None = None  # of the rules' coin tosses (none: a new toss sequence each time)
    # how fast the model writes: its first token after stream_ttft_ms, then stream_tokens_per_s tokens a second
    # (0: no pacing). Streamed or not, the answer takes that long: an unstreamed answer comes when the last
    # token would have been written, so a bench compares the two on the same model
    stream_ttft_ms: Annotated[float, Meta(ge=0)] = 0  # a time: 300 and 300.0 alike
    stream_tokens_per_s: Annotated[float, Meta(ge=0)] = 0
    # a streamed answer: close the connection abruptly after this many output tokens, no terminator (None: never)
    stream_cut_after: Annotated[int, Meta(ge=0)] | None = None
    # a streamed answer: after this many output tokens, wait until a script without it is set (what a test does
    # while the answer is under way, done while nothing more comes)
    stream_hold_after: Annotated[int, Meta(ge=0)] | None = None


KEEP_REQUESTS = 1000  # the newest request bodies that GET /_requests returns
NPC_ANSWER = '{"dialogue": "Well met, traveller.", "action": {"type": "IDLE"}}'
_ENTITY = re.compile(r'E(\d+) ("(?:[^"\\]|\\.)*")')
_QUESTION = re.compile(r"Q(\d+): .*?Options: (.*)")
_PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def _value(text: str) -> Any:
    """A rendered field value back as JSON would have it: true/false, a number, a quoted string."""
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"'):
        return msgspec.json.decode(text)
    try:
        return float(text)
    except ValueError:
        return text


def _pairs(line: str, prefix: str = "") -> dict[str, Any]:
    return {prefix + k: _value(v) for k, v in _PAIR.findall(line)}


def situations(user: str) -> tuple[dict[int, str], dict[int, dict[str, Any]]]:
    """Per entity number, its type and what the prompt says of it (its observation, and the world and scope
    state as ``world.NAME`` / ``scope.NAME``): what a teacher's rules test."""
    shared: dict[str, Any] = {}
    types: dict[int, str] = {}
    fields: dict[int, dict[str, Any]] = {}
    current = 0
    for line in user.split("\n"):
        if line.startswith("WORLD NOW: "):
            shared.update(_pairs(line[len("WORLD NOW: ") :], "world."))
        elif line.startswith("SCOPE STATE: "):
            shared.update(_pairs(line[len("SCOPE STATE: ") :], "scope."))
        elif line[:1] == "E" and (m := _ENTITY.match(line)):
            current = int(m.group(1))
            types[current] = line[m.end() :].split()[0] if line[m.end() :].split() else ""
            fields[current] = dict(shared)
        elif line.startswith("  now: ") and current:
            fields[current].update(_pairs(line[len("  now: ") :]))
    return types, fields


def _batch(user: str, texts: bool = False) -> list[tuple[int, str, list[str], str]]:
    """(number, entity id, options, its part of the prompt if ``texts``) for every question in an npcmind
    prompt (one pass over its lines: this runs for every batch the bench sends, and the provider's own time
    is part of every miss)."""
    ids: dict[int, tuple[str, int]] = {}
    out = []
    lines = user.split("\n")
    for i, line in enumerate(lines):
        first = line[:1]
        if first == "E":
            m = _ENTITY.match(line)
            if m:
                ids[int(m.group(1))] = (msgspec.json.decode(m.group(2)), i)
        elif first == "Q":
            m = _QUESTION.match(line)
            if m:
                n = int(m.group(1))
                opts = [o.strip().split(" ", 1)[-1] for o in m.group(2).split(",")]
                eid, start = ids.get(n, (str(n), i))
                out.append((n, eid, opts, "\n".join(lines[start : i + 1]) if texts else ""))
    return out


def _ruled(rules: list[TextRule], text: str, opts: list[str]) -> str | None:
    """The action of the first rule that matches the entity's part and is one of its options."""
    return next((r.choose for r in rules if r.choose in opts and re.search(r.match, text)), None)


class ScriptedModel:
    """The behaviour and the log of received requests, shared by both protocol routes."""

    def __init__(self) -> None:
        self.script = Script()
        self.requests: deque[dict[str, Any]] = deque(maxlen=KEEP_REQUESTS)  # a long run must not grow it
        self._seen_prefixes: set[str] = set()
        self.received = 0
        self.models_asked = 0
        self.in_flight = 0  # calls received and not yet answered
        self.most_in_flight = 0
        self._held: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None  # what held calls wait on
        self._held_streams: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None  # held answers, mid-way
        self._coin = random.Random()

    def apply(self, script: Script) -> None:
        """Take a new script; the calls an old one held go on, unless this one holds them too (thread-safe: a
        test sets the script from its own thread)."""
        self.script = script
        self._coin = random.Random(script.seed)
        held = self._held
        if held is not None and not script.hold:
            self._held = None
            held[0].call_soon_threadsafe(held[1].set)
        streams = self._held_streams
        if streams is not None and script.stream_hold_after is None:
            self._held_streams = None
            streams[0].call_soon_threadsafe(streams[1].set)

    async def hold(self) -> None:
        """While the script says so, wait until a script that does not hold is set."""
        if not self.script.hold:
            return
        if self._held is None:
            self._held = (asyncio.get_running_loop(), asyncio.Event())
        await self._held[1].wait()

    async def hold_stream(self) -> None:
        """A streamed answer at its ``stream_hold_after`` token: wait until a script without it is set."""
        if self.script.stream_hold_after is None:
            return
        if self._held_streams is None:
            self._held_streams = (asyncio.get_running_loop(), asyncio.Event())
        await self._held_streams[1].wait()

    def calls(self) -> dict[str, int]:
        """How many calls came, and how many were in flight at once: a client's own pool can cap them unseen."""
        return {"received": self.received, "in_flight": self.in_flight, "most_in_flight": self.most_in_flight}

    def answer(self, numbered: bool, user: str) -> tuple[list[tuple[str, float]], dict[str, Any]]:
        """The answer as (token, logprob) pieces, and the same answer as an object."""
        s = self.script
        pieces: list[tuple[str, float]] = []
        obj: dict[str, Any] = {"decisions": []} if numbered else {}
        items = [b for b in _batch(user, bool(s.when)) if b[1] not in s.omit]
        taught = self.taught(user, items) if s.rules else {}
        pieces.append(('{"decisions":[' if numbered else "{", 0.0))
        for k, (n, eid, opts, text) in enumerate(items):
            ruled = _ruled(s.when, text, opts) if s.when and eid not in s.choose else None
            ruled = ruled or taught.get(n)
            if eid in s.decline or (eid not in s.choose and ruled is None and s.default == "decline"):
                action = DECLINE
            else:
                action = s.choose.get(eid) or ruled or (opts[0] if s.default == "first" else opts[-1])
            sep = "," if k else ""
            if numbered:
                choice = 0 if action == DECLINE else (opts.index(action) + 1 if action in opts else len(opts) + 7)
                pieces += [(f'{sep}{{"entity":{n},"choice":', 0.0), (str(choice), s.logprob), ("}", 0.0)]
                obj["decisions"].append({"entity": n, "choice": choice})
            else:
                pieces += [(f'{sep}"E{n}":"', 0.0), (action, s.logprob), ('"', 0.0)]
                obj[f"E{n}"] = action
        pieces.append(("]}" if numbered else "}", 0.0))
        return pieces, obj

    def taught(self, user: str, items: list[tuple[int, str, list[str], str]]) -> dict[int, str]:
        """What the rules choose, by entity number: the first rule that applies and has a legal choice."""
        types, fields = situations(user)
        out: dict[int, str] = {}
        for n, _, opts, _ in items:
            for rule in self.script.rules:
                if not rule.applies(types.get(n, ""), fields.get(n, {})):
                    continue
                if rule.choose is not None and rule.choose in opts:
                    out[n] = rule.choose
                    break
                legal = [a for a in rule.toss if a in opts]
                if legal:
                    out[n] = self._coin.choice(legal)
                    break
        return out

    def cached(self, prefix: str) -> int:
        """Simulated prefix caching: a prefix seen before is cached in 128-token blocks."""
        if self.script.cached_tokens is not None:
            return self.script.cached_tokens
        hit = prefix in self._seen_prefixes
        self._seen_prefixes.add(prefix)
        n = count("o200k_base", prefix)
        return (n // 128) * 128 if hit and n >= 1024 else 0


def _json(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response[bytes]:
    return Response(
        content=msgspec.json.encode(obj), status_code=status, media_type="application/json", headers=headers
    )


def _status_error(s: Script) -> Response[bytes] | None:
    """The scripted HTTP error (with its Retry-After), or None when none is scripted."""
    if s.status is None:
        return None
    wait = {"retry-after": f"{s.retry_after:g}"} if s.retry_after is not None else None
    return _json({"error": {"message": f"scripted status {s.status}", "type": "scripted"}}, s.status, wait)


def _validation_error(loc: tuple[str, ...], value: Any, allowed: list[str]) -> dict[str, Any]:
    """The body llama-cpp-python's server (FastAPI) answers a request field it does not take, status 500."""
    expected = " or ".join(repr(a) for a in allowed)
    detail = {"type": "literal_error", "loc": loc, "msg": f"Input should be {expected}", "input": value}
    message = f"1 validation error:\n  {detail}\n"
    return {"error": {"message": message, "type": "internal_server_error", "param": None, "code": None}}


async def _received(m: ScriptedModel, body: dict[str, Any]) -> Response[bytes] | None:
    """Count and keep one call, hold or delay it as scripted; the scripted error or body, or None to answer."""
    m.requests.append(body)
    m.received += 1
    m.in_flight += 1
    m.most_in_flight = max(m.most_in_flight, m.in_flight)
    try:
        await m.hold()
        if m.script.delay_ms:
            await asyncio.sleep(m.script.delay_ms / 1000)
    finally:
        m.in_flight -= 1
    s = m.script
    failed = _status_error(s)
    if failed is not None:
        return failed
    if s.body is not None:
        return _json(s.body)
    return None


@dataclass(slots=True)
class Said:
    """What the model writes for one call: its content, and what it writes and is counted (the content, or a
    refusal), which a stream sends token by token as the tokenizer cuts it."""

    text: str
    written: str
    # the answer as the script built it, in the pieces the unstreamed form has always given log-probabilities
    # for; none when the script wrote something else (its text, a refusal, a malformed or cut answer)
    pieces: list[tuple[str, float]]
    encoding: str

    def count(self) -> int:
        """The output tokens: as many as a stream of the same answer sends."""
        return count_once(self.encoding, self.written)

    def tokens(self) -> list[tuple[str, float]]:
        """What is written, one token each; a token that holds the start of a scripted piece takes that
        piece's log-probability (the token that decides a choice gets the script's ``logprob``, as unstreamed)."""
        marks: list[tuple[int, float]] = []  # where each piece with a log-probability starts
        pos = 0
        for piece, lp in self.pieces:
            if lp:
                marks.append((pos, lp))
            pos += len(piece)
        out: list[tuple[str, float]] = []
        pos = 0
        i = 0
        for tok in split(self.encoding, self.written):
            lp = 0.0
            while i < len(marks) and marks[i][0] < pos + len(tok):
                lp = min(lp, marks[i][1])
                i += 1
            out.append((tok, lp))
            pos += len(tok)
        return out


async def _pace(s: Script, tokens: int) -> None:
    """Wait as long as the model takes to write ``tokens`` tokens (an unstreamed answer waits for its last)."""
    wait = s.stream_ttft_ms / 1000 + (max(tokens - 1, 0) / s.stream_tokens_per_s if s.stream_tokens_per_s else 0)
    if wait > 0:
        await asyncio.sleep(wait)


class StreamCut(Exception):
    """Raised inside a streamed body to close the connection without its terminator, as a cut provider does."""


def _is_cut(e: BaseException | None) -> bool:
    """Whether an error is, or was caused by, a scripted cut (through the server's exception groups)."""
    while e is not None:
        if isinstance(e, StreamCut):
            return True
        if isinstance(e, BaseExceptionGroup):
            return any(_is_cut(x) for x in e.exceptions)
        e = e.__cause__ or e.__context__
    return False


class QuietCuts(logging.Filter):
    """Keeps the server's log free of a traceback per scripted cut: the cut is the script's, not a failure."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and _is_cut(record.exc_info[1]))


async def _paced(m: ScriptedModel, s: Script, chunks: list[bytes]) -> AsyncIterator[bytes]:
    """The chunks of a streamed answer, one token each, at the script's pace, up to where the script cuts (held
    where it holds)."""
    began = time.monotonic()
    for i, chunk in enumerate(chunks[: s.stream_cut_after]):
        if i == s.stream_hold_after:
            await m.hold_stream()
        due = began + s.stream_ttft_ms / 1000 + (i / s.stream_tokens_per_s if s.stream_tokens_per_s else 0)
        if due > time.monotonic():
            await asyncio.sleep(due - time.monotonic())
        yield chunk


def _sse(obj: Any, event: str | None = None) -> bytes:
    """One server-sent event carrying a JSON object (Anthropic names its events; OpenAI does not)."""
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + msgspec.json.encode(obj) + b"\n\n"


def _openai_refused(s: Script, body: dict[str, Any]) -> Response[bytes] | None:
    """The 400 for a parameter the script rejects, or the 500 for a response_format it does not take."""
    rejected = next((p for p in s.reject_params if p in body), None)
    if rejected is not None:  # as OpenAI answers a parameter a model does not take
        text = f"Unsupported parameter: '{rejected}' is not supported with this model."
        error = {"message": text, "type": "invalid_request_error", "param": rejected}
        return _json({"error": {**error, "code": "unsupported_parameter"}}, 400)
    fmt = body.get("response_format") or {}
    if s.response_formats is not None and fmt and fmt.get("type") not in s.response_formats:
        loc = ("body", "response_format", "type")
        return _json(_validation_error(loc, fmt.get("type"), s.response_formats), 500)
    return None


def _openai_said(m: ScriptedModel, body: dict[str, Any]) -> tuple[Said, str, str]:
    """What the model writes for a chat completion, per the script, with the system and user prompts."""
    s = m.script
    fmt = body.get("response_format") or {}
    messages = body.get("messages", [])
    system = next((x["content"] for x in messages if x.get("role") == "system"), "")
    user = next((x["content"] for x in messages if x.get("role") == "user"), "")
    # OpenAI's form, or llama-cpp-python's (a schema inside json_object)
    schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema") or {}
    # the schema says which form; without one (a server with no structured output), the prompt does
    numbered = "decisions" in schema["properties"] if schema.get("properties") else '{"decisions"' in system
    pieces, _ = m.answer(numbered, user)
    if "ENTITIES:\n" not in user:  # not a decide batch: an NPC's dialogue prompt (the SDK's cortex)
        pieces = [(NPC_ANSWER, 0.0)]
    content = s.text if s.text is not None else "".join(p for p, _ in pieces)
    if s.malformed:
        content = content[: len(content) // 2] + "<<not json"
    if s.truncated and s.text is None:
        content = ""
    real = not s.refusal and s.text is None and not s.malformed and not s.truncated
    written = s.refusal if s.refusal else content  # a refusal is written, and counted, but it is not the content
    return Said(content, written, pieces if real else [], "o200k_base"), system, user


def _openai_answer(m: ScriptedModel, body: dict[str, Any], said: Said, system: str, user: str) -> Response[bytes]:
    """A chat completion as OpenAI's API (and llama-cpp-python's server) answers one, per the script."""
    s = m.script
    message: dict[str, Any] = {"role": "assistant", "content": None if s.refusal else said.text}
    message["refusal"] = s.refusal
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": "length" if s.truncated else "stop"}
    if body.get("logprobs") and said.pieces:
        choice["logprobs"] = {
            "content": [
                {"token": p, "logprob": lp, "bytes": list(p.encode()), "top_logprobs": []} for p, lp in said.pieces
            ]
        }
    prompt_tokens = count("o200k_base", system) + count_once("o200k_base", user)
    return _json(
        {
            "id": f"chatcmpl-scripted-{m.received}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [choice],
            "usage": _openai_usage(m, system, prompt_tokens, said.count()),
        }
    )


def _openai_usage(m: ScriptedModel, system: str, prompt_tokens: int, output: int) -> dict[str, Any]:
    """The usage block, streamed or not."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": output,
        "total_tokens": prompt_tokens + output,
        "prompt_tokens_details": {"cached_tokens": m.cached(system)},
    }


def _openai_stream(m: ScriptedModel, body: dict[str, Any], said: Said, system: str, user: str) -> Stream:
    """A chat completion streamed as OpenAI streams one: a chunk per token (its log-probability when asked),
    the finish reason, the usage chunk when ``stream_options.include_usage``, then ``data: [DONE]``."""
    s = m.script
    head = {"id": f"chatcmpl-scripted-{m.received}", "object": "chat.completion.chunk", "created": int(time.time())}
    head["model"] = body.get("model", "scripted")
    logprobs = bool(body.get("logprobs")) and bool(said.pieces)
    field = "refusal" if s.refusal else "content"
    chunks = [_sse({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})]
    tokens = said.tokens()
    for tok, lp in tokens:
        choice: dict[str, Any] = {"index": 0, "delta": {field: tok}, "finish_reason": None}
        if logprobs:
            choice["logprobs"] = {"content": [{"token": tok, "logprob": lp, "bytes": list(tok.encode())}]}
        chunks.append(_sse({**head, "choices": [choice]}))
    end = {"index": 0, "delta": {}, "finish_reason": "length" if s.truncated else "stop"}
    tail = [_sse({**head, "choices": [end]})]
    if (body.get("stream_options") or {}).get("include_usage"):
        prompt_tokens = count("o200k_base", system) + count_once("o200k_base", user)
        usage = _openai_usage(m, system, prompt_tokens, len(tokens))
        tail.append(_sse({**head, "choices": [], "usage": usage}))
    tail.append(b"data: [DONE]\n\n")
    return _streamed(m, s, chunks[:1], chunks[1:], tail)


def _streamed(m: ScriptedModel, s: Script, first: list[bytes], tokens: list[bytes], tail: list[bytes]) -> Stream:
    """A streamed answer: what comes before the first token at once, the tokens at the script's pace (cut
    where it says), then the rest."""

    async def body() -> AsyncIterator[bytes]:
        for chunk in first:
            yield chunk
        async for chunk in _paced(m, s, tokens):
            yield chunk
        if s.stream_cut_after is not None and s.stream_cut_after <= len(tokens):
            # uvicorn closes a connection whose app failed mid-body: no last chunk, no terminator
            raise StreamCut(f"the script cuts the stream after {s.stream_cut_after} tokens")
        for chunk in tail:
            yield chunk

    return Stream(body(), media_type="text/event-stream", headers={"cache-control": "no-cache"})


def _anthropic_said(m: ScriptedModel, body: dict[str, Any]) -> tuple[Said, dict[str, Any], str, str]:
    """What the model writes for a Messages call (the tool input as compact JSON, or its text), with the
    answer as an object and the system and user prompts."""
    s = m.script
    system = "".join(b.get("text", "") for b in body.get("system", []) if isinstance(b, dict))
    user = next((x["content"] for x in body.get("messages", []) if x.get("role") == "user"), "")
    _, obj = m.answer(True, user)
    if s.text is not None and not s.refusal:
        return Said(s.text, s.text, [], "cl100k_base"), obj, system, user
    written = "" if s.refusal or s.truncated else msgspec.json.encode(obj).decode()
    return Said(written, written, [], "cl100k_base"), obj, system, user


def _anthropic_usage(m: ScriptedModel, system: str, user: str, said: Said) -> dict[str, Any]:
    """The usage block, streamed (in message_start, its output then in message_delta) or not."""
    cached = m.cached(system)
    return {
        "input_tokens": count_once("cl100k_base", system + user) - cached,
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
        # nothing written (a refusal, an answer cut before it began): the model still spent some
        "output_tokens": said.count() or 20,
    }


def _anthropic_stop(s: Script) -> str:
    """Why the scripted message stops."""
    return "refusal" if s.refusal else "max_tokens" if s.truncated else "tool_use"


def _anthropic_answer(
    m: ScriptedModel, body: dict[str, Any], said: Said, obj: dict[str, Any], system: str, user: str
) -> Response[bytes]:
    """A message as Anthropic's Messages API answers one (the decision as a tool call), per the script."""
    s = m.script
    content: list[dict[str, Any]] = []
    if s.text is not None and not s.refusal:  # a model that wrote its answer as text instead of the tool call
        content = [{"type": "text", "text": s.text}]
    elif not (s.refusal or s.truncated):
        content = [{"type": "tool_use", "id": "toolu_scripted", "name": "decide", "input": obj}]
    return _json(
        {
            "id": f"msg_scripted_{m.received}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "scripted"),
            "content": content,
            "stop_reason": _anthropic_stop(s),
            "usage": _anthropic_usage(m, system, user, said),
        }
    )


def _anthropic_stream(m: ScriptedModel, body: dict[str, Any], said: Said, system: str, user: str) -> Stream:
    """A message streamed as Anthropic streams one: message_start, the block's start, a delta per token
    (``input_json_delta`` for the tool input, ``text_delta`` for text), its stop, message_delta with the stop
    reason and output tokens, message_stop."""
    s = m.script
    usage = _anthropic_usage(m, system, user, said)
    message: dict[str, Any] = {
        "id": f"msg_scripted_{m.received}",
        "type": "message",
        "role": "assistant",
        "content": [],
    }
    message |= {"model": body.get("model", "scripted"), "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    first = [_sse({"type": "message_start", "message": message}, "message_start")]
    tokens: list[bytes] = []
    tail: list[bytes] = []
    if said.text:
        text = s.text is not None and not s.refusal
        block = {"type": "text", "text": ""} if text else {"type": "tool_use", "id": "toolu_scripted", "name": "decide"}
        start = {"type": "content_block_start", "index": 0, "content_block": block if text else {**block, "input": {}}}
        first.append(_sse(start, "content_block_start"))
        for tok, _ in said.tokens():
            delta = {"type": "text_delta", "text": tok} if text else {"type": "input_json_delta", "partial_json": tok}
            tokens.append(_sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta"))
        tail.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    stop = {"stop_reason": _anthropic_stop(s), "stop_sequence": None}
    finish = {"type": "message_delta", "delta": stop, "usage": {"output_tokens": usage["output_tokens"]}}
    tail.append(_sse(finish, "message_delta"))
    tail.append(_sse({"type": "message_stop"}, "message_stop"))
    return _streamed(m, s, first, tokens, tail)


def _model_routes(m: ScriptedModel) -> list[Any]:
    """What a provider serves: chat completions, Anthropic's messages and the model list."""

    @post("/v1/chat/completions", status_code=200)
    async def chat(request: Request[Any, Any, Any]) -> Response[Any]:
        body = msgspec.json.decode(await request.body())
        early = await _received(m, body) or _openai_refused(m.script, body)
        if early is not None:
            return early
        said, system, user = _openai_said(m, body)
        if body.get("stream"):
            return _openai_stream(m, body, said, system, user)
        await _pace(m.script, said.count())
        return _openai_answer(m, body, said, system, user)

    @post("/v1/messages", status_code=200)
    async def messages(request: Request[Any, Any, Any]) -> Response[Any]:
        body = msgspec.json.decode(await request.body())
        early = await _received(m, body)
        if early is not None:
            return early
        said, obj, system, user = _anthropic_said(m, body)
        if body.get("stream"):
            return _anthropic_stream(m, body, said, system, user)
        await _pace(m.script, said.count())
        return _anthropic_answer(m, body, said, obj, system, user)

    @get("/v1/models")
    async def models() -> Response[bytes]:
        m.models_asked += 1
        listed = {
            "object": "list",
            "data": [{"id": i, "object": "model", "owned_by": "scripted"} for i in m.script.models],
        }
        return _status_error(m.script) or _json(listed)

    return [chat, messages, models]


def _control_routes(m: ScriptedModel) -> list[Any]:
    """What a test drives the server with: its script, and what it received."""

    @put("/_script")
    async def set_script(request: Request[Any, Any, Any]) -> Response[bytes]:
        try:  # the service's own reader: a mistyped field is named by path, with the fields there are
            m.apply(parse(await request.body(), Script))
        except ApiError as e:
            return Response(content=e.body(), status_code=e.status, media_type="application/json")
        return _json(msgspec.to_builtins(m.script))

    @get("/_script")
    async def get_script() -> Response[bytes]:
        return _json(msgspec.to_builtins(m.script))

    @get("/_requests")
    async def get_requests() -> Response[bytes]:
        return _json(list(m.requests))

    @get("/_calls")
    async def get_calls() -> Response[bytes]:
        return _json(m.calls())

    @delete("/_requests", status_code=200)
    async def clear_requests() -> Response[bytes]:
        m.requests.clear()
        return _json({"cleared": True})

    return [set_script, get_script, get_requests, get_calls, clear_requests]


def create_scripted_app(model: ScriptedModel | None = None) -> Litestar:
    """The scripted server as an ASGI app."""
    m = model or ScriptedModel()
    routes = _model_routes(m) + _control_routes(m)
    server_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, QuietCuts) for f in server_log.filters):
        server_log.addFilter(QuietCuts())
    return Litestar(routes, openapi_config=None)


class ScriptedServer(BackgroundServer):
    """The scripted server on a free local port in a background thread (for tests and benches)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.model = ScriptedModel()
        super().__init__(create_scripted_app(self.model), host, port, lifespan="off")

    def __enter__(self) -> ScriptedServer:
        self.start()
        return self

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (…/v1)."""
        return f"{self.url}/v1"

    def set(self, **script: Any) -> None:
        """Set the behaviour (the same fields as PUT /_script)."""
        self.model.apply(msgspec.convert(script, Script))

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Bodies received so far (the newest 1,000)."""
        return list(self.model.requests)
