"""The service as `npcmind serve` builds it, for uvicorn's own command line: capacity_bench.py runs it on
asyncio's event loop beside `npcmind serve` on uvloop, the one thing that differs.

Settings come from the NPCMIND_* variables as always, and from NPCMIND_BENCH_STORE and NPCMIND_BENCH_PROVIDER.
"""

from __future__ import annotations

import os

from litestar import Litestar

from npcmind.cli import _fewer_collections
from npcmind.config import Settings
from npcmind.http.app import create_app
from npcmind.service import Service

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def app() -> Litestar:
    """The app of a service on the example manifest, its provider the scripted server the bench started."""
    settings = Settings.from_env(
        manifest=os.path.join(ROOT, "examples", "forest.yaml"),
        store=os.environ["NPCMIND_BENCH_STORE"],
        provider="openai",
        base_url=os.environ["NPCMIND_BENCH_PROVIDER"],
        model="scripted",
    )
    _fewer_collections()  # as serve does
    return create_app(Service(settings))
