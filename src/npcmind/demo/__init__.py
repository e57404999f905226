"""`npcmind demo`: the forest example as a game in the browser, served by the service itself at /demo.

The game's TypeScript sources live in clients/demo/; their built bundle and page ship here, so that
`pip install npcmind` and `npcmind demo` need no Node (clients/demo: `npm run build` writes them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Iterator
from importlib import resources

from npcmind.config import Settings

SCRIPTED_MODEL = "scripted"  # the page labels a provider of this model name "scripted, not a model"
# What `--scripted` answers, by the situation each entity's part of the prompt shows (first match wins):
# swarms surround the player (a swarm cut down to one or two pulls back), a hurt queen retreats to her nest,
# a badly hurt bee flees, a bee of a retreating swarm drifts home, whoever sees the player chases, a bee that
# does not keeps its place (a scene at rest repeats itself: the decision cache answers it)
DEMO_RULES = [
    {"match": r'^E\d+ "[^"]*" swarm\n  now: size=[12]\b', "choose": "retreat"},
    {"match": r'^E\d+ "[^"]*" swarm\n', "choose": "surround"},
    {"match": r"profile=queen_bee\n  now: hp_fraction=0(\.[0-4]\d*)? ", "choose": "flee"},
    {"match": r'^E\d+ "[^"]*" bee\n  now: hp_fraction=0(\.[0-2]\d*)? ', "choose": "flee"},
    {"match": r"chose retreat", "choose": "wander"},
    {"match": r"sees_player=true", "choose": "chase"},
    {"match": r'^E\d+ "[^"]*" bee\n', "choose": "idle"},
]


def manifest_path() -> str:
    """The forest manifest shipped with the package: the demo works from a pip install, with no examples/."""
    return str(resources.files("npcmind.demo") / "forest.yaml")


LEARN_EVERY_S = 10.0  # a policy distilled this often: the page shows it take over within its first minute


@contextlib.contextmanager
def prepared(
    settings: Settings, scripted: bool, store: str | None, learn_every_s: float | None = None
) -> Iterator[Settings]:
    """The settings of a demo run, and meanwhile the scripted provider (with ``scripted``) and, when no
    ``store`` is given, a store in a folder of its own, removed afterwards (a demo leaves nothing behind).
    ``learn_every_s``: distil and publish each client's policy this often (serve's --distill-every), or None."""
    from npcmind.testing.scripted import ScriptedServer

    with contextlib.ExitStack() as stack:
        if store is None:  # said once it is gone: the service's last line said the store holds every decision
            stack.callback(print, "the demo's store was in a temporary folder, now removed: --store URL keeps one")
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="npcmind-demo-"))
            store = f"sqlite:///{folder}/demo.db"
        provider, base_url, model = settings.provider, settings.base_url, settings.model
        if scripted:
            server = stack.enter_context(ScriptedServer())
            server.set(when=DEMO_RULES)
            provider, base_url, model = "openai", server.base_url, SCRIPTED_MODEL
            print(f"scripted provider (not a model) on {server.base_url}: answers by fixed rules", flush=True)
        yield dataclasses.replace(
            settings,
            manifest=manifest_path(),
            store=store,
            provider=provider,
            base_url=base_url,
            model=model,
            profile="local",
            redis=None,
            clients=None,
            rulesets=None,
            distill_every_h=learn_every_s / 3600 if learn_every_s else None,
            cors_origins=[*settings.cors_origins, *own_origins(settings.host, settings.port)],
        )


def own_origins(host: str, port: int) -> list[str]:
    """The page's own origins, allowed on top of NPCMIND_CORS_ORIGINS: a browser sends `Origin` with a
    same-origin POST too, and the service warned at every start of the demo that it was not allowed (the
    answer was read all the same)."""
    return [f"http://{h}:{port}" for h in dict.fromkeys([host, "127.0.0.1", "localhost"])]
