"""Check a well-shaped decide request against the manifest, collecting every problem by path."""

from __future__ import annotations

import math
from collections.abc import Mapping

from npcmind.manifest import Manifest
from npcmind.manifest.model import ScopeSpec
from npcmind.protocol.a2g import DecideRequest
from npcmind.protocol.errors import Problem


def check_position(pos: list[float] | None, path: str, out: list[Problem]) -> None:
    """A position is 2 or 3 finite numbers (the shape is checked before; finiteness here)."""
    if pos is not None and not all(math.isfinite(v) for v in pos):
        out.append(Problem(path, "must be 2 or 3 finite numbers"))


def check_request(
    req: DecideRequest, manifest: Manifest, session_scopes: Mapping[str, ScopeSpec] | None = None
) -> list[Problem]:
    """Every way the request breaks the seed's field table for this manifest."""
    out = manifest.world.problems(req.world, "world")
    if req.scope is not None:
        chain = manifest.scope_chain(req.scope, session_scopes)
        if not chain:
            out.append(Problem("scope", f"unknown scope {req.scope!r}"))
        else:
            declared = manifest.chain_fields(chain)
            if declared.fields:
                if req.scope_state is None:
                    out.append(Problem("scope_state", f"is required: scope {req.scope!r} declares fields"))
                else:
                    out += declared.problems(req.scope_state, "scope_state")
            elif req.scope_state:
                out.append(Problem("scope_state", f"must be omitted: scope {req.scope!r} declares no fields"))
    elif req.scope_state is not None:
        out.append(Problem("scope_state", "is only allowed with a scope"))

    first_at: dict[str, int] = {}
    for i, e in enumerate(req.entities):
        p = f"entities[{i}]"
        if e.id in first_at:
            out.append(Problem(f"{p}.id", f"duplicate id {e.id!r} (first at entities[{first_at[e.id]}])"))
        else:
            first_at[e.id] = i
        t = manifest.types.get(e.type)
        if t is None:
            out.append(Problem(f"{p}.type", f"unknown type {e.type!r}"))
            continue
        if t.observe_only:
            out.append(Problem(f"{p}.type", f"type {e.type!r} is observe-only (no actions): send it as telemetry"))
            continue
        out += t.fields.problems(e.observation, f"{p}.observation")
        seen: set[str] = set()
        for j, a in enumerate(e.legal_actions):
            if a in seen:
                out.append(Problem(f"{p}.legal_actions[{j}]", f"repeats {a!r}"))
            elif a not in t.actions:
                out.append(Problem(f"{p}.legal_actions[{j}]", f"not an action of type {e.type}"))
            seen.add(a)
        check_position(e.position, f"{p}.position", out)
        if e.profile is not None:
            prof = manifest.profiles.get(e.profile)
            if prof is None:
                out.append(Problem(f"{p}.profile", f"unknown profile {e.profile!r}"))
            elif prof.type is not None and prof.type != e.type:
                out.append(Problem(f"{p}.profile", f"profile {e.profile!r} is for type {prof.type!r}, not {e.type!r}"))
        if e.trigger is not None and e.trigger not in t.spec.events:
            out.append(Problem(f"{p}.trigger", f"not an event of type {e.type}"))
    return out
