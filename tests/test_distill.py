"""The learned cascade, service side: what each fresh decision keeps, `npcmind distill`, GET /v1/policy."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from conftest import Running, bee, decide_body
from npcmind.storage import open_store
from npcmind.storage.base import TrainingRow


def _training(tmp_path: Path, client: str = "game-1") -> list[TrainingRow]:
    async def read() -> list[TrainingRow]:
        store = open_store(f"sqlite:///{tmp_path}/npcmind.db", read_only=True)  # beside the running service
        try:
            return await store.training(client, 0.0)
        finally:
            await store.close()

    return asyncio.run(read())


def test_a_fresh_decision_keeps_its_features_quantized_and_a_cached_one_adds_none(
    svc: Running, scripted: Any, tmp_path: Path
) -> None:
    scripted.set(choose={"b1": "flee", "b2": "chase"})
    obs = {"hp_fraction": 0.333, "distance_to_player": 96.4, "sees_player": True, "current_action": "chase"}
    body = decide_body(bee("b1", observation=obs, trigger="hit"), bee("b2", legal_actions=["chase", "idle"]))
    assert svc.decide(body).status_code == 200
    again = svc.decide(body).json()  # the same situation: from the cache, nothing new to learn
    assert [d["cached"] for d in again["decisions"]] == [True, True]
    rows = _training(tmp_path)
    assert [(r.action, r.trigger, r.legal_actions) for r in rows] == [
        ("flee", "hit", ["idle", "wander", "chase", "flee"]),
        ("chase", None, ["chase", "idle"]),
    ]
    first = rows[0]
    assert first.observation == {  # as the cache key rounds them: quantum 0.05 and 10
        "hp_fraction": 0.35,
        "distance_to_player": 100.0,
        "sees_player": True,
        "current_action": "chase",
    }
    assert first.world == {"player_hp_fraction": 0.4, "repellent": False} and first.scope_state == {"boss_phase": 2}
    assert first.manifest_version == svc.service.manifest.version and first.confidence is not None  # type: ignore[union-attr]
    assert first.outcome is None
    did = svc.decide(decide_body(bee("b3", observation={**obs, "hp_fraction": 0.9}))).json()["decisions"][0]
    report = {"client_id": "game-1", "reports": [{"decision_id": did["decision_id"], "outcome": "failed"}]}
    assert svc.http.post("/v1/report", json=report).status_code == 200
    assert [r.outcome for r in _training(tmp_path)] == [None, None, "failed"]
    assert _training(tmp_path, "game-2") == []
