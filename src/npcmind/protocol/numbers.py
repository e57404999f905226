"""The one rule for every number a body holds: what a 64-bit float, JSON's number and every engine's, holds.

A JSON reader may give an integer of any length (Python's does), but every value is later compared,
converted to a float, quantized or echoed, and the game reads the answer as doubles: an integer of 400
digits made the float conversion of a check overflow (a 500), and an echoed epoch of 4,000 digits broke
every client. So a number is finite within ±1.8e308, and an integer, where the protocol or the manifest
asks for one, lies within ±(2^53 - 1), the integers a double holds exactly.
"""

from __future__ import annotations

import sys
from typing import Any

from npcmind_client.npc_wire import MAX_INTEGER, Count  # one rule, shared with the SDK (npcmind_client.shared)

__all__ = ["INTEGER_RULE", "MAX_INTEGER", "MAX_NUMBER", "NUMBER_RULE", "Count", "number_problem"]

MAX_NUMBER = sys.float_info.max  # 1.7976931348623157e308
NUMBER_RULE = "must be a finite number within ±1.8e308"
INTEGER_RULE = f"must be a whole number within ±{MAX_INTEGER} (2^53-1)"


def number_problem(value: Any, integer: bool) -> str | None:
    """The rule's message for a number (int or float) out of its range, else None. Comparisons only: a float
    conversion of a long integer is what overflowed, and NaN fails both."""
    if integer:
        return None if -MAX_INTEGER <= value <= MAX_INTEGER else INTEGER_RULE
    return None if -MAX_NUMBER <= value <= MAX_NUMBER else NUMBER_RULE
