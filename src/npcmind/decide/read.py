"""What the model read for a batch's fresh decisions, kept with their features (same row, same commit, same
retention), so that `npcmind replay` can send the very prompt again, or render it anew from the same situation
with another manifest (docs/replay.md).

Kept is the situation the prompt was rendered from, not its text: the request's world, scope state and entities,
the context lines the situation layer gave (neighbours, memory, as shown) and the scopes a session added; the
manifest is kept once per version (``Manifests``). Rendered again with the same manifest, it is the same prompt.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from npcmind.decide.batch import Batch
from npcmind.manifest import Manifest
from npcmind.manifest.model import ScopeSpec
from npcmind.protocol.a2g import DecideEntity
from npcmind.storage.base import MANIFEST_EVERY_S, RequestFeatures


class ReadEntity(msgspec.Struct, array_like=True):
    """One entity the call asked: its number in the prompt, the entity as the game sent it, and its context
    lines as shown (``timed``: those that carry an age)."""

    number: int
    entity: DecideEntity
    lines: list[str]
    timed: list[str]


class ReadCall(msgspec.Struct, array_like=True):
    """One provider call's prompt as the situation it was rendered from: every entity it asked, in its order."""

    mode: str
    scope: str | None
    extra: dict[str, ScopeSpec]  # the session's own scopes along the chain (the manifest's are in the manifest)
    profiles: list[str]  # every profile of the request: parts 3 lists them, asked or not
    world: dict[str, Any]
    scope_state: dict[str, Any] | None
    situation: list[str]
    entities: list[ReadEntity]


class Read(msgspec.Struct, array_like=True):
    """What one features row keeps of what the model read: the call (a batch keeps one features row, with the
    group that completes it: Keeper.settle), and each decision's entity number."""

    call: ReadCall
    numbers: list[tuple[int, int]]  # (decision number, entity number in the call)


encode_read = msgspec.json.Encoder().encode
decode_read = msgspec.json.Decoder(Read).decode


def read_of(batch: Batch, features: RequestFeatures) -> bytes:
    """The batch's Read, as JSON (the store compresses it with the features). Encoded from tuples laid out as
    Read's arrays, not through its structs: the same bytes (a test compares them), without building a struct an
    entity and copying its lines on every uncached request (issue 43)."""
    number = {ep.entity.id: ep.number for _, ep, _ in batch.asked}
    entity = batch.entity_of
    numbers = [(f.seq, n) for f in features.decisions if (n := number.get(entity.get(f.seq, ""), 0))]
    entities = [
        (ep.number, ep.entity, _NO_LINES, _NO_LINES)
        if (ctx := ep.ctx) is None
        else (ep.number, ep.entity, ctx.lines, [line for line, _ in ctx.timed_lines])
        for _, ep, _ in batch.asked
    ]
    call = (*_call_head(batch), entities)
    return encode_read((call, numbers))


_NO_LINES: list[str] = []


def read_call(batch: Batch) -> ReadCall:
    """The situation the batch's provider call was rendered from (what replay and shadow mode render again)."""
    return ReadCall(*_call_head(batch), [_entity(ep.number, ep.entity, ep.ctx) for _, ep, _ in batch.asked])


_Head = tuple[str, str | None, dict[str, ScopeSpec], list[str], dict[str, Any], dict[str, Any] | None, list[str]]


def _call_head(batch: Batch) -> _Head:
    """ReadCall's fields before its entities, in its order: read_call builds the struct from them, read_of the
    same array without it."""
    req, scopes = batch.req, batch.session.manifest.file.scopes
    return (
        batch.prompt.mode,
        req.scope,
        {name: spec for name, spec in batch.chain if name not in scopes},
        sorted({e.profile for e in req.entities if e.profile}),
        req.world,
        req.scope_state,
        batch.prompt.situation,
    )


def _entity(number: int, e: DecideEntity, ctx: Any) -> ReadEntity:
    if ctx is None:
        return ReadEntity(number, e, [], [])
    return ReadEntity(number, e, list(ctx.lines), [line for line, _ in ctx.timed_lines])


class Manifests:
    """Which manifest versions this process kept lately: each goes with a row once every MANIFEST_EVERY_S."""

    def __init__(self) -> None:
        self._kept: dict[str, float] = {}

    def due(self, manifest: Manifest) -> bytes | None:
        """The manifest to keep with the next row, or None when it was kept lately."""
        now = time.monotonic()
        if now - self._kept.get(manifest.version, -MANIFEST_EVERY_S) < MANIFEST_EVERY_S:
            return None
        self._kept[manifest.version] = now
        return msgspec.json.encode(manifest.data)

    def lost(self, manifest: Manifest) -> None:
        """The row that carried it was not kept: keep it with the next."""
        self._kept.pop(manifest.version, None)
