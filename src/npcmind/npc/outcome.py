"""The NPC prompt, and Finalize: parse what a (possibly small) model wrote, apply the ruleset, build the outcome."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from npcmind.npc.rulesets import Ruleset
from npcmind.npc.words import Reading, misdirection, renderings
from npcmind.protocol.npc import GenericAction, MemoryStoreInstruction, RuleVerdict

MAX_REMEMBER = 3
# the longest model output Finalize reads: past it the outcome is refused unread (docs/npc.md says why 16,384)
MAX_OUTPUT_CHARS = 16_384
_FENCE = re.compile(r"```[a-zA-Z]*")
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_EMOTIONS = {
    "angry": re.compile(r"(?i)\b(angry|furious|how dare|outraged|enough!)"),
    "afraid": re.compile(r"(?i)\b(afraid|scared|terrified|frightened|please don't hurt)"),
    "happy": re.compile(r"(?i)\b(glad|happy|delighted|wonderful|splendid|hah!|haha)"),
    "sad": re.compile(r"(?i)\b(sad|sorrow|grief|mourn|alas)"),
}


def _block(title: str, body: Any) -> str:
    if body in (None, "", {}, []):
        return ""
    text = body if isinstance(body, str) else json.dumps(body, sort_keys=True, ensure_ascii=False)
    return f"## {title}\n{text}\n\n"


def build_prompt(tape: dict[str, Any], ruleset: Ruleset) -> str:
    """Persona, actor data, state, context, memories (most relevant first), rules and actions, observation."""
    actor = tape.get("actor") or {}
    memories = sorted(
        (m for m in tape.get("memories") or [] if isinstance(m, dict) and m.get("text")),
        key=lambda m: -(m.get("similarity") or 0.0),
    )
    recalled = "\n".join(f"- ({m.get('type') or 'memory'}) {m['text']}" for m in memories)
    actions = "\n".join(
        f"- {name}: {rule.text}" + (" (needs a target)" if rule.needs else "")
        for name, rule in ruleset.spec.actions.items()
    )
    answer = (
        'Answer with one JSON object and nothing else: {"dialogue": "what you say", '
        '"action": {"type": "ONE_OF_THE_ACTIONS", "target": "who or where", "reason": "why"}, '
        '"remember": ["a fact worth keeping"]}. "action" and "remember" are optional.'
    )
    return (
        _block("Who you are", tape.get("persona") or actor.get("persona"))
        + _block("What you know about yourself", actor.get("data"))
        + _block("Your state", tape.get("npcState"))
        + _block("Context", tape.get("context"))
        + _block("What you remember", recalled)
        + _block("Rules", ruleset.spec.text)
        + _block("Actions you may take", actions)
        + _block("What just happened", tape.get("observation"))
        + answer
    )


@dataclass
class Parsed:
    """A model's output after repair: the line, an optional action, facts to remember."""

    dialogue: str
    action: dict[str, Any] | None
    remember: list[str]
    form: str  # "json", "repaired json" or "plain text"


def _try_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # a model's output nested hundreds deep is no JSON answer either
        return None


def _repair(candidate: str) -> Any:
    fixed = _TRAILING_COMMA.sub(r"\1", candidate)
    fixed = re.sub(r"\bTrue\b", "true", re.sub(r"\bFalse\b", "false", re.sub(r"\bNone\b", "null", fixed)))
    if '"' not in fixed and "'" in fixed:
        fixed = fixed.replace("'", '"')
    found = _try_json(fixed)
    if found is not None:
        return found
    # cut off mid-way (max tokens): close the open string and brackets
    if fixed.count('"') % 2:
        fixed += '"'
    stack = []
    for ch in fixed:
        if ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    return _try_json(_TRAILING_COMMA.sub(r"\1", fixed.rstrip().rstrip(",") + "".join(reversed(stack))))


def parse_output(text: str) -> Parsed:
    """Accept JSON, JSON wrapped in prose or fences, broken JSON, or plain text (dialogue, no action)."""
    raw = _FENCE.sub("", text or "").strip()
    start = raw.find("{")
    obj: Any = None
    form = "plain text"
    if start >= 0:
        end = raw.rfind("}")
        candidate = raw[start : end + 1] if end > start else raw[start:]
        obj = _try_json(candidate)
        form = "json" if obj is not None and start == 0 and end == len(raw) - 1 else "repaired json"
        if obj is None:
            obj = _repair(candidate)
    if isinstance(obj, dict) and isinstance(obj.get("dialogue"), str):
        action = obj.get("action")
        if isinstance(action, str):
            action = {"type": action}
        remember = obj.get("remember") or []
        if isinstance(remember, str):
            remember = [remember]
        facts = [clip(str(r).strip(), 200) for r in remember if isinstance(r, str | int | float) and str(r).strip()]
        return Parsed(obj["dialogue"].strip(), action if isinstance(action, dict) else None, facts[:MAX_REMEMBER], form)
    plain = raw if start < 0 else (raw[:start] + raw[raw.rfind("}") + 1 :] if raw.rfind("}") > start else raw[:start])
    plain = plain.strip().strip('"').strip()
    return Parsed(plain or raw, None, [], "plain text")


_IN_WORD = frozenset({"Mn", "Me", "Mc", "Cf", "Cn", "Co", "Cs"})  # marks and invisibles: part of their word
LAST_DIALOGUE_CHARS = 200


def _in_word(char: str) -> bool:
    return char.isalnum() or unicodedata.category(char) in _IN_WORD


def clip(text: str, limit: int) -> str:
    """A text cut to `limit` at a sentence end, else between words, so no cut leaves a new word or part of one.

    A cut inside a word made words that were never checked ("killjoys" cut to "kill…"); one is made only
    where a single word is longer than the limit, and what is cut is checked as it is signed anyway.
    """
    if len(text) <= limit:
        return text
    cut = text[:limit]
    end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "))
    if end > limit // 2:
        return cut[: end + 1]
    at = limit
    while at > 0 and _in_word(text[at - 1]) and _in_word(text[at]):
        at -= 1
    return (text[:at] if at > 0 else cut).rstrip() + "…"


@dataclass
class Outcome:
    """What Finalize says, before it is signed."""

    valid: bool
    dialogue: str
    action: GenericAction | None
    memory: list[MemoryStoreInstruction] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    audit: list[RuleVerdict] = field(default_factory=list)


def _confidence(value: Any) -> float | None:
    """A model's confidence in its action, kept as it wrote it when that is a finite number."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _action(parsed: Parsed, ruleset: Ruleset, audit: list[RuleVerdict]) -> GenericAction | None:
    """The model's action checked against the ruleset: one not allowed, or without its target, is dropped."""
    if parsed.action is None:
        return None
    spec = ruleset.spec
    kind = str(parsed.action.get("type") or "").strip().upper()
    if kind == "SPEAK" and kind not in spec.actions:  # ForbocAI's name for talking
        kind = "TALK"
        audit.append(RuleVerdict("action_alias", "repaired", "SPEAK read as TALK"))
    target, reason = parsed.action.get("target"), parsed.action.get("reason")
    rule = spec.actions.get(kind)
    if rule is None:
        audit.append(RuleVerdict("action_allowed", "repaired", f"action {kind or '(none)'!r} is not allowed; dropped"))
        return None
    if "target" in rule.needs and not (isinstance(target, str) and target.strip()):
        audit.append(RuleVerdict("action_needs", "repaired", f"{kind} needs a target; dropped"))
        return None
    audit.append(RuleVerdict("action_allowed", "pass", f"{kind} is allowed"))
    return GenericAction(
        kind,
        clip(str(reason), 200) if isinstance(reason, str | int | float) else None,
        clip(str(target), 100) if isinstance(target, str | int | float) else None,
        _confidence(parsed.action.get("confidence")),
    )


def _signed_text(out: Outcome) -> str:
    """What the model's output became in the Finalize that is signed: every part of it, after every cut."""
    action = out.action
    parts = [out.dialogue, str(out.state.get("lastDialogue") or "")]
    parts += [action.type, action.reason or "", action.target or ""] if action else []
    parts += [m.text for m in out.memory if m.type in ("experience", "knowledge")]  # the others are the game's
    return "\n".join(p for p in parts if p)


def _blocked(said: str, signed: str, ruleset: Ruleset, audit: list[RuleVerdict]) -> bool:
    """Apply every blocked rule to the model's output and to the text as signed, each in every way a player may
    be shown it, then check their directions; whether anything tripped."""
    shown: dict[str, str] = {}  # each text a player may be shown, read once: the output's renderings come first
    for text, where in ((said, ""), (signed, " in the text as signed")):
        for how, rendering in renderings(text):
            shown.setdefault(rendering, how + where)
    texts = [(Reading(text), where) for text, where in shown.items()]
    tripped = False
    for rule in ruleset.rules:
        why = next((f"{found}{where}" for text, where in texts if (found := rule.trips(text))), None)
        tripped = tripped or why is not None
        audit.append(
            RuleVerdict(f"blocked.{rule.id}", "pass", "none of its words")
            if why is None
            else RuleVerdict(f"blocked.{rule.id}", "blocked", f"found {why}")
        )
    return _directions(said, signed, audit) or tripped


def _directions(said: str, signed: str, audit: list[RuleVerdict]) -> bool:
    """Refuse an override, or an embedding or isolate left open, in the output or the text as signed."""
    texts = ((said, ""), (signed, " in the text as signed"))
    wrong = next((f"{why}{where}" for text, where in texts if (why := misdirection(text))), None)
    audit.append(
        RuleVerdict("bidi", "pass", "no override; every embedding and isolate closed in its line")
        if wrong is None
        else RuleVerdict("bidi", "blocked", wrong)
    )
    return wrong is not None


def finalize(tape: dict[str, Any], ruleset: Ruleset) -> Outcome:
    """Judge the generated output against the ruleset; blocked content makes the outcome invalid.

    The outcome is built first (every cut made), then the rules judge both the model's whole output and
    exactly the text that would be signed.
    """
    spec = ruleset.spec
    output = str(tape.get("generatedOutput") or "")
    if len(output) > MAX_OUTPUT_CHARS:  # every rule reads it in up to six ways: its cost is capped here
        why = f"generatedOutput is {len(output)} characters; Finalize reads at most {MAX_OUTPUT_CHARS}"
        return Outcome(False, spec.refusal, None, audit=[RuleVerdict("max_output_chars", "blocked", why)])
    parsed = parse_output(output)
    audit = [RuleVerdict("format", "pass" if parsed.form == "json" else "repaired", f"read as {parsed.form}")]
    action = _action(parsed, ruleset, audit)
    dialogue = clip(parsed.dialogue, spec.max_dialogue_chars)
    out = _valid(tape, parsed, action, dialogue, audit)
    said = [parsed.dialogue, *parsed.remember, *((action.reason, action.target) if action else ())]
    if _blocked("\n".join(x for x in said if x), _signed_text(out), ruleset, audit):  # rules see across parts
        return Outcome(False, spec.refusal, None, audit=audit)
    if not parsed.dialogue and action is None:
        audit.append(RuleVerdict("not_empty", "blocked", "the output has neither dialogue nor an action"))
        return Outcome(False, spec.refusal, None, audit=audit)
    audit.append(
        RuleVerdict(
            "max_dialogue_chars",
            "repaired" if dialogue != parsed.dialogue else "pass",
            f"{len(parsed.dialogue)} characters, at most {spec.max_dialogue_chars}",
        )
    )
    return out


def _valid(
    tape: dict[str, Any], parsed: Parsed, action: GenericAction | None, dialogue: str, audit: list[RuleVerdict]
) -> Outcome:
    """The outcome if no rule trips: memories, the state patch, the mood."""
    observation = str(tape.get("observation") or "")
    memory = [MemoryStoreInstruction(observation, "observation", 0.4)] if observation else []
    did = f" and did {action.type}" + (f" ({action.target})" if action.target else "") if action else ""
    if dialogue or action:
        memory.append(
            MemoryStoreInstruction(f'I said "{dialogue}"{did}' if dialogue else f"I{did[4:]}", "experience", 0.5)
        )
    memory += [MemoryStoreInstruction(fact, "knowledge", 0.7) for fact in parsed.remember]
    mood = next((name for name, rx in _EMOTIONS.items() if rx.search(dialogue)), None)
    if mood is not None:
        memory.append(MemoryStoreInstruction(f"I felt {mood} when: {observation}"[:300], "emotion", 0.6))
    last = clip(dialogue, LAST_DIALOGUE_CHARS)
    state: dict[str, Any] = {"lastAction": action.type if action else None, "lastDialogue": last}
    npc_state = tape.get("npcState") or {}
    turns = npc_state.get("turns") if isinstance(npc_state, dict) else None
    state["turns"] = (turns if isinstance(turns, int) and not isinstance(turns, bool) else 0) + 1
    if mood is not None:
        state["mood"] = mood
    return Outcome(True, dialogue, action, memory, state, audit)
