"""The store interface: everything the service must not lose, in four parts by what they hold (decisions,
sessions, policies, secrets), each behind one async API implemented for SQLite and PostgreSQL."""

from __future__ import annotations

import bisect
import logging
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

log = logging.getLogger("npcmind.storage")

SCHEMA_VERSION = 4  # 1: a row a decision (moved over at start); 2: a row a request, outcomes apart;
# 3: the features of fresh decisions (a row a request) and the distilled policies; 4: what the model read (a
# features row's prompt) and the manifests it was rendered with
MANIFEST_EVERY_S = 3600.0  # a process keeps its manifest again this often: prune forgets one unused for longer


def check_version(found: int | None, where: str) -> None:
    """Refuse a store written by a newer npcmind: its rows may mean what this one cannot know."""
    if found is not None and found > SCHEMA_VERSION:
        raise ValueError(
            f"the store {where} was written by a newer npcmind (schema version {found}; this npcmind knows up to "
            f"{SCHEMA_VERSION}): upgrade npcmind, or give this one another --store"
        )


def read_version(raw: bytes | None, where: str) -> int | None:
    """The schema version a store's meta row holds; a value that is no number names the store, not int()."""
    if raw is None:
        return None
    text = bytes(raw).decode(errors="replace")
    try:
        return int(text)
    except ValueError:
        raise ValueError(
            f"the store {where} has a schema_version of {text[:40]!r}, not a number: it was not written by npcmind, "
            "or was damaged; give another --store"
        ) from None


def check_beside(found: int | None, where: str) -> None:
    """A process beside the service (distill) creates and migrates nothing: the store must be this version."""
    if found is None:
        raise ValueError(f"the store {where} holds no npcmind store (no schema_version): check --store")
    check_version(found, where)
    if found < SCHEMA_VERSION:
        raise ValueError(
            f"the store {where} was written by an older npcmind (schema version {found}; this npcmind reads "
            f"{SCHEMA_VERSION}) and lacks what this one reads: start `npcmind serve` on it once"
        )


class StoreError(Exception):
    """The store could not keep or read what it was asked (disk full, I/O error): nothing of the request
    was kept, so nothing of it may be acknowledged; the HTTP layer answers 503."""


@dataclass(slots=True)
class IssuedDecision:
    """An AI decision as issued to one session, and its outcome once the game reports it."""

    seq: int
    decision_id: str
    session_id: str
    entity_id: str
    type: str
    action: str
    label: str
    created_at: float
    outcome: str | None = None
    detail: str | None = None


@dataclass(slots=True)
class SessionRecord:
    """A session of one client, as created by POST /v1/session (or implicitly in the local profile)."""

    session_id: str
    client_id: str
    created_at: float
    expires_at: float
    ended: bool = False


@dataclass(slots=True)
class DecisionFeatures:
    """What one fresh AI decision was made from and what it chose: a policy learns from these (issue 23)."""

    seq: int
    type: str
    profile: str | None
    observation: dict[str, Any]  # numbers quantized as in the cache key
    trigger: str | None
    legal_actions: list[str]
    action: str
    confidence: float | None


@dataclass(slots=True)
class RequestFeatures:
    """The fresh decisions of one request with what they share: kept as one row, like the batch itself."""

    client_id: str
    manifest_version: str
    created_at: float
    world: dict[str, Any]
    scope_state: dict[str, Any] | None
    decisions: list[DecisionFeatures]
    read: bytes | None = None  # what the model read (decide/read.py's Read, JSON): kept compressed for replay
    manifest: bytes | None = None  # the manifest (JSON), when this process has not kept its version lately


@dataclass(slots=True)
class TrainingRow:
    """One fresh decision as distill reads it back: its features, and the outcome the game reported if any."""

    seq: int
    manifest_version: str
    created_at: float
    type: str
    profile: str | None
    observation: dict[str, Any]
    world: dict[str, Any]
    scope_state: dict[str, Any] | None
    trigger: str | None
    legal_actions: list[str]
    action: str
    confidence: float | None
    outcome: str | None = None
    session_id: str | None = None  # the session it was decided for: distill bounds what one session weighs


@dataclass(slots=True)
class StoredPolicy:
    """A distilled policy file as the service serves it."""

    client_id: str
    manifest_version: str
    created_at: float
    data: bytes


_encode = msgspec.json.Encoder().encode
_Entry = tuple[int, str, str | None, dict[str, Any], str | None, list[str], str, float | None]
_Features = tuple[str, dict[str, Any], dict[str, Any] | None, list[_Entry]]
_decode_features = msgspec.json.Decoder(_Features).decode


def features_row(f: RequestFeatures) -> tuple[int, str, float, bytes, bytes | None]:
    """A request's features as the one row every store keeps of them: the first number, the client, the time
    and [manifest version, world, scope state, [[seq, type, profile, observation, trigger, legal, action,
    confidence], ...]] as JSON, zlib-compressed: the field names repeat in every entry, and compressed a
    request of 16 took 389 bytes instead of 2,768 (20 us at level 1; docs/policy.md); and what the model read,
    compressed apart (training never reads it; docs/replay.md)."""
    entries = [
        (d.seq, d.type, d.profile, d.observation, d.trigger, d.legal_actions, d.action, d.confidence)
        for d in f.decisions
    ]
    data = zlib.compress(_encode((f.manifest_version, f.world, f.scope_state, entries)), 1)
    read = zlib.compress(f.read, 1) if f.read is not None else None
    return f.decisions[0].seq, f.client_id, f.created_at, data, read


def manifest_rows(features: Iterable[RequestFeatures]) -> list[tuple[str, float, bytes]]:
    """The manifests the rows carry, as kept: version, when last used, the manifest's JSON compressed."""
    return [(f.manifest_version, f.created_at, zlib.compress(f.manifest, 1)) for f in features if f.manifest]


def training_rows(created_at: float, data: bytes) -> list[TrainingRow]:
    """The decisions of one stored features row, outcomes not yet joined."""
    manifest, world, scope_state, entries = _decode_features(zlib.decompress(data))
    return [
        TrainingRow(seq, manifest, created_at, typ, profile, obs, world, scope_state, trigger, legal, action, conf)
        for seq, typ, profile, obs, trigger, legal, action, conf in entries
    ]


def readable_rows(client_id: str, rows: Iterable[tuple[float, bytes]]) -> list[TrainingRow]:
    """The decisions of a client's features rows; a row that cannot be read (damaged on disk, written by hand)
    is skipped and counted in one warning, so one bad row neither stops a distill nor hides the others."""
    out: list[TrainingRow] = []
    bad, first = 0, ""
    for at, data in rows:
        try:
            out += training_rows(at, bytes(data))
        except (zlib.error, msgspec.DecodeError, ValueError, TypeError) as e:
            bad += 1
            first = first or f"{e.__class__.__name__}: {e}"
    if bad:
        log.warning(
            "store: %d features row%s of client %r cannot be read and %s skipped (the first: %s)",
            bad,
            "" if bad == 1 else "s",
            client_id,
            "was" if bad == 1 else "were",
            first,
        )
    return out


def join_sessions(rows: list[TrainingRow], batches: Iterable[tuple[int, int, str]]) -> None:
    """Name each decision's session from the batches (first number, how many, session) that hold it: distill
    bounds what one session's decisions and reports weigh (docs/policy.md)."""
    spans = sorted(batches)
    firsts = [b[0] for b in spans]
    for r in rows:
        i = bisect.bisect_right(firsts, r.seq) - 1
        if i >= 0 and r.seq < spans[i][0] + spans[i][1]:
            r.session_id = spans[i][2]


def batch_row(rows: list[IssuedDecision]) -> tuple[int, int, str, float, bytes]:
    """One request's decisions as the one row every store keeps of them (a row a decision cost 2 KB a request):
    the first number, how many, the session, the time, and [decision_id, entity_id, type, action, label] each."""
    first = rows[0]
    decisions = _encode([(r.decision_id, r.entity_id, r.type, r.action, r.label) for r in rows])
    return first.seq, len(rows), first.session_id, first.created_at, decisions


class Decisions(Protocol):
    """Issued decisions and their outcomes (and, in the same commit, the features a policy learns from)."""

    async def allocate(self, n: int) -> int:
        """The first of ``n`` new consecutive decision sequence numbers."""
        ...

    async def record(self, rows: list[IssuedDecision], features: RequestFeatures | None = None) -> None:
        """Keep issued decisions so that their reports can be checked later, and the features of the fresh ones
        (in the same commit) so that a policy can learn from them; ``rows`` may be empty when the features are of
        decisions recorded before (a streamed batch keeps them once, with its last group)."""
        ...

    async def get(self, seq: int) -> IssuedDecision | None:
        """An issued decision by its sequence number."""
        ...

    async def set_outcome(self, seq: int, outcome: str, detail: str | None, now: float) -> bool:
        """Record a decision's outcome unless one is recorded already (False then)."""
        ...

    async def of_session(self, session_id: str, limit: int) -> list[IssuedDecision]:
        """This session's latest decisions, newest first (to rebuild memory after a restart)."""
        ...

    async def prune(self, before: float) -> int:
        """Forget decisions issued before ``before``, their outcomes and features too; how many were forgotten.
        Decision numbers never repeat after it, across restarts too."""
        ...


class Sessions(Protocol):
    """Sessions, the scopes each added, and the revocations that end them at every process."""

    async def create(self, rec: SessionRecord) -> None:
        """Keep a new session."""
        ...

    async def open(self, rec: SessionRecord, limit: int) -> bool:
        """Keep a new session unless its client has ``limit`` live ones already (False then), counted and kept
        in one atomic step: two processes opening a client's last session at once must not both succeed."""
        ...

    async def get(self, session_id: str) -> SessionRecord | None:
        """A session by id, ended or not."""
        ...

    async def live(self, client_id: str, now: float) -> int:
        """How many sessions of a client are open and unexpired."""
        ...

    async def end(self, session_id: str) -> None:
        """Mark a session ended and number its revocation, in one commit: its token stops working at every
        process, which learns it from ``ended_since`` even when the shared state (Redis) lost it."""
        ...

    async def ended_since(self, after: int) -> tuple[int, list[tuple[str, float]]]:
        """The sessions ended after revocation number ``after`` (0: all kept), each (session_id, expires_at), and
        the newest number read. Numbers are in commit order: a reader that saw one has seen every smaller one."""
        ...

    async def put_scope(self, session_id: str, name: str, spec: bytes) -> None:
        """Add or replace a scope of this session (JSON of a ScopeSpec)."""
        ...

    async def scopes(self, session_id: str) -> dict[str, bytes]:
        """The scopes this session added."""
        ...

    async def prune(self, before: float) -> int:
        """Forget sessions that expired before ``before`` (their scopes and revocations too); how many."""
        ...


class Policies(Protocol):
    """What a policy learns from (the features of fresh decisions, with outcomes), what the model read for them
    (for replay) and the distilled policies."""

    async def training(self, client_id: str, since: float) -> list[TrainingRow]:
        """The features of this client's fresh decisions issued at or after ``since``, oldest first, each with
        its reported outcome: what ``npcmind distill`` learns from."""
        ...

    async def reads(self, client_id: str, since: float) -> list[tuple[int, bytes]]:
        """What the model read for this client's fresh decisions issued at or after ``since``, a row (its first
        decision number, the kept Read compressed) a features row that holds one: what ``npcmind replay`` sends."""
        ...

    async def manifest(self, version: str) -> bytes | None:
        """A manifest version a prompt was rendered with (its JSON, compressed), if it is kept."""
        ...

    async def training_clients(self, since: float) -> list[str]:
        """The clients with fresh decisions issued at or after ``since``: whom a background distill trains for."""
        ...

    async def put(self, policy: StoredPolicy) -> None:
        """Keep a distilled policy for its client and manifest version, replacing the one before."""
        ...

    async def get(self, client_id: str, manifest_version: str) -> StoredPolicy | None:
        """The latest policy of a client for a manifest version, if one was distilled."""
        ...


class Secrets(Protocol):
    """Keys every process of a deployment must share (MAC keys, token keys, signing seeds)."""

    async def get(self, name: str, size: int = 32) -> bytes:
        """A random secret created once and kept."""
        ...


class Store(Protocol):
    """Durable state, in four parts by what they hold. Once a method has returned, what it wrote survives kill -9
    and a restart."""

    @property
    def decisions(self) -> Decisions:
        """Issued decisions and outcomes."""
        ...

    @property
    def sessions(self) -> Sessions:
        """Sessions, scopes and revocations."""
        ...

    @property
    def policies(self) -> Policies:
        """Training features and distilled policies."""
        ...

    @property
    def secrets(self) -> Secrets:
        """Shared keys."""
        ...

    async def check(self) -> None:
        """Connect, create the schema and let go again, before the server starts: a store that cannot be used
        is one line at start (ValueError), not a failed start-up with a traceback."""
        ...

    async def open(self) -> None:
        """Connect inside the event loop that will use the store; a store it cannot use raises ValueError."""
        ...

    async def prune(self, before: float) -> tuple[int, int]:
        """Forget decisions issued before ``before`` (their outcomes and features too) and sessions that expired
        before it (their scopes too), so the store stops growing; the numbers of decisions and sessions forgotten.
        Decision numbers never repeat after it, across restarts too."""
        ...

    async def close(self) -> None:
        """Flush and release."""
        ...
