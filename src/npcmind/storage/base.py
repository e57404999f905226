"""The store interface: everything the service must not lose, in four parts by what they hold (decisions,
sessions, policies, secrets), each behind one async API implemented for SQLite and PostgreSQL."""

from __future__ import annotations

import bisect
import logging
import threading
import zlib
from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec
import zstandard

from npcmind.manifest.load import MAX_CHAIN_FIELDS

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
    confidence], ...]] as JSON, compressed (``small_compress``): the field names repeat in every entry, and a
    request of 16 takes 314 bytes instead of 2,843 (docs/policy.md); and what the model read, compressed apart
    (training never reads it; docs/replay.md)."""
    entries = [
        (d.seq, d.type, d.profile, d.observation, d.trigger, d.legal_actions, d.action, d.confidence)
        for d in f.decisions
    ]
    data = small_compress(_encode((f.manifest_version, f.world, f.scope_state, entries)))
    read = small_compress(f.read) if f.read is not None else None
    return f.decisions[0].seq, f.client_id, f.created_at, data, read


def small_compress(data: bytes) -> bytes:
    """zstd level 1, with the content size and a checksum: a 16-entity request's features (2,843 bytes) 4 us and
    314 bytes, what its model read (19,639 bytes) 14 us and 1,031 bytes; zlib level 1 with an 8 KiB window took
    6.6 and 27 us for 326 and 1,490 (bench/store_bench.py). Rows kept as zlib before are still read: ``inflate``
    tells the two apart by their first bytes. One compressor a thread, reused (its set-up is paid once)."""
    c: zstandard.ZstdCompressor | None = getattr(_packers, "c", None)
    if c is None:
        c = _packers.c = zstandard.ZstdCompressor(level=1, write_checksum=True)
    return c.compress(data)


_packers = threading.local()
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # a zstd frame's first bytes; a zlib stream's first byte is 0x78 (or 0x08-0x68)


def manifest_rows(features: Iterable[RequestFeatures]) -> list[tuple[str, float, bytes]]:
    """The manifests the rows carry, as kept: version, when last used, the manifest's JSON compressed."""
    return [(f.manifest_version, f.created_at, zlib.compress(f.manifest, 1)) for f in features if f.manifest]


# What distill and replay read back of a stored row is capped (issue 39; docs/policy.md, docs/replay.md): a row past
# a cap is skipped and counted, never read whole, so a store written before the request edge capped scope chains
# (or crafted) costs a run what it costs to look at each row's size, not to read it.
MAX_ROW_BYTES = 256 * 1024  # a features row's JSON, decompressed: the request edge's default body, which holds it
MAX_READ_BYTES = 512 * 1024  # what the model read (a kept call), decompressed: the body, context lines, scopes
# What a row may set is what the request edge lets a decide carry: a world or an observation of at most 64 fields
# (a manifest declares no more), a scope state of at most 256 (a chain's bound, MAX_CHAIN_FIELDS), so a request of
# 16 entities at most 1,344; a row's text holding more than 2,048 keys is past them for sure and is refused as
# soon as that is seen. A chain a store kept from before those bounds had set 19,840 scope fields a decide and
# made replay 12x slower and 65x bigger (issue 39).
MAX_OBJECT_FIELDS = 64
MAX_SCOPE_FIELDS = MAX_CHAIN_FIELDS
MAX_ROW_FIELDS = 2048
MAX_RUN_DECISIONS = 1_000_000  # decisions one run reads: 100,000 train in 8-15 s; past it reading stops
CHUNK = 32 * 1024  # a row is decompressed this much at a time, its fields counted as it goes


def stored_limit(cap: int) -> int:
    """The stored (compressed) size past which a row is over ``cap`` decompressed: zstd adds at most 1/256 of what
    it cannot compress and a header (its compress bound), zlib as rows were kept before 5 bytes a block of about
    2 KiB (0.25%), so a blob longer than this cannot decompress to ``cap`` or less."""
    return cap + cap // 100 + 64


class RowTooLarge(ValueError):
    """A stored row past a read-back cap: its message is why it was skipped, as the user is told."""


def bytes_skip(cap: int) -> str:
    """Why a row past a bytes cap was skipped."""
    return f"more than {cap:,} bytes"


FIELDS_SKIP = f"more than {MAX_ROW_FIELDS:,} fields"
SCOPE_SKIP = f"more than {MAX_SCOPE_FIELDS:,} scope fields"
OBJECT_SKIP = f"a world or an observation of more than {MAX_OBJECT_FIELDS} fields"


def too_many_fields(world: object, scope_state: object, observations: Iterable[object]) -> str | None:
    """Why a row's situation is past the fields a decide may carry, or None."""
    if fields_of(scope_state) > MAX_SCOPE_FIELDS:
        return SCOPE_SKIP
    if fields_of(world) > MAX_OBJECT_FIELDS or any(fields_of(o) > MAX_OBJECT_FIELDS for o in observations):
        return OBJECT_SKIP
    return None


def inflate(data: bytes | None, cap: int, max_keys: int | None = MAX_ROW_FIELDS) -> bytes:
    """A stored blob (zstd, or zlib as rows were kept before) decompressed a chunk at a time, never past ``cap`` + 1
    bytes (RowTooLarge past it, or as soon as the text holds more than ``max_keys`` object keys for sure), so a row
    past a cap costs what it takes to see that, not to read it. None is a blob the store did not hand over: longer
    than ``stored_limit(cap)``. A damaged or cut blob raises ValueError (zlib.error for zlib's)."""
    if data is None:
        raise RowTooLarge(bytes_skip(cap))
    out, keys, chunks = bytearray(), 0, 0
    for part in _zstd_parts(data, cap) if data[:4] == ZSTD_MAGIC else _zlib_parts(data):
        out += part
        if len(out) > cap:
            raise RowTooLarge(bytes_skip(cap))
        # '":' ends a key, and inside a string a quote is always escaped ('\\":'); a key ending in a backslash, or
        # a pattern cut by a chunk's end, can only be missed (one a chunk is taken off): a lower bound of the keys
        if max_keys is not None:
            keys += part.count(b'":') - part.count(b'\\":')
            chunks += 1
            if keys - chunks > max_keys:
                raise RowTooLarge(FIELDS_SKIP)
    return bytes(out)


def _zlib_parts(data: bytes) -> Iterator[bytes]:
    """A zlib blob's text, CHUNK bytes at a time."""
    d = zlib.decompressobj()
    rest = data
    while rest or not d.eof:
        part = d.decompress(rest, CHUNK)
        rest = d.unconsumed_tail
        yield part
        if not part and not rest:
            break
    if not d.eof:
        raise zlib.error("the compressed data is incomplete")


def _zstd_parts(data: bytes, cap: int) -> Iterator[bytes]:
    """A zstd frame's text, CHUNK bytes at a time (read as far as a zlib row's: its first chunks may say which
    cap it is past, fields or bytes)."""
    size = zstandard.frame_content_size(data)
    if size < 0:  # small_compress writes the size: a frame without it was not kept by this service
        raise ValueError("a zstd row without its size")
    n = 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(data) as reader:
            while part := reader.read(CHUNK):
                n += len(part)
                yield part
    except zstandard.ZstdError as e:
        raise ValueError(f"a damaged zstd row: {e}") from None
    if n != size:
        raise ValueError("the compressed data is incomplete")


def fields_of(*objects: object) -> int:
    """How many fields these objects set, together (one that is not an object sets none)."""
    return sum(len(o) for o in objects if isinstance(o, dict))


def training_rows(created_at: float, data: bytes | None) -> list[TrainingRow]:
    """The decisions of one stored features row, outcomes not yet joined; RowTooLarge past a read-back cap."""
    manifest, world, scope_state, entries = _decode_features(inflate(data, MAX_ROW_BYTES))
    why = too_many_fields(world, scope_state, (e[3] for e in entries))
    if why is not None:
        raise RowTooLarge(why)
    return [
        TrainingRow(seq, manifest, created_at, typ, profile, obs, world, scope_state, trigger, legal, action, conf)
        for seq, typ, profile, obs, trigger, legal, action, conf in entries
    ]


class TrainingRows(list[TrainingRow]):
    """A client's decisions read back, with the rows skipped past a cap or damaged (why: how many), the first
    decision number of each row skipped (replay leaves its call out), and whether reading stopped at the cap of
    decisions a run reads."""

    def __init__(self) -> None:
        super().__init__()
        self.skipped: Counter[str] = Counter()
        self.skipped_firsts: set[int] = set()
        self.stopped = False

    def said(self) -> list[str]:
        """What the user is told of what was not read: "3 rows skipped: more than 1,024 scope fields"."""
        out = [f"{n:,} row{'' if n == 1 else 's'} skipped: {why}" for why, n in sorted(self.skipped.items())]
        if self.stopped:
            out.append(
                f"stopped reading at {MAX_RUN_DECISIONS:,} decisions (the most one run reads): --since reads fewer"
            )
        return out


class RowReader:
    """Reads a client's features rows one at a time into TrainingRows: a row past a cap or damaged is skipped and
    counted (and the count logged once at the end), and reading stops at MAX_RUN_DECISIONS decisions."""

    def __init__(self, client_id: str, situations: bool = True) -> None:
        self.client_id = client_id
        self.situations = situations
        self.rows = TrainingRows()
        self._first = ""

    def add(self, first: int, created_at: float, data: bytes | None) -> bool:
        """One stored row; False once the run has read all it may (stop fetching)."""
        if len(self.rows) >= MAX_RUN_DECISIONS:
            self.rows.stopped = True
            return False
        try:
            got = training_rows(created_at, bytes(data) if data is not None else None)
            if not self.situations:  # what replay keeps of them: no row's situation outlives its turn
                for r in got:
                    r.observation, r.world, r.scope_state = {}, {}, None
            self.rows += got
        except RowTooLarge as e:
            self._skip(first, str(e), str(e))
        except (zlib.error, msgspec.DecodeError, ValueError, TypeError) as e:
            self._skip(first, DAMAGED, f"{e.__class__.__name__}: {e}")
        return True

    def _skip(self, first: int, why: str, detail: str) -> None:
        self.rows.skipped[why] += 1
        self.rows.skipped_firsts.add(first)
        if why == DAMAGED:
            self._first = self._first or detail

    def done(self) -> TrainingRows:
        """The rows read, the skipped ones said once in the log (the damaged, then those past a cap)."""
        skipped = self.rows.skipped
        bad = skipped.get(DAMAGED, 0)
        if bad:
            log.warning(
                "store: %d features row%s of client %r cannot be read and %s skipped (the first: %s)",
                bad,
                "" if bad == 1 else "s",
                self.client_id,
                "was" if bad == 1 else "were",
                self._first,
            )
        for why, n in sorted(skipped.items()):
            if why != DAMAGED:
                log.warning("store: client %r: %d features row%s skipped: %s", self.client_id, n, "s"[: n != 1], why)
        return self.rows


DAMAGED = "cannot be read (damaged on disk, or not written by npcmind)"


def readable_rows(
    client_id: str, rows: Iterable[tuple[int, float, bytes | None]], situations: bool = True
) -> TrainingRows:
    """The decisions of a client's features rows (first number, time, data); a row that cannot be read (damaged on
    disk, written by hand) or past a read-back cap is skipped and counted, so one bad row neither stops a distill
    nor hides the others."""
    reader = RowReader(client_id, situations)
    for first, at, data in rows:
        if not reader.add(first, at, data):
            break
    return reader.done()


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

    async def record(
        self, rows: list[IssuedDecision], features: RequestFeatures | None = None, more: bool = False
    ) -> None:
        """Keep issued decisions so that their reports can be checked later, and the features of the fresh ones
        (in the same commit) so that a policy can learn from them; ``rows`` may be empty when the features are of
        decisions recorded before (a streamed batch keeps them once, with its last group). ``more``: a streamed
        batch's group before its last, which a store may keep in a cheaper durable form until that last group
        (SQLite's pending file); kept all the same once this returns."""
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

    async def training(self, client_id: str, since: float, situations: bool = True) -> TrainingRows:
        """The features of this client's fresh decisions issued at or after ``since``, oldest first, each with
        its reported outcome: what ``npcmind distill`` learns from. Read a row at a time: a row past a read-back
        cap (MAX_ROW_BYTES, MAX_ROW_FIELDS) or damaged is skipped and counted, and reading stops at
        MAX_RUN_DECISIONS (docs/policy.md). ``situations=False``: without the observation, world and scope
        state (what replay needs of them is what was decided)."""
        ...

    async def reads(
        self,
        client_id: str,
        since: float,
        after: int | None = None,
        limit: int | None = None,
        skip: Collection[int] = (),
    ) -> list[tuple[int, bytes | None]]:
        """What the model read for this client's fresh decisions issued at or after ``since``, a row (its first
        decision number, the kept Read compressed) a features row that holds one: what ``npcmind replay`` sends.
        ``after`` and ``limit``: the rows after that first number, at most that many (replay reads a page at a
        time). The Read of a row in ``skip`` (its features were skipped), or stored longer than
        ``stored_limit(MAX_READ_BYTES)``, is None: it is not even fetched."""
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
