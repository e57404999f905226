"""The game-side SDK: an NPC registry, per-NPC memory with vector recall, a cortex, and the process loop.

Needs the `sdk` extra: `pip install 'npcmind[sdk]'` (onnxruntime, tokenizers, numpy, httpx and the
embedding model package).
"""

from npcmind.sdk.client import NpcMind, NpcOutcome, ProtocolError
from npcmind.sdk.cortex import Cortex, OpenAICortex
from npcmind.sdk.store import NpcRecord, NpcStore

__all__ = ["Cortex", "NpcMind", "NpcOutcome", "NpcRecord", "NpcStore", "OpenAICortex", "ProtocolError"]
