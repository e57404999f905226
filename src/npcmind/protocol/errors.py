"""One error shape for every route, so a game can handle all failures with one parser."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Annotated

import msgspec
from msgspec import Meta


class Problem(msgspec.Struct, frozen=True):
    """A single problem at a JSON path, so the developer can find the exact field to fix."""

    path: Annotated[str, Meta(description="Where, as a JSON path into the body: entities[3].observation.hp_fraction.")]
    message: Annotated[str, Meta(description="What is wrong there, and what is expected.")]


def choices(value: str, known: Iterable[str], what: str, likely: str | None = None) -> str:
    """The tail of a message about a name that is not one of ``known``: the likely typo (``likely``, else the
    closest by spelling), then what there is (so the developer fixes it from the error alone)."""
    names = sorted(known)
    same_but_case = [n for n in names if n.lower() == value.lower()]  # 'Bee' for bee: too short for difflib
    close = [likely] if likely else same_but_case or difflib.get_close_matches(value, names, n=1, cutoff=0.7)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    listed = ", ".join(names[:16]) + (f", … ({len(names)} in all)" if len(names) > 16 else "")
    return f"{hint} ({what}: {listed or 'none'})"


MAX_LISTED = 200  # problems listed in one 422


class ErrorBody(msgspec.Struct):
    """The inside of every error answer."""

    code: Annotated[
        str, Meta(description="For a program: invalid_request (422), malformed_json, unauthorized, not_found, ...")
    ]
    message: Annotated[str, Meta(description="For a person: what went wrong and, where there is one, the fix.")]
    details: Annotated[list[Problem], Meta(description="Every problem by path (a 422); empty otherwise.")] = []


class ErrorResponse(msgspec.Struct):
    """The JSON of every 4xx answer."""

    error: Annotated[ErrorBody, Meta(description="What went wrong.")]


class ApiError(Exception):
    """An answer the service gives on purpose: a 4xx with a code and problems by path."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: list[Problem] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or []
        self.headers = headers or {}

    @classmethod
    def invalid(cls, details: list[Problem]) -> ApiError:
        """A 422 whose message already names the first problem, for logs that show one line; at most
        ``MAX_LISTED`` problems are listed (a body of thousands of wrong fields would get a megabyte back)."""
        first = details[0]
        where = f"{first.path}: " if first.path else ""
        more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
        if len(details) > MAX_LISTED:
            rest = len(details) - MAX_LISTED
            details = [*details[:MAX_LISTED], Problem("", f"and {rest} more problems, not listed: fix these first")]
        return cls(422, "invalid_request", f"{where}{first.message}{more}", details)

    def body(self) -> bytes:
        """The JSON body of this error."""
        return msgspec.json.encode(ErrorResponse(ErrorBody(self.code, self.message, self.details)))
