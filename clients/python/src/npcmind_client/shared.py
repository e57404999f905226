"""What the service shares with this SDK, and why: the one place that says which ``npcmind_client`` modules the
server (``src/npcmind``) imports. Each rule here must hold identically on both sides of the wire, so it is
written once, on the lower side: the service depends on the client package, never the reverse (the client
installs and runs without the service; tests/test_client_dist.py holds both directions and this list).

How the service gets the client package (clients/python/PACKAGING.md says it for users): the service's
distribution bundles ``npcmind_client`` from clients/python/src (pyproject.toml's ``packages.find``), so
``pip install -e .`` in a fresh clone, with no other step, gives the server the exact client of its own commit;
a game installs ``pip install ./clients/python`` (``npcmind-client``) alone. Install one or the other in an
environment, not both: each provides ``npcmind_client``. ``npcmind.sdk`` re-exports the client under the
service's old name, for imports written before the split.
"""

from __future__ import annotations

# module of npcmind_client -> why the service imports it (a new server import of the client is added here first)
SHARED: dict[str, str] = {
    "npc_wire": "the NPC protocol's wire types and number limits: the service checks what the SDK sends by them",
    "signing": "the outcome signature: the service signs exactly the bytes the game verifies offline",
    "policy": "the distilled policy file: `npcmind distill` writes the format the SDK's cascade reads",
    "params": "which request parameters a model refused: the providers and the SDK's cortex retry without them",
    "urls": "one check of a base URL's scheme, with the same message for --provider-url and service_url",
}
