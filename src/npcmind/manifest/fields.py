"""Check and render declared field values: the same rules for world, observations, scope state and telemetry."""

from __future__ import annotations

import math
from collections.abc import Mapping
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


def render_value(value: Any, spec: FieldSpec | None) -> str:
    """A value as the model sees it; numbers rounded to their quantum, strings quoted so they stay data."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        if spec is not None and spec.quantum:
            q = spec.quantum
            rounded = round(value / q) * q
            d = _decimals(q)
            text = f"{rounded:.{d}f}" if d else str(round(rounded))
            return "0" if text.strip("-0.") == "" else text
        return fmt_number(value)
    if isinstance(value, str):
        if spec is not None and spec.type == "enum":
            return value
        return msgspec.json.encode(value).decode()
    return msgspec.json.encode(value, order="sorted").decode()


def render_fields(values: Mapping[str, Any], fields: Mapping[str, FieldSpec]) -> str:
    """Field values as `name=value` pairs in the manifest's declared order."""
    return " ".join(f"{name}={render_value(values[name], spec)}" for name, spec in fields.items() if name in values)
