"""Check and render declared field values: the same rules for world, observations, scope state and telemetry."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from npcmind.manifest.model import FieldSpec
from npcmind.protocol.errors import Problem

DEFAULT_STRING_LENGTH = 64


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def check_value(value: Any, spec: FieldSpec, path: str, out: list[Problem]) -> None:
    """Append the problems of one value against its field spec."""
    t = spec.type
    if t == "boolean":
        if not isinstance(value, bool):
            out.append(Problem(path, "must be a boolean"))
        return
    if t == "string":
        if not isinstance(value, str):
            out.append(Problem(path, "must be a string"))
        elif len(value) > (spec.max_length or DEFAULT_STRING_LENGTH):
            out.append(Problem(path, f"is longer than {spec.max_length or DEFAULT_STRING_LENGTH} characters"))
        return
    if t == "enum":
        if not isinstance(value, str) or value not in (spec.values or ()):
            out.append(Problem(path, "must be one of " + ", ".join(spec.values or ())))
        return
    if t == "integer" and not (isinstance(value, int) and not isinstance(value, bool)):
        out.append(Problem(path, "must be an integer"))
        return
    if not _num(value) or not math.isfinite(value):
        out.append(Problem(path, "must be a finite number"))
        return
    if spec.min is not None and value < spec.min:
        out.append(Problem(path, f"must be at least {fmt_number(spec.min)}"))
    if spec.max is not None and value > spec.max:
        out.append(Problem(path, f"must be at most {fmt_number(spec.max)}"))


def check_fields(values: Any, fields: Mapping[str, FieldSpec], path: str, owner: str) -> list[Problem]:
    """Problems of an object that must hold exactly the declared fields."""
    out: list[Problem] = []
    if not isinstance(values, dict):
        return [Problem(path, "must be an object")]
    for name, spec in fields.items():
        if name in values:
            check_value(values[name], spec, f"{path}.{name}", out)
        else:
            out.append(Problem(f"{path}.{name}", "is required"))
    for name in values:
        if name not in fields:
            out.append(Problem(f"{path}.{name}", f"is not a field of {owner}"))
    return out


def fmt_number(v: float) -> str:
    """Compact, deterministic number text: integers without a point, others to 3 decimals."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if float(v).is_integer():
        return str(int(v))
    return repr(round(float(v), 3))


def _decimals(q: float) -> int:
    return max(0, -math.floor(math.log10(q) + 1e-9)) if q < 1 else 0


def quantized(value: float, q: float, decimals: int) -> str:
    """A number rounded to its quantum, with a fixed number of decimals and no negative zero."""
    rounded = round(value / q) * q
    text = f"{rounded:.{decimals}f}" if decimals else str(round(rounded))
    return "0" if text.strip("-0.") == "" else text


def _checker(spec: FieldSpec) -> Callable[[Any], bool]:
    """A fast yes/no test of one value; the slow path explains a no."""
    lo = -math.inf if spec.min is None else spec.min
    hi = math.inf if spec.max is None else spec.max
    if spec.type == "boolean":
        return lambda v: v is True or v is False
    if spec.type == "string":
        limit = spec.max_length or DEFAULT_STRING_LENGTH
        return lambda v: type(v) is str and len(v) <= limit
    if spec.type == "enum":
        allowed = frozenset(spec.values or ())
        return lambda v: type(v) is str and v in allowed
    if spec.type == "integer":
        return lambda v: type(v) is int and lo <= v <= hi
    return lambda v: (type(v) is float or type(v) is int) and lo <= v <= hi and math.isfinite(v)


def _renderer(spec: FieldSpec) -> Callable[[Any], str]:
    """A renderer for one field, with its quantum and format fixed once."""
    if spec.type == "boolean":
        return lambda v: "true" if v else "false"
    if spec.type == "enum":
        return str
    if spec.type == "string":
        return lambda v: msgspec.json.encode(v).decode()
    if spec.quantum:
        q, d = spec.quantum, _decimals(spec.quantum)
        return lambda v: quantized(v, q, d)
    return fmt_number


class FieldSet:
    """Declared fields compiled once: a fast check for the common valid case, and the prompt rendering."""

    __slots__ = ("_checks", "_names", "_renders", "fields", "owner")

    def __init__(self, fields: Mapping[str, FieldSpec], owner: str) -> None:
        self.fields = dict(fields)
        self.owner = owner
        self._names = frozenset(fields)
        self._checks = [(n, _checker(f)) for n, f in fields.items()]
        self._renders = [(n, _renderer(f)) for n, f in fields.items()]

    def problems(self, values: Any, path: str) -> list[Problem]:
        """Every problem of an object that must hold exactly these fields."""
        if type(values) is dict and values.keys() == self._names and all(ok(values[n]) for n, ok in self._checks):
            return []
        return check_fields(values, self.fields, path, self.owner)

    def render(self, values: Mapping[str, Any]) -> str:
        """`name=value` pairs in the declared order (values already checked)."""
        return " ".join(f"{n}={r(values[n])}" for n, r in self._renders if n in values)
