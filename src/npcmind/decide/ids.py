"""Decision ids that cannot be guessed or forged: a sequence number, random bits and a MAC over session and both.

The sequence number lets the store keep decisions in an append-only table (cheap commits) and find one
by id without an index on random keys; the MAC under the service's secret makes an id unforgeable. The MAC
needs nothing but the id and the session, so a forged id is refused before the store is asked: one over the
entity too (the first form) could only be checked against the decision read back, and 256 forged ids in a
report cost 256 store lookups. The entity needs no MAC: the number names one stored decision, of one entity.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

_SEQ = 6
_RAND = 6
_MAC = 12  # 24 bytes in all: 32 base64 characters, no padding
_LEN = 2 + 4 * (_SEQ + _RAND + _MAC) // 3
_FORM = b"npcmind decision id 2\x00"  # apart from the first form's MAC input (session, entity, head)
_URLSAFE = bytes.maketrans(b"+/", b"-_")  # base64url, as base64.urlsafe_b64encode makes it (24 bytes: no padding)


class DecisionIds:
    """Issues and checks ids under the service's secret, which lives in the store and survives restarts."""

    def __init__(self, secret: bytes) -> None:
        self._keyed = hashlib.blake2b(key=secret, digest_size=_MAC)  # keyed BLAKE2b is a MAC; copied per id

    def _session(self, session_id: str) -> hashlib.blake2b:
        """The MAC's state once the session is in it: copied per id."""
        h = self._keyed.copy()
        h.update(_FORM + session_id.encode() + b"\x00")
        return h

    def _mac(self, session_id: str, head: bytes) -> bytes:
        h = self._session(session_id)
        h.update(head)
        return h.digest()

    def issue_many(self, first_seq: int, session_id: str, n: int) -> list[str]:
        """Ids of ``n`` consecutive decisions ``first_seq``, ``first_seq + 1``... of a session."""
        rand = os.urandom(_RAND * n)
        session = self._session(session_id)
        out = []
        for i in range(n):
            head = (first_seq + i).to_bytes(_SEQ, "big") + rand[i * _RAND : (i + 1) * _RAND]
            h = session.copy()
            h.update(head)
            out.append("d_" + binascii.b2a_base64(head + h.digest(), newline=False).translate(_URLSAFE).decode())
        return out

    @staticmethod
    def seq_of(decision_id: str) -> int | None:
        """The sequence number inside an id, or None when it is not one of ours at all."""
        raw = _decoded(decision_id)
        return None if raw is None else int.from_bytes(raw[:_SEQ], "big")

    def verify(self, decision_id: str, session_id: str) -> int | None:
        """The id's sequence number when this service issued it to this session, else None: checked without the
        store, so a forged id costs no lookup."""
        raw = _decoded(decision_id)
        if raw is None:
            return None
        head, mac = raw[: _SEQ + _RAND], raw[_SEQ + _RAND :]
        return int.from_bytes(head[:_SEQ], "big") if hmac.compare_digest(mac, self._mac(session_id, head)) else None


def _decoded(decision_id: str) -> bytes | None:
    """The bytes of an id spelt exactly as issued, else None: the lenient decoder read `+/` as `-_` and skipped
    stray characters and padding, so an id with a character changed was still taken as the decision issued."""
    if not decision_id.startswith("d_") or len(decision_id) != _LEN:
        return None
    try:
        raw = base64.urlsafe_b64decode(decision_id[2:])
    except ValueError:  # binascii.Error, and non-ASCII characters
        return None
    exact = len(raw) == _SEQ + _RAND + _MAC and base64.urlsafe_b64encode(raw).decode() == decision_id[2:]
    return raw if exact else None
