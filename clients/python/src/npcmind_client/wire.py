"""The decide answer as the SDK reads it, checked by hand: the client depends on httpx alone, and an answer
that is not npcmind's (another protocol version, a proxy) must never reach the game."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

from npcmind_client.limits import MAX_STRAY_LINES

Outcome = Literal["done", "failed", "interrupted", "rejected"]
OUTCOMES: tuple[str, ...] = get_args(Outcome)


class Malformed(ValueError):
    """An answer that is not a decide answer of this protocol, and where."""


@dataclass(frozen=True, slots=True)
class AIDecision:
    """A valid model choice, fresh or from the service's decision cache."""

    id: str
    action: str
    label: str
    confidence: float | None
    ttl_ms: int
    decision_id: str
    cached: bool


@dataclass(frozen=True, slots=True)
class FallbackDecision:
    """No choice for this entity: the game runs its native AI."""

    id: str
    code: str
    reason: str
    ttl_ms: int


@dataclass(frozen=True, slots=True)
class DecideAnswer:
    """The body of a 200 to POST /v1/decide."""

    epoch: int
    decisions: list[AIDecision | FallbackDecision]


def _field(d: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = d.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, (int, float))):
        raise Malformed(f"{where}.{key}: expected {getattr(kind, '__name__', 'a number')}, got {value!r:.60}")
    return value


MAX_INTEGER = 2**53 - 1  # the protocol's bound on ttl_ms and the like: a float holds every integer up to it


def _ttl(d: dict[str, Any], where: str) -> int:
    """A decision's ttl_ms: an integer within the protocol's bound (10**400 ms would overflow the clock's sum)."""
    ttl: int = _field(d, "ttl_ms", int, where)
    if not -MAX_INTEGER <= ttl <= MAX_INTEGER:
        raise Malformed(f"{where}.ttl_ms: out of range (at most {MAX_INTEGER:,})")
    return ttl


def _confidence(value: Any, where: str) -> float | None:
    """A confidence as a finite float, or None: an integer of 400 digits is no float (OverflowError)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Malformed(f"{where}.confidence: expected a number or null")
    try:
        x = float(value)
    except OverflowError:
        raise Malformed(f"{where}.confidence: out of range") from None
    if not math.isfinite(x):
        raise Malformed(f"{where}.confidence: out of range")
    return x


def _decision(d: Any, where: str) -> AIDecision | FallbackDecision:
    if not isinstance(d, dict):
        raise Malformed(f"{where}: expected an object")
    source = d.get("source")
    if source == "AI":
        confidence = _confidence(d.get("confidence"), where)
        cached = d.get("cached")
        if not isinstance(cached, bool):
            raise Malformed(f"{where}.cached: expected a boolean")
        return AIDecision(
            _field(d, "id", str, where),
            _field(d, "action", str, where),
            _field(d, "label", str, where),
            confidence,
            _ttl(d, where),
            _field(d, "decision_id", str, where),
            cached,
        )
    if source == "FALLBACK":
        return FallbackDecision(
            _field(d, "id", str, where),
            _field(d, "code", str, where),
            _field(d, "reason", str, where),
            _ttl(d, where),
        )
    raise Malformed(f"{where}.source: expected 'AI' or 'FALLBACK', got {source!r:.60}")


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The last line of a streamed decide answer: the stream came whole (docs/streaming.md)."""

    epoch: int


def read_stream_line(line: str) -> AIDecision | FallbackDecision | StreamEnd:
    """One line of a streamed decide answer: a decision (it has ``source``) or the last line (it has ``a2g``),
    or Malformed naming the first problem."""
    try:
        d = json.loads(line)
    except (ValueError, RecursionError):
        raise Malformed(f"a line is not JSON: {line!r:.60}") from None
    if isinstance(d, dict) and "source" not in d and "a2g" in d:
        _field(d, "a2g", str, "$")
        _field(d, "latency_ms", int, "$")
        return StreamEnd(_field(d, "epoch", int, "$"))
    return _decision(d, "$")


def read_decide_answer(body: Any, asked: int | None = None) -> DecideAnswer:
    """The answer's epoch and decisions, or Malformed naming the first problem; ``asked``: the entities the
    request carried, one decision each, and MAX_STRAY_LINES more at most (ids not asked, repeats): an answer
    with more is refused before any is read (bounded work in the game's tick)."""
    if not isinstance(body, dict):
        raise Malformed("expected an object")
    if "a2g" not in body and isinstance(error := body.get("error"), dict):  # the transport's cap, a proxy's page
        raise Malformed(str(error.get("message") or "an error, with a 200"))
    _field(body, "a2g", str, "$")
    _field(body, "latency_ms", int, "$")
    epoch = _field(body, "epoch", int, "$")
    decisions = _field(body, "decisions", list, "$")
    if asked is not None and len(decisions) > asked + MAX_STRAY_LINES:
        raise Malformed(
            f"$.decisions: {len(decisions):,} decisions for {asked} entities asked (one each, and at most "
            f"{MAX_STRAY_LINES} more: MAX_STRAY_LINES)"
        )
    return DecideAnswer(epoch, [_decision(d, f"decisions[{i}]") for i, d in enumerate(decisions)])
