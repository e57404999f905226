"""The service's side of outcome signatures: its Ed25519 key (derived from a seed kept in the store) and the
HMAC step tokens; what a verifier needs (the payload, the digest, verify) is the SDK's, in
``npcmind_client.signing``, so the service signs exactly what the game checks."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from npcmind_client.signing import ATTESTS, NotCanonical, b64, canonical, digest, key_id, signed_payload, verify

__all__ = ["ATTESTS", "NotCanonical", "Signer", "StepTokens", "canonical", "digest", "signed_payload", "verify"]


class StepTokens:
    """HMAC tokens that bind a tape to the NPC and the step the service issued it with, so no step is skipped."""

    def __init__(self, key: bytes) -> None:
        self._key = hashlib.sha256(b"npcmind step tokens v1\n" + key).digest()

    def issue(self, npc_id: str, step: str, tape: dict[str, Any]) -> str:
        """The token for ``tape`` (without its own token) as returned with instruction ``step``."""
        body = canonical({"npcId": npc_id, "step": step, "tapeDigest": digest(tape)})
        return b64(hmac.new(self._key, body, hashlib.sha256).digest())

    def valid(self, token: object, npc_id: str, step: str, tape: dict[str, Any]) -> bool:
        """Whether ``token`` is the one this service issued for this NPC, step and tape."""
        if not isinstance(token, str):
            return False
        expected = self.issue(npc_id, step, tape).encode()
        return hmac.compare_digest(token.encode("utf-8", "surrogatepass"), expected)  # bytes: any text compares


class Signer:
    """The service's signing key, derived from a 32-byte seed kept in the store (survives restarts)."""

    def __init__(self, seed: bytes) -> None:
        self._key = Ed25519PrivateKey.from_private_bytes(seed[:32])
        self.public_raw = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.kid = key_id(self.public_raw)

    @property
    def public_key(self) -> str:
        """The public key, base64url of its 32 raw bytes."""
        return b64(self.public_raw)

    def sign(self, payload: dict[str, Any]) -> str:
        """`<kid>.<base64url signature>` over the payload's canonical JSON."""
        return f"{self.kid}.{b64(self._key.sign(canonical(payload)))}"
