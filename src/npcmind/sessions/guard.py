"""Who is asking: the local profile's implicit sessions, or the hosted profile's tokens, limits and rates."""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
import os
import time
from collections.abc import Callable

from npcmind.context.registry import SessionRegistry
from npcmind.decide.pipeline import SessionContext
from npcmind.manifest import Manifest
from npcmind.protocol.a2g import SessionResponse
from npcmind.protocol.errors import ApiError
from npcmind.sessions.clients import KEY_PREFIX, Client
from npcmind.sessions.tokens import TokenClaims, TokenError, TokenSigner
from npcmind.shared.base import Shared
from npcmind.storage.base import SessionRecord, Store

log = logging.getLogger("npcmind.sessions")
REVOCATION_POLL_S = 1.0  # a process reads the store's revocations at most this long before it serves a request
NEW_SESSION = "open a session with the client API key at POST /v1/session and send its session_token"


def bearer(authorization: str | None, missing: str) -> str:
    """The token of an `Authorization: Bearer` header, or a 401 (``missing``: what to send instead)."""
    if not authorization:
        raise ApiError(401, "unauthorized", missing)
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise ApiError(401, "unauthorized", "Authorization must be 'Bearer <token>'")
    return value.strip()


def key_owner(clients: dict[str, Client], authorization: str | None) -> Client:
    """The client whose API key the request carries (401 missing or unknown): asked before anything else of a
    request, so one without a key learns nothing of what else it got wrong."""
    key = bearer(authorization, "missing Authorization: Bearer <client API key>")
    owner = next((c for c in clients.values() if c.key_matches(key)), None)
    if owner is None:
        raise ApiError(401, "unauthorized", "unknown API key")
    return owner


def key_holder(clients: dict[str, Client], authorization: str | None, client_id: str) -> Client:
    """The client whose API key the request carries, which must be ``client_id`` (401 unknown key, 403 another's):
    what only the game's owner holds, never a session (a player's copy of the game) by its token."""
    owner = key_owner(clients, authorization)
    client = clients.get(client_id)
    if client is None or owner.client_id != client_id:
        raise ApiError(403, "forbidden", f"this API key is not a key of client {client_id!r}")
    return client


class Guard:
    """Turns a request's credentials and body client_id into the session it belongs to."""

    def __init__(
        self,
        registry: SessionRegistry,
        store: Store,
        signer: TokenSigner,
        shared: Shared,
        manifest: Manifest | None = None,
        clients: dict[str, Client] | None = None,
        revocation_poll_s: float = REVOCATION_POLL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.store = store
        self.signer = signer
        self.shared = shared
        self.manifest = manifest
        self.clients = clients
        self._sessions: dict[str, SessionRecord] = {}
        self.owner = "p_" + os.urandom(8).hex()  # this process, as the owner of the sessions it serves
        self.poll_s = revocation_poll_s
        self._clock = clock  # when reads of the store's revocations began and are asked for (tests set their own)
        self._ended: dict[str, float] = {}  # sessions this process knows ended, until their tokens expire
        self._expiring: list[tuple[float, str]] = []  # the same, soonest expiry first
        self._read_upto = 0  # the store's revocations read so far (0: none yet; the first read takes all kept)
        self._read_at = -math.inf  # when the last read began (by the clock)
        self._reading = asyncio.Lock()

    @property
    def hosted(self) -> bool:
        return self.clients is not None

    def manifest_for(self, client_id: str) -> Manifest:
        """The manifest a client's requests are checked against."""
        if self.clients is None:
            assert self.manifest is not None
            return self.manifest
        return self.clients[client_id].manifest

    async def claims(self, authorization: str | None) -> TokenClaims:
        """A valid session's claims (hosted profile), after the client's request rate: 401 or 429 otherwise."""
        token = bearer(authorization, f"missing Authorization: Bearer <session token>; {NEW_SESSION}")
        now = time.time()
        try:
            claims = self.signer.verify(token, now)
        except TokenError as e:
            if token.startswith(KEY_PREFIX):  # the client key sent where its session token belongs
                msg = "this is a client API key: it goes to POST /v1/session only; send the session_token it answers"
                raise ApiError(401, "unauthorized", msg) from None
            raise ApiError(401, "unauthorized", f"{e}: {NEW_SESSION}") from None
        await self._read_revocations()
        if claims.sid in self._ended:  # ended here, or read from the store: whatever Redis says now
            raise ApiError(401, "unauthorized", f"session ended or unknown: {NEW_SESSION}")
        rec = self._sessions.get(claims.sid)
        revoked = await self.shared.revoked(claims.sid)  # ended at any process: shared at once
        if rec is None or revoked is None:  # not known here, or the shared state cannot say: the store is the authority
            rec = await self.store.sessions.get(claims.sid)
            if rec is not None:
                self._remember(rec)
        if rec is None or rec.ended or revoked or rec.client_id != claims.cid or claims.cid not in (self.clients or {}):
            raise ApiError(401, "unauthorized", f"session ended or unknown: {NEW_SESSION}")
        await self._rate(claims)
        return claims

    async def _read_revocations(self) -> None:
        """The sessions ended at any process, read from the store by a read that began at most ``poll_s`` before
        this request: Redis only speeds revocation up; paused, flushed, restarted or down, it cannot make an
        ended session valid again past this bound. One read at a time; requests meanwhile share it."""
        asked = self._clock()
        if asked - self._read_at < self.poll_s:
            return
        async with self._reading:
            if self._read_at > asked - self.poll_s:  # a read that began late enough ended while this one waited
                return
            began = self._clock()
            self._read_upto, ended = await self.store.sessions.ended_since(self._read_upto)
            now = time.time()
            for sid, until in ended:
                self._end_here(sid, until, now)
            while self._expiring and self._expiring[0][0] <= now:  # its token fails on its own from now on
                self._ended.pop(heapq.heappop(self._expiring)[1], None)
            self._read_at = began

    def _end_here(self, session_id: str, until: float, now: float) -> None:
        """Refuse a session at this process until ``until`` (its token's expiry), and let go of what it held."""
        if until <= now or session_id in self._ended:
            return
        self._ended[session_id] = until
        heapq.heappush(self._expiring, (until, session_id))
        rec = self._sessions.get(session_id)
        if rec is not None:
            rec.ended = True
        self.registry.end(session_id)

    def _remember(self, rec: SessionRecord) -> None:
        """Keep a session's record at hand, for as many sessions as the registry holds (the store has them all)."""
        self._sessions[rec.session_id] = rec
        while len(self._sessions) > self.registry.max_sessions:
            del self._sessions[next(iter(self._sessions))]

    async def _rate(self, claims: TokenClaims) -> None:
        """The client's request rate, shared by every process: each session may always use its share (the rate
        over ``max_sessions``) and borrow what the others leave; 429 with Retry-After past both."""
        assert self.clients is not None
        spec = self.clients[claims.cid].spec
        rate = spec.requests_per_second
        wait = await self.shared.take(claims.cid, claims.sid, rate, rate / spec.max_sessions)
        if wait > 0:
            raise ApiError(
                429,
                "rate_limited",
                f"over the client's request rate; retry in {wait:.2f} s",
                headers={"Retry-After": str(max(1, round(wait + 0.5)))},
            )

    async def authenticate(self, authorization: str | None) -> TokenClaims | None:
        """First, before the body is read: the token's claims (hosted; 401/429), or None (local)."""
        return None if self.clients is None else await self.claims(authorization)

    async def session(self, claims: TokenClaims | None, client_id: str, named_in: str = "the body") -> SessionContext:
        """The session of a session-scoped request: implicit (local) or the token's (hosted; 403 on another client,
        saying where the request named it: ``named_in``, the body or a query parameter)."""
        if self.clients is None or claims is None:
            assert self.manifest is not None
            return await self._owned(f"local:{client_id}", client_id, self.manifest)
        if claims.cid != client_id:
            raise ApiError(403, "forbidden", f"the token is for client {claims.cid!r}, {named_in} names {client_id!r}")
        return await self._owned(claims.sid, claims.cid, self.clients[claims.cid].manifest)

    async def _owned(self, session_id: str, client_id: str, manifest: Manifest) -> SessionContext:
        """The session as this process holds it, rebuilt from the store first when another process served it
        since (or the shared state cannot say): a session that moved away and came back must never be served
        the memory this process kept from before it left."""
        if await self.shared.claim(session_id, self.owner) is not True:
            self.registry.forget(session_id)
        return await self.registry.session(session_id, client_id, manifest)

    async def client_of(self, authorization: str | None) -> str | None:
        """For routes without a body: the token's client (hosted), or None (local)."""
        if self.clients is None:
            return None
        return (await self.claims(authorization)).cid

    async def open(self, authorization: str | None, client_id: str) -> SessionResponse:
        """POST /v1/session: the client's API key opens a session within its limit."""
        if self.clients is None:
            raise ApiError(404, "not_found", "sessions exist only in the hosted profile; the local profile needs none")
        client = key_holder(self.clients, authorization, client_id)
        now = time.time()
        ttl = client.spec.session_ttl_s
        sid = "s_" + os.urandom(12).hex()
        rec = SessionRecord(sid, client_id, now, now + ttl)
        if not await self.store.sessions.open(rec, client.spec.max_sessions):  # count and insert in one step
            raise ApiError(
                429,
                "too_many_sessions",
                f"client {client_id!r} has its {client.spec.max_sessions} sessions"
                " open; end one with DELETE /v1/session",
                headers={"Retry-After": "1"},
            )
        self._remember(rec)
        token = self.signer.sign(TokenClaims(sid, client_id, int(now + ttl)))
        return SessionResponse(token, sid, ttl)

    async def end(self, authorization: str | None) -> str:
        """DELETE /v1/session: the token stops working."""
        if self.clients is None:
            raise ApiError(404, "not_found", "sessions exist only in the hosted profile")
        claims = await self.claims(authorization)
        await self.store.sessions.end(claims.sid)  # first, durably: the store is what every process reads
        self._end_here(claims.sid, claims.exp, time.time())
        if not await self.shared.revoke(claims.sid, claims.exp):  # the fast path: every process at its next request
            log.warning(
                "session %s ended, but the shared state could not take its revocation (%s): the other processes "
                "refuse it once they read the store's revocations, within %g s (NPCMIND_REVOCATION_POLL_S)",
                claims.sid,
                self.shared.problem() or "no answer",
                self.poll_s,
            )
        return claims.sid
