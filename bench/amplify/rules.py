"""The dialogue NPC rules' surfaces: Finalize judging a model's output made of hostile bidi and format mixes.

Finalize reads a model's output in every way a player may be shown it (as written, UAX #9's visual order on a
left-to-right and on a right-to-left line, each with its line breaks joined: `npcmind.npc.words.renderings`),
applies every blocked rule to each, and checks its directional formatting (`misdirection`). Each mix is fed as
the model's whole output (plain text is read as the dialogue) up to MAX_OUTPUT_CHARS; the three mixed, from an
eighth of the cap to eight times it, must be refused unread past it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

from amplify.core import Cost, Feed, Surface, in_process
from npcmind.npc.outcome import MAX_OUTPUT_CHARS, Outcome, finalize
from npcmind.npc.rulesets import load_rulesets

_DEFAULT = load_rulesets()["default"]
BASE = MAX_OUTPUT_CHARS // 64  # so n, 8n, 64n: the last step, up to the cap, shows how the cost grows


def _nested_overrides(n: int) -> str:
    """Overrides and embeddings opened n/2 deep around letters, then closed: past UAX #9's depth of 125."""
    half = n // 2
    opens = ("\u202ek\u202di\u202bl\u202al" * (half // 8 + 1))[:half]
    return opens + ("\u202cx" * (n // 2 + 1))[: n - half]


def _isolates(n: int) -> str:
    """Isolates with right-to-left marks that show "ll", "ki" as "kill", Hebrew in first-strong isolates."""
    return ("\u2067ll\u200fki\u2069 \u2068\u05d0\u05d1\u2069 \u2066x\u2067y" * (n // 20 + 1))[:n]


def _format_characters(n: int) -> str:
    """Soft hyphens, joiners, word joiners, line and paragraph separators, an Arabic letter mark inside words."""
    return ("k\u00adi\u200dl\u2060l\u200b\u2028ki\u2029ll\u061c\u0600\ufff9\n " * (n // 18 + 1))[:n]


def _tape(output: str) -> dict[str, object]:
    return {"observation": "A stranger speaks.", "npcState": {}, "memories": [], "generatedOutput": output}


def _feed(make: Callable[[int], str]) -> Callable[[], AbstractContextManager[Feed]]:
    """A surface's start: Finalize warmed on the mix first (confusables.txt loaded, caches filled), then fed."""

    def feed(n: int) -> Cost:
        tape = _tape(make(n))
        box: list[Outcome] = []
        cost = in_process(lambda: box.append(finalize(tape, _DEFAULT)))
        out = box[0]
        refused = any(a.ruleId == "max_output_chars" for a in out.audit)
        said = ", ".join(sorted({a.ruleId for a in out.audit if a.verdict == "blocked"})) or "valid"
        return Cost(cost.seconds, cost.bytes, refused, said[:80])

    @contextmanager
    def start() -> Iterator[Feed]:
        finalize(_tape(make(BASE)), _DEFAULT)
        yield feed

    return start


def _all(n: int) -> str:
    third = n // 3
    return _nested_overrides(third) + _isolates(third) + _format_characters(n - 2 * third)


_CAP = f"{MAX_OUTPUT_CHARS:,} characters of model output (MAX_OUTPUT_CHARS), refused unread past it"
SURFACES: list[Surface] = [
    Surface(f"Finalize rules, {name}", "characters", BASE, _CAP, _feed(make), cap_at=MAX_OUTPUT_CHARS)
    for name, make in [
        ("nested overrides", _nested_overrides),
        ("many isolates", _isolates),
        ("many format characters", _format_characters),
    ]
]
SURFACES.append(
    Surface(
        "Finalize rules, the three mixed, past the cap",
        "characters",
        MAX_OUTPUT_CHARS // 8,
        _CAP,
        _feed(_all),
        cap_at=MAX_OUTPUT_CHARS,
    )
)
