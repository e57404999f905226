"""Session tokens: signed by the service, naming session and client, expiring, valid across restarts."""

from __future__ import annotations

import base64
import hashlib
import hmac

import msgspec

PREFIX = "nms1."


class TokenClaims(msgspec.Struct):
    """What a token says."""

    sid: str
    cid: str
    exp: int


class TokenError(Exception):
    """A token that is missing, malformed, tampered with or expired."""


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def unb64(s: str) -> bytes:
    """The bytes of the one base64url spelling of them, unpadded, or a ValueError: the lenient decoder took another
    last character, `+/` for `-_`, padding and stray characters, so a changed byte of a token still verified."""
    try:
        raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    except ValueError:  # binascii.Error, and non-ASCII characters
        raise ValueError("not base64url") from None
    if _b64(raw) != s:
        raise ValueError("not the unpadded base64url spelling of its bytes")
    return raw


class TokenSigner:
    """Signs and checks tokens with a secret kept in the store."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, payload: bytes) -> bytes:
        return hashlib.blake2b(payload, key=self._secret, digest_size=32).digest()

    def sign(self, claims: TokenClaims) -> str:
        """A token for these claims."""
        payload = msgspec.json.encode(claims)
        return PREFIX + _b64(payload) + "." + _b64(self._mac(payload))

    def verify(self, token: str, now: float) -> TokenClaims:
        """The claims of a valid, unexpired token; TokenError otherwise."""
        if not token.startswith(PREFIX) or token.count(".") != 2:
            raise TokenError("not a session token")
        try:
            body, mac = token[len(PREFIX) :].split(".")
            payload, sig = unb64(body), unb64(mac)
        except ValueError:
            raise TokenError("malformed session token") from None
        if not hmac.compare_digest(sig, self._mac(payload)):
            raise TokenError("session token signature does not match")
        try:
            claims = msgspec.json.decode(payload, type=TokenClaims)
        except msgspec.DecodeError:
            raise TokenError("malformed session token") from None
        if claims.exp <= now:
            raise TokenError("session token expired")
        return claims
