"""The manifest's file format: what a game declares about its world, types, profiles and scopes."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from npcmind.protocol.a2g import DeclaredName as Name
from npcmind.protocol.numbers import MAX_INTEGER

Text = Annotated[str, Meta(max_length=4000)]
Positive = Annotated[float, Meta(gt=0)]
PositiveInt = Annotated[int, Meta(gt=0, le=MAX_INTEGER)]  # ttl_ms and the like are echoed in every decision
FieldType = Literal["number", "integer", "boolean", "string", "enum"]


class FieldSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One field of the world, a type's observation or a scope's state."""

    type: FieldType
    text: Text | None = None
    min: float | None = None
    max: float | None = None
    quantum: Positive | None = None
    max_length: Annotated[int, Meta(ge=1, le=4000)] | None = None
    values: Annotated[list[Annotated[str, Meta(min_length=1, max_length=64)]], Meta(min_length=1)] | None = None


Fields = Annotated[dict[Name, FieldSpec], Meta(max_length=64)]


class Defaults(msgspec.Struct, forbid_unknown_fields=True):
    """Settings a type falls back to when it does not set its own."""

    ttl_ms: PositiveInt = 12000
    refresh_ms: PositiveInt = 4000
    max_input_tokens: PositiveInt = 400
    perception_radius: Positive = 150.0


class TypeSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A kind of entity; one without actions is observe-only (the player, a chest)."""

    text: Text = ""
    fields: Fields = {}
    actions: Annotated[dict[Name, Text], Meta(min_length=1, max_length=32)] | None = None
    events: Annotated[dict[Name, Text], Meta(max_length=32)] = {}
    perception_radius: Positive | None = None
    max_input_tokens: PositiveInt | None = None
    refresh_ms: PositiveInt | None = None
    ttl_ms: PositiveInt | None = None


class ProfileSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A named character sheet that an entity can carry (the queen, a veteran guard)."""

    text: Text
    type: Name | None = None


class ScopeSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, frozen=True):
    """Shared context for everything on screen: a level, a zone, an alarm state. Frozen: a session that
    replaces a scope puts a new one in place, which is how the decision cache sees that it changed."""

    text: Text
    parent: Name | None = None
    fields: Fields = {}


class WorldSpec(msgspec.Struct, forbid_unknown_fields=True):
    """What the game is, and the world state every request carries."""

    text: Text
    fields: Fields = {}


class ManifestFile(msgspec.Struct, forbid_unknown_fields=True):
    """A whole manifest as written by the game developer."""

    a2g: Literal["0.1"]
    world: WorldSpec
    types: Annotated[dict[Name, TypeSpec], Meta(min_length=1, max_length=64)]
    defaults: Defaults = msgspec.field(default_factory=Defaults)
    profiles: Annotated[dict[Name, ProfileSpec], Meta(max_length=256)] = {}
    scopes: Annotated[dict[Name, ScopeSpec], Meta(max_length=256)] = {}
