"""Reading the service's one error shape, so a game handles every failure with one parser."""

from __future__ import annotations

from typing import Any


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
    return "; ".join(f"{d.get('path')}: {d.get('message')}" for d in details) or message or otherwise
