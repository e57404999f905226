"""Check and render declared field values: the same rules for world, observations, scope state and telemetry."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import msgspec

from npcmind.manifest.model import FieldSpec
from npcmind.protocol.errors import Problem, choices
from npcmind.protocol.numbers import MAX_INTEGER, MAX_NUMBER, number_problem
from npcmind.protocol.validate import not_an_integer, type_name

DEFAULT_STRING_LENGTH = 64
# the line breaks JSON leaves unescaped: a reader that splits lines on them (Python's splitlines, a model that
# learnt them as breaks) would see a game string start a line of its own
_BREAKS = str.maketrans({"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def quote(text: str) -> str:
    """A game-supplied string as prompt text, JSON-quoted, so that it stays data on its own line: JSON escapes
    quotes and control characters, and the three line breaks it leaves are escaped too."""
    out = msgspec.json.encode(text).decode()
    return out if out.isascii() else out.translate(_BREAKS)


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def check_value(value: Any, spec: FieldSpec, path: str, out: list[Problem]) -> None:
    """Append the problems of one value against its field spec."""
    t = spec.type
    if t == "boolean":
        if not isinstance(value, bool):
            out.append(Problem(path, f"must be a boolean, not {type_name(value)}"))
        return
    if t == "string":
        if not isinstance(value, str):
            out.append(Problem(path, f"must be a string, not {type_name(value)}"))
        elif len(value) > (spec.max_length or DEFAULT_STRING_LENGTH):
            out.append(Problem(path, f"is longer than {spec.max_length or DEFAULT_STRING_LENGTH} characters"))
        return
    if t == "enum":
        if not isinstance(value, str) or value not in (spec.values or ()):
            out.append(Problem(path, "must be one of " + ", ".join(spec.values or ())))
        return
    if t == "integer" and not (isinstance(value, int) and not isinstance(value, bool)):
        out.append(Problem(path, f"must be an integer, not {not_an_integer(value)}"))
        return
    if not _num(value):
        out.append(Problem(path, f"must be a number, not {type_name(value)}"))
        return
    said = number_problem(value, t == "integer")  # the protocol's one rule, before the field's own bounds
    if said is not None:
        out.append(Problem(path, said))
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
            out.append(Problem(f"{path}.{name}", f"is not a field of {owner}{choices(name, fields, 'its fields')}"))
    return out


QUANTIZED_KEPT = 4096  # numbers whose quantized text is kept: about 0.6 MB


def fmt_number(v: float) -> str:
    """Compact, deterministic number text: integers without a point, others to 3 decimals."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if float(v).is_integer():
        return str(int(v))
    return repr(round(float(v), 3))


def _decimals(q: float) -> int:
    return max(0, -math.floor(math.log10(q) + 1e-9)) if q < 1 else 0


@lru_cache(maxsize=QUANTIZED_KEPT)
def quantized(value: float, q: float, decimals: int) -> str:
    """A number rounded to its quantum, with a fixed number of decimals and no negative zero. Near the float
    limit (1.7e308 in steps of 0.001) the count of steps, or the steps times the quantum, overflows to inf:
    a number that large is already whole in quanta, as far as a float can tell, so it stays as it is.
    Memoized: a request renders each observed number three times (the entity's own line, its neighbours' view
    of it, the features a policy learns from), and a hit costs a sixth of the formatting (issue 43)."""
    steps = value / q
    rounded = round(steps) * q if -MAX_NUMBER <= steps <= MAX_NUMBER else value
    if not -MAX_NUMBER <= rounded <= MAX_NUMBER:
        rounded = value
    text = f"{rounded:.{decimals}f}" if decimals else str(round(rounded))
    return "0" if text.strip("-0.") == "" else text


def _check_expr(spec: FieldSpec, v: str, i: int, ns: dict[str, Any]) -> str:
    """A Python expression that is true when the value ``v`` passes its field spec (the fast path). The bounds
    hold the protocol's number rule too: comparisons alone, which also fail NaN and infinities."""
    lo, hi = f"_lo{i}", f"_hi{i}"
    limit = MAX_INTEGER if spec.type == "integer" else MAX_NUMBER
    ns[lo] = -limit if spec.min is None else max(spec.min, -limit)
    ns[hi] = limit if spec.max is None else min(spec.max, limit)
    if spec.type == "boolean":
        return f"({v} is True or {v} is False)"
    if spec.type == "string":
        ns[f"_len{i}"] = spec.max_length or DEFAULT_STRING_LENGTH
        return f"(type({v}) is str and len({v}) <= _len{i})"
    if spec.type == "enum":
        ns[f"_in{i}"] = frozenset(spec.values or ())
        return f"(type({v}) is str and {v} in _in{i})"
    if spec.type == "integer":
        return f"(type({v}) is int and {lo} <= {v} <= {hi})"
    return f"((type({v}) is float or type({v}) is int) and {lo} <= {v} <= {hi})"


def _render_expr(spec: FieldSpec, v: str, i: int, ns: dict[str, Any]) -> str:
    """A Python expression that renders the (checked) value ``v`` for the prompt."""
    if spec.type == "boolean":
        return f"('true' if {v} else 'false')"
    if spec.type == "enum":  # values a session may declare: quoted like any string, once, at compile time
        ns[f"_e{i}"] = {value: quote(value) for value in spec.values or ()}
        return f"(_e{i}.get({v}) or _quote({v}))"
    if spec.type == "string":
        return f"_quote({v})"
    if spec.quantum:
        ns[f"_q{i}"], ns[f"_d{i}"] = spec.quantum, _decimals(spec.quantum)
        return f"_quantized({v}, _q{i}, _d{i})"
    return f"_fmt({v})"


def _render_one(spec: FieldSpec) -> Callable[[Any], str]:
    """How one (checked) value of the field renders, as the compiled rendering does."""
    if spec.type == "boolean":
        return lambda v: "true" if v else "false"
    if spec.type in ("enum", "string"):
        return quote
    if spec.quantum:
        q, decimals = spec.quantum, _decimals(spec.quantum)
        return lambda v: quantized(v, q, decimals)
    return fmt_number


class FieldSet:
    """Declared fields made into two plain functions, a check for the common valid case and the prompt
    rendering: they run for every entity of every request. The manifest's are compiled once (a loop of
    per-field closures cost three times as much); a session's scope chains are not, as compiling costs
    about 80 µs a field and more than linear, and a session may post new definitions before every decide."""

    __slots__ = ("_compiled", "_names", "_ok", "_partial", "_quanta", "_render", "fields", "owner")

    def __init__(self, fields: Mapping[str, FieldSpec], owner: str, compiled: bool = True) -> None:
        self.fields = dict(fields)
        self.owner = owner
        self._compiled = compiled
        self._names = frozenset(fields)
        self._partial: dict[frozenset[str], FieldSet] = {}
        self._quanta = [
            (name, spec.quantum, _decimals(spec.quantum), spec.type == "integer")
            for name, spec in self.fields.items()
            if spec.quantum and spec.type in ("number", "integer")
        ]
        if compiled:
            self._ok, self._render = self._compile()
        else:
            self._ok, self._render = self._interpret()

    def _compile(self) -> tuple[Callable[[dict[str, Any]], bool], Callable[[Mapping[str, Any]], str]]:
        ns: dict[str, Any] = {
            "_quote": quote,
            "_quantized": quantized,
            "_fmt": fmt_number,
        }
        checks, parts = ["True"], []
        for i, (name, spec) in enumerate(self.fields.items()):
            # no game-supplied text enters the source: names (a session's scopes may bring any) are constants
            ns[f"_k{i}"], ns[f"_p{i}"] = name, f"{name}="
            checks.append(_check_expr(spec, f"v[_k{i}]", i, ns))
            parts.append(f"{{_p{i}}}{{{_render_expr(spec, f'v[_k{i}]', i, ns)}}}")
        source = f"def ok(v):\n    return {' and '.join(checks)}\ndef render(v):\n    return f{' '.join(parts)!r}\n"
        exec(compile(source, "<fields>", "exec"), ns)  # our own source, built above from constants
        return ns["ok"], ns["render"]

    def _interpret(self) -> tuple[Callable[[dict[str, Any]], bool], Callable[[Mapping[str, Any]], str]]:
        specs = list(self.fields.items())
        renders = [(f"{name}=", name, _render_one(spec)) for name, spec in specs]

        def ok(v: dict[str, Any]) -> bool:
            out: list[Problem] = []
            for name, spec in specs:
                check_value(v[name], spec, "", out)
                if out:
                    return False
            return True

        def render(v: Mapping[str, Any]) -> str:
            return " ".join([prefix + fn(v[name]) for prefix, name, fn in renders])

        return ok, render

    def problems(self, values: Any, path: str) -> list[Problem]:
        """Every problem of an object that must hold exactly these fields."""
        if type(values) is dict and values.keys() == self._names and self._ok(values):
            return []
        return check_fields(values, self.fields, path, self.owner)

    def quantize(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The (checked) values as the decision cache sees them, numbers rounded to their quantum: what a
        distilled policy learns from, so that it generalizes as far as the cache does."""
        out = dict(values)
        for name, q, decimals, integer in self._quanta:
            v = out.get(name)
            if v is not None:
                text = quantized(v, q, decimals)
                out[name] = int(float(text)) if integer else float(text)
        return out

    def render(self, values: Mapping[str, Any]) -> str:
        """`name=value` pairs in the declared order (values already checked)."""
        if values.keys() == self._names:
            return self._render(values)
        present = self._names.intersection(values)  # a part of the fields: rare, compiled once per part
        part = self._partial.get(present)
        if part is None:
            fields = {n: f for n, f in self.fields.items() if n in present}
            part = self._partial[present] = FieldSet(fields, self.owner, self._compiled)
        return part._render(values)
