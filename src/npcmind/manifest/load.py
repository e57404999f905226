"""Load a manifest from YAML, JSON or TOML, check it whole, and give it a version."""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import yaml

from npcmind.manifest.fields import FieldSet
from npcmind.manifest.model import FieldSpec, ManifestFile, ProfileSpec, ScopeSpec, TypeSpec, WorldSpec
from npcmind.protocol.errors import Problem, choices
from npcmind.protocol.validate import problems as shape_problems

_S = TypeVar("_S")


class ManifestError(Exception):
    """A manifest (or another file the user wrote: clients, rulesets) that cannot be used, with every problem
    by path."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        self.summary = f"{source}: {len(problems)} problem{'' if len(problems) == 1 else 's'}"
        lines = "\n".join(f"  {p.path or '(file)'}: {p.message}" for p in problems)
        super().__init__(f"{self.summary}\n{lines}")


@dataclass(frozen=True, slots=True)
class ResolvedType:
    """A type with its defaults applied, ready for the pipeline."""

    name: str
    spec: TypeSpec
    fields: FieldSet
    ttl_ms: int
    refresh_ms: int
    max_input_tokens: int
    perception_radius: float
    actions: dict[str, str]  # name -> label, in the manifest's order
    observe_only: bool  # no actions: telemetry only, never decided


class Manifest:
    """A checked manifest: its file, its version and quick look-ups the pipeline needs."""

    def __init__(self, file: ManifestFile) -> None:
        self.file = file
        self.data: dict[str, Any] = msgspec.to_builtins(file)
        canonical = msgspec.json.encode(self.data, order="sorted")
        self.version = "sha256:" + hashlib.sha256(canonical).hexdigest()
        d = file.defaults
        self.types: dict[str, ResolvedType] = {
            name: ResolvedType(
                name=name,
                spec=t,
                fields=FieldSet(t.fields, f"type {name!r}"),
                ttl_ms=t.ttl_ms or d.ttl_ms,
                refresh_ms=t.refresh_ms or d.refresh_ms,
                max_input_tokens=t.max_input_tokens or d.max_input_tokens,
                perception_radius=t.perception_radius or d.perception_radius,
                actions=dict(t.actions or {}),
                observe_only=not t.actions,
            )
            for name, t in file.types.items()
        }
        self.world = FieldSet(file.world.fields, "the world")
        self._chain_sets: dict[tuple[str, ...], FieldSet] = {}
        # a chain through a session's scopes, read as it is, by the identity of its specs (kept alive with it)
        self._session_sets: dict[tuple[int, ...], tuple[list[tuple[str, ScopeSpec]], FieldSet]] = {}
        self._chains: dict[str, list[tuple[str, ScopeSpec]]] = {}
        # a digest of each chain through a session's scopes, by the identity of its specs (kept alive with it)
        self._chain_keys: dict[tuple[int, ...], tuple[list[tuple[str, ScopeSpec]], str]] = {}

    @property
    def profiles(self) -> dict[str, ProfileSpec]:
        return self.file.profiles

    def scope(self, name: str, extra: Mapping[str, ScopeSpec] | None = None) -> ScopeSpec | None:
        """A scope of the manifest, or one a session added."""
        found = self.file.scopes.get(name)
        if found is None and extra:
            found = extra.get(name)
        return found

    def scope_chain(self, name: str, extra: Mapping[str, ScopeSpec] | None = None) -> list[tuple[str, ScopeSpec]]:
        """The scopes from the root down to ``name`` (cycle-safe; empty if unknown). A manifest scope's
        chain holds only manifest scopes, so it is worked out once; do not change the list."""
        found = self._chains.get(name)
        if found is None:
            found = self._chain(name, extra)
            if name in self.file.scopes:
                self._chains[name] = found
        return found

    def _chain(self, name: str, extra: Mapping[str, ScopeSpec] | None) -> list[tuple[str, ScopeSpec]]:
        chain: list[tuple[str, ScopeSpec]] = []
        seen: set[str] = set()
        cur: str | None = name
        while cur is not None and cur not in seen:
            spec = self.scope(cur, extra)
            if spec is None:
                return [] if cur == name else chain[::-1]
            seen.add(cur)
            chain.append((cur, spec))
            cur = spec.parent
        return chain[::-1]

    def chain_key(self, name: str | None, chain: list[tuple[str, ScopeSpec]]) -> str:
        """What the model reads of scope ``name`` (its chain's texts and fields) as a part of a decision-cache key.
        A manifest scope is its name: the manifest's version covers its definition. A chain through a session's
        scopes is a digest of its definitions, made once per definition, not once per request: a replaced scope
        is a new (frozen) ScopeSpec, and the digests are kept by the identity of the chain's specs."""
        if name is None:
            return ""
        if self._chains.get(name) is chain:  # the manifest's own chain, worked out once by scope_chain
            return name
        ident = tuple([id(spec) for _, spec in chain])
        found = self._chain_keys.get(ident)
        if found is None:
            digest = hashlib.blake2b(msgspec.json.encode(chain), digest_size=16).hexdigest()
            if len(self._chain_keys) >= 1024:
                self._chain_keys.clear()
            # the entry holds the chain, so no spec it names can die and leave its id to another
            found = self._chain_keys[ident] = (chain, "session:" + digest)
        return found[1]

    def chain_fields(self, chain: list[tuple[str, ScopeSpec]]) -> FieldSet:
        """Every state field declared along a scope chain: compiled once per chain for the manifest's own scopes,
        read as they are for chains through a session's scopes (which a session may replace before each
        decide: a cache by content is defeated by renaming one field, and compiling is the cost)."""
        key = tuple(name for name, _ in chain)
        manifest_only = all(name in self.file.scopes for name in key)
        found = self._chain_sets.get(key) if manifest_only else None
        if found is not None:
            return found
        out: dict[str, FieldSpec] = {}
        for _, spec in chain:
            out.update(spec.fields)
        owner = f"scope {key[-1]!r}" if key else "scope"
        if manifest_only:
            compiled = self._chain_sets[key] = FieldSet(out, owner)
            return compiled
        ident = tuple([id(spec) for _, spec in chain])
        kept = self._session_sets.get(ident)
        if kept is None:  # linear in the chain's fields: a new definition costs its size, never a compile
            if len(self._session_sets) >= 1024:
                self._session_sets.clear()
            kept = self._session_sets[ident] = (chain, FieldSet(out, owner, compiled=False))
        return kept[1]


def _field_problems(fields: Mapping[str, FieldSpec], path: str) -> list[Problem]:
    out: list[Problem] = []
    for name, f in fields.items():
        p = f"{path}.{name}"
        numeric = f.type in ("number", "integer")
        if f.type == "enum" and not f.values:
            out.append(Problem(f"{p}.values", "an enum needs a non-empty list of values"))
        if f.values is not None and f.type != "enum":
            out.append(Problem(f"{p}.values", "only an enum has values"))
        if f.values and len(set(f.values)) != len(f.values):
            out.append(Problem(f"{p}.values", "must not repeat a value"))
        if f.max_length is not None and f.type != "string":
            out.append(Problem(f"{p}.max_length", "only a string has a max_length"))
        for key in ("min", "max", "quantum"):
            if getattr(f, key) is not None and not numeric:
                out.append(Problem(f"{p}.{key}", f"only a number or integer has {key}"))
        if f.min is not None and f.max is not None and f.min > f.max:
            out.append(Problem(f"{p}.min", "must not be greater than max"))
    return out


def check(file: ManifestFile) -> list[Problem]:
    """Rules the file format alone cannot say: references, cycles, field kinds."""
    out = _field_problems(file.world.fields, "world.fields")
    for name, t in file.types.items():
        out += _field_problems(t.fields, f"types.{name}.fields")
    for name, prof in file.profiles.items():
        if prof.type is not None:
            if prof.type not in file.types:
                known = choices(prof.type, file.types, "types")
                out.append(Problem(f"profiles.{name}.type", f"unknown type {prof.type!r}{known}"))
            elif not file.types[prof.type].actions:
                out.append(Problem(f"profiles.{name}.type", f"type {prof.type!r} is observe-only (no actions)"))
    for name, sc in file.scopes.items():
        out += _field_problems(sc.fields, f"scopes.{name}.fields")
        if sc.parent is not None and sc.parent not in file.scopes:
            known = choices(sc.parent, [n for n in file.scopes if n != name], "scopes")  # not its own parent
            out.append(Problem(f"scopes.{name}.parent", f"unknown scope {sc.parent!r}{known}"))
    out += _chains(file.scopes)
    return out


MAX_CHAIN_SCOPES = 16  # scopes along one chain, root to leaf: the model reads each one's text in every prompt
MAX_CHAIN_FIELDS = 256  # state fields declared along one chain: scope_state holds them all in every decide


def _chains(scopes: Mapping[str, ScopeSpec]) -> list[Problem]:
    """Cycles, and chains past their bounds, in one walk of each scope up to a scope already worked out: linear
    in the scopes however long the chains (each scope is walked from once), where walking every chain from
    every scope grew with the square of a chain's length."""
    out: list[Problem] = []
    done: dict[str, tuple[int, int]] = {}  # scope: (scopes, fields) of its chain; a cycle's members count 0
    for start in scopes:
        path: list[str] = []
        on_path: dict[str, int] = {}
        cur: str | None = start
        while cur is not None and cur in scopes and cur not in done and cur not in on_path:
            on_path[cur] = len(path)
            path.append(cur)
            cur = scopes[cur].parent
        depth, fields = done.get(cur, (0, 0)) if cur is not None else (0, 0)
        if cur is not None and cur in on_path:  # the walk closed a cycle: each member says so, as before
            ring = path[on_path[cur] :]
            for i, member in enumerate(ring):
                turn = [*ring[i:], *ring[:i], member]
                out.append(Problem(f"scopes.{member}.parent", "forms a cycle: " + " -> ".join(turn)))
                done[member] = (0, 0)
            path = path[: on_path[cur]]
        for name in reversed(path):
            depth, fields = depth + 1, fields + len(scopes[name].fields)
            done[name] = (depth, fields)
            if depth > MAX_CHAIN_SCOPES:
                out.append(
                    Problem(f"scopes.{name}.parent", f"makes a chain of {depth} scopes; at most {MAX_CHAIN_SCOPES}")
                )
            if fields > MAX_CHAIN_FIELDS:
                out.append(
                    Problem(
                        f"scopes.{name}.fields",
                        f"makes {fields} state fields along its chain; at most {MAX_CHAIN_FIELDS} "
                        "(scope_state holds every field of the chain)",
                    )
                )
    return out


def _convert(value: Any, kind: type[_S]) -> _S | None:
    try:
        return msgspec.convert(value, kind, strict=True)
    except (msgspec.ValidationError, RecursionError):
        return None


def _field_that_converts(raw: Any) -> FieldSpec | None:
    """A field as far as it converts: with a known type, its keys that are well-shaped on their own, so that
    its rules (min above max, say) are checked beside the shape problem of another key."""
    spec = _convert(raw, FieldSpec)
    if spec is not None or not isinstance(raw, dict):
        return spec
    kind = raw.get("type")
    return _convert({k: v for k, v in raw.items() if _convert({"type": kind, k: v}, FieldSpec)}, FieldSpec)


def fields_that_convert(raw: Any) -> dict[str, FieldSpec]:
    """Field declarations as far as they convert, for checking the rules of a declaration with shape problems."""
    found = {name: _field_that_converts(spec) for name, spec in (raw.items() if isinstance(raw, dict) else ())}
    return {name: spec for name, spec in found.items() if isinstance(name, str) and spec is not None}


def untold(rules: list[Problem], said: set[str]) -> list[Problem]:
    """The rule problems at no path a shape problem was told at, above or below: a key of the wrong kind
    left out of the stand-in must not be called missing as well."""
    return [
        p
        for p in rules
        if not any(
            s == p.path or s.startswith((p.path + ".", p.path + "[")) or p.path.startswith(s + ".") for s in said
        )
    ]


def _what_converts(data: Any) -> ManifestFile:
    """A manifest that failed its shape check, element by element as far as it converts, for ``check``: a
    type or scope that does not convert stays as a stand-in (its fields that do, whether it has actions, its
    parent), so that what refers to it is not called unknown."""
    top = data if isinstance(data, dict) else {}

    def section(name: str) -> dict[Any, Any]:
        found = top.get(name)  # YAML keys may be numbers: those are shape problems, left out here
        return {k: v for k, v in found.items() if isinstance(k, str)} if isinstance(found, dict) else {}

    types: dict[str, TypeSpec] = {}
    for name, raw in section("types").items():
        r = raw if isinstance(raw, dict) else {}
        stand_in = TypeSpec(
            fields=fields_that_convert(r.get("fields")), actions={"_": ""} if r.get("actions") else None
        )
        types[name] = _convert(raw, TypeSpec) or stand_in
    scopes: dict[str, ScopeSpec] = {}
    for name, raw in section("scopes").items():
        r = raw if isinstance(raw, dict) else {}
        parent = r.get("parent") if isinstance(r.get("parent"), str) else None
        scopes[name] = _convert(raw, ScopeSpec) or ScopeSpec("", parent, fields_that_convert(r.get("fields")))
    profiles = {name: p for name, raw in section("profiles").items() if (p := _convert(raw, ProfileSpec))}
    world = WorldSpec("", fields_that_convert(section("world").get("fields")))
    return ManifestFile("0.1", world, types, profiles=profiles, scopes=scopes)


def parse_text(text: str, fmt: str, source: str = "manifest") -> Any:
    """Parse manifest text in the given format ('yaml', 'json' or 'toml')."""
    try:
        if fmt == "json":
            return json.loads(text)
        if fmt == "toml":
            return tomllib.loads(text)
        return yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as e:
        raise ManifestError(source, [Problem("", f"not valid {fmt.upper()}: {e}")]) from None
    except RecursionError:
        too_deep = f"{fmt.upper()} nested too deep to read (hundreds of levels)"
        raise ManifestError(source, [Problem("", too_deep)]) from None


def from_data(data: Any, source: str = "manifest") -> Manifest:
    """Check parsed manifest data and compile it, or raise ManifestError listing every problem."""
    try:
        file = msgspec.convert(data, ManifestFile, strict=True)
    except msgspec.ValidationError as e:
        try:
            found = shape_problems(data, ManifestFile) or [Problem("", str(e))]
        except RecursionError:  # a value nested hundreds deep: msgspec's one message names where
            found = [Problem("", str(e))]
        else:  # the rules beyond shape too, on what did convert: every problem in one pass, not in two
            found += untold(check(_what_converts(data)), {p.path for p in found})
        raise ManifestError(source, found) from None
    except RecursionError:
        raise ManifestError(source, [Problem("", "nested too deep to read (hundreds of levels)")]) from None
    found = check(file)
    if found:
        raise ManifestError(source, found)
    return Manifest(file)


def read_text_file(p: Path) -> str:
    """A file the user wrote (manifest, clients, rulesets) as text, or a ManifestError that says why not: it
    cannot be read, or it is not UTF-8. A byte order mark, as Windows editors write, is no problem."""
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ManifestError(str(p), [Problem("", f"cannot read file: {e.strerror or e}")]) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        where = f"byte 0x{raw[e.start]:02x} at offset {e.start}, line {line}"
        raise ManifestError(str(p), [Problem("", f"not UTF-8 text ({where}): save the file as UTF-8")]) from None


def load(path: str | Path) -> Manifest:
    """Load and check a manifest file; the format follows the extension (YAML by default)."""
    p = Path(path)
    text = read_text_file(p)
    suffix = p.suffix.lower()
    fmt = "json" if suffix == ".json" else "toml" if suffix == ".toml" else "yaml"
    data = parse_text(text, fmt, str(p))
    if data is None and fmt == "yaml":  # an empty file (or only comments): say what it lacks
        data = {}
    return from_data(data, str(p))
