"""How the SDK reads a refusal: a 422 whose problems all lie in named entities costs only those entities (each
is named once and sent alone until the service takes it); any other refusal is said once, with its fix."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from npcmind_client.errors import error_line, read_error

_ENTITY_PATH = re.compile(r"entities\[(\d{1,9})\]\.?")  # a request has 16: more digits are no entity's index
NUMBER = re.compile(r"\d+(?:\.\d+)?")  # the figures in a reason (seconds left, sizes): not a new kind of reason


class Refusals:
    """The entities the service refused (id -> why), and the lines that say a refusal once."""

    def __init__(self, say: Callable[[str, str, bool], None]) -> None:
        self.alone: dict[str, str] = {}  # entity id -> why the service refused it: sent alone until taken
        self._say = say

    def entities(self, status: int, body: Any, sent: list[tuple[str, str]]) -> set[str]:
        """The ids of a 422 whose every problem lies in one of the request's entities (``sent``: id and type,
        in the request's order), each named once in the log and sent alone from now on; else none."""
        details = read_error(body)[2] if status == 422 else []
        if not details:
            return set()
        why: dict[str, list[str]] = {}
        for d in details:
            m = _ENTITY_PATH.match(str(d.get("path", "")))
            if m is None or int(m.group(1)) >= len(sent):
                return set()  # a problem of the whole request (world, scope, a field of the body)
            eid = sent[int(m.group(1))][0]
            why.setdefault(eid, []).append(f"{str(d['path'])[m.end() :] or 'entity'}: {d.get('message')}")
        types = dict(sent)
        for eid, problems in why.items():
            self.alone[eid] = "; ".join(problems)
            self._say(
                f"refused:{eid}:{self.alone[eid]}",
                f"npcmind refused {types[eid]} {eid!r} ({self.alone[eid]}): the others go on without it, and it "
                "is sent alone until the service takes it",
                True,
            )
        return set(why)

    def said(self, status: int, body: Any, hosted: bool) -> None:
        """Say a refusal of the whole request once (a countdown in its text is not a new refusal)."""
        msg = f"npcmind answered {status} {read_error(body)[0]}: {error_line(body, '')}"
        if status == 401 and not hosted:
            msg += " (the service runs the hosted profile: give DecideClient its api_key=)"
        self._say(f"{status}:{NUMBER.sub('#', msg)}", msg, True)


MAX_RETRY_AFTER_S = 3600.0  # a Retry-After past an hour waits an hour: 10**400 s would be never again


def retry_after_ms(headers: dict[str, str]) -> float:
    """How long a 429 or 5xx asks us to wait (its Retry-After in seconds, at most MAX_RETRY_AFTER_S), else a
    second."""
    retry = headers.get("retry-after")
    if not (retry and retry.replace(".", "", 1).isdigit()):
        return 1000.0
    return min(float(retry), MAX_RETRY_AFTER_S) * 1000
