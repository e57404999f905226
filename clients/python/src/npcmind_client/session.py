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
        self.pending = False  # a session request is out

    @property
    def hosted(self) -> bool:
        """Whether requests need a session token (an api key was given)."""
        return self.api_key is not None

    def ready(self) -> bool:
        """Whether requests can go now: not hosted, or a token is held."""
        return self.api_key is None or self.token is not None

    def due(self, now: float) -> bool:
        """Whether a session request should go now: none held, or near the end of its life."""
        if self.api_key is None or self.pending:
            return False
        return self.token is None or now >= self.renew_at

    def request(self) -> tuple[dict[str, Any], dict[str, str]]:
        """The body and headers of POST /v1/session."""
        self.pending = True
        return {"client_id": self.client_id}, {"authorization": f"Bearer {self.api_key}"}

    def headers(self) -> dict[str, str]:
        """The headers every other request carries."""
        return {"authorization": f"Bearer {self.token}"} if self.token is not None else {}

    def answered(self, status: int, body: Any, now: float) -> str | None:
        """Take the answer to POST /v1/session; the problem in one line when there is no new token."""
        self.pending = False
        token = body.get("session_token") if status == 200 and isinstance(body, dict) else None
        if isinstance(token, str) and token:
            ttl = body.get("expires_in_s")
            ok = isinstance(ttl, (int, float)) and not isinstance(ttl, bool)
            self.token, self.renew_at = token, now + 0.9 * ttl * 1000 if ok else float("inf")
            return None
        self.failed(now)
        why = error_line(body, "(no session_token)")
        return f"npcmind did not open a session (POST /v1/session answered {status}: {why})"

    def failed(self, now: float) -> None:
        """No new token: a renewal goes on with the live token (a client at its max_sessions cannot open
        another while it lives) and tries again later."""
        self.pending = False
        if self.token is not None:
            self.renew_at = now + RENEW_RETRY_MS

    def lost(self) -> None:
        """The service answered 401: the session ended under us; a new one with the next request."""
        self.token = None
        self.renew_at = float("inf")
