"""The kept calls replay reads back: each provider call's situation with the fresh decisions it gave, joined from
the store's features rows (what was decided, its reported outcome) and what the model read."""

from __future__ import annotations

import random
import zlib
from collections import Counter
from dataclasses import dataclass, field

import msgspec

from npcmind.decide.read import ReadCall, decode_read
from npcmind.manifest import Manifest, ManifestError, from_data
from npcmind.storage.base import Store


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
    """One provider call: the manifest version it was rendered with, what it read, and its kept decisions."""

    manifest_version: str
    created_at: float
    read: ReadCall
    decisions: list[Kept] = field(default_factory=list)


@dataclass(slots=True)
class Loaded:
    """The calls to replay, the manifests they were rendered with (None: not kept), and what was left out, why."""

    calls: list[KeptCall]
    manifests: dict[str, Manifest | None]
    left_out: Counter[str]


async def load(store: Store, client: str, since: float, only_type: str | None, sample: int | None) -> Loaded:
    """A client's kept calls since ``since``: with ``only_type``, those that decided an entity of it (their other
    decisions are not counted); with ``sample``, whole calls drawn at random (seed 0, so a rerun replays the same)
    until they hold ``sample`` decisions."""
    rows = {r.seq: r for r in await store.policies.training(client, since)}
    left_out: Counter[str] = Counter()
    calls: dict[int, KeptCall] = {}
    for first, blob in await store.policies.reads(client, since):
        try:
            read = decode_read(zlib.decompress(blob))
        except (zlib.error, msgspec.DecodeError, ValueError):
            left_out["a damaged row"] += 1
            continue
        r0 = rows.get(first)
        if r0 is None:
            left_out["a row without its features"] += 1
            continue
        call = calls[first] = KeptCall(r0.manifest_version, r0.created_at, read.call)
        for seq, number in read.numbers:
            r = rows.get(seq)
            if r is not None:
                call.decisions.append(Kept(seq, number, r.type, r.action, r.outcome))
    chosen = [c for c in calls.values() if only_type is None or any(d.type == only_type for d in c.decisions)]
    for c in chosen:
        if only_type is not None:
            c.decisions = [d for d in c.decisions if d.type == only_type]
    if sample is not None:
        chosen = _sample(chosen, sample)
    versions = {c.manifest_version for c in chosen}
    return Loaded(chosen, {v: await _manifest(store, v) for v in sorted(versions)}, left_out)


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
