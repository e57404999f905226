"""What the manifest says of the telemetry and scopes a game posts: every problem by path, in one 422.

Pure functions: the HTTP layer calls them on a body whose shape is partly wrong (so that a fixed shape is not
followed by a second 422), and the hub calls them before it applies anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from npcmind.decide.validate import check_position, unknown_type
from npcmind.manifest import Manifest
from npcmind.manifest.load import check as check_manifest_refs
from npcmind.manifest.load import fields_that_convert, untold
from npcmind.manifest.model import Fields, FieldSpec, ScopeSpec
from npcmind.protocol.a2g import ScopeDefinition, TelemetryEntity
from npcmind.protocol.errors import MAX_LISTED, Problem, choices
from npcmind.protocol.validate import problems as shape_problems


def telemetry_problems(entities: list[tuple[int, TelemetryEntity]], m: Manifest) -> list[Problem]:
    """Telemetry entities against the manifest: known type, exactly its fields, its actions, a finite position."""
    problems: list[Problem] = []
    for i, e in entities:
        p = f"entities[{i}]"
        t = m.types.get(e.type)
        if t is None:
            problems.append(unknown_type(p, e.type, m))
            continue
        if e.fields is not None:
            problems += t.fields.problems(e.fields, f"{p}.fields")
        if e.action is not None and e.action not in t.actions:
            known = choices(e.action, t.actions, "its actions")
            problems.append(Problem(f"{p}.action", f"{e.action!r} is not an action of type {e.type}{known}"))
        check_position(e.position, f"{p}.position", problems)
    return problems


def misshaped_telemetry_problems(entities: Any, shaped: set[int], m: Manifest) -> list[Problem]:
    """What the manifest says of telemetry entities mis-shaped elsewhere (a position of one number): their
    type and fields, so that they are not a second 422 once the shape is fixed."""
    problems: list[Problem] = []
    for i, item in enumerate(entities[:MAX_LISTED] if isinstance(entities, list) else []):
        if i in shaped or not isinstance(item, dict) or not isinstance(item.get("type"), str):
            continue
        t = m.types.get(item["type"])
        if t is None:
            problems.append(unknown_type(f"entities[{i}]", item["type"], m))
        elif isinstance(item.get("fields"), dict):
            problems += t.fields.problems(item["fields"], f"entities[{i}].fields")
    return problems


def scope_problems(
    defs: Mapping[str, ScopeDefinition], m: Manifest, session_scopes: Mapping[str, ScopeSpec]
) -> tuple[list[Problem], dict[str, ScopeSpec]]:
    """Every problem of scopes a session posts, by path, and the scopes that have none to add. A scope whose
    fields have shape problems still has its parent and its fields' rules checked, in the same 422."""
    problems: list[Problem] = []
    specs: dict[str, ScopeSpec] = {}
    stand_ins: dict[str, ScopeSpec] = {}
    for name, d in defs.items():
        found = shape_problems(d.fields, Fields)  # names as in a manifest: they enter the prompt
        problems += [Problem(f"scopes.{name}.fields{('.' + p.path) if p.path else ''}", p.message) for p in found]
        if found:
            stand_ins[name] = ScopeSpec(text=d.text, parent=d.parent, fields=fields_that_convert(d.fields))
        else:
            fields = msgspec.convert(d.fields, dict[str, FieldSpec])
            specs[name] = ScopeSpec(text=d.text, parent=d.parent, fields=fields)
    file = msgspec.structs.replace(m.file, scopes={**m.file.scopes, **session_scopes, **specs, **stand_ins})
    found = check_manifest_refs(file)
    rules = [p for p in found if any(p.path.startswith(f"scopes.{n}.") for n in defs)]
    problems += untold(rules, {p.path for p in problems})
    problems += _chains_passed_below(found, defs, m, file.scopes)
    return problems, specs


def _chains_passed_below(
    found: list[Problem], defs: Mapping[str, ScopeDefinition], m: Manifest, scopes: Mapping[str, ScopeSpec]
) -> list[Problem]:
    """A posted scope that would take a scope below it past a chain's bounds (a root given more fields, say),
    told at the posted scope, once: the scope below is the session's already and was not in the request."""
    out: list[Problem] = []
    told: set[str] = set()
    for p in found:
        name = p.path.split(".")[1]
        if name in defs or not p.message.startswith("makes "):
            continue
        posted = next((n for n, _ in m.scope_chain(name, scopes) if n in defs and n not in told), None)
        if posted is not None:
            told.add(posted)
            out.append(Problem(f"scopes.{posted}", f"would give scope {name!r} a chain that {p.message}"))
    return out
