"""The SDK's `cortex` under its old name: a re-export of `npcmind_client.cortex` (one copy of the code)."""

from npcmind_client.cortex import *  # noqa: F403
