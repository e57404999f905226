"""Parameters an OpenAI-compatible model refuses: found in its 400 answer, so a caller can stop sending them.

OpenAI's reasoning models refuse ``logprobs``, ``temperature`` other than 1, ``stop`` and ``max_tokens``;
servers and proxies differ on others. A call that only refines its request with such a parameter should
drop it and ask again rather than fail: the decide pipeline and the SDK's cortex both do. Both also put
an error answer in one readable line (`error_text`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Any

_REFUSAL_WORDS = ("support", "unrecognized", "unknown", "extra", "not permitted", "not allowed", "input should be")


def refused_parameter(status: int | None, body: object, sent: Collection[str], optional: Collection[str]) -> str | None:
    """The parameter of ``optional`` and ``sent`` that an error answer says the model does not take, or None.

    OpenAI names it in ``error.param`` of a 400; other servers (vLLM, llama.cpp, proxies) only in the
    message, some with a 422; llama-cpp-python's server answers its request validation errors with a 500.
    """
    if status not in (400, 422, 500) or not isinstance(body, dict):
        return None
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=str)
    if status == 500 and "validation error" not in text:
        return None  # the server's own failure: nothing the request could leave out
    candidates = [n for n in optional if n in sent]
    error = body.get("error")
    param = error.get("param") if isinstance(error, dict) else None
    if isinstance(param, str):
        return param if param in candidates else None
    if not any(w in text.lower() for w in _REFUSAL_WORDS):
        return None
    found = [(m.start(), n) for n in candidates if (m := re.search(rf"(?<!\w){n}(?!\w)", text))]
    return min(found)[1] if found else None


def first_not_refused(names: Sequence[str], refused: Collection[str]) -> str | None:
    """The first of ``names`` the model has not refused: a server knows one of the token limit's two names."""
    return next((n for n in names if n not in refused), None)


def is_html(text: str) -> bool:
    """Whether a body that is not JSON is a web page: the URL is a web server's, not an API's."""
    return text.lstrip()[:1] == "<"


def error_text(raw: bytes, answer: Any) -> str:
    """An error body in one line a game developer can act on: an API's own message, or what the page was."""
    error = answer.get("error") if isinstance(answer, dict) else None
    message = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
    text = str(message) if message else raw.decode("utf-8", "replace")
    if answer is None and is_html(text):
        return "an HTML page, not an API's answer: the base URL is likely not the API's (it usually ends in /v1)"
    return " ".join(text.split())[:200] or "(no body)"
