"""Collect every shape problem of a decoded JSON value by path, so a 422 lists them all at once.

msgspec stops at the first error; a game developer wants the whole list. The walker below reads
the same msgspec Struct definitions that decode the happy path, so the wire types stay the one
place that defines a shape.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import msgspec
from msgspec import inspect as mi

from npcmind.protocol.errors import Problem, choices
from npcmind.protocol.numbers import number_problem

T = TypeVar("T")

_MAX_PROBLEMS = 100


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def not_an_integer(value: Any) -> str:
    """What a value given for an integer is: 2.0 is a number to a JSON reader, and a game engine that keeps every
    number a float (GDScript, Lua, JavaScript's JSON of a double) writes it so; the message says the fix."""
    if isinstance(value, float) and value.is_integer():
        return f"{value!r}: send a whole number without a decimal point (an int, not a float)"
    return type_name(value)


def type_name(value: Any) -> str:
    """A JSON value's kind as the game developer wrote it, for "must be a number, not string"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _bare(t: mi.Type) -> mi.Type:
    """The type under a field's documentation (a description wraps it in Metadata)."""
    return t.type if isinstance(t, mi.Metadata) else t


def _expected(t: mi.Type) -> str:
    if isinstance(t, mi.Metadata) and "shape" in (t.extra or {}):  # the field's own words for its form
        return str(t.extra["shape"])  # type: ignore[index]
    t = _bare(t)
    names = {
        mi.IntType: "an integer",
        mi.FloatType: "a number",
        mi.StrType: "a string",
        mi.BoolType: "a boolean",
        mi.NoneType: "null",
        mi.ListType: "an array",
        mi.DictType: "an object",
        mi.StructType: "an object",
    }
    if isinstance(t, mi.UnionType):
        return " or ".join(_expected(x) for x in t.types)
    if isinstance(t, mi.LiteralType):
        return "one of " + ", ".join(repr(v) for v in t.values)
    return names.get(type(t), "a value")


def _bounds(value: float, t: mi.IntType | mi.FloatType, path: str, out: list[Problem]) -> None:
    if t.ge is not None and value < t.ge:
        out.append(Problem(path, f"must be at least {t.ge}"))
    if t.gt is not None and value <= t.gt:
        out.append(Problem(path, f"must be greater than {t.gt}"))
    if t.le is not None and value > t.le:
        out.append(Problem(path, f"must be at most {t.le}"))
    if t.lt is not None and value >= t.lt:
        out.append(Problem(path, f"must be less than {t.lt}"))


def _length(n: int, t: Any, path: str, what: str, out: list[Problem]) -> None:
    if t.min_length is not None and n < t.min_length:
        out.append(Problem(path, "must not be empty" if t.min_length == 1 else f"needs at least {t.min_length} {what}"))
    if t.max_length is not None and n > t.max_length:
        out.append(Problem(path, f"has {n} {what}, at most {t.max_length} allowed"))


def _matches(value: Any, t: mi.Type) -> bool:
    """Whether value has the JSON kind of t (for choosing a union member)."""
    t = _bare(t)
    if isinstance(t, mi.AnyType):
        return True
    if isinstance(t, mi.NoneType):
        return value is None
    if isinstance(t, mi.BoolType):
        return isinstance(value, bool)
    if isinstance(t, mi.IntType):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(t, mi.FloatType):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(t, mi.StrType | mi.LiteralType):
        return isinstance(value, str)
    if isinstance(t, mi.ListType):
        return isinstance(value, list)
    if isinstance(t, mi.DictType | mi.StructType):
        return isinstance(value, dict)
    return False


def _walk(value: Any, t: mi.Type, path: str, out: list[Problem]) -> None:
    if len(out) >= _MAX_PROBLEMS:
        return
    said = t  # with its metadata: a field may name its form in the game developer's terms
    t = _bare(t)
    if isinstance(t, mi.AnyType):
        return
    if isinstance(t, mi.UnionType):
        for member in t.types:
            if _matches(value, member):
                _walk(value, member, path, out)
                return
        out.append(Problem(path, f"must be {_expected(said)}, not {type_name(value)}"))
        return
    if not _matches(value, t):
        found = not_an_integer(value) if isinstance(t, mi.IntType) else type_name(value)
        out.append(Problem(path, f"must be {_expected(said)}, not {found}"))
        return
    if isinstance(t, mi.IntType | mi.FloatType):
        said_rule = number_problem(value, isinstance(t, mi.IntType))  # the one rule before the field's own bounds
        if said_rule is not None:
            out.append(Problem(path, said_rule))
            return
        _bounds(value, t, path, out)
    elif isinstance(t, mi.StrType):
        _length(len(value), t, path, "characters", out)
        if t.pattern is not None and not re.search(t.pattern, value):
            shaped = isinstance(said, mi.Metadata) and "shape" in (said.extra or {})  # the rule in words
            out.append(Problem(path, f"must be {_expected(said)}" if shaped else f"must match {t.pattern}"))
    elif isinstance(t, mi.LiteralType):
        if value not in t.values:
            out.append(Problem(path, f"must be {_expected(t)}, not {value!r}"))
    elif isinstance(t, mi.ListType):
        _length(len(value), t, path, "items", out)
        for i, item in enumerate(value):
            _walk(item, t.item_type, _join(path, i), out)
    elif isinstance(t, mi.DictType):
        _length(len(value), t, path, "entries", out)
        for k, v in value.items():
            _walk(k, t.key_type, _join(path, k), out)
            _walk(v, t.value_type, _join(path, k), out)
    elif isinstance(t, mi.StructType):
        known = {f.encode_name: f for f in t.fields}
        for f in t.fields:
            if f.encode_name in value:
                _walk(value[f.encode_name], f.type, _join(path, f.encode_name), out)
            elif f.required:
                out.append(Problem(_join(path, f.encode_name), "is required"))
        if t.forbid_unknown_fields:
            for k in value:
                if k not in known:
                    out.append(Problem(_join(path, k), "is not a known field" + choices(str(k), known, "fields")))


def problems(value: Any, typ: type) -> list[Problem]:
    """Every shape problem of ``value`` against the msgspec type ``typ``, by path."""
    out: list[Problem] = []
    _walk(value, mi.type_info(typ), "", out)
    return out


def _problem_of(e: msgspec.ValidationError) -> Problem:
    """msgspec's one error (`Expected int, got str - at `$.a[0]``) as a Problem with our path form."""
    message, _, where = str(e).partition(" - at `$")
    return Problem(where.rstrip("`").lstrip("."), message[:1].lower() + message[1:])


def well_shaped(items: Any, typ: type[T]) -> list[tuple[int, T]]:
    """The items of a JSON list that are well-shaped ``typ`` on their own, with their indices."""
    out: list[tuple[int, T]] = []
    if isinstance(items, list):
        for i, item in enumerate(items[:_MAX_PROBLEMS]):
            try:
                out.append((i, msgspec.convert(item, typ, strict=True)))
            except msgspec.ValidationError:
                continue
    return out


TOO_DEEP = (
    "arrays or objects nested too deep to read (hundreds of levels); no field of the protocol needs more than a few"
)


def decode_json(body: bytes) -> Any:
    """Decode JSON, or raise a 400 that says where it broke."""
    from npcmind.protocol.errors import ApiError

    try:
        return msgspec.json.decode(body)
    except msgspec.ValidationError as e:  # well-formed, but a number no float can hold (1e999): by its full path
        raise ApiError.invalid(_anywhere_out_of_range(body) or [_problem_of(e)]) from None
    except RecursionError:
        raise ApiError.invalid([Problem("", TOO_DEEP)]) from None
    except msgspec.DecodeError as e:
        raise ApiError(400, "malformed_json", f"body is not valid JSON: {e}") from None


def convert(value: Any, typ: type[T], at: str = "") -> T:
    """Check ``value`` (found at path ``at``) against ``typ`` and build it, or raise a 422 listing every problem:
    its shape, and numbers no float holds anywhere in it, free-form objects (an NPC's state) included."""
    from npcmind.protocol.errors import ApiError

    huge = _huge_in(value)
    try:
        built = msgspec.convert(value, typ, strict=True)
    except msgspec.ValidationError as e:
        try:
            found = problems(value, typ)
        except RecursionError:  # a value nested hundreds deep: msgspec's one problem names it
            found = []
        if not found and not huge:  # the walker missed something msgspec saw: never hide it
            found = [_problem_of(e)]
    else:
        if not huge:
            return built
        found = []
    said = {p.path for p in found}
    found += [p for p in huge if p.path not in said]
    if at:
        found = [
            Problem(f"{at}.{p.path}" if p.path and not p.path.startswith("[") else at + p.path, p.message)
            for p in found
        ]
    raise ApiError.invalid(found) from None


def _walk_numbers(value: Any, path: str, out: list[Problem]) -> None:
    """Numbers no float holds (1e999, or an integer of 400 digits) anywhere in a decoded value, free-form fields
    included. (The walker judges integers where the protocol wants one; here a number must be one a float holds.)"""
    if len(out) >= _MAX_PROBLEMS:
        return
    if isinstance(value, int | float):
        said = number_problem(value, integer=False)
        if said is not None:
            out.append(Problem(path, said))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _walk_numbers(item, _join(path, i), out)
    elif isinstance(value, dict):
        for k, v in value.items():
            _walk_numbers(v, _join(path, k), out)


def _huge_in(value: Any) -> list[Problem]:
    """Every number of a value that no float holds, by path; none for a value nested too deep to walk (its
    shape problem names it)."""
    out: list[Problem] = []
    try:
        _walk_numbers(value, "", out)
    except RecursionError:
        return []
    return out


def decode_loosely(body: bytes) -> Any:
    """A body's JSON for listing its manifest problems, even with a number no float holds (1e999, which msgspec
    refuses and the standard library reads as infinity): the shape error names that number, and the rest of the
    body's problems come in the same 422 instead of a second one."""
    try:
        return msgspec.json.decode(body)
    except msgspec.ValidationError:
        return json.loads(body)


def _out_of_range(body: bytes, typ: type) -> list[Problem]:
    """Every problem of a body with a number msgspec cannot hold (1e999), each at its full path, where
    msgspec's own error stops at a dict (`observation[...]`). The standard library reads it as infinity."""
    try:
        raw = json.loads(body)
        huge = _huge_in(raw)
        at = {p.path for p in huge}
        return huge + [p for p in problems(raw, typ) if p.path not in at]
    except (ValueError, RecursionError):
        return []


def _anywhere_out_of_range(body: bytes) -> list[Problem]:
    """The numbers no float holds in a body msgspec refused for one (the standard library reads 1e999 as inf)."""
    try:
        return _huge_in(json.loads(body))
    except (ValueError, RecursionError):
        return []


def parse(body: bytes, typ: type[T]) -> T:
    """Decode a JSON body straight into ``typ`` on the fast path; list every problem otherwise."""
    from npcmind.protocol.errors import ApiError

    try:
        return msgspec.json.decode(body, type=typ, strict=True)
    except msgspec.ValidationError as typed_error:
        try:
            raw = msgspec.json.decode(body)
        except msgspec.ValidationError:  # a number out of range (1e999): msgspec's path stops at a dict
            raise ApiError.invalid(_out_of_range(body, typ) or [_problem_of(typed_error)]) from None
        except RecursionError:  # nesting too deep to walk: the typed error names the field
            raise ApiError.invalid([_problem_of(typed_error)]) from None
        except msgspec.DecodeError:
            decode_json(body)
            raise
        return convert(raw, typ)
    except msgspec.DecodeError:
        decode_json(body)  # raises the 400
        raise
    except RecursionError:  # valid JSON, but arrays or objects nested too deep for the decoder, in free-form data
        raise ApiError.invalid([Problem("", TOO_DEEP)]) from None
