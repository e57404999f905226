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

import itertools
import json
import math
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as _field
from pathlib import Path
from typing import Any

try:  # the SDK's error root; this file copied into a game alone has none beside it, and imports nothing
    from npcmind_client.errors import NpcMindError as _Root
except ImportError:  # pragma: no cover - run by test_policy's copy of this file alone

    class _Root(Exception):  # type: ignore[no-redef]
        """The root a copied policy.py gives its PolicyError: the same ``status`` and ``code``, both None."""

        status: int | None = None
        code: str | None = None


FORMAT = "npcmind-policy"
FORMAT_VERSION = 1
SOURCES = ("observation", "world", "scope_state", "trigger", "profile", "legal")
ENCODINGS = ("number", "boolean", "enum")
MAX_BYTES = 16 * 1024 * 1024  # distill writes ~60 kB a type: room for hundreds of types, not for a memory bomb
MAX_NESTING = 32  # a policy's JSON nests 7 deep: bounded before parsing, so no parser recursion goes deep
MAX_DEPTH = 64  # distill's trees are at most 12 deep: 64 leaves room for other trainers, bounds a choose's walk
MAX_NODES = 1_000_000  # over all trees of the file: a depth-12 tree has at most 8,191 nodes
# What one file may hold (docs/policy.md): a choose walks one type's trees and sums their leaves over the legal
# actions, so these bound its work (trees x depth, trees x actions) whatever the file; the manifest allows 64
# types of 32 actions and 64 fields each, and distill writes one tree a type.
MAX_TYPES = 256
MAX_TREES = 32  # a type
MAX_ACTIONS = 256  # a type
MAX_FEATURES = 4096  # a type (an enum field is a feature a value)
# What is not a bracket of the JSON's structure: text between brackets, and whole strings (an escape is two
# characters; an unterminated string runs to the end). Possessive quantifiers never give back what they took,
# and a string always matches from its quote, so the engine reads each character once: linear in the text
# (a string pattern that could fail at an unterminated quote was tried again from every later quote: quadratic).
_NOT_BRACKETS = re.compile(r'(?:[^"\[\]{}]++|"[^"\\]*+(?:\\.[^"\\]*+)*+"?)++', re.S)
_UP_TO_BRACKET = re.compile(r'(?:[^"\[\]{}]++|"[^"\\]*+(?:\\.[^"\\]*+)*+"?)*+([\[\]{}])', re.S)
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class PolicyError(_Root, ValueError):
    """A policy file that cannot be used: malformed, of an unknown format, or for another manifest version
    (no status: a file, or a 200 whose body cannot be used)."""


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
    index: dict[str, int] = _field(init=False, repr=False, compare=False)  # an action's place, made once at load

    def __post_init__(self) -> None:
        object.__setattr__(self, "index", {a: i for i, a in enumerate(self.actions)})

    def distribution(self, situation: Mapping[str, Any]) -> list[float]:
        """The mean of the trees' leaf distributions over every action (summed in tree order)."""
        return self._mean(situation, list(range(len(self.actions))))

    def choose(self, situation: Mapping[str, Any]) -> tuple[str, float] | None:
        """Legal-action masking: the most probable of the legal actions (the first in the file's order on a
        tie), and its probability among the legal ones; ``None`` when no legal action has any. Work: the
        nodes walked in this type's trees and their leaves' legal actions, never the rest of the file."""
        legal = situation["legal"]
        if len(legal) < len(self.actions):  # the fewer of the legal ones and the type's actions are looked up
            places = sorted(i for a in legal if (i := self.index.get(a)) is not None)
        else:
            places = [i for i, a in enumerate(self.actions) if a in legal]
        best, best_p, total = -1, 0.0, 0.0
        for i, p in zip(places, self._mean(situation, places), strict=True):
            total += p
            if p > best_p:
                best, best_p = i, p
        if best < 0 or total <= 0.0:
            return None
        return self.actions[best], best_p / total

    def _mean(self, situation: Mapping[str, Any], places: list[int]) -> list[float]:
        """The trees' mean probability of the actions at ``places``, each summed in tree order (as both SDKs
        add); a feature is encoded when a walk first reaches it, at most once."""
        x: dict[int, float] = {}
        sums = [0.0] * len(places)
        for tree in self.trees:
            node = 0
            while (f := tree.feature[node]) >= 0:
                v = x.get(f)
                if v is None:
                    v = x[f] = self.features[f].encode(situation)
                node = tree.left[node] if v <= tree.threshold[node] else tree.right[node]
            row = tree.value[node]
            sums = [t + row[i] for t, i in zip(sums, places, strict=True)]
        return [t / len(self.trees) for t in sums]


class Policy:
    """A loaded policy file: ``choose()`` for each entity, or ``None`` to ask the service."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.manifest_version: str = _text(data, "manifest_version")
        self.client_id: str | None = data.get("client_id") if isinstance(data.get("client_id"), str) else None
        self.created_at: str | None = data.get("created_at") if isinstance(data.get("created_at"), str) else None
        types = data.get("types")
        if not isinstance(types, Mapping):
            raise PolicyError("policy file: `types` must be an object of entity types")
        _count(types)
        self.types: dict[str, TypePolicy] = {name: _type(name, spec) for name, spec in types.items()}

    @classmethod
    def load(
        cls,
        source: str | Path | bytes | Mapping[str, Any],
        *,
        manifest_version: str | None = None,
        max_bytes: int = MAX_BYTES,
    ) -> Policy:
        """A policy from a file path, JSON text or bytes, or a parsed object. With ``manifest_version`` (the
        game's, from GET /v1/manifest), a file distilled for another version is refused (PolicyError).
        ``max_bytes``: the largest text read (UTF-8 bytes; 16 MiB unless a game needs another bound)."""
        data: Any = source
        if isinstance(source, bytes | bytearray):
            data = _json(_utf8(bytes(source), "policy JSON", max_bytes), "policy JSON", max_bytes)
        elif isinstance(source, str) and source.lstrip().startswith(("{", "[")):
            data = _json(source, "policy JSON", max_bytes)
        elif isinstance(source, str | Path):
            where = f"policy file {str(source)[:200]!r}"
            data = _json(_utf8(_read(source, where, max_bytes), where, max_bytes), where, max_bytes)
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


def _count(types: Mapping[str, Any]) -> None:
    """The file's size in types, trees and nodes, counted before any tree is built: a huge file fails fast."""
    if len(types) > MAX_TYPES:
        raise PolicyError(f"policy file: `types` holds {len(types):,} types: at most {MAX_TYPES:,}")
    nodes = 0
    for name, spec in types.items():
        trees = spec.get("trees") if isinstance(spec, Mapping) else None
        if isinstance(trees, list) and len(trees) > MAX_TREES:
            raise PolicyError(
                f"policy file: `types.{name}.trees` holds {len(trees):,} trees: at most {MAX_TREES} a type"
            )
        for t in trees if isinstance(trees, list) else []:
            nodes += len(t["feature"]) if isinstance(t, Mapping) and isinstance(t.get("feature"), list) else 0
        if nodes > MAX_NODES:
            raise PolicyError(f"policy file: `types.{name}` brings the trees past {MAX_NODES:,} nodes in all")


def _read(source: str | Path, where: str, max_bytes: int) -> bytes:
    """The file's bytes, at most one past the bound: a path that cannot be opened is one line, not a traceback."""
    try:
        with open(source, "rb") as f:
            return f.read(max_bytes + 1)
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise PolicyError(f"{where}: cannot be read ({reason})") from None


def _utf8(data: bytes, where: str, max_bytes: int) -> str:
    """The text of a policy: UTF-8 (as JSON is), within the size bound."""
    if len(data) > max_bytes:
        raise PolicyError(f"{where}: larger than {max_bytes:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PolicyError(f"{where}: not UTF-8") from None


def _json(text: str, where: str, max_bytes: int) -> Any:
    """Parsed JSON, its size and nesting bounded before parsing (a deep nesting would exhaust the recursion)."""
    if len(text) > max_bytes or (3 * len(text) > max_bytes and len(text.encode("utf-8", "surrogatepass")) > max_bytes):
        raise PolicyError(f"{where}: larger than {max_bytes:,} bytes")
    at = _too_deep(text)
    if at is not None:
        raise PolicyError(f"{where}: nested deeper than {MAX_NESTING} levels (at character {at})")
    try:
        return json.loads(text, parse_int=_int, parse_constant=_constant)
    except (ValueError, RecursionError) as e:
        raise PolicyError(f"{where}: not JSON ({e})") from None


def _too_deep(text: str) -> int | None:
    """Where the JSON first nests deeper than MAX_NESTING (outside strings), or None: in linear time, each step
    in C (a Python loop a bracket took seconds on 16 MiB of brackets)."""
    brackets = _NOT_BRACKETS.sub("", text)  # the structure's brackets only, in order
    try:  # depth goes up one at a time, so the first too deep is exactly MAX_NESTING + 1
        k = operator.indexOf(itertools.accumulate(map(_STEP.__getitem__, brackets)), MAX_NESTING + 1)
    except ValueError:
        return None
    return next(itertools.islice(_UP_TO_BRACKET.finditer(text), k, None)).start(1)  # the k-th bracket's place


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


def _numbers(values: list[Any], path: str, key: str, integer: bool = False) -> list[Any]:
    """A tree's array of numbers, checked; the place is written only into a message (a long type name copied
    into a path for every node would cost the name's length times the nodes)."""
    out: list[Any] = []
    for i, v in enumerate(values):
        x = _finite(v)
        if x is None:
            raise PolicyError(f"policy file: `{path}.{key}[{i}]` must be a finite number")
        if integer:
            if not x.is_integer():
                raise PolicyError(f"policy file: `{path}.{key}[{i}]` must be an integer")
            out.append(int(x))
        else:
            out.append(x)
    return out


def _feature(spec: Any, where: str, i: int) -> Feature:
    """One feature entry, checked (``where``: its type's path, the place written only on failure)."""
    if not isinstance(spec, Mapping):
        raise PolicyError(f"policy file: `{where}.features[{i}]` must be an object")
    source, encoding = spec.get("source"), spec.get("encoding")
    if source not in SOURCES:
        raise PolicyError(f"policy file: `{where}.features[{i}].source` must be one of {', '.join(SOURCES)}")
    if encoding not in ENCODINGS:
        raise PolicyError(f"policy file: `{where}.features[{i}].encoding` must be one of {', '.join(ENCODINGS)}")
    field = spec.get("field")
    if source in ("observation", "world", "scope_state") and not isinstance(field, str):
        raise PolicyError(f"policy file: `{where}.features[{i}].field` must name a field of the {source}")
    value = spec.get("value")
    if encoding == "enum" and not isinstance(value, str):
        raise PolicyError(f"policy file: `{where}.features[{i}].value` must be the enum value this feature tests")
    quantum = spec.get("quantum")
    q = _number(quantum, f"{where}.features[{i}].quantum") if quantum is not None else None
    if q is not None and q <= 0:
        raise PolicyError(f"policy file: `{where}.features[{i}].quantum` must be above 0")
    missing = spec.get("missing", 0)
    m = _finite(missing)
    if m is None:
        raise PolicyError(f"policy file: `{where}.features[{i}].missing` must be a finite number")
    return Feature(str(source), field if isinstance(field, str) else None, str(encoding), value, q, m)


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
        _numbers(arrays["feature"], path, "feature", integer=True),
        _numbers(arrays["threshold"], path, "threshold"),
        _numbers(arrays["left"], path, "left", integer=True),
        _numbers(arrays["right"], path, "right", integer=True),
        [_row(row, path, i) for i, row in enumerate(rows)],
    )
    _shape(tree, path, n_features, n_actions)
    return tree


def _row(row: list[Any], path: str, i: int) -> list[float]:
    """One node's row of probabilities as floats (each a finite number; checked as a leaf by ``_shape``)."""
    out = [_finite(p) for p in row]
    if None in out:
        raise PolicyError(f"policy file: `{path}.value[{i}]` must be a finite number")
    return out  # type: ignore[return-value]


def _shape(tree: Tree, path: str, n_features: int, n_actions: int) -> None:
    """Indices within the tree, children after their parent, depth within MAX_DEPTH, leaves distributions."""
    n = len(tree.feature)
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
            row = tree.value[i]
            if len(row) != n_actions:
                raise PolicyError(f"policy file: `{path}.value[{i}]` must hold one probability an action")
            if not all(0.0 <= p <= 1.0 for p in row) or sum(row) <= 0.0:
                raise PolicyError(f"policy file: `{path}.value[{i}]` must hold probabilities from 0 to 1, not all 0")


def _type(name: str, spec: Any) -> TypePolicy:
    """One type's entry, checked."""
    path = f"types.{name}"
    if not isinstance(spec, Mapping):
        raise PolicyError(f"policy file: `{path}` must be an object")
    actions = spec.get("actions")
    if not isinstance(actions, list) or not actions or not all(isinstance(a, str) for a in actions):
        raise PolicyError(f"policy file: `{path}.actions` must be a list of action names")
    if len(actions) > MAX_ACTIONS:
        raise PolicyError(f"policy file: `{path}.actions` names {len(actions):,} actions: at most {MAX_ACTIONS} a type")
    if len(set(actions)) != len(actions):
        raise PolicyError(f"policy file: `{path}.actions` must not name an action twice")
    features = spec.get("features")
    trees = spec.get("trees")
    if not isinstance(features, list):
        raise PolicyError(f"policy file: `{path}.features` must be a list")
    if len(features) > MAX_FEATURES:
        raise PolicyError(
            f"policy file: `{path}.features` holds {len(features):,} features: at most {MAX_FEATURES:,} a type"
        )
    if not isinstance(trees, list) or not trees:
        raise PolicyError(f"policy file: `{path}.trees` must be a list of at least one tree")
    feats = [_feature(f, path, i) for i, f in enumerate(features)]
    return TypePolicy(
        list(actions), feats, [_tree(t, f"{path}.trees[{i}]", len(feats), len(actions)) for i, t in enumerate(trees)]
    )
