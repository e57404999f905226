"""The answer format, one leaf that the prompt and every provider share, so neither imports the other.

What the model is told to answer (``INSTRUCTIONS``, ``offered``), the schema that forces a legal choice, and the
tolerant parser with the confidences read from log-probabilities. Two forms. ``numbered`` is one fixed schema (options
are numbered in the prompt's dynamic tail), so a hosted API's prompt cache, which covers the schema, stays
warm. ``enum`` gives each entity its own enum of legal actions, for self-hosted servers that apply the schema
as a grammar while sampling.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Literal

import jiter
import msgspec

AnswerMode = Literal["numbered", "enum"]
DECLINE = "(decline)"

INSTRUCTIONS: dict[AnswerMode, str] = {
    "numbered": 'Answer with JSON only: {"decisions":[{"entity":<entity number>,"choice":<option number>}]}, '
    "one item per question; choice 0 declines to choose.",
    "enum": 'Answer with JSON only: {"E<entity number>":"<option name>"}, one key per question; '
    f'"{DECLINE}" declines to choose.',
}


@dataclass(slots=True)
class Choice:
    """What the model answered for one entity, before the pipeline checks it against legal actions."""

    action: str | None
    refused: bool = False
    confidence: float | None = None


def offered(mode: AnswerMode, options: Sequence[str]) -> str:
    """A question's options as the prompt shows them: numbered from 1 in the form whose answer is a number
    (``parse`` reads choice k as the k-th of them), by name in the other."""
    if mode == "numbered":
        return ", ".join(f"{i} {a}" for i, a in enumerate(options, 1))
    return ", ".join(options)


NUMBERED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decisions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"entity": {"type": "integer"}, "choice": {"type": "integer"}},
                "required": ["entity", "choice"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["decisions"],
    "additionalProperties": False,
}


def schema(mode: AnswerMode, entities: Sequence[tuple[int, list[str]]]) -> dict[str, Any]:
    """The JSON schema the provider must answer in."""
    if mode == "numbered":
        return NUMBERED_SCHEMA
    props = {f"E{n}": {"type": "string", "enum": [*opts, DECLINE]} for n, opts in entities}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


# one complete item of each form, wherever the answer was cut after it
_ITEM = {
    "numbered": re.compile(r'\{\s*"entity"\s*:\s*(\d+)\s*,\s*"choice"\s*:\s*(\d+)\s*\}'),
    "enum": re.compile(r'"E(\d+)"\s*:\s*("(?:[^"\\]|\\.)*")'),
}


def _after_thinking(text: str) -> str:
    """What a reasoning model served without a grammar (Qwen3, DeepSeek-R1) wrote after its thinking: the
    text after the last ``</think>`` (some chat templates drop the opening tag), or nothing while a
    ``<think>`` is still open, cut by the output limit: no brace inside it is an answer."""
    text = text.rsplit("</think>", 1)[-1]
    return "" if "<think>" in text else text


def _unfenced(text: str) -> str:
    r"""The text inside the Markdown fence a model may wrap its JSON in (```json ... ```), in one pass: a regular
    expression with an unanchored ``\s*```$`` rescanned a run of spaces from each of its spaces (a 40 KB answer
    of spaces held the event loop for 2.8 s)."""
    if text.startswith("```"):
        lang = 3
        while lang < len(text) and text[lang] in _LETTERS:
            lang += 1
        text = text[lang:].lstrip()
    if text.endswith("```"):
        text = text[:-3].rstrip()
    return text


_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _load(text: str) -> Any:
    text = _unfenced(_after_thinking(text).strip())
    try:
        return msgspec.json.decode(text)
    except RecursionError:  # brackets nested hundreds deep: a model in a loop wrote no answer
        return None
    except msgspec.DecodeError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            return None
        try:
            return msgspec.json.decode(text[start : end + 1])
        except (msgspec.DecodeError, RecursionError):
            return None


def from_object(obj: Any, mode: AnswerMode, entities: Sequence[tuple[int, list[str]]]) -> dict[int, Choice]:
    """Map a decoded answer to one Choice per entity that it answers; anything unreadable is left out."""
    options = dict(entities)
    out: dict[int, Choice] = {}
    if not isinstance(obj, dict):
        return out
    if mode == "numbered":
        items = obj.get("decisions")
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            n, k = item.get("entity"), item.get("choice")
            if not isinstance(n, int) or n not in options or n in out or not isinstance(k, int):
                continue
            opts = options[n]
            if k == 0:
                out[n] = Choice(None, refused=True)
            else:
                out[n] = Choice(opts[k - 1] if 1 <= k <= len(opts) else f"#{k}")
        return out
    for n in options:
        v = obj.get(f"E{n}")
        if isinstance(v, str):
            out[n] = Choice(None, refused=True) if v == DECLINE else Choice(v)
    return out


def parse(
    text: str, mode: AnswerMode, entities: Sequence[tuple[int, list[str]]], cut: bool = False
) -> dict[int, Choice]:
    """Parse the model's text answer; malformed JSON answers nothing (every entity is invalid_choice), unless
    the answer was ``cut`` at the output limit: then the entities it had finished still count."""
    obj = _load(text)
    out = from_object(obj, mode, entities)
    if mode == "enum" and _may_repeat(text, obj):
        _first_of_twice(text, out, dict(entities))
    return _salvage(text, mode, entities) if cut and not out else out


def _may_repeat(text: str, obj: Any) -> bool:
    """Whether the answer may give a key twice: each of the object's keys beginning with E is written at least
    once as ``"E``, so when the text holds no more ``"E`` than that (and no escape that spells a key otherwise),
    none is given twice and the search for repeats is skipped (most answers: it cost a regular expression pass)."""
    if not isinstance(obj, dict) or "\\u" in text:
        return True
    return text.count('"E') > len([k for k in obj if k.startswith("E")])


def _first_of_twice(text: str, out: dict[int, Choice], options: dict[int, list[str]]) -> None:
    """An entity the answer gives twice keeps its first value, as the streamed reader (which cannot take back a
    line it sent) keeps it: one rule for both. JSON decoding keeps the last; the keys are found in one pass."""
    seen: set[int] = set()
    twice: set[int] = set()
    for m in _ENUM_KEY_AT.finditer(text):
        n = int(m.group(1))
        (twice if n in seen else seen).add(n)
    body = _unfenced(_after_thinking(text).strip()) if twice else ""
    for n in twice & options.keys():
        first = from_object({f"E{n}": _first_value(body, f"E{n}")}, "enum", [(n, options[n])])
        if n in first:
            out[n] = first[n]
        else:  # its first value is no choice: the entity has none, whatever came after
            out.pop(n, None)


def _salvage(text: str, mode: AnswerMode, entities: Sequence[tuple[int, list[str]]]) -> dict[int, Choice]:
    """Each complete item of a cut answer counts, as if the answer had closed after it; the entity being
    written when it stopped, and those after, are left out."""
    found = _ITEM[mode].findall(_after_thinking(text))
    if mode == "numbered":
        return from_object({"decisions": [{"entity": int(n), "choice": int(k)} for n, k in found]}, mode, entities)
    obj: dict[str, Any] = {}
    for n, quoted in found:
        try:
            obj.setdefault(f"E{n}", msgspec.json.decode(quoted))  # the first mention counts, as in parse()
        except msgspec.DecodeError:
            continue
    return from_object(obj, mode, entities)


_ENUM_KEY_AT = re.compile(r'"E(\d+)"\s*:')
_VALUE_AT = {
    "numbered": re.compile(r'"entity"\s*:\s*(\d+)\s*,\s*"choice"\s*:\s*'),
    "enum": re.compile(r'"E(\d+)"\s*:\s*"'),
}


def value_offsets(text: str, mode: AnswerMode, numbers: Sequence[int]) -> dict[int, int]:
    """Where in the answer text each entity's chosen value starts: the token that decides the choice.
    One pass over the answer; the first mention of an entity counts."""
    wanted = set(numbers)
    out: dict[int, int] = {}
    for m in _VALUE_AT[mode].finditer(text):
        n = int(m.group(1))
        if n in wanted and n not in out:
            out[n] = m.end()
    return out


def confidences(
    text: str, tokens: Sequence[tuple[str, float]], mode: AnswerMode, numbers: Sequence[int]
) -> dict[int, float]:
    """The probability of each entity's choice at the token that decides it, from token log-probabilities."""
    offsets = value_offsets(text, mode, numbers)
    if not offsets or not tokens:
        return {}
    starts = list(accumulate([len(tok) for tok, _ in tokens], initial=0))  # where each token begins (and the end)
    return _at_tokens(offsets, tokens, starts)


def _at_tokens(offsets: dict[int, int], tokens: Sequence[tuple[str, float]], starts: list[int]) -> dict[int, float]:
    """The probability of the token that holds each text offset (``starts``: where each token begins)."""
    out: dict[int, float] = {}
    for n, off in offsets.items():
        i = bisect.bisect_right(starts, off) - 1
        if 0 <= i < len(tokens) and off < starts[i] + len(tokens[i][0]):
            out[n] = round(math.exp(tokens[i][1]), 4)
    return out


_OPENING_FENCE = re.compile(r"^```[a-zA-Z]*\s*")
# a delta without one of these cannot complete a part: in the enum form, close a value's string; in the numbered
# form, begin the item that closes the one before, or close the document
READ_ALWAYS = 16 * 1024  # characters of a streamed answer read again at every delta that may close a part
_MAY_CLOSE = {"enum": re.compile('"'), "numbered": re.compile("[{}]")}
_ENUM_KEY = re.compile(r"E(\d+)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')  # one JSON string, closed


class PartialAnswer:
    """An answer read while the model still writes it: each entity's Choice as soon as its part is complete, so
    the pipeline decides that entity at once instead of waiting for the whole batch's answer.

    jiter's partial mode parses the text so far (reparsed per delta: answers are a few hundred characters, and
    only a delta that could close something is parsed). The whole answer is still read by ``parse`` at the end;
    this only says earlier what it will say, entity by entity, and never takes a pick back.
    """

    def __init__(self, mode: AnswerMode, entities: Sequence[tuple[int, list[str]]]) -> None:
        self.mode = mode
        self.entities = list(entities)
        self.text = ""  # the answer so far, as the model wrote it (thinking and fences included)
        self.tokens: list[tuple[str, float]] = []  # its tokens and log-probabilities, when the provider gives them
        self.picked: dict[int, Choice] = {}  # every entity given so far: the first mention counts
        self._options = dict(self.entities)
        self._starts: list[int] = []  # where each token begins in the text
        self._may_close = _MAY_CLOSE[mode]
        self._read_items = 0  # the items (numbered) or keys (enum) already taken: complete, read or skipped
        self._read_at = 0  # the text's length when it was last read

    def _worth_reading(self) -> bool:
        """Whether to read the text again now. Each read parses it whole: an answer within READ_ALWAYS (every
        model's: 16 entities are about 400 characters) is read at every delta that may close a part; a longer
        one only once it has grown by a quarter since the last read, so that reading a stream of any length
        costs a few times its length, never its square (what comes meanwhile is picked at the next read or
        by the whole answer's parse at the end)."""
        return len(self.text) <= READ_ALWAYS or len(self.text) >= self._read_at * 5 // 4

    def feed(self, delta: str | Sequence[str], tokens: Sequence[tuple[str, float]] = ()) -> list[tuple[int, Choice]]:
        """Add what the model wrote next (with its tokens' log-probabilities, if any): the entities whose part
        it completed, in the answer's order. ``delta`` may be several deltas, as one read of the stream brought
        them: read together, once; and only where that fails (malformed text among them), one after another,
        so that the parts complete before it stand, as if each had been fed alone."""
        deltas = [delta] if isinstance(delta, str) else delta
        for tok in tokens:
            self._starts.append(self._starts[-1] + len(self.tokens[-1][0]) if self.tokens else 0)
            self.tokens.append(tok)
        start = len(self.text)
        self.text += "".join(deltas)
        if not self._may_close.search(self.text, start) or not self._worth_reading():
            return []
        self._read_at = len(self.text)
        got = self._read(self.text)
        if got is None:
            got = []
            end = start
            for d in deltas if len(deltas) > 1 and len(self.text) <= READ_ALWAYS else ():
                end += len(d)
                if self._may_close.search(d):
                    for n, c in self._read(self.text[:end]) or ():
                        self.picked[n] = c
                        got.append((n, c))
        if self.tokens and got:
            offsets = value_offsets(self.text, self.mode, [n for n, _ in got])
            for n, p in _at_tokens(offsets, self.tokens, self._starts).items():
                next(c for m, c in got if m == n).confidence = p
        self.picked.update(got)
        return got

    def _read(self, text: str) -> list[tuple[int, Choice]] | None:
        """The entities newly complete in the answer's text so far; None when it is malformed (what was picked
        stands, the rest is parse()'s at the end)."""
        body = self._body(text)
        if body is None:
            return []
        try:
            obj = jiter.from_json(body.encode(), partial_mode="on")  # "on": a string not yet closed is left out
        except ValueError:
            return None
        return self._numbered(obj, body) if self.mode == "numbered" else self._enum(obj, body)

    def _body(self, text: str) -> str | None:
        """The JSON of the answer so far, or None while nothing of it can be read yet: a ``<think>`` still
        open, or text that does not begin as a JSON object (prose, a fence's first backticks)."""
        if "think>" in text:
            text = _after_thinking(text)
        text = _OPENING_FENCE.sub("", text.lstrip())
        return text if text.startswith("{") else None

    def _enum(self, obj: Any, body: str) -> list[tuple[int, Choice]]:
        """``{"E3":"attack",...}``: a value counts once its string is closed (partial mode leaves out the rest,
        so every key it gives is complete, and only the keys past those read before are new). A key written
        twice keeps its first value (jiter keeps the last), as when the deltas came one by one."""
        out: list[tuple[int, Choice]] = []
        if not isinstance(obj, dict):
            return out
        for key in list(obj)[self._read_items :]:
            m = _ENUM_KEY.fullmatch(key)
            n = int(m.group(1)) if m else None
            if n is None or n not in self._options or n in self.picked:
                continue
            value = obj[key] if body.count(f'"{key}"') < 2 else _first_value(body, key)
            if isinstance(value, str):
                out += from_object({key: value}, "enum", [(n, self._options[n])]).items()
        self._read_items = max(self._read_items, len(obj))
        return out

    def _numbered(self, obj: Any, body: str) -> list[tuple[int, Choice]]:
        """``{"decisions":[{"entity":1,"choice":2},...]}``: an item counts only once it is closed. The last item
        read may not be: a number at the end of the text may still grow ("2" -> "23"), and a key may follow. So
        an item counts when a later item has begun, or when the whole document is complete."""
        items = obj.get("decisions") if isinstance(obj, dict) else None
        if not isinstance(items, list):
            return []
        closed = len(items) if _complete(body) else len(items) - 1
        out: list[tuple[int, Choice]] = []
        for item in items[self._read_items : closed]:  # an unreadable item is skipped: parse() leaves it out too
            for n, c in from_object({"decisions": [item]}, "numbered", self.entities).items():
                if n not in self.picked and all(n != m for m, _ in out):
                    out.append((n, c))
        self._read_items = max(self._read_items, closed)
        return out


def _first_value(body: str, key: str) -> Any:
    """The first value written for ``key`` when it is a complete string, else None."""
    at = re.search(rf'"{re.escape(key)}"\s*:\s*', body)
    value = _STRING.match(body, at.end()) if at is not None else None
    if value is None:
        return None
    try:
        return msgspec.json.decode(value.group())
    except msgspec.DecodeError:
        return None


def load_partial(text: str) -> Any:
    """A JSON document however much of it was written (a cut stream's tool input), or None when unreadable."""
    try:
        return jiter.from_json(text.encode(), partial_mode="on")
    except ValueError:
        return None


def _complete(body: str) -> bool:
    """Whether the JSON text is a whole document (a closing fence after it aside)."""
    body = body.rstrip().rstrip("`").rstrip()  # a closing fence, or its first backticks
    if not body.endswith("}"):
        return False
    try:
        jiter.from_json(body.encode(), partial_mode="off")
    except ValueError:
        return False
    return True
