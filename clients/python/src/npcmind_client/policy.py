"""A distilled local policy (docs/policy.md): the game decides what the model would, without asking it.

``npcmind distill`` writes a portable JSON file of small decision trees over the manifest's named fields; this
module evaluates it with the standard library only, so a game ships it with no dependency. A choice is the most
probable legal action, its probability among the legal ones its confidence; a type the file does not cover, or
a situation where no legal action has any probability, gives ``None`` (ask the service). A file distilled for
another manifest version is refused: its fields may mean something else now.

Loading checks the whole file, so that ``choose`` cannot fail or run long in the game: every failure of
``Policy.load`` is a ``PolicyError`` naming the place, and ``choose`` never raises, whatever the situation holds
(a value that is not of its feature's kind is that feature's ``missing``). The limits are in docs/policy.md.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = "npcmind-policy"
FORMAT_VERSION = 1
SOURCES = ("observation", "world", "scope_state", "trigger", "profile", "legal")
ENCODINGS = ("number", "boolean", "enum")
MAX_BYTES = 16 * 1024 * 1024  # distill writes ~60 kB a type: room for hundreds of types, not for a memory bomb
MAX_NESTING = 32  # a policy's JSON nests 7 deep: bounded before parsing, so no parser recursion goes deep
MAX_DEPTH = 64  # distill's trees are at most 12 deep: 64 leaves room for other trainers, bounds a choose's walk
MAX_NODES = 1_000_000  # over all trees of the file: a depth-12 tree has at most 8,191 nodes
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


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
        raw = situation.get(self.source)
        if self.field is not None:
            raw = raw.get(self.field) if isinstance(raw, Mapping) else None
        if raw is None:
            return self.missing
        if self.encoding == "enum":
            return 1.0 if isinstance(raw, str) and raw == self.value else 0.0
        if self.encoding == "boolean":
            return 1.0 if raw is True else 0.0 if raw is False else self.missing
        x = _finite(raw)
        if x is None:
            return self.missing
        if self.quantum:  # as the service's cache key rounds it: half to even, as Python's round
            steps = x / self.quantum  # a huge value over a tiny quantum overflows: not a number to compare
            if not math.isfinite(steps):
                return self.missing
            x = round(steps) * self.quantum
            return x if math.isfinite(x) else self.missing
        return x


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
        nodes = 0
        for name, spec in types.items():  # counted before any tree is built: a huge file fails fast
            for t in spec.get("trees", []) if isinstance(spec, Mapping) and isinstance(spec.get("trees"), list) else []:
                nodes += len(t["feature"]) if isinstance(t, Mapping) and isinstance(t.get("feature"), list) else 0
            if nodes > MAX_NODES:
                raise PolicyError(f"policy file: `types.{name}` brings the trees past {MAX_NODES:,} nodes in all")
        self.types: dict[str, TypePolicy] = {name: _type(name, spec) for name, spec in types.items()}

    @classmethod
    def load(cls, source: str | Path | bytes | Mapping[str, Any], manifest_version: str | None = None) -> Policy:
        """A policy from a file path, JSON text or bytes, or a parsed object. With ``manifest_version`` (the
        game's, from GET /v1/manifest), a file distilled for another version is refused (PolicyError)."""
        data: Any = source
        if isinstance(source, bytes | bytearray):
            data = _json(_utf8(bytes(source), "policy JSON"), "policy JSON")
        elif isinstance(source, str) and source.lstrip().startswith(("{", "[")):
            data = _json(source, "policy JSON")
        elif isinstance(source, str | Path):
            where = f"policy file {str(source)[:200]!r}"
            data = _json(_utf8(_read(source, where), where), where)
        if not isinstance(data, Mapping):
            raise PolicyError("a policy must be a JSON object")
        version = data.get("format_version")
        if data.get("format") != FORMAT or isinstance(version, bool) or version != FORMAT_VERSION:
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
        policy does not cover or when no legal action has any probability. Never raises: a value that is not
        of its feature's kind (a string for a number, NaN, a number too large for the quantum) is missing."""
        tp = self.types.get(type) if isinstance(type, str) else None
        if tp is None:
            return None
        legal = legal_actions if isinstance(legal_actions, list | tuple | set | frozenset) else ()
        situation = {
            "observation": observation,
            "world": world,
            "scope_state": scope_state,
            "trigger": trigger,
            "profile": profile,
            "legal": {a for a in legal if isinstance(a, str)},  # anything else is no action of the file
        }
        return tp.choose(situation)

    def __repr__(self) -> str:
        return f"Policy(manifest_version={self.manifest_version!r}, types={sorted(self.types)})"


def _read(source: str | Path, where: str) -> bytes:
    """The file's bytes, at most MAX_BYTES of them: a path that cannot be opened is one line, not a traceback."""
    try:
        with open(source, "rb") as f:
            return f.read(MAX_BYTES + 1)
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise PolicyError(f"{where}: cannot be read ({reason})") from None


def _utf8(data: bytes, where: str) -> str:
    """The text of a policy: UTF-8 (as JSON is), within the size bound."""
    if len(data) > MAX_BYTES:
        raise PolicyError(f"{where}: larger than {MAX_BYTES:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PolicyError(f"{where}: not UTF-8") from None


def _json(text: str, where: str) -> Any:
    """Parsed JSON, its size and nesting bounded before parsing (a deep nesting would exhaust the recursion)."""
    if len(text) > MAX_BYTES or (3 * len(text) > MAX_BYTES and len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES):
        raise PolicyError(f"{where}: larger than {MAX_BYTES:,} bytes")
    depth = 0
    for m in _BRACKETS.finditer(_STRINGS.sub(lambda s: " " * len(s.group()), text)):
        depth += 1 if m.group() in "[{" else -1
        if depth > MAX_NESTING:
            raise PolicyError(f"{where}: nested deeper than {MAX_NESTING} levels (at character {m.start()})")
    try:
        return json.loads(text, parse_int=_int, parse_constant=_constant)
    except (ValueError, RecursionError) as e:
        raise PolicyError(f"{where}: not JSON ({e})") from None


def _int(digits: str) -> int | float:
    """A JSON integer as JavaScript reads it: beyond 20 digits a float (infinite past the float range), so a
    huge one is refused as a number out of range rather than crashing the conversion."""
    return int(digits) if len(digits) <= 20 else float(digits)


def _constant(name: str) -> Any:
    """NaN and Infinity are not JSON (JavaScript's parser refuses them too)."""
    raise ValueError(f"{name} is not a JSON value")


def _finite(v: Any) -> float | None:
    """A number as a finite float, or None (a boolean, a string, NaN, an infinity, an int past float range)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        x = float(v)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


def _text(data: Mapping[str, Any], key: str) -> str:
    v = data.get(key)
    if not isinstance(v, str) or not v:
        raise PolicyError(f"policy file: `{key}` must be a non-empty string")
    return v


def _number(v: Any, path: str) -> float:
    x = _finite(v)
    if x is None:
        raise PolicyError(f"policy file: `{path}` must be a finite number")
    return x


def _index(v: Any, path: str) -> int:
    x = _number(v, path)
    if not x.is_integer():
        raise PolicyError(f"policy file: `{path}` must be an integer")
    return int(x)


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
        [_index(f, f"{path}.feature[{i}]") for i, f in enumerate(arrays["feature"])],
        [_number(t, f"{path}.threshold[{i}]") for i, t in enumerate(arrays["threshold"])],
        [_index(c, f"{path}.left[{i}]") for i, c in enumerate(arrays["left"])],
        [_index(c, f"{path}.right[{i}]") for i, c in enumerate(arrays["right"])],
        [[_number(p, f"{path}.value[{i}]") for p in row] for i, row in enumerate(rows)],
    )
    depth = [0] * n  # children come after their parent, so one pass in node order sees every parent first
    for i in range(n):
        if tree.feature[i] >= n_features:
            raise PolicyError(f"policy file: `{path}.feature[{i}]` is not a feature of the type")
        if tree.feature[i] >= 0:
            if not (i < tree.left[i] < n and i < tree.right[i] < n):
                raise PolicyError(f"policy file: `{path}` node {i} must point to later nodes of the tree")
            if depth[i] >= MAX_DEPTH:
                raise PolicyError(f"policy file: `{path}` node {i} is deeper than {MAX_DEPTH} levels")
            for child in (tree.left[i], tree.right[i]):
                depth[child] = max(depth[child], depth[i] + 1)
        else:
            _leaf(tree.value[i], f"{path}.value[{i}]", n_actions)
    return tree


def _leaf(row: list[float], path: str, n_actions: int) -> None:
    """A leaf is a distribution: probabilities in [0, 1] (so no sum can overflow) and some probability."""
    if len(row) != n_actions:
        raise PolicyError(f"policy file: `{path}` must hold one probability an action")
    if not all(0.0 <= p <= 1.0 for p in row) or sum(row) <= 0.0:
        raise PolicyError(f"policy file: `{path}` must hold probabilities from 0 to 1, not all 0")


def _type(name: str, spec: Any) -> TypePolicy:
    """One type's entry, checked."""
    path = f"types.{name}"
    if not isinstance(spec, Mapping):
        raise PolicyError(f"policy file: `{path}` must be an object")
    actions = spec.get("actions")
    if not isinstance(actions, list) or not actions or not all(isinstance(a, str) for a in actions):
        raise PolicyError(f"policy file: `{path}.actions` must be a list of action names")
    if len(set(actions)) != len(actions):
        raise PolicyError(f"policy file: `{path}.actions` must not name an action twice")
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
