"""The SDK's `store` under its old name: a re-export of `npcmind_client.store` (one copy of the code)."""

from npcmind_client.store import *  # noqa: F403
