"""The game-side SDKs, as the service's package has always named them: a re-export of `npcmind_client` (the
client distribution in clients/python, bundled in this package), so existing imports keep working.

`npcmind.sdk.decide` needs only the base install; the NPC parts need the `sdk` extra (or `npcmind-client[npc]`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import npcmind_client

if TYPE_CHECKING:
    from npcmind_client import (
        Choice,
        Cortex,
        CortexError,
        DecideClient,
        DecideOptions,
        InMemoryNpcs,
        InvalidInputError,
        NewMemory,
        NpcMemory,
        NpcMind,
        NpcMindError,
        NpcOutcome,
        NpcRecord,
        NpcStore,
        OpenAICortex,
        Policy,
        PolicyError,
        ProtocolError,
        RecalledMemory,
        Scheduler,
        ServiceError,
        SignatureError,
        TooLargeError,
        UnreachableError,
    )

__all__ = [
    "Choice",
    "Cortex",
    "CortexError",
    "DecideClient",
    "DecideOptions",
    "InMemoryNpcs",
    "InvalidInputError",
    "NewMemory",
    "NpcMemory",
    "NpcMind",
    "NpcMindError",
    "NpcOutcome",
    "NpcRecord",
    "NpcStore",
    "OpenAICortex",
    "Policy",
    "PolicyError",
    "ProtocolError",
    "RecalledMemory",
    "Scheduler",
    "ServiceError",
    "SignatureError",
    "TooLargeError",
    "UnreachableError",
]


def __getattr__(name: str) -> Any:
    """A part of the SDK, imported from `npcmind_client` when first used."""
    if name not in __all__:
        raise AttributeError(f"module 'npcmind.sdk' has no attribute {name!r}")
    return getattr(npcmind_client, name)
