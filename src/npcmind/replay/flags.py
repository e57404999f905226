"""`npcmind replay`'s flag types, apart from the command so that building the parser imports nothing heavy."""

from __future__ import annotations

import argparse
import re


class FlagError(Exception):
    """A flag that cannot be used: its message names it."""


_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([mhd]?)\s*")
_UNIT_H = {"m": 1 / 60, "h": 1.0, "": 1.0, "d": 24.0}


def duration_hours(text: str) -> float:
    """--since: ``2h``, ``30m``, ``7d`` or a number of hours."""
    m = _DURATION.fullmatch(text)
    if m is None or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration above 0 (2h, 30m, 7d or hours)")
    return float(m.group(1)) * _UNIT_H[m.group(2)]


def positive(text: str) -> float:
    """--rate, --timeout: a number above 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
    return v


def price(text: str) -> float:
    """--price-in, --price-out: per million tokens, 0 or more."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a price (per million tokens)") from None
    if not 0 <= v < float("inf"):
        raise argparse.ArgumentTypeError(f"a price is 0 or more, not {text}")
    return v


def count(text: str) -> int:
    """--sample, --in-flight: a whole number above 0."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {text}")
    return v


def share(text: str) -> float:
    """--shadow-share: above 0, at most 1."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share (0.05 is one call in twenty)") from None
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"a share is above 0 and at most 1, not {text}")
    return v
