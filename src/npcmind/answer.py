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
from typing import Any, Literal

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


_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
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


def _load(text: str) -> Any:
    text = _FENCE.sub("", _after_thinking(text).strip())
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
    out = from_object(_load(text), mode, entities)
    return _salvage(text, mode, entities) if cut and not out else out


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
    starts: list[int] = []
    pos = 0
    for tok, _ in tokens:
        starts.append(pos)
        pos += len(tok)
    out: dict[int, float] = {}
    for n, off in offsets.items():
        i = bisect.bisect_right(starts, off) - 1
        if 0 <= i < len(tokens) and off < starts[i] + len(tokens[i][0]):
            out[n] = round(math.exp(tokens[i][1]), 4)
    return out
