"""The example's bodies and a polling wait, for the benches and the tests alike: a bench needs no pytest."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FOREST = ROOT / "examples" / "forest.yaml"

BEE_OBS = {"hp_fraction": 0.333, "distance_to_player": 96.4, "sees_player": True, "current_action": "chase"}
BOSS_OBS = {"hp_fraction": 0.4, "distance_to_player": 210.0, "sees_player": True, "current_action": "idle"}


def until(condition: Callable[[], Any], what: str, deadline_s: float = 600) -> Any:
    """The condition's first truthy value, polled: the deadline only bounds a hang, so a slow machine is never a
    failure (no test may depend on timing)."""
    deadline = time.monotonic() + deadline_s
    while not (value := condition()):
        assert time.monotonic() < deadline, f"{what}: not within {deadline_s:g} s"
        time.sleep(0.05)
    return value


def bee(eid: str, **over: Any) -> dict[str, Any]:
    """A valid bee entity of the forest example."""
    e = {"id": eid, "type": "bee", "observation": dict(BEE_OBS), "legal_actions": ["idle", "wander", "chase", "flee"]}
    e.update(over)
    return e


def queen(eid: str = "q", **over: Any) -> dict[str, Any]:
    """A valid boss entity with the queen's profile."""
    e = {
        "id": eid,
        "type": "boss",
        "profile": "queen_bee",
        "observation": dict(BOSS_OBS),
        "legal_actions": ["idle", "chase", "flee"],
    }
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
