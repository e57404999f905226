"""Decision ids that cannot be guessed or forged: random bits plus a MAC over session and entity."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

_RAND = 10
_MAC = 10


def _b32(b: bytes) -> str:
    return base64.b32encode(b).decode().rstrip("=").lower()


class DecisionIds:
    """Issues and checks ids under the service's secret, which lives in the store and survives restarts."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, session_id: str, entity_id: str, rand: bytes) -> bytes:
        msg = session_id.encode() + b"\x00" + entity_id.encode() + b"\x00" + rand
        return hmac.new(self._secret, msg, hashlib.sha256).digest()[:_MAC]

    def issue(self, session_id: str, entity_id: str) -> str:
        """A new id for a decision given to this session for this entity."""
        rand = os.urandom(_RAND)
        return "d_" + _b32(rand + self._mac(session_id, entity_id, rand))

    def verify(self, decision_id: str, session_id: str, entity_id: str) -> bool:
        """Whether this id was issued by this service to this session for this entity."""
        if not decision_id.startswith("d_") or len(decision_id) != 34:
            return False
        try:
            raw = base64.b32decode(decision_id[2:].upper() + "====")
        except ValueError:
            return False
        rand, mac = raw[:_RAND], raw[_RAND:]
        return hmac.compare_digest(mac, self._mac(session_id, entity_id, rand))
