"""The service as `npcmind serve` builds it, in this process, on a fresh SQLite file: for the in-process benches."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
from npcmind.config import Settings  # noqa: E402
from npcmind.service import Service  # noqa: E402
from support import FOREST  # noqa: E402


async def started_service(base_url: str, **settings: Any) -> Service:
    """Started on the example manifest, its provider the scripted server at ``base_url``."""
    tmp = tempfile.mkdtemp(prefix="npcmind-bench-")
    svc = Service(
        Settings(
            manifest=str(FOREST),
            store=f"sqlite:///{tmp}/bench.db",
            provider="openai",
            base_url=base_url,
            model="scripted",
            **settings,
        )
    )
    await svc.start()
    return svc
