"""Tools for testing a game against npcmind offline, never a default: the scripted model server lives here."""
