"""The cascade's local policy (no I/O): the game's own, or the one the service distilled from the model's
decisions (GET /v1/policy), so a game gets better without a release.

The service's policy is asked once the manifest's version is known, again every ``policy_refresh_ms`` (with
``If-None-Match``: a 304 costs no body) and at once when the manifest version changes. A 200 is loaded for
the manifest version the SDK knows; one for another version is never used (said once, none kept, and the
manifest asked again: the service may run a new one); a 404 means none yet. By default a game that gave its
own ``policy`` keeps it and fetches nothing; one that gave none uses the service's (its operator opted in by
running ``distill``); ``fetch_policy`` turns fetching on or off either way, and a fetched policy, while one is
usable, decides in place of the game's own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from npcmind_client.policy import MAX_BYTES, Policy, PolicyError
from npcmind_client.say import SayOnce

if TYPE_CHECKING:
    from npcmind_client.roster import Entity

PolicyFunction = Callable[["Entity"], "tuple[str, float] | None"]
LocalPolicy = Policy | PolicyFunction
# A minute: a new policy comes at most every --distill-every hours, so sooner finds nothing new; a 304 (no
# body) a minute costs the service nothing, and a game session of a few minutes still picks up a new one.
DEFAULT_POLICY_REFRESH_MS = 60_000


class Cascade:
    """Which local policy decides before the service, and when to ask the service for its own."""

    def __init__(
        self,
        client_id: str,
        policy: LocalPolicy | None,
        fetch: bool | None,
        refresh_ms: float,
        say: SayOnce,
        manifest_version: str | None = None,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.client_id = client_id
        self.own = policy
        self.fetch = policy is None if fetch is None else fetch
        self.refresh_ms = refresh_ms
        self.max_bytes = max_bytes  # the largest policy body read (the transport stops one byte past it)
        self.fetched: Policy | None = None
        self.manifest_version = manifest_version
        self.recheck_manifest = False  # a policy for another version came: the manifest may have changed
        self._say = say
        self._etag: str | None = None
        self._next = float("-inf")
        self._asking = False

    def active(self) -> LocalPolicy | None:
        """The policy that decides now: the service's while one is usable, else the game's own (a ``Policy``
        of the game's only for the manifest version it was distilled for, once that is known)."""
        if self.fetched is not None:
            return self.fetched
        own = self.own
        if isinstance(own, Policy) and self.manifest_version not in (None, own.manifest_version):
            self._say(f"own-policy:{self.manifest_version}", _other_version(own, self.manifest_version))
            return None
        return own

    def choose(self, e: Entity, world: dict[str, Any], scope_state: dict[str, Any] | None) -> tuple[str, float] | None:
        """The active policy's choice for ``e`` (action, confidence), or None: ask the service."""
        policy = self.active()
        if policy is None:
            return None
        if isinstance(policy, Policy):
            return policy.choose(e.type, e.observation, e.legal_actions, world, scope_state, e.trigger, e.profile)
        return policy(e)

    # --- fetching the service's -----------------------------------------------------------------

    def due(self, now: float) -> bool:
        """Whether GET /v1/policy goes out now (fetching on, the manifest version known, none in flight)."""
        return self.fetch and self.manifest_version is not None and not self._asking and now >= self._next

    def request(self, now: float) -> tuple[str, dict[str, str]]:
        """The path and the extra headers of GET /v1/policy; the next is due ``refresh_ms`` later."""
        self._asking = True
        self._next = now + self.refresh_ms
        path = f"/v1/policy?{urlencode({'client_id': self.client_id})}"
        return path, {"if-none-match": self._etag} if self._etag is not None else {}

    def answered(self, status: int, body: Any, headers: dict[str, str]) -> bool:
        """Take the answer to GET /v1/policy; False for an answer the scheduler deals with (401, 429, 5xx)."""
        self._asking = False
        if status == 304:
            return True
        if status == 404:
            self._drop()
            return True
        if status != 200:
            return False
        loaded: Policy | None = None
        try:
            loaded = self._load(body)
            if self.manifest_version is not None:
                loaded.check(self.manifest_version)
            policy = loaded
        except Exception as e:  # PolicyError, or a file this SDK cannot read at all: never into the game loop
            self._drop()
            version = loaded.manifest_version if loaded is not None else None
            if version is None and isinstance(body, dict):
                version = body.get("manifest_version")
            self.recheck_manifest = (loaded is not None or isinstance(body, dict)) and version != self.manifest_version
            self._say(f"policy:{_kind(str(e))}", f"the service's local policy is not used: {e}", False)
            return True
        self.fetched = policy
        self._etag = headers.get("etag")
        return True

    def _load(self, body: Any) -> Policy:
        """The policy of a 200: loaded already (the SDK's transport loads it on its worker thread, so a large
        file never holds ``tick()``), or why it could not be; its raw bytes (at most one byte past
        ``max_bytes``) or a parsed object, from a game's own HTTP."""
        if isinstance(body, Policy):  # the SDK's transport loads it on its worker, off the game's frame
            return body
        if isinstance(body, PolicyError):
            raise body
        if isinstance(body, bytes | bytearray) and len(body) > self.max_bytes:
            raise PolicyError(
                f"GET /v1/policy: the body is larger than {self.max_bytes:,} bytes (policy_max_bytes), "
                "not read past that"
            )
        source = bytes(body) if isinstance(body, bytes | bytearray) else body if isinstance(body, dict) else b""
        return Policy.load(source, max_bytes=self.max_bytes)

    def failed(self) -> None:
        """GET /v1/policy got no answer: asked again on its period."""
        self._asking = False

    def manifest(self, version: str | None) -> None:
        """The manifest version the service runs now: on a change the policy for the old one goes, and the
        service's is asked at once."""
        self.recheck_manifest = False
        if version is None or version == self.manifest_version:
            return
        self.manifest_version = version
        self._drop()
        self._next = float("-inf")

    def _drop(self) -> None:
        self.fetched = None
        self._etag = None


def _other_version(policy: Policy, version: str | None) -> str:
    return (
        f"the game's policy was distilled for manifest version {policy.manifest_version}, and the service runs "
        f"{version}: a policy for another manifest version is never used (distill again)"
    )


def _kind(text: str) -> str:
    """A message's kind: the same problem with another hash or figure is said once."""
    return re.sub(r"sha256:[0-9a-f]+|\d+", "#", text)
