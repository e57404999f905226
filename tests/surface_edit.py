"""Editing clients/surface/surface.json when a port's surface changed on purpose (a merge that makes C# helper
types internal, say): `python tests/surface.py sync` takes out of the declaration what a port no longer has, adds
what it has that is not declared, and marks every entry it touched with a `TODO` reason, which the test refuses
until a person writes why. The file is written in one layout (`dumps`), so such an edit shows as a small diff."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from surface import (
    Surface,
    as_member,
    compared,
    concept_name,
    member_name,
    present,
    styled,
)


def canonical(name: str) -> str:
    """A language's member name as the declaration's snake_case one: `lastPrompt`, `LastPrompt` -> `last_prompt`."""
    if name.isupper() or "_" in name:
        return name.lower()
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def synced(declaration: dict[str, Any], language: str, surface: Surface) -> dict[str, Any]:
    """The declaration made to agree with one port's surface, every entry changed given a TODO reason."""
    out = copy.deepcopy(declaration)
    want, have = compared(out, language, surface)
    gone, new = set(want) - have, have - set(want)
    for concept in out["concepts"]:
        langs = present(concept)
        if language not in langs:
            continue
        top = concept_name(concept, language)
        members = [as_member(m) for m in concept.get("members", [])]
        for member in members:
            if language not in present(member, langs):
                continue
            # a type gone takes its members with it, but one naming the language in its `only` must no longer;
            # a member gone from a type still there leaves that language
            if ("only" in member) if top in gone else f"{top}.{member_name(member, language)}" in gone:
                leave(member, language, present(member, langs))
        if top in gone:
            leave(concept, language, langs)
        if "members" in concept:
            concept["members"] = [compact(m) for m in members if m.get("only") != []]
    out["concepts"] = [c for c in out["concepts"] if c.get("only") != []]
    add(out, language, surface, new)
    return out


def leave(entry: dict[str, Any], language: str, langs: tuple[str, ...]) -> None:
    """A language no longer has this entry: `only` the others (none: the entry goes), its reason to write again."""
    was = entry.get("reason", "")
    entry["only"] = [lang for lang in langs if lang != language]
    entry.pop(language, None)
    entry["reason"] = f"TODO: gone from {language} (the reason was: {was or 'none'})"


def add(declaration: dict[str, Any], language: str, surface: Surface, new: set[str]) -> None:
    """What a port has that the declaration does not: a type as a concept of that language alone, a member as a
    member of its concept there."""
    concepts = {concept_name(c, language): c for c in declaration["concepts"] if language in present(c)}
    todo = f"TODO: new in {language}"
    types = sorted(n for n in new if n in surface)
    for name in types:
        concept: dict[str, Any] = {"name": name, "only": [language], "reason": todo}
        members = [compact(member_of(m, language)) for m in surface[name]["members"]]
        if members:
            concept["members"] = members
        declaration["concepts"].append(concept)
    for name in sorted(n for n in new if n not in surface):
        top, _, member = name.rpartition(".")
        if top in types:
            continue  # with its new type, above
        if top in concepts:
            concepts[top].setdefault("members", []).append(
                {**member_of(member, language), "only": [language], "reason": todo}
            )
        else:  # a member of a type declared under another name: its whole name, as a concept
            concept = {"name": name, "only": [language], "reason": todo}
            declaration["concepts"].append(concept)


def member_of(name: str, language: str) -> dict[str, Any]:
    """A member of a language, with its name there where the naming rule does not give it."""
    entry: dict[str, Any] = {"name": canonical(name)}
    const = name.isupper() and language != "csharp"
    if const:
        entry["const"] = True
    if styled(entry["name"], language, const=const) != name:
        entry[language] = name
    return entry


def compact(member: dict[str, Any]) -> str | dict[str, Any]:
    """A member with nothing but its name is written as its name."""
    return member["name"] if set(member) == {"name"} else member


def dumps(declaration: dict[str, Any]) -> str:
    """surface.json's layout: the reasons a line each, a concept's keys on its first line and its plain members
    run together, a member with keys of its own on a line of its own."""
    lines = ["{", f' "about": {encode(declaration.get("about", ""))},', ' "reasons": {']
    reasons = list(declaration.get("reasons", {}).items())
    lines += [f"  {encode(k)}: {encode(v)}" + ("," if i < len(reasons) - 1 else "") for i, (k, v) in enumerate(reasons)]
    lines += [" },", ' "concepts": [']
    concepts = declaration["concepts"]
    for i, concept in enumerate(concepts):
        lines.append(concept_lines(concept) + ("," if i < len(concepts) - 1 else ""))
    return "\n".join([*lines, " ]", "}"]) + "\n"


def concept_lines(concept: dict[str, Any]) -> str:
    """One concept in surface.json's layout."""
    head = encode({k: v for k, v in concept.items() if k != "members"})
    if "members" not in concept:
        return f"  {head}"
    rows: list[str] = []
    row = ""
    for member in concept["members"]:
        text = encode(member)
        if isinstance(member, dict) or len(row) + len(text) > 112:
            if row:
                rows.append(row)
            row = ""
        if isinstance(member, dict):
            rows.append(text)
        else:
            row = f"{row} {text}," if row else f"{text},"
    if row:
        rows.append(row)
    body = ",\n".join(f"   {r.rstrip(',')}" for r in rows)
    return f'  {head[:-1]}, "members": [\n{body}\n  ]}}'


def encode(value: Any) -> str:
    """JSON on one line, as written by hand: `, ` and `: ` between items, text as it is (not \\u-escaped)."""
    return json.dumps(value, ensure_ascii=False)
