"""Shared fixtures: the scripted provider and the service, each on a real local port."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from npcmind.config import Settings
from npcmind.http.app import create_app
from npcmind.http.server import BackgroundServer
from npcmind.providers.scripted import ScriptedServer
from npcmind.service import Service

ROOT = Path(__file__).resolve().parents[1]
FOREST = ROOT / "examples" / "forest.yaml"

BEE_OBS = {"hp_fraction": 0.333, "distance_to_player": 96.4, "sees_player": True, "current_action": "chase"}
BOSS_OBS = {"hp_fraction": 0.4, "distance_to_player": 210.0, "sees_player": True, "current_action": "idle"}


def bee(eid: str, **over: Any) -> dict[str, Any]:
    """A valid bee entity of the forest example."""
    e = {"id": eid, "type": "bee", "observation": dict(BEE_OBS), "legal_actions": ["idle", "wander", "chase", "flee"]}
    e.update(over)
    return e


def decide_body(*entities: dict[str, Any], client_id: str = "game-1", **over: Any) -> dict[str, Any]:
    """A valid decide request of the forest example."""
    body = {
        "client_id": client_id,
        "epoch": 7,
        "world": {"player_hp_fraction": 0.4, "repellent": False},
        "scope": "forest_boss",
        "scope_state": {"boss_phase": 2},
        "entities": list(entities) or [bee("28735")],
    }
    body.update(copy.deepcopy(over))
    return body


@pytest.fixture()
def scripted() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


class Running:
    """A service on a real port, with an HTTP client."""

    def __init__(self, server: BackgroundServer, service: Service) -> None:
        self.server = server
        self.service = service
        self.http = httpx.Client(base_url=server.url, timeout=30)

    def decide(self, body: dict[str, Any], **kw: Any) -> httpx.Response:
        return self.http.post("/v1/decide", json=body, **kw)


@pytest.fixture()
def start_service(tmp_path: Path) -> Iterator[Callable[..., Running]]:
    started: list[Running] = []

    def start(manifest: Path = FOREST, store: str | None = None, **settings: Any) -> Running:
        s = Settings(manifest=str(manifest), store=store or f"sqlite:///{tmp_path}/npcmind.db", **settings)
        service = Service(s)
        server = BackgroundServer(create_app(service)).start()
        r = Running(server, service)
        started.append(r)
        return r

    yield start
    for r in started:
        r.http.close()
        r.server.stop()


@pytest.fixture()
def svc(start_service: Callable[..., Running], scripted: ScriptedServer) -> Running:
    """The service on the example manifest, its provider the scripted server (self-hosted, enum form)."""
    return start_service(provider="openai", base_url=scripted.base_url, model="scripted")
