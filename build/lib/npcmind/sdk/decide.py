"""The SDK's `decide` under its old name: a re-export of `npcmind_client.decide` (one copy of the code)."""

from npcmind_client.decide import *  # noqa: F403
