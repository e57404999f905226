"""The hosted profile's session (no I/O): POST /v1/session with the api key, the token on every request,
renewed at 90% of its life so no request meets an expired token, a new one after a 401."""

from __future__ import annotations

from typing import Any

from npcmind_client.errors import error_line

RENEW_RETRY_MS = 30_000.0  # a renewal the service refused is tried again after this, with the old token
RETRY_MS = 1000.0  # a first session that could not be opened is asked again after this


class Session:
    """One client's session token and when to renew it, on the scheduler's clock (ms)."""

    def __init__(self, client_id: str, api_key: str | None) -> None:
        self.client_id = client_id
        self.api_key = api_key
        self.token: str | None = None
        self.renew_at = float("inf")
        self.pending: str | None = None  # the ref of the session request that is out

    @property
    def hosted(self) -> bool:
        """Whether requests need a session token (an api key was given)."""
        return self.api_key is not None

    def ready(self) -> bool:
        """Whether requests can go now: not hosted, a token held, or one asked for (they wait for it)."""
        return self.api_key is None or self.token is not None or self.pending is not None

    def awaited(self) -> list[str]:
        """The session request the others must wait for: the first one (a renewal goes on with the old token)."""
        return [self.pending] if self.pending is not None and self.token is None else []

    def due(self, now: float) -> bool:
        """Whether a session request should go now: none held, or near the end of its life."""
        if self.api_key is None or self.pending is not None:
            return False
        return self.token is None or now >= self.renew_at

    def request(self, ref: str) -> tuple[dict[str, Any], dict[str, str]]:
        """The body and headers of POST /v1/session, sent as ``ref``."""
        self.pending = ref
        return {"client_id": self.client_id}, {"authorization": f"Bearer {self.api_key}"}

    def headers(self) -> dict[str, str]:
        """The headers every other request carries; while the first token is asked for, ``Bearer @<ref>``:
        the transport puts in the ``session_token`` the answer to request ``ref`` brings."""
        if self.token is not None:
            return {"authorization": f"Bearer {self.token}"}
        return {"authorization": f"Bearer @{self.pending}"} if self.pending is not None else {}

    def answered(self, status: int, body: Any, now: float) -> str | None:
        """Take the answer to POST /v1/session; the problem in one line when there is no new token."""
        self.pending = None
        token = session_token(status, body)
        if token is not None:
            ttl = body.get("expires_in_s")
            ok = isinstance(ttl, (int, float)) and not isinstance(ttl, bool) and 0 < ttl <= 2**53  # not NaN or 10**400
            self.token, self.renew_at = token, now + 0.9 * ttl * 1000 if ok else float("inf")
            return None
        self.failed(now)
        why = error_line(body, "(no session_token)")
        return f"npcmind did not open a session (POST /v1/session answered {status}: {why})"

    def failed(self, now: float) -> None:
        """No new token: a renewal goes on with the live token (a client at its max_sessions cannot open
        another while it lives) and tries again later."""
        self.pending = None
        if self.token is not None:
            self.renew_at = now + RENEW_RETRY_MS

    def lost(self) -> None:
        """The service answered 401: the session ended under us; a new one with the next request."""
        self.token = None
        self.renew_at = float("inf")


def session_token(status: int, body: Any) -> str | None:
    """The token a POST /v1/session answer brings, or None: read here alone, by the session and by the transport
    (which puts it in the requests made while it was asked for, before the game's next tick applies it)."""
    token = body.get("session_token") if status == 200 and isinstance(body, dict) else None
    return token if isinstance(token, str) and token else None
