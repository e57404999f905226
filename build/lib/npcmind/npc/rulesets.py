"""Rulesets: what an NPC may recall, do and say, configured on the service (YAML), with built-in presets."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from npcmind.manifest import ManifestError
from npcmind.manifest.load import parse_text, read_text_file
from npcmind.npc.words import Term, WordRule
from npcmind.protocol.errors import Problem
from npcmind.protocol.npc import PromptConstraints
from npcmind.protocol.validate import problems as shape_problems

BUILTIN = Path(__file__).with_name("rulesets.yaml")
ActionName = Annotated[
    str,
    Meta(
        pattern="^[A-Z][A-Z0-9_]{0,31}$",
        extra={"shape": "an action name: an uppercase ASCII letter, then uppercase letters, digits or _ (32 at most)"},
    ),
]
RulesetName = Annotated[
    str,
    Meta(
        pattern="^[a-z][a-z0-9_-]{0,47}$",
        extra={
            "shape": "a ruleset name: a lowercase ASCII letter, then lowercase letters, digits, _ or - (48 at most)"
        },
    ),
]


RuleId = Annotated[
    str,
    Meta(
        pattern="^[a-z][a-z0-9_-]{0,47}$",
        extra={"shape": "a rule id: a lowercase ASCII letter, then lowercase letters, digits, _ or - (48 at most)"},
    ),
]
Terms = Annotated[list[Annotated[str, Meta(min_length=1)]], Meta(min_length=1)]


class BlockedRule(msgspec.Struct, forbid_unknown_fields=True):
    """Blocked content as words: any of `words` trips the rule; with `with`, only together with one of those."""

    id: RuleId
    words: Terms
    with_: Annotated[list[Annotated[str, Meta(min_length=1)]], Meta(min_length=1)] | None = msgspec.field(
        default=None, name="with"
    )


class Recall(msgspec.Struct, forbid_unknown_fields=True):
    """How many memories to ask for, and how similar they must be."""

    limit: Annotated[int, Meta(ge=1, le=50)] = 5
    threshold: Annotated[float, Meta(ge=-1, le=1)] = 0.3


class ActionRule(msgspec.Struct, forbid_unknown_fields=True):
    """An allowed action type and what it needs."""

    text: str = ""
    needs: list[Literal["target"]] = []  # a MOVE's destination is its target too


class Constraints(msgspec.Struct, forbid_unknown_fields=True):
    """The inference limits a ruleset sets, within what OpenAI-compatible servers take (a value beyond them
    would make every ExecuteInference fail at the game's model, not here)."""

    maxTokens: Annotated[int, Meta(ge=1, le=32768)] | None = None
    temperature: Annotated[float, Meta(ge=0, le=2)] | None = None
    stop: Annotated[list[Annotated[str, Meta(min_length=1)]], Meta(max_length=4)] = []


class RulesetSpec(msgspec.Struct, forbid_unknown_fields=True):
    """One ruleset as written in YAML."""

    text: str = ""
    recall: Recall | None = msgspec.field(default_factory=Recall)
    actions: dict[ActionName, ActionRule] = {}
    blocked: list[BlockedRule] = []
    max_dialogue_chars: Annotated[int, Meta(ge=1)] = 400
    refusal: str = "I'd rather not talk about that."
    constraints: Constraints = msgspec.field(default_factory=lambda: Constraints(200, 0.7, []))


class RulesetsFile(msgspec.Struct, forbid_unknown_fields=True):
    """A rulesets file."""

    rulesets: dict[RulesetName, RulesetSpec]


@dataclass(frozen=True)
class Ruleset:
    """A checked ruleset with its word rules built."""

    name: str
    spec: RulesetSpec
    rules: tuple[WordRule, ...]
    constraints: PromptConstraints  # as ExecuteInference carries them


_NOT_A_RULE = (
    "a blocked rule is an object {id, words: [...], with: [...]}, not a string: regular expressions are no "
    "longer read, words are matched in all their forms (docs/protocol.md, Rulesets)"
)


def _strings(name: str, blocked: object, problems: list[Problem]) -> None:
    """A problem for each blocked entry written as a regular expression, as rulesets before word rules were."""
    for i, raw in enumerate(blocked if isinstance(blocked, list) else []):
        if isinstance(raw, str):
            problems.append(Problem(f"rulesets.{name}.blocked[{i}]", _NOT_A_RULE))


def _rules(name: str, spec: RulesetSpec, problems: list[Problem]) -> list[WordRule]:
    """A ruleset's blocked rules built; a term with no word in it, or an id used twice, is a problem."""
    out, seen = [], set()
    for i, rule in enumerate(spec.blocked):
        at = f"rulesets.{name}.blocked[{i}]"
        if rule.id in seen:
            problems.append(Problem(f"{at}.id", f"{rule.id!r} names another rule of this ruleset already"))
        seen.add(rule.id)
        groups = {"words": [Term.of(t) for t in rule.words], "with": [Term.of(t) for t in rule.with_ or []]}
        for field, terms in groups.items():
            for j, term in enumerate(terms):
                if not term.slots:
                    problems.append(
                        Problem(f"{at}.{field}[{j}]", f"{term.text!r} has no word in it (letters or digits)")
                    )
        out.append(WordRule(rule.id, tuple(groups["words"]), tuple(groups["with"])))
    return out


def _compile(name: str, spec: RulesetSpec, problems: list[Problem]) -> Ruleset:
    rules = _rules(name, spec, problems)
    c = spec.constraints
    return Ruleset(name, spec, tuple(rules), PromptConstraints(c.maxTokens, c.temperature, list(c.stop)))


def load_rulesets(extra: str | Path | None = None) -> dict[str, Ruleset]:
    """The built-in presets, then a file's rulesets added or replacing them (every problem by path)."""
    out: dict[str, Ruleset] = {}
    for path in [BUILTIN, *([Path(extra)] if extra else [])]:
        data = parse_text(read_text_file(path), "yaml", str(path))
        try:
            parsed = msgspec.convert(data, RulesetsFile, strict=True)
        except msgspec.ValidationError as e:
            found = shape_problems(data, RulesetsFile) or [Problem("", str(e))]
            raw = data.get("rulesets") if isinstance(data, dict) else None
            said: list[Problem] = []
            for key, value in raw.items() if isinstance(raw, dict) else ():
                _strings(key, value.get("blocked") if isinstance(value, dict) else None, said)
            at = {p.path for p in said}  # the regular expression's own words, not "must be an object"
            raise ManifestError(str(path), [p for p in found if p.path not in at] + said) from None
        problems: list[Problem] = []
        for name, spec in parsed.rulesets.items():
            out[name] = _compile(name, spec, problems)
        if problems:
            raise ManifestError(str(path), problems)
    return out
