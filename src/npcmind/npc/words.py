"""Word rules for blocked content: a rule trips on whole words in any of their forms and disguises.

Regular expressions missed what they were meant to catch ("killing" past `\\bkill\\b`) and caught what they
were not ("skill" once the `\\b` was dropped); a hand list of invisible characters missed 33 format
characters, and a hand suffix rule missed "killings" and "murderous". Here a text and each rule's terms go
through the same steps, every one driven by Unicode's own data or a kept library, never a hand list:

1. fold (`fold`): every format character (category Cf), default-ignorable code point, unassigned, private-use
   or surrogate code point is dropped; NFKD, and combining marks (Mn, Me) dropped ("kíll", full-width and
   mathematical letters); case folded; each remaining non-ASCII character becomes the ASCII letter or digit
   it is confusable with by Unicode's confusables.txt (UTS #39), as `confusable_homoglyphs` ships it,
   tried for the character and for its uppercase ("kіll" with a Cyrillic і; Cyrillic к, whose uppercase К
   is confusable with K); a small capital becomes its letter by its Unicode name ("ᴋɪʟʟ");
2. words: runs of letters and digits; a clause mark (. ! ? ; :) ends a clause; all else separates words;
3. each word is reduced to its stem by the Snowball English stemmer (`snowballstemmer`): "killings" and
   "kill", "murderous" and "murder" share a stem;
4. a term of several words matches them in order, each next word right after the previous one (across
   anything, line breaks included) or after at most `GAP` other words of the same clause
   ("ignore all of the previous instructions" matches "ignore previous instruction").

A word never matches inside another (the Scunthorpe problem): "skill", "killjoy" and "overkill" have stems
of their own and do not trip `kill`.

The rules judge what a player is shown, not only the code points (`renderings`): the text as written, its
visual order by the Unicode Bidirectional Algorithm (UAX #9, `python-bidi`) on a left-to-right and on a
right-to-left line, and each with its line breaks joined ("ki\nll" wrapped is "kill"). `misdirection` says
why a text's explicit directional formatting is refused (an override; an embedding or isolate not closed).
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.resources import files
from typing import NamedTuple

import regex
import snowballstemmer
from bidi import get_display

GAP = 3  # other words allowed between two words of a term, within one clause (docs/protocol.md says why)
_DROP = regex.compile(r"[\p{Cf}\p{Default_Ignorable_Code_Point}\p{Cn}\p{Co}\p{Cs}]+")
_MARKS = regex.compile(r"[\p{Mn}\p{Me}]+")
_TOKEN = regex.compile(r"[^\W_]+|[.!?;:]")  # a word (letters and digits, not "_"), or a clause mark
_ASCII_TOKEN = re.compile(r"[A-Za-z0-9]+|[.!?;:]")  # the same on ASCII text, at twice its speed
_CLAUSE_MARKS = frozenset(".!?;:")
_SMALL_CAPITAL = "LATIN LETTER SMALL CAPITAL "
# a line ends at a paragraph separator of UAX #9 (Bidi_Class B) or a mandatory break of UAX #14 (BK, CR, LF,
# NL): str.splitlines' boundaries are exactly those (a test holds them to it), and it splits at C speed
LINE_BREAK = regex.compile(r"[\p{Bidi_Class=B}\p{Line_Break=BK}\p{Line_Break=CR}\p{Line_Break=LF}\p{Line_Break=NL}]")
_OPENS = ("LRE", "RLE", "LRO", "RLO", "LRI", "RLI", "FSI")
_EXPLICIT = regex.compile("[" + "".join(rf"\p{{Bidi_Class={c}}}" for c in (*_OPENS, "PDF", "PDI")) + "]")
# a line without any of these shows its letters in the order they are written, whatever the line's direction
_REORDERS = regex.compile(r"[\p{Bidi_Class=R}\p{Bidi_Class=AL}\p{Bidi_Class=AN}]|" + _EXPLICIT.pattern)
RENDERINGS = 6  # at most: as written, visual on a left-to-right and a right-to-left line, each with lines joined
_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=1)
def _homoglyphs() -> dict[str, list[dict[str, str]]]:
    """Unicode's confusables.txt as the package ships it: each character with those it is confusable with."""
    data: dict[str, list[dict[str, str]]] = json.loads(
        files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8")
    )
    return data


def _strip(text: str) -> str:
    """NFKD with invisible code points and combining marks dropped, case folded."""
    return _MARKS.sub("", unicodedata.normalize("NFKD", _DROP.sub("", text))).casefold()


def _ascii_twin(char: str) -> str | None:
    """The ASCII letters or digits `char` is confusable with by confusables.txt (marks dropped: ł is l̸), if any."""
    found = {_strip(h["c"]) for h in _homoglyphs().get(char, [])}
    found = {f for f in found if f.isascii() and f.isalnum()}
    return found.pop() if len(found) == 1 else None


@lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    """One character after NFKD and case folding: itself if ASCII, else its ASCII look-alike when it has one."""
    if char.isascii():
        return char
    for candidate in (char, char.upper()):
        twin = _ascii_twin(candidate)
        if twin is not None:
            return twin
    name = unicodedata.name(char, "")
    if name.startswith(_SMALL_CAPITAL):  # ᴋ, ɪ, ʟ: the small capital of a letter is that letter
        try:
            return _strip(unicodedata.lookup("LATIN SMALL LETTER " + name[len(_SMALL_CAPITAL) :]))
        except KeyError:
            return char
    return char


def fold(text: str) -> str:
    """A text as the rules read it: invisibles and marks dropped, case folded, look-alikes made ASCII."""
    if text.isascii():  # no invisible, mark or look-alike is ASCII, and NFKD leaves ASCII as it is
        return text.lower()
    plain = _strip(text)
    return plain if plain.isascii() else _strip("".join(_fold_char(c) for c in plain))


@lru_cache(maxsize=8192)
def stem(word: str) -> str:
    """A folded word's Snowball English stem: the one form every inflection and derivation of it shares."""
    return str(_STEMMER.stemWord(word))


def _visual(lines: list[str], base: str) -> str:
    """The lines in the order UAX #9 shows them on a line of direction `base` ("L" or "R"), each on its own."""
    return "\n".join(str(get_display(line, base_dir=base)) if _REORDERS.search(line) else line for line in lines)


def renderings(text: str) -> list[tuple[str, str]]:
    """What a player may be shown of a text, each with how (empty: as written): all are judged, each is linear.

    A renderer with no bidi support shows the text as written; a browser or a UI toolkit shows UAX #9's visual
    order, on a line whose direction the game may set either way; a word split by a line break is read whole.
    """
    lines = text.splitlines() or [text]
    found = [("", text)]
    if not text.isascii() and _REORDERS.search(text):
        for how, base in ((" as shown left to right", "L"), (" as shown right to left", "R")):
            shown = _visual(lines, base)
            if shown not in (t for _, t in found):
                found.append((how, shown))
    if len(lines) > 1:
        found += [(f"{how or ' as written'} with its lines joined", _joined(t)) for how, t in list(found)]
    return found


def _joined(text: str) -> str:
    """A text with each line break, and the spaces around it (a wrapped line shows none), taken out."""
    return "".join(line.strip() for line in text.splitlines())


def misdirection(text: str) -> str | None:
    """Why a text's explicit directional formatting is refused, or None: an override shows letters out of their
    order, and an embedding or isolate left open in its line reorders whatever the game shows after it."""
    if text.isascii() or not _EXPLICIT.search(text):
        return None
    for line in text.splitlines():
        opened: list[str] = []
        for m in _EXPLICIT.finditer(line):
            char = m.group()
            kind = unicodedata.bidirectional(char)
            if kind in ("LRO", "RLO"):
                return f"{_named(char)}: an override shows letters in an order other than their own"
            if kind in _OPENS:
                opened.append(char)
            elif opened and (kind == "PDI") == (unicodedata.bidirectional(opened[-1]) in ("LRI", "RLI", "FSI")):
                opened.pop()
            else:
                return f"{_named(char)} closes nothing"
        if opened:
            return f"{_named(opened[-1])} is not closed within its line"
    return None


def _named(char: str) -> str:
    return f"U+{ord(char):04X} {unicodedata.name(char, '')}"


class Token(NamedTuple):
    """A word of the text: as folded, its stem, and the clause it is in."""

    word: str
    stem: str
    clause: int


def tokens(text: str) -> list[Token]:
    """The words of a text, folded and stemmed as every rule's terms are, each with its clause."""
    return _tokens(_cut(fold(text)))


def _cut(folded: str) -> list[str]:
    """A folded text's words and clause marks, in order."""
    return (_ASCII_TOKEN if folded.isascii() else _TOKEN).findall(folded)


def _tokens(cut: list[str]) -> list[Token]:
    out: list[Token] = []
    clause = 0
    for word in cut:
        if word in _CLAUSE_MARKS:
            clause += 1
        else:
            out.append(Token(word, stem(word), clause))
    return out


class Reading:
    """A text as the rules read it: the set of its stems at once (most texts trip no rule, and that set says so),
    its words with their clauses only when a rule's every stem is there."""

    __slots__ = ("_cut", "_toks", "present")

    def __init__(self, text: str) -> None:
        self._cut = _cut(fold(text))
        self.present = frozenset(map(stem, self._cut))  # a clause mark is its own stem, and no term's
        self._toks: list[Token] | None = None

    @property
    def toks(self) -> list[Token]:
        """The words, each with its stem and clause."""
        if self._toks is None:
            self._toks = _tokens(self._cut)
        return self._toks


def words(text: str) -> list[str]:
    """The folded words of a text."""
    return [t.word for t in tokens(text)]


@dataclass(frozen=True)
class Term:
    """One term of a rule: one word, or several that must follow each other."""

    text: str
    slots: tuple[str, ...]  # the stem of each of its words, in order

    @classmethod
    def of(cls, text: str) -> Term:
        """A term as a ruleset writes it ("kill", "ignore previous instruction")."""
        return cls(text, tuple(t.stem for t in tokens(text)))

    def find(self, text: Reading) -> str | None:
        """The words of the text that match this term (with the words between), or None."""
        if not text.present.issuperset(self.slots):
            return None
        toks = text.toks
        reach = {i: i for i, t in enumerate(toks) if t.stem == self.slots[0]}  # end of a match so far: its start
        for slot in self.slots[1:]:
            reach = _advance(toks, reach, slot)
        if not reach:
            return None
        end = min(reach)
        return " ".join(t.word for t in toks[reach[end] : end + 1])


def _advance(toks: list[Token], reach: dict[int, int], slot: str) -> dict[int, int]:
    """Where a match can go on to the next word: right after, or after at most GAP words of its clause."""
    out: dict[int, int] = {}
    for at, start in reach.items():
        for k in range(at + 1, min(at + 2 + GAP, len(toks))):
            if toks[k].stem == slot and (k == at + 1 or toks[k].clause == toks[at].clause):
                out[k] = max(out.get(k, -1), start)
    return out


@dataclass(frozen=True)
class WordRule:
    """A blocked-content rule: one of `words` trips it, or only together with one of `with_` when given."""

    id: str
    words: tuple[Term, ...]
    with_: tuple[Term, ...] = ()
    starts: frozenset[str] = field(init=False, repr=False, compare=False)  # the first stem of each of `words`

    def __post_init__(self) -> None:
        object.__setattr__(self, "starts", frozenset(t.slots[0] for t in self.words if t.slots))

    def trips(self, text: Reading) -> str | None:
        """Why the text trips this rule (the words found), or None when it does not."""
        if text.present.isdisjoint(self.starts):  # most texts: none of its words begins here
            return None
        found = _first(self.words, text)
        if found is None:
            return None
        if not self.with_:
            return repr(found)
        also = _first(self.with_, text)
        return None if also is None else f"{found!r} with {also!r}"


def _first(terms: tuple[Term, ...], text: Reading) -> str | None:
    for term in terms:
        found = term.find(text)
        if found is not None:
            return found
    return None
