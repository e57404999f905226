"""A distilled local policy (docs/policy.md): the game decides what the model would, without asking it.

``npcmind distill`` writes a portable JSON file of small decision trees over the manifest's named fields; this
module evaluates it with the standard library only, so a game ships it with no dependency. A choice is the most
probable legal action, its probability among the legal ones its confidence; a type the file does not cover, or
a situation where no legal action has any probability, gives ``None`` (ask the service). A file distilled for
another manifest version is refused: its fields may mean something else now.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = "npcmind-policy"
FORMAT_VERSION = 1
SOURCES = ("observation", "world", "scope_state", "trigger", "profile", "legal")
ENCODINGS = ("number", "boolean", "enum")


class PolicyError(ValueError):
    """A policy file that cannot be used: malformed, of an unknown format, or for another manifest version."""


@dataclass(frozen=True, slots=True)
class Feature:
    """One input of the trees: a named value of the situation, encoded as a number."""

    source: str
    field: str | None
    encoding: str
    value: str | None
    quantum: float | None
    missing: float

    def encode(self, situation: Mapping[str, Any]) -> float:
        """The number the trees compare for this feature (the encoding is the file's contract: docs/policy.md)."""
        if self.source == "legal":
            return 1.0 if self.value in situation["legal"] else 0.0
        raw = situation[self.source]
        if self.field is not None:
            raw = raw.get(self.field) if isinstance(raw, Mapping) else None
        if raw is None:
            return self.missing
        if self.encoding == "enum":
            return 1.0 if raw == self.value else 0.0
        if self.encoding == "boolean":
            return 1.0 if raw is True else 0.0 if raw is False else self.missing
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
            return self.missing
        if self.quantum:  # as the service's cache key rounds it: half to even, as Python's round
            return round(raw / self.quantum) * self.quantum
        return float(raw)


@dataclass(frozen=True, slots=True)
class Tree:
    """One decision tree in flat arrays: node i splits on ``feature[i]`` (``-1``: a leaf with ``value[i]``)."""

    feature: list[int]
    threshold: list[float]
    left: list[int]
    right: list[int]
    value: list[list[float]]

    def leaf(self, x: list[float]) -> list[float]:
        """The distribution over actions at the leaf this situation falls in (``x <= threshold``: left)."""
        node = 0
        while self.feature[node] >= 0:
            node = self.left[node] if x[self.feature[node]] <= self.threshold[node] else self.right[node]
        return self.value[node]


@dataclass(frozen=True, slots=True)
class TypePolicy:
    """The trees of one entity type, over its features, giving a distribution over its actions."""

    actions: list[str]
    features: list[Feature]
    trees: list[Tree]

    def distribution(self, situation: Mapping[str, Any]) -> list[float]:
        """The mean of the trees' leaf distributions, summed in tree order (both SDKs add in the same order)."""
        x = [f.encode(situation) for f in self.features]
        total = [0.0] * len(self.actions)
        for tree in self.trees:
            for i, p in enumerate(tree.leaf(x)):
                total[i] += p
        return [p / len(self.trees) for p in total]

    def choose(self, situation: Mapping[str, Any]) -> tuple[str, float] | None:
        """Legal-action masking: the most probable of the legal actions (the first in the file's order on a
        tie), and its probability among the legal ones; ``None`` when no legal action has any."""
        legal = situation["legal"]
        best, best_p, total = None, 0.0, 0.0
        for action, p in zip(self.actions, self.distribution(situation), strict=True):
            if action in legal:
                total += p
                if p > best_p:
                    best, best_p = action, p
        if best is None or total <= 0.0:
            return None
        return best, best_p / total


class Policy:
    """A loaded policy file: ``choose()`` for each entity, or ``None`` to ask the service."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.manifest_version: str = _text(data, "manifest_version")
        self.client_id: str | None = data.get("client_id") if isinstance(data.get("client_id"), str) else None
        self.created_at: str | None = data.get("created_at") if isinstance(data.get("created_at"), str) else None
        types = data.get("types")
        if not isinstance(types, Mapping):
            raise PolicyError("policy file: `types` must be an object of entity types")
        self.types: dict[str, TypePolicy] = {name: _type(name, spec) for name, spec in types.items()}

    @classmethod
    def load(cls, source: str | Path | bytes | Mapping[str, Any], manifest_version: str | None = None) -> Policy:
        """A policy from a file path, JSON text or bytes, or a parsed object. With ``manifest_version`` (the
        game's, from GET /v1/manifest), a file distilled for another version is refused (PolicyError)."""
        data: Any = source
        if isinstance(source, bytes):
            data = _json(source.decode("utf-8"), "policy JSON")
        elif isinstance(source, str) and source.lstrip().startswith("{"):
            data = _json(source, "policy JSON")
        elif isinstance(source, str | Path):
            try:
                text = Path(source).read_text(encoding="utf-8")
            except OSError as e:
                raise PolicyError(f"policy file {source}: cannot be read ({e.strerror or e})") from None
            data = _json(text, f"policy file {source}")
        if not isinstance(data, Mapping):
            raise PolicyError("a policy must be a JSON object")
        if data.get("format") != FORMAT or data.get("format_version") != FORMAT_VERSION:
            raise PolicyError(
                f"not a policy file this SDK reads: `format` must be {FORMAT!r} and `format_version` "
                f"{FORMAT_VERSION} (found {data.get('format')!r}, {data.get('format_version')!r})"
            )
        policy = cls(data)
        if manifest_version is not None:
            policy.check(manifest_version)
        return policy

    def check(self, manifest_version: str) -> None:
        """Refuse this policy for a game on another manifest version: its fields may mean something else now."""
        if manifest_version != self.manifest_version:
            raise PolicyError(
                f"this policy was distilled for manifest version {self.manifest_version}, and the game runs "
                f"{manifest_version}: a policy for another manifest version is never used (distill again)"
            )

    def choose(
        self,
        type: str,
        observation: Mapping[str, Any],
        legal_actions: Sequence[str],
        world: Mapping[str, Any] | None = None,
        scope_state: Mapping[str, Any] | None = None,
        trigger: str | None = None,
        profile: str | None = None,
    ) -> tuple[str, float] | None:
        """The most probable legal action and its probability among the legal ones; ``None`` for a type this
        policy does not cover or when no legal action has any probability."""
        tp = self.types.get(type)
        if tp is None:
            return None
        situation = {
            "observation": observation,
            "world": world or {},
            "scope_state": scope_state or {},
            "trigger": trigger,
            "profile": profile,
            "legal": set(legal_actions),
        }
        return tp.choose(situation)

    def __repr__(self) -> str:
        return f"Policy(manifest_version={self.manifest_version!r}, types={sorted(self.types)})"


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise PolicyError(f"{where}: not JSON ({e})") from None


def _text(data: Mapping[str, Any], key: str) -> str:
    v = data.get(key)
    if not isinstance(v, str) or not v:
        raise PolicyError(f"policy file: `{key}` must be a non-empty string")
    return v


def _number(v: Any, path: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise PolicyError(f"policy file: `{path}` must be a finite number")
    return float(v)


def _feature(spec: Any, path: str) -> Feature:
    """One feature entry, checked."""
    if not isinstance(spec, Mapping):
        raise PolicyError(f"policy file: `{path}` must be an object")
    source, encoding = spec.get("source"), spec.get("encoding")
    if source not in SOURCES:
        raise PolicyError(f"policy file: `{path}.source` must be one of {', '.join(SOURCES)}")
    if encoding not in ENCODINGS:
        raise PolicyError(f"policy file: `{path}.encoding` must be one of {', '.join(ENCODINGS)}")
    field = spec.get("field")
    if source in ("observation", "world", "scope_state") and not isinstance(field, str):
        raise PolicyError(f"policy file: `{path}.field` must name a field of the {source}")
    value = spec.get("value")
    if encoding == "enum" and not isinstance(value, str):
        raise PolicyError(f"policy file: `{path}.value` must be the enum value this feature tests")
    quantum = spec.get("quantum")
    q = _number(quantum, f"{path}.quantum") if quantum is not None else None
    if q is not None and q <= 0:
        raise PolicyError(f"policy file: `{path}.quantum` must be above 0")
    missing = _number(spec.get("missing", 0), f"{path}.missing")
    return Feature(str(source), field if isinstance(field, str) else None, str(encoding), value, q, missing)


def _tree(spec: Any, path: str, n_features: int, n_actions: int) -> Tree:
    """One tree, checked whole: a bad index would loop or crash in the game, not here."""
    if not isinstance(spec, Mapping):
        raise PolicyError(f"policy file: `{path}` must be an object")
    arrays: dict[str, list[Any]] = {}
    n = len(spec["feature"]) if isinstance(spec.get("feature"), list) else 0
    for k in ("feature", "threshold", "left", "right", "value"):
        v = spec.get(k)
        if not isinstance(v, list) or len(v) != n or n == 0:
            raise PolicyError(f"policy file: `{path}.{k}` must be a list of one item a node ({n or 'at least 1'})")
        arrays[k] = v
    rows = [row if isinstance(row, list) else [] for row in arrays["value"]]
    tree = Tree(
        [int(_number(f, f"{path}.feature")) for f in arrays["feature"]],
        [_number(t, f"{path}.threshold") for t in arrays["threshold"]],
        [int(_number(i, f"{path}.left")) for i in arrays["left"]],
        [int(_number(i, f"{path}.right")) for i in arrays["right"]],
        [[_number(p, f"{path}.value") for p in row] for row in rows],
    )
    for i in range(n):
        if tree.feature[i] >= n_features:
            raise PolicyError(f"policy file: `{path}.feature[{i}]` is not a feature of the type")
        if tree.feature[i] >= 0 and not (i < tree.left[i] < n and i < tree.right[i] < n):
            raise PolicyError(f"policy file: `{path}` node {i} must point to later nodes of the tree")
        if tree.feature[i] < 0 and len(tree.value[i]) != n_actions:
            raise PolicyError(f"policy file: `{path}.value[{i}]` must hold one probability an action")
    return tree


def _type(name: str, spec: Any) -> TypePolicy:
    """One type's entry, checked."""
    path = f"types.{name}"
    if not isinstance(spec, Mapping):
        raise PolicyError(f"policy file: `{path}` must be an object")
    actions = spec.get("actions")
    if not isinstance(actions, list) or not actions or not all(isinstance(a, str) for a in actions):
        raise PolicyError(f"policy file: `{path}.actions` must be a list of action names")
    features = spec.get("features")
    trees = spec.get("trees")
    if not isinstance(features, list):
        raise PolicyError(f"policy file: `{path}.features` must be a list")
    if not isinstance(trees, list) or not trees:
        raise PolicyError(f"policy file: `{path}.trees` must be a list of at least one tree")
    feats = [_feature(f, f"{path}.features[{i}]") for i, f in enumerate(features)]
    return TypePolicy(
        list(actions), feats, [_tree(t, f"{path}.trees[{i}]", len(feats), len(actions)) for i, t in enumerate(trees)]
    )
