"""The clients file of the hosted profile: who may open sessions, with which manifest and limits."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import msgspec
from msgspec import Meta

from npcmind.manifest import Manifest, ManifestError
from npcmind.manifest import load as load_manifest
from npcmind.manifest.load import parse_text, read_text_file
from npcmind.protocol.a2g import Id
from npcmind.protocol.errors import Problem
from npcmind.protocol.validate import problems as shape_problems

KEY_PREFIX = "nmk_"


class ClientSpec(msgspec.Struct, forbid_unknown_fields=True):
    """One client as written in the clients file."""

    client_id: Id
    manifest: str
    key_sha256: Annotated[
        str, Meta(pattern="^[0-9a-f]{64}$", extra={"shape": "64 lowercase hex digits, as `npcmind keygen` prints it"})
    ]
    max_sessions: Annotated[int, Meta(ge=1)] = 16
    requests_per_second: Annotated[float, Meta(gt=0)] = 50.0
    session_ttl_s: Annotated[int, Meta(ge=60)] = 3600


class ClientsFile(msgspec.Struct, forbid_unknown_fields=True):
    """The whole clients file."""

    clients: Annotated[list[ClientSpec], Meta(min_length=1)]


@dataclass(frozen=True, slots=True)
class Client:
    """A configured client with its loaded manifest."""

    spec: ClientSpec
    manifest: Manifest

    @property
    def client_id(self) -> str:
        return self.spec.client_id

    def key_matches(self, key: str) -> bool:
        """Constant-time check of an API key against the stored hash (the key itself is never kept)."""
        return hmac.compare_digest(hash_key(key), self.spec.key_sha256)


def hash_key(key: str) -> str:
    """The SHA-256 hex of a key, as the clients file stores it."""
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    """A random API key: 32 bytes from the OS, base64url."""
    return KEY_PREFIX + base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")


def load_clients(path: str | Path) -> dict[str, Client]:
    """Load the clients file and every manifest it names (paths relative to the file); ManifestError lists problems."""
    p = Path(path)
    text = read_text_file(p)
    fmt = "json" if p.suffix == ".json" else "toml" if p.suffix == ".toml" else "yaml"
    data = parse_text(text, fmt, str(p))
    if isinstance(data, list):  # keygen's line pasted alone: the list without the `clients:` above it
        raise ManifestError(str(p), [Problem("", "must be an object: the list of clients goes under `clients:`")])
    try:
        parsed = msgspec.convert(data, ClientsFile, strict=True)
    except msgspec.ValidationError as e:
        raise ManifestError(str(p), shape_problems(data, ClientsFile) or [Problem("", str(e))]) from None
    out: dict[str, Client] = {}
    problems: list[Problem] = []
    keys: dict[str, str] = {}  # key hash -> the client it opens sessions for: one client a key
    for i, spec in enumerate(parsed.clients):
        if spec.client_id in out:
            problems.append(Problem(f"clients[{i}].client_id", f"duplicate client {spec.client_id!r}"))
            continue
        owner = keys.setdefault(spec.key_sha256, spec.client_id)
        if owner != spec.client_id:
            problems.append(
                Problem(
                    f"clients[{i}].key_sha256",
                    f"the key of client {owner!r} too: each client needs a key of its own (npcmind keygen)",
                )
            )
        mpath = Path(spec.manifest)
        if not mpath.is_absolute():
            mpath = p.parent / mpath
        try:
            out[spec.client_id] = Client(spec, load_manifest(mpath))
        except ManifestError as e:
            problems += [
                Problem(f"clients[{i}].manifest", f"{mpath}: {q.path or '(file)'}: {q.message}") for q in e.problems
            ]
    if problems:
        raise ManifestError(str(p), problems)
    return out
