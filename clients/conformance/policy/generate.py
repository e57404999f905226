"""Write the policy vectors of this folder: a policy distilled by `npcmind distill`'s trainer, and the cases.

Run from the repository root (the `distill` extra installed):
    PYTHONPATH=src:clients/python/src python clients/conformance/policy/generate.py
The expected choices come from the Python evaluator; the TypeScript SDK must give the same on the same files.
`handmade.policy.json` is written by hand, and tests/test_policy.py checks some of its cases by hand too.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from npcmind.distill.run import distill
from npcmind.manifest import load
from npcmind.storage.base import TrainingRow
from npcmind_client.policy import Policy

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
BEE_ACTIONS = ["idle", "wander", "chase", "flee"]


def _bee(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any], str | None, list[str]]:
    obs = {
        "hp_fraction": rng.random(),
        "distance_to_player": rng.random() * 300,
        "sees_player": rng.random() < 0.8,
        "current_action": rng.choice(BEE_ACTIONS),
    }
    world = {"player_hp_fraction": rng.random(), "repellent": rng.random() < 0.1}
    legal = [a for a in BEE_ACTIONS if rng.random() < 0.8] or ["idle"]
    return obs, world, rng.choice([None, None, "hit", "ally_died"]), legal


def _teacher(obs: dict[str, Any], world: dict[str, Any], trigger: str | None, rng: random.Random) -> str:
    if world["repellent"] or obs["hp_fraction"] < 0.3:
        return "flee"
    if trigger == "hit" or obs["distance_to_player"] < 100:
        return "chase"
    return "wander" if not obs["sees_player"] else rng.choice(["chase", "idle"])


def distilled() -> dict[str, Any]:
    """A policy as distill writes it, from 3,000 seeded decisions of the forest's bees."""
    manifest = load(ROOT / "examples" / "forest.yaml")
    rng = random.Random(23)
    rows = []
    for i in range(3000):
        obs, world, trigger, legal = _bee(rng)
        q = {k: manifest.types["bee"].fields.quantize(obs)[k] for k in obs}
        action = _teacher(q, world, trigger, rng)
        legal = sorted(set(legal) | {action}, key=BEE_ACTIONS.index)
        wq = manifest.world.quantize(world)
        rows.append(TrainingRow(i, manifest.version, 0.0, "bee", None, q, wq, None, trigger, legal, action, 0.9))
    policy = distill(rows, "conformance", manifest).policy
    assert policy is not None
    policy["created_at"] = "2026-12-02T00:00:00+00:00"
    return policy


def cases(policy: Policy, inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each input with the choice the Python evaluator makes."""
    out = []
    for c in inputs:
        args = {k: c[k] for k in ("world", "scope_state", "trigger", "profile") if k in c}
        got = policy.choose(c["type"], c["observation"], c["legal_actions"], **args)
        out.append({**c, "expect": None if got is None else {"action": got[0], "confidence": got[1]}})
    return out


def _handmade_inputs() -> list[dict[str, Any]]:
    bee = {"hp_fraction": 0.8, "distance_to_player": 50, "sees_player": True, "current_action": "idle"}
    all4 = BEE_ACTIONS
    return [
        {"name": "repellent: both trees' leaves averaged", "type": "bee", "observation": bee, "legal_actions": all4,
         "world": {"repellent": True}},
        {"name": "low health after rounding to the quantum (0.27 -> 0.25)", "type": "bee",
         "observation": {**bee, "hp_fraction": 0.27}, "legal_actions": all4, "world": {"repellent": False}},
        {"name": "0.28 rounds to 0.3, above the split", "type": "bee", "observation": {**bee, "hp_fraction": 0.28},
         "legal_actions": all4, "world": {"repellent": False}},
        {"name": "a trigger is a feature", "type": "bee", "observation": bee, "legal_actions": all4,
         "world": {"repellent": False}, "trigger": "hit"},
        {"name": "masking: flee not legal, the best legal action and its share", "type": "bee", "observation": bee,
         "legal_actions": ["idle", "wander", "chase"], "world": {"repellent": True}},
        {"name": "an enum value and scope state", "type": "bee", "observation": {**bee, "current_action": "chase"},
         "legal_actions": all4, "world": {"repellent": False}, "scope_state": {"boss_phase": 1}},
        {"name": "a missing scope field takes the feature's missing value (-1)", "type": "bee",
         "observation": {**bee, "current_action": "chase"}, "legal_actions": ["idle", "chase"],
         "world": {"repellent": False}},
        {"name": "legal actions are a feature too", "type": "bee", "observation": {**bee, "current_action": "chase"},
         "legal_actions": ["flee", "chase"], "world": {"repellent": False}, "scope_state": {"boss_phase": 3}},
        {"name": "no world given: a boolean counts as missing (0)", "type": "bee", "observation": bee,
         "legal_actions": all4},
        {"name": "a tie goes to the first action in the file's order", "type": "bee", "observation": bee,
         "legal_actions": ["chase", "flee"], "world": {"repellent": False}, "trigger": "hit"},
        {"name": "a profile is a feature", "type": "boss", "profile": "queen_bee",
         "observation": {"sees_player": False}, "legal_actions": ["idle", "chase", "flee"]},
        {"name": "no legal action has any probability: none", "type": "boss", "profile": "queen_bee",
         "observation": {"sees_player": True}, "legal_actions": ["idle", "chase"]},
        {"name": "only the actions of the type count", "type": "boss", "observation": {"sees_player": True},
         "legal_actions": ["dance", "idle"]},
        {"name": "a type the policy does not cover: none", "type": "swarm", "observation": {"size": 4},
         "legal_actions": ["surround", "retreat"]},
    ]  # fmt: skip


def _distilled_inputs() -> list[dict[str, Any]]:
    rng = random.Random(7)
    out = []
    for i in range(40):
        obs, world, trigger, legal = _bee(rng)
        out.append({"name": f"seeded situation {i}", "type": "bee", "observation": obs, "legal_actions": legal,
                    "world": world, "trigger": trigger})  # fmt: skip
    return out


def main() -> None:
    """Write both policies' cases (and the distilled policy itself)."""
    forest = distilled()
    (HERE / "forest.policy.json").write_text(json.dumps(forest, indent=1) + "\n")
    files = {"handmade.policy.json": _handmade_inputs(), "forest.policy.json": _distilled_inputs()}
    vectors = []
    for name, inputs in files.items():
        policy = Policy.load(HERE / name)
        vectors.append({"policy": name, "manifest_version": policy.manifest_version, "cases": cases(policy, inputs)})
    (HERE / "cases.json").write_text(json.dumps(vectors, indent=1) + "\n")


if __name__ == "__main__":
    main()
