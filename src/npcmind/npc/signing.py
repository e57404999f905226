"""Ed25519 signatures over RFC 8785 canonical JSON, so a game server can check an outcome offline with the public key.

A signature attests what this service did: that it judged this tape (its digest) for this NPC by this
ruleset and reached this verdict. Inference runs on the game's side, so it does not attest that a model
wrote `generatedOutput`, nor anything about the tape's other fields beyond what the game sent.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from npcmind.npc.jcs import NotCanonical, canonical

__all__ = ["ATTESTS", "NotCanonical", "Signer", "StepTokens", "canonical", "digest", "signed_payload", "verify"]

ATTESTS = "npcmind/ruleset-verdict/v1"  # the payload's kind: a ruleset's verdict, never an inference's origin


def digest(obj: Any) -> str:
    """SHA-256 hex of an object's canonical JSON (the tape digest inside a signed outcome and a step token)."""
    return hashlib.sha256(canonical(obj)).hexdigest()


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def _unb64(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def key_id(public_raw: bytes) -> str:
    """A short stable name for a public key."""
    return hashlib.sha256(public_raw).hexdigest()[:16]


def signed_payload(npc_id: str, finalize: dict[str, Any], tape: Any) -> dict[str, Any]:
    """Exactly what the signature covers: the Finalize instruction as sent (its `signature` left out), for
    the path's NPC, by the ruleset its `ruleAudit.preset` names, over the returned tape's digest."""
    verdict = {k: v for k, v in finalize.items() if k != "signature"}
    audit = verdict.get("ruleAudit")
    return {
        "attests": ATTESTS,
        "npcId": npc_id,
        "rulesetId": audit.get("preset") if isinstance(audit, dict) else None,
        "tapeDigest": digest(tape),
        "rulesetVerdict": verdict,
    }


class StepTokens:
    """HMAC tokens that bind a tape to the NPC and the step the service issued it with, so no step is skipped."""

    def __init__(self, key: bytes) -> None:
        self._key = hashlib.sha256(b"npcmind step tokens v1\n" + key).digest()

    def issue(self, npc_id: str, step: str, tape: dict[str, Any]) -> str:
        """The token for ``tape`` (without its own token) as returned with instruction ``step``."""
        body = canonical({"npcId": npc_id, "step": step, "tapeDigest": digest(tape)})
        return _b64(hmac.new(self._key, body, hashlib.sha256).digest())

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
