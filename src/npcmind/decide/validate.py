"""Check a well-shaped decide request against the manifest, collecting every problem by path."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from npcmind.manifest import Manifest
from npcmind.manifest.load import MAX_CHAIN_FIELDS, MAX_CHAIN_SCOPES, ResolvedType
from npcmind.manifest.model import ScopeSpec
from npcmind.protocol.a2g import MAX_ENTITIES, DecideEntity, DecideRequest
from npcmind.protocol.errors import Problem, choices
from npcmind.protocol.validate import well_shaped


def check_position(pos: list[float] | None, path: str, out: list[Problem]) -> None:
    """A position is 2 or 3 finite numbers (the shape is checked before; finiteness here)."""
    if pos is not None and not all(map(math.isfinite, pos)):
        out.append(Problem(path, "must be 2 or 3 finite numbers"))


def check_scope(
    scope: str | None, state: Any, manifest: Manifest, session_scopes: Mapping[str, ScopeSpec] | None
) -> list[Problem]:
    """The scope is known and scope_state holds exactly the fields declared along its chain."""
    out: list[Problem] = []
    if scope is None:
        if state is not None:
            out.append(Problem("scope_state", "is only allowed with a scope"))
        return out
    chain = manifest.scope_chain(scope, session_scopes)
    if not chain:
        known = [*manifest.file.scopes, *(session_scopes or ())]
        return [Problem("scope", f"unknown scope {scope!r}{choices(scope, known, 'scopes')}")]
    if len(chain) > MAX_CHAIN_SCOPES or sum(len(spec.fields) for _, spec in chain) > MAX_CHAIN_FIELDS:
        # POST /v1/context refuses such a chain; a store kept from before that rule may still hold one
        return [
            Problem(
                "scope",
                f"scope {scope!r} has a chain of {len(chain)} scopes declaring "
                f"{sum(len(spec.fields) for _, spec in chain)} state fields; at most {MAX_CHAIN_SCOPES} scopes "
                f"and {MAX_CHAIN_FIELDS} fields: post its scopes again within those bounds",
            )
        ]
    declared = manifest.chain_fields(chain)
    if declared.fields:
        if state is None:
            out.append(Problem("scope_state", f"is required: scope {scope!r} declares fields"))
        else:
            out += declared.problems(state, "scope_state")
    elif state:
        out.append(Problem("scope_state", f"must be omitted: scope {scope!r} declares no fields"))
    return out


def unknown_type(p: str, name: str, manifest: Manifest) -> Problem:
    """The problem of an entity (at path ``p``) whose type the manifest lacks, with the likely one."""
    return Problem(f"{p}.type", f"unknown type {name!r}{choices(name, manifest.types, 'types')}")


def _decided_type(p: str, name: str, manifest: Manifest) -> ResolvedType | Problem:
    """The entity's type, if it is one the service decides for; else the problem with it."""
    t = manifest.types.get(name)
    if t is None:
        return unknown_type(p, name, manifest)
    if t.observe_only:
        return Problem(f"{p}.type", f"type {name!r} is observe-only (no actions): send it as telemetry")
    return t


def check_entity(i: int, e: DecideEntity, manifest: Manifest) -> list[Problem]:
    """One entity against its type: observation, legal actions, position, profile, trigger."""
    p = f"entities[{i}]"
    t = _decided_type(p, e.type, manifest)
    if isinstance(t, Problem):
        return [t]
    out = t.fields.problems(e.observation, f"{p}.observation")
    legal = set(e.legal_actions)
    if len(legal) != len(e.legal_actions) or not legal <= t.actions.keys():  # the slow path says which
        seen: set[str] = set()
        for j, a in enumerate(e.legal_actions):
            if a in seen:
                out.append(Problem(f"{p}.legal_actions[{j}]", f"repeats {a!r}"))
            elif a not in t.actions:
                out.append(
                    Problem(
                        f"{p}.legal_actions[{j}]",
                        f"{a!r} is not an action of type {e.type}{choices(a, t.actions, 'its actions')}",
                    )
                )
            seen.add(a)
    check_position(e.position, f"{p}.position", out)
    if e.profile is not None:
        prof = manifest.profiles.get(e.profile)
        if prof is None:
            out.append(
                Problem(
                    f"{p}.profile", f"unknown profile {e.profile!r}{choices(e.profile, manifest.profiles, 'profiles')}"
                )
            )
        elif prof.type is not None and prof.type != e.type:
            out.append(Problem(f"{p}.profile", f"profile {e.profile!r} is for type {prof.type!r}, not {e.type!r}"))
    if e.trigger is not None and e.trigger not in t.spec.events:
        known = choices(e.trigger, t.spec.events, "its events")
        out.append(Problem(f"{p}.trigger", f"{e.trigger!r} is not an event of type {e.type}{known}"))
    return out


def _duplicates(ids: list[tuple[int, str]]) -> list[Problem]:
    out: list[Problem] = []
    first_at: dict[str, int] = {}
    for i, eid in ids:
        if eid in first_at:
            out.append(Problem(f"entities[{i}].id", f"duplicate id {eid!r} (first at entities[{first_at[eid]}])"))
        else:
            first_at[eid] = i
    return out


def check_request(
    req: DecideRequest, manifest: Manifest, session_scopes: Mapping[str, ScopeSpec] | None = None
) -> list[Problem]:
    """Every way the request breaks the seed's field table for this manifest."""
    out = manifest.world.problems(req.world, "world")
    out += check_scope(req.scope, req.scope_state, manifest, session_scopes)
    out += _duplicates([(i, e.id) for i, e in enumerate(req.entities)])
    for i, e in enumerate(req.entities):
        out += check_entity(i, e, manifest)
    return out


def partial_problems(raw: Any, manifest: Manifest, session_scopes: Mapping[str, ScopeSpec] | None) -> list[Problem]:
    """The manifest's problems with every part of a mis-shaped request that is well-shaped on its own,
    so that one 422 lists them together with the shape problems."""
    if not isinstance(raw, dict):
        return []
    out: list[Problem] = []
    if isinstance(raw.get("world"), dict):
        out += manifest.world.problems(raw["world"], "world")
    scope, state = raw.get("scope"), raw.get("scope_state")
    if (scope is None or isinstance(scope, str)) and (state is None or isinstance(state, dict)):
        out += check_scope(scope, state, manifest, session_scopes)
    items = well_shaped(raw.get("entities"), DecideEntity)
    out += _duplicates([(i, e.id) for i, e in items])
    for i, e in items:
        out += check_entity(i, e, manifest)
    shaped = {i for i, _ in items}
    entities = raw.get("entities")
    for i, item in enumerate(entities[:MAX_ENTITIES] if isinstance(entities, list) else []):
        if i not in shaped and isinstance(item, dict):
            out += _misshaped_entity(i, item, manifest)
    return out


def _misshaped_entity(i: int, item: dict[str, Any], manifest: Manifest) -> list[Problem]:
    """What the manifest says of an entity mis-shaped elsewhere (a position of one number, say): its type and
    its observation, so that they are not a second 422 once the shape is fixed."""
    name, observation = item.get("type"), item.get("observation")
    if not isinstance(name, str):
        return []
    t = _decided_type(f"entities[{i}]", name, manifest)
    if isinstance(t, Problem):
        return [t]
    return t.fields.problems(observation, f"entities[{i}].observation") if isinstance(observation, dict) else []
