"""Ed25519 signatures over canonical JSON, so a game server can check an outcome offline with the public key."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def canonical(obj: Any) -> bytes:
    """Canonical JSON: keys sorted at every level, no whitespace, UTF-8, shortest number forms."""
    return msgspec.json.encode(obj, order="sorted")


def digest(obj: Any) -> str:
    """SHA-256 hex of an object's canonical JSON (the tape digest inside a signed outcome)."""
    return hashlib.sha256(canonical(obj)).hexdigest()


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def _unb64(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def key_id(public_raw: bytes) -> str:
    """A short stable name for a public key."""
    return hashlib.sha256(public_raw).hexdigest()[:16]


def signed_payload(
    npc_id: str, valid: bool, dialogue: str, action: Any, state_transform: Any, memory_store: Any, tape: Any
) -> dict[str, Any]:
    """Exactly what the signature covers."""
    return {
        "npcId": npc_id,
        "valid": valid,
        "dialogue": dialogue,
        "action": action,
        "stateTransform": state_transform,
        "memoryStore": memory_store,
        "tapeDigest": digest(tape),
    }


class Signer:
    """The service's signing key, derived from a 32-byte seed kept in the store (survives restarts)."""

    def __init__(self, seed: bytes) -> None:
        self._key = Ed25519PrivateKey.from_private_bytes(seed[:32])
        self.public_raw = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.kid = key_id(self.public_raw)

    @property
    def public_key(self) -> str:
        """The public key, base64url of its 32 raw bytes."""
        return _b64(self.public_raw)

    def sign(self, payload: dict[str, Any]) -> str:
        """`<kid>.<base64url signature>` over the payload's canonical JSON."""
        return f"{self.kid}.{_b64(self._key.sign(canonical(payload)))}"


def verify(signature: str, payload: dict[str, Any], public_keys: dict[str, str]) -> bool:
    """Whether ``signature`` is a valid signature of ``payload`` by one of the keys (kid → base64url key)."""
    kid, _, sig = signature.partition(".")
    raw = public_keys.get(kid)
    if raw is None or not sig:
        return False
    try:
        sig_raw = _unb64(sig)
        if _b64(sig_raw) != sig:  # one encoding per signature: no malleable padding bits
            return False
        Ed25519PublicKey.from_public_bytes(_unb64(raw)).verify(sig_raw, canonical(payload))
    except (InvalidSignature, ValueError, TypeError):  # TypeError: a key that is not text
        return False
    return True
