"""What the trees of a type may split on: its manifest's named fields, encoded as the policy file declares them.

With the manifest, each field is encoded as it declares it (a number rounded to its quantum, a boolean, an enum
as one feature a declared value; strings are free text and left out). Without it, the encodings are read off
the stored decisions themselves. Every row is encoded by the evaluator's own ``Feature.encode``, the code a
game runs, so a tree never learns from a number the game would compute otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from npcmind.manifest import Manifest
from npcmind.manifest.model import FieldSpec
from npcmind.storage.base import TrainingRow
from npcmind_client.policy import Feature

MAX_ENUM_VALUES = 32  # distinct strings of an undeclared field kept as enum values; beyond, it is free text


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


def _inferred(source: str, values: Iterable[Mapping[str, Any] | None]) -> list[dict[str, Any]]:
    """The features of fields nobody declared to distill: read off the values the decisions carried."""
    seen: dict[str, list[Any]] = {}
    for v in values:
        for name, x in (v or {}).items():
            seen.setdefault(name, []).append(x)
    out: list[dict[str, Any]] = []
    for name, xs in seen.items():
        if all(isinstance(x, bool) for x in xs):
            out.append({"source": source, "field": name, "encoding": "boolean"})
        elif all(isinstance(x, int | float) and not isinstance(x, bool) for x in xs):
            out.append({"source": source, "field": name, "encoding": "number"})
        elif all(isinstance(x, str) for x in xs) and len(distinct := sorted(set(xs))) <= MAX_ENUM_VALUES:
            out += [{"source": source, "field": name, "encoding": "enum", "value": v} for v in distinct]
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
        out += _inferred(
            "scope_state", ({k: v for k, v in (s or {}).items() if k not in declared} for s in scope_fields)
        )
        out += _named("trigger", t.spec.events)
        out += _named("profile", sorted(p for p, spec in manifest.profiles.items() if spec.type in (None, type_name)))
        return out + _named("legal", t.actions)
    out = _inferred("observation", (r.observation for r in rows)) + _inferred("world", (r.world for r in rows))
    out += _inferred("scope_state", scope_fields)
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


def encode(rows: list[TrainingRow], features: list[Feature]) -> list[list[float]]:
    """The rows as numbers, one list a row, by the evaluator's own encoding."""
    return [[f.encode(s) for f in features] for s in map(situation, rows)]
