"""Word rules for blocked content: a rule trips on whole words in any of their forms, wherever lines break.

Regular expressions missed what they were meant to catch ("killing" past `\\bkill\\b`, a `.` that does
not cross the newline between dialogue and target) and caught what they were not ("skill" once the
`\\b` was dropped). Here a text and each rule's terms go through the same steps:

1. NFKC normalisation (full-width letters become plain ones), case folding, and invisible format
   characters (soft hyphen, zero-width space and joiners, bidi marks, BOM, variation selectors) dropped;
2. words: runs of letters and digits; everything else (spaces, newlines, punctuation, apostrophes,
   hyphens, `_`) separates them;
3. each word of a term stands for its forms (`forms`), and a term of several words matches them as
   consecutive words of the text, across line breaks.

So a word never matches inside another (the Scunthorpe problem): "skill", "killjoy" and "overkill" are
words of their own and do not trip `kill`, nor "hello" or "shell" `hell`; a ruleset that means to block a
compound lists it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\U0001bca0-\U0001bca3\U000e0000-\U000e0fff]"
)
_WORD = re.compile(r"[^\W_]+")  # letters and digits (str.isalnum), not "_"
_VOWELS = frozenset("aeiou")
_NO_DOUBLING = _VOWELS | frozenset("wxy")


def words(text: str) -> list[str]:
    """The words of a text, normalised as every rule's terms are."""
    return _WORD.findall(_INVISIBLE.sub("", unicodedata.normalize("NFKC", text).casefold()))


def forms(word: str) -> frozenset[str]:
    """A word and its inflected forms by a fixed English suffix rule (no stemmer, no dictionary).

    A word of ASCII letters gains -s, -es, -ed, -ing, -er, -ers (kill: kills, killed, killing, killer,
    killers); one ending in e also drops it before -ing, -ed, -er (massacre: massacring, massacred); one
    ending in a consonant and y also takes -ies, -ied, -ier (bully: bullies, bullied); one ending in
    consonant, vowel, consonant (not w, x, y) also doubles its last letter (stab: stabbed, stabbing).
    Irregular forms (slay: slew, slain; child: children) are written as words of their own. Forms that
    are not English words cost nothing: no text holds them.
    """
    if not (word.isascii() and word.isalpha()):
        return frozenset({word})
    out = {word, *(word + s for s in ("s", "es", "ed", "ing", "er", "ers"))}
    if word.endswith("e"):
        out |= {word[:-1] + s for s in ("ing", "ed", "er", "ers")}
    elif len(word) >= 2 and word[-1] == "y" and word[-2] not in _VOWELS:
        out |= {word[:-1] + s for s in ("ies", "ied", "ier", "iers")}
    elif len(word) >= 3 and word[-1] not in _NO_DOUBLING and word[-2] in _VOWELS and word[-3] not in _VOWELS:
        out |= {word + word[-1] + s for s in ("ed", "ing", "er", "ers")}
    return frozenset(out)


@dataclass(frozen=True)
class Term:
    """One term of a rule: one word, or several that must follow each other."""

    text: str
    slots: tuple[frozenset[str], ...]  # the accepted forms of each of its words, in order

    @classmethod
    def of(cls, text: str) -> Term:
        """A term as a ruleset writes it ("kill", "ignore all instruction")."""
        return cls(text, tuple(forms(w) for w in words(text)))

    def find(self, tokens: list[str], present: frozenset[str]) -> str | None:
        """The words of the text that match this term, or None."""
        first = self.slots[0]
        if first.isdisjoint(present):
            return None
        n = len(self.slots)
        for i, token in enumerate(tokens):
            if token in first and i + n <= len(tokens) and all(tokens[i + j] in self.slots[j] for j in range(1, n)):
                return " ".join(tokens[i : i + n])
        return None


@dataclass(frozen=True)
class WordRule:
    """A blocked-content rule: one of `words` trips it, or only together with one of `with_` when given."""

    id: str
    words: tuple[Term, ...]
    with_: tuple[Term, ...] = ()

    def trips(self, tokens: list[str], present: frozenset[str]) -> str | None:
        """Why the text trips this rule (the words found), or None when it does not."""
        found = _first(self.words, tokens, present)
        if found is None:
            return None
        if not self.with_:
            return repr(found)
        also = _first(self.with_, tokens, present)
        return None if also is None else f"{found!r} with {also!r}"


def _first(terms: tuple[Term, ...], tokens: list[str], present: frozenset[str]) -> str | None:
    for term in terms:
        found = term.find(tokens, present)
        if found is not None:
            return found
    return None
