"""Rulesets: what an NPC may recall, do and say, configured on the service (YAML), with built-in presets."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from npcmind.manifest import ManifestError
from npcmind.manifest.load import parse_text, read_text_file
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
    blocked: list[str] = []
    max_dialogue_chars: Annotated[int, Meta(ge=1)] = 400
    refusal: str = "I'd rather not talk about that."
    constraints: Constraints = msgspec.field(default_factory=lambda: Constraints(200, 0.7, []))


class RulesetsFile(msgspec.Struct, forbid_unknown_fields=True):
    """A rulesets file."""

    rulesets: dict[RulesetName, RulesetSpec]


@dataclass(frozen=True)
class Ruleset:
    """A checked ruleset with its patterns compiled."""

    name: str
    spec: RulesetSpec
    patterns: tuple[re.Pattern[str], ...]
    constraints: PromptConstraints  # as ExecuteInference carries them


def _patterns(name: str, blocked: object, problems: list[Problem]) -> list[re.Pattern[str]]:
    """A ruleset's blocked patterns compiled; each that is text but not a regular expression, a problem."""
    out = []
    for i, raw in enumerate(blocked if isinstance(blocked, list) else []):
        try:
            if isinstance(raw, str):
                out.append(re.compile(raw))
        except re.error as e:
            problems.append(Problem(f"rulesets.{name}.blocked[{i}]", f"not a valid regular expression: {e}"))
    return out


def _compile(name: str, spec: RulesetSpec, problems: list[Problem]) -> Ruleset:
    patterns = _patterns(name, spec.blocked, problems)
    c = spec.constraints
    return Ruleset(name, spec, tuple(patterns), PromptConstraints(c.maxTokens, c.temperature, list(c.stop)))


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
            for key, value in raw.items() if isinstance(raw, dict) else ():  # every problem at once
                _patterns(key, value.get("blocked") if isinstance(value, dict) else None, found)
            raise ManifestError(str(path), found) from None
        problems: list[Problem] = []
        for name, spec in parsed.rulesets.items():
            out[name] = _compile(name, spec, problems)
        if problems:
            raise ManifestError(str(path), problems)
    return out
