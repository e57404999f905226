"""The manifest: what a game declares once, so every request can be checked and every prompt built."""

from npcmind.manifest.load import Manifest, ManifestError, ResolvedType, from_data, load

__all__ = ["Manifest", "ManifestError", "ResolvedType", "from_data", "load"]
