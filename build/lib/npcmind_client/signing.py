"""Checking an outcome's Ed25519 signature over RFC 8785 canonical JSON, offline with the service's public key:
a game applies nothing the service did not sign (the service signs with the same payload and digest).

A signature attests what the service did: that it judged this tape (its digest) for this NPC by this
ruleset and reached this verdict. Inference runs on the game's side, so it does not attest that a model
wrote `generatedOutput`, nor anything about the tape's other fields beyond what the game sent.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from npcmind_client.jcs import NotCanonical, canonical

__all__ = ["ATTESTS", "NotCanonical", "b64", "canonical", "digest", "key_id", "signed_payload", "unb64", "verify"]

ATTESTS = "npcmind/ruleset-verdict/v1"  # the payload's kind: a ruleset's verdict, never an inference's origin


def digest(obj: Any) -> str:
    """SHA-256 hex of an object's canonical JSON (the tape digest inside a signed outcome and a step token)."""
    return hashlib.sha256(canonical(obj)).hexdigest()


def b64(b: bytes) -> str:
    """Base64url without padding: the form of keys and signatures on the wire."""
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def unb64(s: str) -> bytes:
    """The bytes of a base64url text without padding."""
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


def verify(signature: str, payload: dict[str, Any], public_keys: dict[str, str]) -> bool:
    """Whether ``signature`` is a valid signature of ``payload`` by one of the keys (kid → base64url key)."""
    kid, _, sig = signature.partition(".")
    raw = public_keys.get(kid)
    if raw is None or not sig:
        return False
    try:
        sig_raw = unb64(sig)
        if b64(sig_raw) != sig:  # one encoding per signature: no malleable padding bits
            return False
        Ed25519PublicKey.from_public_bytes(unb64(raw)).verify(sig_raw, canonical(payload))
    except (InvalidSignature, ValueError, TypeError):  # TypeError: a key that is not text
        return False
    return True
