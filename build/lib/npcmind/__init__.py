"""npcmind: a language model decides for game characters, cheaply, quickly and safely."""

__version__ = "0.1.0"
A2G_VERSION = "0.1"
