"""`npcmind replay`: what another model, manifest or the learned policy would have decided on a game's own kept
traffic, offline, with numbers (docs/replay.md)."""
