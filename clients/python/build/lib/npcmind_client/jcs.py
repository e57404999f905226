"""RFC 8785 (JCS) canonical JSON, so a verifier in any language rebuilds the exact bytes a signature covers.

Implemented against the behaviour of the `rfc8785` package (Trail of Bits) and checked against it and
against ECMAScript's Number.prototype.toString on 700,000 doubles, with one documented difference: an
integer beyond ±2^53 is the double JSON.parse reads from it (12345678901234567890 is written
12345678901234567000, as JavaScript writes it back), where `rfc8785` refuses it. The test vectors are
docs/signature-vectors.json.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

_SAFE = 2**53  # every integer up to this is one double, written as its digits
_string = msgspec.json.encode  # escapes exactly as JCS does (checked for every code point)


class NotCanonical(ValueError):
    """A value that has no JCS form (a number no double holds, a key that is not text), and where it is."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path or 'value'}: {message}")
        self.path = path
        self.message = message

    def under(self, key: str | int) -> NotCanonical:
        """The same problem, seen from the enclosing object (key) or array (index)."""
        step = f"[{key}]" if isinstance(key, int) else key
        path = step + self.path if not self.path or self.path.startswith("[") else f"{step}.{self.path}"
        return NotCanonical(path, self.message)


def number(x: float) -> str:
    """ECMAScript's Number.prototype.toString of a double (RFC 8785 section 3.2.2.3)."""
    if math.isnan(x) or math.isinf(x):
        raise NotCanonical("", f"{x} is not a JSON number")
    if x == 0:
        return "0"  # -0 too
    if x < 0:
        return "-" + number(-x)
    mantissa, _, exp = repr(x).partition("e")  # repr: the shortest digits that read back as x, as ES picks them
    whole, _, frac = mantissa.partition(".")
    frac = "" if frac == "0" else frac
    if whole != "0":
        n = len(whole) + int(exp or 0)  # x = 0.digits × 10^n
        digits = (whole + frac).rstrip("0")
    else:
        significant = frac.lstrip("0")
        n = int(exp or 0) - (len(frac) - len(significant))
        digits = significant.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return f"{digits[:n]}.{digits[n:]}"
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = n - 1
    return f"{digits if k == 1 else digits[0] + '.' + digits[1:]}e{'+' if e >= 0 else '-'}{abs(e)}"


def _integer(n: int) -> bytes:
    if -_SAFE <= n <= _SAFE:
        return str(n).encode()
    try:
        return number(float(n)).encode()  # what JSON.parse reads from these digits
    except OverflowError:
        raise NotCanonical("", "a number beyond the range of a double (±1.8e308): no JSON reader holds it") from None


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _leaf(value: Any) -> bytes | None:
    """A scalar's canonical bytes, or None for an object or array (kept out of the recursion: most values are these)."""
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is float:
        return number(value).encode()
    if value is None:
        return b"null"
    if kind is bool:
        return b"true" if value else b"false"
    if kind is int:
        return _integer(value)
    return None


def _write(value: Any, out: list[bytes]) -> None:
    leaf = _leaf(value)
    if leaf is not None:
        out.append(leaf)
    elif isinstance(value, dict):
        _object(value, out)
    elif isinstance(value, list | tuple):
        out.append(b"[")
        for i, item in enumerate(value):
            if i:
                out.append(b",")
            try:
                _write(item, out)
            except NotCanonical as e:
                raise e.under(i) from None
        out.append(b"]")
    elif isinstance(value, float):  # subclasses of the JSON types (a numpy float64, an IntEnum, a str Enum)
        out.append(number(float(value)).encode())
    elif isinstance(value, int):
        out.append(_integer(int(value)))
    elif isinstance(value, str):
        out.append(_string(str.__str__(value)))
    else:
        raise NotCanonical("", f"a {type(value).__name__} is not JSON")


def _keys(value: dict[Any, Any]) -> list[str]:
    """The keys in RFC 8785 order (UTF-16 code units; for ASCII keys, the same as code points, and faster)."""
    try:
        ascii_only = all(k.isascii() for k in value)
    except AttributeError:
        raise NotCanonical("", "an object key must be text") from None
    return sorted(value) if ascii_only else sorted(value, key=_utf16)


def _object(value: dict[Any, Any], out: list[bytes]) -> None:
    out.append(b"{")
    for i, key in enumerate(_keys(value)):
        if i:
            out.append(b",")
        out.append(_string(key))
        out.append(b":")
        item = value[key]
        try:
            leaf = _leaf(item)
            if leaf is None:
                _write(item, out)
            else:
                out.append(leaf)
        except NotCanonical as e:
            raise e.under(key) from None
    out.append(b"}")


def canonical(value: Any) -> bytes:
    """The RFC 8785 bytes of a JSON value: sorted keys, no whitespace, ECMAScript numbers, UTF-8."""
    out: list[bytes] = []
    _write(value, out)
    return b"".join(out)
