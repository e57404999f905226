"""The SDK's `client` under its old name: a re-export of `npcmind_client.client` (one copy of the code)."""

from npcmind_client.client import *  # noqa: F403
