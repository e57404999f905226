"""`npcmind demo`: the forest example as a game in the browser, served by the service itself at /demo.

The game's TypeScript sources live in clients/demo/; their built bundle and page ship here, so that
`pip install npcmind` and `npcmind demo` need no Node (clients/demo: `npm run build` writes them).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from collections.abc import Iterator
from importlib import resources

SCRIPTED_MODEL = "scripted"  # the page labels a provider of this model name "scripted, not a model"
# What `--scripted` answers, by the situation each entity's part of the prompt shows (first match wins):
# swarms surround the player (a swarm cut down to one or two pulls back), a hurt queen retreats to her nest,
# a badly hurt bee flees, a bee of a retreating swarm drifts home, whoever sees the player chases
DEMO_RULES = [
    {"match": r'^E\d+ "[^"]*" swarm\n  now: size=[12]\b', "choose": "retreat"},
    {"match": r'^E\d+ "[^"]*" swarm\n', "choose": "surround"},
    {"match": r"profile=queen_bee\n  now: hp_fraction=0(\.[0-4]\d*)? ", "choose": "flee"},
    {"match": r'^E\d+ "[^"]*" bee\n  now: hp_fraction=0(\.[0-2]\d*)? ', "choose": "flee"},
    {"match": r"chose retreat", "choose": "wander"},
    {"match": r"sees_player=true", "choose": "chase"},
    {"match": r'^E\d+ "[^"]*" bee\n', "choose": "wander"},
]


def manifest_path() -> str:
    """The forest manifest shipped with the package: the demo works from a pip install, with no examples/."""
    return str(resources.files("npcmind.demo") / "forest.yaml")


@contextlib.contextmanager
def prepared(args: argparse.Namespace) -> Iterator[argparse.Namespace]:
    """The serve arguments of a demo run, and meanwhile the scripted provider (with --scripted) and a store in
    a folder of its own, removed afterwards (a demo leaves nothing behind)."""
    from npcmind.testing.scripted import ScriptedServer

    with contextlib.ExitStack() as stack:
        if args.store is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="npcmind-demo-"))
            args.store = f"sqlite:///{folder}/demo.db"
        if args.scripted:
            scripted = stack.enter_context(ScriptedServer())
            scripted.set(when=DEMO_RULES)
            args.provider, args.base_url, args.model = "openai", scripted.base_url, SCRIPTED_MODEL
            print(f"scripted provider (not a model) on {scripted.base_url}: answers by fixed rules", flush=True)
        args.manifest = manifest_path()
        args.profile, args.redis, args.clients, args.rulesets = "local", None, None, None
        args.distill_every = None  # a demo of minutes: no retraining in the background
        stack.enter_context(_own_origin(args.host, args.port))
        yield args


@contextlib.contextmanager
def _own_origin(host: str, port: int) -> Iterator[None]:
    """Allow the page's own origin meanwhile: a browser sends `Origin` with a same-origin POST too, and the
    service warned at every start of the demo that it was not allowed (the answer was read all the same)."""
    before = os.environ.get("NPCMIND_CORS_ORIGINS")
    ours = [f"http://{h}:{port}" for h in dict.fromkeys([host, "127.0.0.1", "localhost"])]
    os.environ["NPCMIND_CORS_ORIGINS"] = ",".join([*(before.split(",") if before else []), *ours])
    try:
        yield
    finally:
        if before is None:
            del os.environ["NPCMIND_CORS_ORIGINS"]
        else:
            os.environ["NPCMIND_CORS_ORIGINS"] = before
