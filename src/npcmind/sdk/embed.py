"""The SDK's `embed` under its old name: a re-export of `npcmind_client.embed` (one copy of the code)."""

from npcmind_client.embed import *  # noqa: F403
