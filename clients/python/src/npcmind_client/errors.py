"""The SDK's errors, under one root, and the service's one error shape read by one parser: a game catches
``NpcMindError`` for every failure of the SDK and reads ``status`` (the HTTP status, None where no answer came)
and ``code`` (the protocol's error code, ``invalid_request`` or ``unauthorized``, None where there is none)."""

from __future__ import annotations

from typing import Any


class NpcMindError(Exception):
    """Every failure of this SDK: ``status`` the HTTP status of the answer it comes from (None without one),
    ``code`` the protocol's error code (the body's ``error.code``; None without one)."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        """``status`` and ``code`` keyword-only: a game's own code may raise one with a message alone."""
        super().__init__(message)
        self.status = status
        self.code = code


class ServiceError(NpcMindError):
    """The service refused a request: its answer's status (4xx, 5xx) and its error code (a 422's
    ``invalid_request``, a 401's ``unauthorized``...), the message its problems by path."""


class ProtocolError(NpcMindError):
    """The service's answer breaks the protocol: a 200 without an instruction, an unknown instruction, no
    Finalize after the calls allowed, keys that are none."""


class UnreachableError(NpcMindError):
    """The service (or the cortex) cannot be reached, or its answer broke off: no status."""


class TooLargeError(NpcMindError, ValueError):
    """A body past its cap: reading stopped there (the message names the cap); ``code`` ``answer_too_large``."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = "answer_too_large") -> None:
        """The code defaults to the one every reader of errors gives a body read no further than its cap."""
        super().__init__(message, status=status, code=code)


class InvalidInputError(NpcMindError, ValueError):
    """What the game gave cannot be used (an unknown NPC, a context JSON cannot carry): nothing was sent."""


class SignatureError(NpcMindError):
    """An outcome's signature does not verify (or its tape has no canonical form to verify): nothing was
    applied. Not a ``ServiceError``: the service answered 200; what it answered cannot be trusted."""


def service_error(status: int, body: Any, otherwise: str, what: str) -> ServiceError:
    """The ServiceError of an error answer: its status, the code of its body, its problems in one line."""
    code, _, _ = read_error(body)
    return ServiceError(f"{what} answered {status}: {error_line(body, otherwise)}", status=status, code=code or None)


def read_error(body: Any) -> tuple[str, str, list[dict[str, Any]]]:
    """An error answer of this service as its code, message and details; empty parts for a body that is none
    (a proxy's page, another server): the SDKs read every failure with this one reader."""
    err = body.get("error") if isinstance(body, dict) else None
    err = err if isinstance(err, dict) else {}
    found = err.get("details")
    details = [d for d in found if isinstance(d, dict)] if isinstance(found, list) else []
    return str(err.get("code") or ""), str(err.get("message") or ""), details


def error_line(body: Any, otherwise: str) -> str:
    """An error answer in one line: its problems by path, else its message, else ``otherwise``."""
    _, message, details = read_error(body)
    line = "; ".join(f"{_part(d.get('path'))}: {_part(d.get('message'))}" for d in details)
    return line or message or otherwise


def _part(value: Any) -> str:
    """A problem's path or message as text: empty when absent or null, as the other SDKs read it."""
    return "" if value is None else str(value)
