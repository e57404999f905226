"""The kept calls replay reads back: each provider call's situation with the fresh decisions it gave, joined from
the store's features rows (what was decided, its reported outcome) and what the model read."""

from __future__ import annotations

import random
import zlib
from collections import Counter
from dataclasses import dataclass, field

import msgspec

from npcmind.decide.read import Read, ReadCall, decode_read
from npcmind.manifest import Manifest, ManifestError, from_data
from npcmind.manifest.load import MAX_CHAIN_FIELDS, MAX_CHAIN_SCOPES
from npcmind.storage.base import MAX_READ_BYTES, MAX_RUN_DECISIONS, RowTooLarge, Store, inflate, too_many_fields

CHAIN_SKIP = f"a chain of session scopes past {MAX_CHAIN_SCOPES} scopes or {MAX_CHAIN_FIELDS} fields"


@dataclass(slots=True)
class Kept:
    """One fresh decision as it was made: its number, the entity's number in its call, what was chosen and the
    outcome the game reported (None: none reported)."""

    seq: int
    number: int
    type: str
    action: str
    outcome: str | None


@dataclass(slots=True)
class KeptCall:
    """One provider call: the manifest version it was rendered with, what it read (or its kept Read, compressed:
    opened when it is replayed, so a run holds the calls in flight opened, not all of them), and its kept
    decisions."""

    manifest_version: str
    created_at: float
    read: ReadCall | bytes
    decisions: list[Kept] = field(default_factory=list)

    def opened(self) -> ReadCall:
        """What the call read (a kept Read is checked within its caps when it is loaded)."""
        if isinstance(self.read, bytes):
            return decode_read(inflate(self.read, MAX_READ_BYTES, None)).call
        return self.read


@dataclass(slots=True)
class Loaded:
    """The calls to replay, the manifests they were rendered with (None: not kept), what was left out, why, and how
    many fresh decisions (made by a model) the store holds for the client since then, kept calls or not."""

    calls: list[KeptCall]
    manifests: dict[str, Manifest | None]
    left_out: Counter[str]
    fresh: int = 0


PAGE = 64  # kept reads fetched at once: a run holds a page of them, never the whole store's


async def load(store: Store, client: str, since: float, only_type: str | None, sample: int | None) -> Loaded:
    """A client's kept calls since ``since``: with ``only_type``, those that decided an entity of it (their other
    decisions are not counted); with ``sample``, whole calls drawn at random (seed 0, so a rerun replays the same)
    until they hold ``sample`` decisions. A row past a read-back cap is skipped and counted (docs/replay.md)."""
    training = await store.policies.training(client, since, situations=False)
    left_out: Counter[str] = Counter({f"rows skipped: {why}": n for why, n in training.skipped.items()})
    if training.stopped:
        left_out[f"decisions past the {MAX_RUN_DECISIONS:,} one run reads (--since reads fewer)"] += 1
    rows = {r.seq: r for r in training}
    calls: dict[int, KeptCall] = {}
    after: int | None = None
    while True:
        page = await store.policies.reads(client, since, after, PAGE, training.skipped_firsts)
        for first, blob in page:
            if first in training.skipped_firsts:
                continue  # counted once, with its features row
            r0 = rows.get(first)
            if r0 is None:  # not read back (past the decisions a run reads), or lost: its Read is not opened
                left_out["a row without its features"] += 1
                continue
            call = _call(blob, left_out)
            if call is None or blob is None:
                continue
            kept = calls[first] = KeptCall(r0.manifest_version, r0.created_at, blob)
            for seq, number in call.numbers:
                r = rows.get(seq)
                if r is not None:
                    kept.decisions.append(Kept(seq, number, r.type, r.action, r.outcome))
        if len(page) < PAGE:
            break
        after = page[-1][0]
    chosen = [c for c in calls.values() if only_type is None or any(d.type == only_type for d in c.decisions)]
    for c in chosen:
        if only_type is not None:
            c.decisions = [d for d in c.decisions if d.type == only_type]
    if sample is not None:
        chosen = _sample(chosen, sample)
    versions = {c.manifest_version for c in chosen}
    manifests = {v: await _manifest(store, v) for v in sorted(versions)}
    return Loaded(chosen, manifests, left_out, len(rows) + sum(training.skipped.values()))


def _call(blob: bytes | None, left_out: Counter[str]) -> Read | None:
    """A kept Read opened, within its caps: None (counted in ``left_out``, by why) past one, or damaged."""
    try:
        read = decode_read(inflate(blob, MAX_READ_BYTES, None))  # its scopes' declarations hold keys of their own
    except RowTooLarge as e:
        left_out[f"rows skipped: {e}"] += 1
        return None
    except (zlib.error, msgspec.DecodeError, ValueError):
        left_out["a damaged row"] += 1
        return None
    c = read.call
    why = too_many_fields(c.world, c.scope_state, (e.entity.observation for e in c.entities))
    if why is None and (
        len(c.extra) > MAX_CHAIN_SCOPES or sum(len(s.fields) for s in c.extra.values()) > MAX_CHAIN_FIELDS
    ):
        why = CHAIN_SKIP  # a chain the service refuses to decide on today is not replayed either
    if why is not None:
        left_out[f"rows skipped: {why}"] += 1
        return None
    return read


def _sample(calls: list[KeptCall], n: int) -> list[KeptCall]:
    """Whole calls at random (seed 0) until they hold ``n`` decisions, in the order they were made."""
    order = list(range(len(calls)))
    random.Random(0).shuffle(order)
    taken: list[int] = []
    held = 0
    for i in order:
        if held >= n:
            break
        taken.append(i)
        held += len(calls[i].decisions)
    return [calls[i] for i in sorted(taken)]


async def _manifest(store: Store, version: str) -> Manifest | None:
    """A kept manifest version, checked to be that version; None when it is not kept (or does not read back)."""
    blob = await store.policies.manifest(version)
    if blob is None:
        return None
    try:
        m = from_data(msgspec.json.decode(zlib.decompress(blob)), f"the kept manifest {version[:19]}")
    except (zlib.error, msgspec.DecodeError, ManifestError):
        return None
    return m if m.version == version else None
