"""What the trees of a type may split on: its manifest's named fields, encoded as the policy file declares them.

With the manifest, each field is encoded as it declares it (a number rounded to its quantum, a boolean, an enum
as one feature a declared value; strings are free text and left out). Without it, the encodings are read off
the stored decisions themselves. Every row is encoded by the evaluator's own ``Feature.encode``, the code a
game runs, so a tree never learns from a number the game would compute otherwise.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from npcmind.manifest import Manifest
from npcmind.manifest.model import FieldSpec
from npcmind.storage.base import TrainingRow
from npcmind_client.policy import Feature

MAX_ENUM_VALUES = 32  # distinct strings of an undeclared field kept as enum values; beyond, it is free text
# Features a type gets from scope-state fields no manifest declares (a session's own scopes may add 1,024 of 64
# fields): the most widely carried ones (by sessions, then decisions), up to this many features. Every feature is
# a column of every row of the type, so 65,536 of them had made a round 9x slower and 5x bigger (issue 29);
# 8 keep a hostile store's round within 2x of a clean one's (docs/policy.md, bench/distill_bench.py --hostile).
MAX_UNDECLARED_FEATURES = 8


def _declared(source: str, fields: Mapping[str, FieldSpec]) -> list[dict[str, Any]]:
    """The features of declared fields."""
    out: list[dict[str, Any]] = []
    for name, spec in fields.items():
        if spec.type in ("number", "integer"):
            f: dict[str, Any] = {"source": source, "field": name, "encoding": "number"}
            if spec.quantum:
                f["quantum"] = spec.quantum
            out.append(f)
        elif spec.type == "boolean":
            out.append({"source": source, "field": name, "encoding": "boolean"})
        elif spec.type == "enum":
            out += [{"source": source, "field": name, "encoding": "enum", "value": v} for v in spec.values or ()]
    return out


class _Seen:
    """What one undeclared field carried, in bounded memory: its kinds of value, its strings (up to one more than
    an enum keeps), how many decisions and which sessions carried it."""

    def __init__(self) -> None:
        self.kinds: set[str] = set()
        self.strings: set[str] = set()
        self.rows = 0
        self.sessions: set[str | None] = set()

    def add(self, x: Any, rows: int, sessions: set[str | None]) -> None:
        """One value, carried by ``rows`` decisions of these sessions."""
        if isinstance(x, bool):
            self.kinds.add("boolean")
        elif isinstance(x, int | float):
            self.kinds.add("number")
        elif isinstance(x, str):
            self.kinds.add("enum")
            if len(self.strings) <= MAX_ENUM_VALUES:
                self.strings.add(x)
        else:
            self.kinds.add("other")
        self.rows += rows
        self.sessions |= sessions

    def features(self, source: str, name: str) -> list[dict[str, Any]]:
        """Its features (none for free text, mixed kinds, or values that are neither)."""
        if self.kinds == {"boolean"} or self.kinds == {"number"}:
            return [{"source": source, "field": name, "encoding": self.kinds.pop()}]
        if self.kinds == {"enum"} and len(self.strings) <= MAX_ENUM_VALUES:
            return [{"source": source, "field": name, "encoding": "enum", "value": v} for v in sorted(self.strings)]
        return []


def _inferred(
    source: str,
    values: Iterable[Mapping[str, Any] | None],
    sessions: Iterable[str | None] | None = None,
    skip: set[str] | frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    """The features of fields nobody declared to distill: read off the values the decisions carried. With
    ``sessions`` (a session each value), only MAX_UNDECLARED_FEATURES, of the most widely carried fields."""
    groups: dict[int, tuple[Mapping[str, Any], int, set[str | None]]] = {}
    for v, s in zip(values, sessions if sessions is not None else itertools.repeat(None), strict=False):
        if isinstance(v, Mapping):  # the decisions of one request share one object: each is read once
            _, n, ss = groups.get(id(v), (v, 0, set()))
            groups[id(v)] = (v, n + 1, ss | {s})
    seen: dict[str, _Seen] = {}
    for v, n, ss in groups.values():
        for name, x in v.items():
            if name not in skip:
                seen.setdefault(name, _Seen()).add(x, n, ss)
    if sessions is None:
        return [f for name, field in seen.items() for f in field.features(source, name)]
    out: list[dict[str, Any]] = []
    for name in sorted(seen, key=lambda k: (-len(seen[k].sessions), -seen[k].rows, k)):
        found = seen[name].features(source, name)
        if len(out) + len(found) <= MAX_UNDECLARED_FEATURES:
            out += found
    return out


def _named(source: str, names: Iterable[str]) -> list[dict[str, Any]]:
    """One feature a name: a trigger, a profile, a legal action (is it this one? is it allowed?)."""
    return [{"source": source, "encoding": "enum", "value": n} for n in names]


def candidate_features(type_name: str, rows: list[TrainingRow], manifest: Manifest | None) -> list[dict[str, Any]]:
    """Every feature the trees of this type may split on, as policy-file entries."""
    scope_fields = [r.scope_state for r in rows]
    if manifest is not None and type_name in manifest.types:
        t = manifest.types[type_name]
        out = _declared("observation", t.spec.fields) + _declared("world", manifest.file.world.fields)
        declared: dict[str, FieldSpec] = {}
        for scope in manifest.file.scopes.values():
            declared.update(scope.fields)
        out += _declared("scope_state", declared)
        out += _inferred("scope_state", scope_fields, (r.session_id for r in rows), skip=set(declared))
        out += _named("trigger", t.spec.events)
        out += _named("profile", sorted(p for p, spec in manifest.profiles.items() if spec.type in (None, type_name)))
        return out + _named("legal", t.actions)
    out = _inferred("observation", (r.observation for r in rows)) + _inferred("world", (r.world for r in rows))
    out += _inferred("scope_state", scope_fields, (r.session_id for r in rows))
    out += _named("trigger", sorted({r.trigger for r in rows if r.trigger}))
    out += _named("profile", sorted({r.profile for r in rows if r.profile}))
    return out + _named("legal", sorted({a for r in rows for a in r.legal_actions}))


def to_feature(spec: Mapping[str, Any]) -> Feature:
    """A policy-file feature entry as the evaluator reads it."""
    return Feature(
        spec["source"],
        spec.get("field"),
        spec["encoding"],
        spec.get("value"),
        spec.get("quantum"),
        spec.get("missing", 0.0),
    )


def situation(r: TrainingRow) -> dict[str, Any]:
    """A stored decision as the evaluator sees a game's entity."""
    return {
        "observation": r.observation,
        "world": r.world,
        "scope_state": r.scope_state or {},
        "trigger": r.trigger,
        "profile": r.profile,
        "legal": set(r.legal_actions),
    }


def encode(rows: list[TrainingRow], features: list[Feature]) -> Any:
    """The rows as numbers (a float64 array, a row a decision) by the evaluator's own encoding: filled a row at a
    time, so a round holds the array and one row of Python floats, not a list of them all."""
    import numpy as np

    x = np.empty((len(rows), len(features)), dtype=np.float64)
    for i, s in enumerate(map(situation, rows)):
        x[i] = [f.encode(s) for f in features]
    return x
