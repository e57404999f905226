"""Write the policy vectors of this folder: a policy distilled by `npcmind distill`'s trainer, the edge policy,
the cases, and the files every SDK must refuse (refused.json).

Run from the repository root (the `distill` extra installed):
    PYTHONPATH=src:clients/python/src python clients/conformance/policy/generate.py
The expected choices come from the Python evaluator; the TypeScript SDK must give the same on the same files.
`handmade.policy.json` is written by hand, and tests/test_policy.py checks some of its cases by hand too.
Each refused input is checked here to be refused by the Python evaluator with the message it expects.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from npcmind.distill.run import distill
from npcmind.manifest import load
from npcmind.storage.base import TrainingRow
from npcmind_client.policy import (
    MAX_ACTIONS,
    MAX_BYTES,
    MAX_DEPTH,
    MAX_FEATURES,
    MAX_NODES,
    MAX_TREES,
    MAX_TYPES,
    Policy,
    PolicyError,
)

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


def _type(actions: list[str], features: list[dict[str, Any]], tree: dict[str, list[Any]]) -> dict[str, Any]:
    return {"actions": actions, "features": features, "trees": [tree]}


def _chain(depth: int) -> dict[str, list[Any]]:
    """A tree whose deepest leaves are ``depth`` splits down: internal nodes at even indices, each with a leaf
    ("shallow") on its left and the next split on its right, the last split's right leaf "deep"."""
    tree: dict[str, list[Any]] = {k: [] for k in ("feature", "threshold", "left", "right", "value")}
    for k in range(depth):
        i = len(tree["feature"])
        last = k == depth - 1
        for row in ([0, i + 1, i + 2, []], [-1, -1, -1, [1.0, 0.0]]):
            tree["feature"].append(row[0])
            tree["threshold"].append(0.5)
            tree["left"].append(row[1])
            tree["right"].append(row[2])
            tree["value"].append(row[3])
        if last:
            tree["feature"].append(-1)
            tree["threshold"].append(0.0)
            tree["left"].append(-1)
            tree["right"].append(-1)
            tree["value"].append([0.0, 1.0])
    return tree


ROUNDED = ["minus3", "minus2", "minus1", "zero", "plus1", "plus2", "plus3"]  # the "half" type's actions


def _steps() -> dict[str, list[Any]]:
    """A tree naming the integer its feature rounded to (-3 to 3): splits at -2.5, -1.5, ..., 2.5, each with the
    leaf of one integer on its left and the next split on its right, the last split's right leaf 3."""
    keys = ("feature", "threshold", "left", "right", "value")
    rows: list[list[Any]] = []
    for k, cut in enumerate([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5]):
        i = len(rows)
        rows += [[0, cut, i + 1, i + 2, []], [-1, 0.0, -1, -1, [float(j == k) for j in range(7)]]]
    rows.append([-1, 0.0, -1, -1, [float(j == 6) for j in range(7)]])
    return {key: [row[n] for row in rows] for n, key in enumerate(keys)}


def edge() -> dict[str, Any]:
    """A policy at the edges of the rules: a quantum so small that a plain number overflows it, each encoding
    fed values not of its kind, a tree exactly as deep as the bound allows, and values halfway between two
    quanta (a tie goes to the even one)."""
    missing3 = {
        "feature": [0, -1, 0, -1, -1],
        "threshold": [-0.5, 0, 0, 0, 0],
        "left": [1, -1, 3, -1, -1],
        "right": [2, -1, 4, -1, -1],
        "value": [[], [0, 0, 1.0], [], [1.0, 0, 0], [0, 1.0, 0]],
    }
    three = ["nonpositive", "positive", "missing"]
    return {
        "format": "npcmind-policy", "format_version": 1, "manifest_version": "sha256:" + "0" * 63 + "2",
        "client_id": "conformance", "created_at": "2026-12-02T00:00:00+00:00",
        "types": {
            "tiny_quantum": _type(three, [{"source": "observation", "field": "n", "encoding": "number",
                                           "quantum": 5e-324, "missing": -1}], missing3),
            "plain": _type(three, [{"source": "observation", "field": "n", "encoding": "number", "missing": -1}],
                           missing3),
            "flag": _type(["no", "yes", "missing"], [{"source": "observation", "field": "flag",
                                                      "encoding": "boolean", "missing": -1}],
                          {**missing3, "threshold": [-0.5, 0, 0.5, 0, 0]}),
            "mode": _type(["off", "on"], [{"source": "observation", "field": "mode", "encoding": "enum",
                                           "value": "on"},
                                          {"source": "trigger", "encoding": "enum", "value": "hit"}],
                          {"feature": [0, 1, -1, -1, -1], "threshold": [0.5, 0.5, 0, 0, 0], "left": [1, 3, -1, -1, -1],
                           "right": [2, 4, -1, -1, -1], "value": [[], [], [0, 1.0], [1.0, 0], [0, 1.0]]}),
            "deep": _type(["shallow", "deep"], [{"source": "observation", "field": "n", "encoding": "number"}],
                          _chain(MAX_DEPTH)),
            "half": _type(ROUNDED, [{"source": "observation", "field": "n", "encoding": "number", "quantum": 1}],
                          _steps()),
        },
    }  # fmt: skip


def _edge_inputs() -> list[dict[str, Any]]:
    """choose() never raises: every value not of its feature's kind is the feature's missing, in every SDK."""
    huge = 10**400  # JSON digits past the float range: JavaScript reads Infinity, Python an int too big to float
    out: list[dict[str, Any]] = []
    for name, n, want in [
        ("0 stays 0", 0, "nonpositive"),
        ("1e-323 is two quanta of 5e-324", 1e-323, "positive"),
        ("1 / 5e-324 overflows: missing", 1, "missing"),
        ("1e308 / 5e-324 overflows: missing", 1e308, "missing"),
        ("an integer past the float range: missing", huge, "missing"),
        ("a string where a number is expected: missing", "12", "missing"),
        ("a boolean is not a number: missing", True, "missing"),
        ("a list: missing", [1], "missing"),
        ("an object: missing", {"n": 1}, "missing"),
        ("null: missing", None, "missing"),
    ]:
        out.append({"name": f"tiny quantum: {name}", "type": "tiny_quantum", "observation": {"n": n},
                    "legal_actions": ["nonpositive", "positive", "missing"], "want": want})  # fmt: skip
    for name, n, want in [
        ("1e308 is a number", 1e308, "positive"),
        ("an integer past the float range: missing", huge, "missing"),
        ("a string: missing", "5", "missing"),
    ]:
        out.append({"name": f"no quantum: {name}", "type": "plain", "observation": {"n": n},
                    "legal_actions": ["nonpositive", "positive", "missing"], "want": want})  # fmt: skip
    for name, v, want in [("true", True, "yes"), ("false", False, "no"), ("1 is not a boolean", 1, "missing"),
                          ("'true' is not a boolean", "true", "missing"), ("an object", {}, "missing")]:  # fmt: skip
        out.append({"name": f"boolean: {name}", "type": "flag", "observation": {"flag": v},
                    "legal_actions": ["no", "yes", "missing"], "want": want})  # fmt: skip
    enums = [("the value", "on", None, "on"), ("a number", 1, None, "off"), ("a list holding it", ["on"], None, "off"),
             ("a number trigger", "off", 5, "off"), ("a list trigger", "off", ["hit"], "off"),
             ("the trigger", "off", "hit", "on")]  # fmt: skip
    for name, v, trigger, want in enums:
        out.append({"name": f"enum: {name}", "type": "mode", "observation": {"mode": v}, "trigger": trigger,
                    "legal_actions": ["off", "on"], "want": want})  # fmt: skip
    # a tie rounds to the even quantum (Python's round, the service's cache key); half up (JavaScript's Math.round)
    # or half away from zero (.NET's MidpointRounding.AwayFromZero, C's round) differ on some of these
    for n, want in [(0.5, "zero"), (1.5, "plus2"), (2.5, "plus2"), (-0.5, "zero"), (-1.5, "minus2"),
                    (-2.5, "minus2"), (2.5000000000000004, "plus3"), (0.49999999999999994, "zero")]:  # fmt: skip
        out.append({"name": f"a tie to the even quantum: {n!r}", "type": "half", "observation": {"n": n},
                    "legal_actions": ROUNDED, "want": want})  # fmt: skip
    out += [
        {"name": "an observation that is not an object: every field missing", "type": "tiny_quantum",
         "observation": [1, 2], "legal_actions": ["nonpositive", "positive", "missing"], "want": "missing"},
        {"name": "a world and scope state that are not objects: missing", "type": "plain", "observation": "n",
         "world": 5, "scope_state": "x", "legal_actions": ["positive", "missing"], "want": "missing"},
        {"name": "legal actions that are not strings are none", "type": "plain", "observation": {"n": 3},
         "legal_actions": [1, None, {"a": 1}, "positive"], "want": "positive"},
        {"name": "no string legal action: none", "type": "plain", "observation": {"n": 3},
         "legal_actions": [1, None], "want": None},
        {"name": "a type that is not a string: none", "type": 5, "observation": {"n": 3},
         "legal_actions": ["positive"], "want": None},
        {"name": "a tree as deep as the bound: its deepest leaf", "type": "deep", "observation": {"n": 1},
         "legal_actions": ["shallow", "deep"], "want": "deep"},
        {"name": "a tree as deep as the bound: its first leaf", "type": "deep", "observation": {"n": 0},
         "legal_actions": ["shallow", "deep"], "want": "shallow"},
    ]  # fmt: skip
    return out


def _broken(change: Any) -> dict[str, Any]:
    data = json.loads((HERE / "handmade.policy.json").read_text())
    change(data)
    return data


def _deep_policy(splits: int) -> dict[str, Any]:
    return {**edge(), "types": {"deep": edge()["types"]["deep"] | {"trees": [_chain(splits)]}}}


def refused() -> list[dict[str, Any]]:
    """Inputs every SDK's Policy.load must refuse with a PolicyError whose message holds ``says``. An input is
    ``policy`` (an object: load it, and its JSON text), ``text`` (a list of strings and ``[string, times]``,
    joined) or ``bytes_hex``."""
    handmade = (HERE / "handmade.policy.json").read_text()
    huge = 10**400
    tree0 = "types.bee.trees[0]"

    def at(key: str, i: int, v: Any) -> Any:
        return lambda d: d["types"]["bee"]["trees"][0][key].__setitem__(i, v)

    def feat(**kw: Any) -> Any:
        return lambda d: d["types"]["bee"]["features"][0].update(kw)

    bee = "types.bee"
    return [
        {"name": "arrays nested 200,000 deep (a recursive parser overflows its stack)", "text": [["[", 200000]],
         "says": "policy JSON: nested deeper than 32 levels (at character 32)"},
        {"name": "objects nested 200,000 deep", "text": [['{"a":', 200000]],
         "says": "policy JSON: nested deeper than 32 levels (at character 160)"},
        {"name": "bytes that are not UTF-8", "bytes_hex": "7b22666f726d6174223a22ff227d",
         "says": "policy JSON: not UTF-8"},
        {"name": "larger than the size bound", "text": ["{", [" ", MAX_BYTES], "}"],
         "says": f"policy JSON: larger than {MAX_BYTES:,} bytes"},
        {"name": "NaN is not JSON", "text": [handmade.replace("0.275", "NaN")], "says": "policy JSON: not JSON ("},
        {"name": "a JSON array, not an object", "text": ["[1, 2]"], "says": "a policy must be a JSON object"},
        {"name": "more nodes than the bound", "text": ['{"format": "npcmind-policy", "format_version": 1, '
         '"manifest_version": "sha256:1", "types": {"bee": {"trees": [{"feature": [', ["0, ", MAX_NODES], "0]}]}}}"],
         "says": f"policy file: `types.bee` brings the trees past {MAX_NODES:,} nodes in all"},
        {"name": "a threshold past the float range, as digits", "policy": _broken(at("threshold", 0, huge)),
         "says": f"policy file: `{tree0}.threshold[0]` must be a finite number"},
        {"name": "a threshold of 1e999", "text": [handmade.replace("0.275", "1e999")],
         "says": f"policy file: `{tree0}.threshold[1]` must be a finite number"},
        {"name": "a feature index past the float range", "policy": _broken(at("feature", 0, huge)),
         "says": f"policy file: `{tree0}.feature[0]` must be a finite number"},
        {"name": "a child index that is not an integer", "policy": _broken(at("left", 0, 1.5)),
         "says": f"policy file: `{tree0}.left[0]` must be an integer"},
        {"name": "a negative probability", "policy": _broken(at("value", 2, [5, -4, 0, 0])),
         "says": f"policy file: `{tree0}.value[2]` must hold probabilities from 0 to 1, not all 0"},
        {"name": "a probability above 1", "policy": _broken(at("value", 2, [5, 0, 0, 0])),
         "says": f"policy file: `{tree0}.value[2]` must hold probabilities from 0 to 1, not all 0"},
        {"name": "a leaf with no probability at all", "policy": _broken(at("value", 2, [0, 0, 0, 0])),
         "says": f"policy file: `{tree0}.value[2]` must hold probabilities from 0 to 1, not all 0"},
        {"name": "a quantum of 0", "policy": _broken(feat(quantum=0)),
         "says": f"policy file: `{bee}.features[0].quantum` must be above 0"},
        {"name": "a negative quantum", "policy": _broken(feat(quantum=-0.05)),
         "says": f"policy file: `{bee}.features[0].quantum` must be above 0"},
        {"name": "a quantum past the float range", "policy": _broken(feat(quantum=huge)),
         "says": f"policy file: `{bee}.features[0].quantum` must be a finite number"},
        {"name": "a quantum that is a string", "policy": _broken(feat(quantum="0.05")),
         "says": f"policy file: `{bee}.features[0].quantum` must be a finite number"},
        {"name": "format_version true (not the number 1)", "policy": _broken(lambda d: d.update(format_version=True)),
         "says": "`format_version` 1 (found "},
        {"name": "format_version '1'", "policy": _broken(lambda d: d.update(format_version="1")),
         "says": "`format_version` 1 (found "},
        {"name": "an action named twice", "policy": _broken(lambda d: d["types"]["bee"]["actions"].append("idle")),
         "says": f"policy file: `{bee}.actions` must not name an action twice"},
        {"name": "a tree one split deeper than the bound", "policy": _deep_policy(MAX_DEPTH + 1),
         "says": f"policy file: `types.deep.trees[0]` node {2 * MAX_DEPTH} is deeper than {MAX_DEPTH} levels"},
        {"name": "an unterminated string of 1 MiB of escaped quotes (a pattern retried at each quote: hours)",
         "text": ['{"format":"npcmind-policy","format_version":1,"x":"', ['\\"', 512 * 1024]],
         "says": "policy JSON: not JSON ("},
        {"name": "1 MiB of quotes (an empty string each two)", "text": ['{"x":[', ['"', 1024 * 1024], "]}"],
         "says": "policy JSON: not JSON ("},
        {"name": "one type more than the bound", "policy": _broken(lambda d: d.update(
            types={f"t{i}": {} for i in range(MAX_TYPES + 1)})),  # counted before a type is read
         "says": f"policy file: `types` holds {MAX_TYPES + 1:,} types: at most {MAX_TYPES:,}"},
        {"name": "one tree more than the bound", "policy": _broken(lambda d: d["types"]["bee"].update(
            trees=[{}] * (MAX_TREES + 1))),  # counted before a tree is read
         "says": f"policy file: `{bee}.trees` holds {MAX_TREES + 1:,} trees: at most {MAX_TREES} a type"},
        {"name": "one action more than the bound", "policy": _broken(lambda d: d["types"]["bee"].update(
            actions=[f"a{i}" for i in range(MAX_ACTIONS + 1)])),
         "says": f"policy file: `{bee}.actions` names {MAX_ACTIONS + 1:,} actions: at most {MAX_ACTIONS} a type"},
        {"name": "one feature more than the bound", "policy": _broken(lambda d: d["types"]["bee"].update(
            features=[{}] * (MAX_FEATURES + 1))),  # counted before a feature is read
         "says": f"policy file: `{bee}.features` holds {MAX_FEATURES + 1:,} features: at most {MAX_FEATURES:,} a type"},
    ]  # fmt: skip


def joined(parts: list[Any]) -> str:
    """The text of a ``text`` input: its strings, each ``[string, times]`` repeated."""
    return "".join(p if isinstance(p, str) else p[0] * p[1] for p in parts)


def check_refused(vectors: list[dict[str, Any]]) -> None:
    """Every refused input is refused by this evaluator, with the message the vector expects."""
    for v in vectors:
        sources: list[Any] = [v["policy"], json.dumps(v["policy"])] if "policy" in v else []
        sources += [joined(v["text"])] if "text" in v else []
        sources += [bytes.fromhex(v["bytes_hex"])] if "bytes_hex" in v else []
        for source in sources:
            try:
                Policy.load(source)
            except PolicyError as e:
                assert v["says"] in str(e), (v["name"], str(e))
            else:
                raise AssertionError(f"{v['name']}: loaded")


def main() -> None:
    """Write the policies' cases (and the distilled and edge policies themselves), and the refused inputs."""
    forest = distilled()
    (HERE / "forest.policy.json").write_text(json.dumps(forest, indent=1) + "\n")
    (HERE / "edge.policy.json").write_text(json.dumps(edge(), indent=1) + "\n")
    files = {"handmade.policy.json": _handmade_inputs(), "forest.policy.json": _distilled_inputs()}
    vectors = []
    for name, inputs in files.items():
        policy = Policy.load(HERE / name)
        vectors.append({"policy": name, "manifest_version": policy.manifest_version, "cases": cases(policy, inputs)})
    edge_policy = Policy.load(HERE / "edge.policy.json")
    edge_cases = cases(edge_policy, [{k: v for k, v in c.items() if k != "want"} for c in _edge_inputs()])
    for c, want in zip(edge_cases, [c["want"] for c in _edge_inputs()], strict=True):
        assert (c["expect"] and c["expect"]["action"]) == want, (c["name"], c["expect"], want)  # the rule, by hand
    vectors.append(
        {"policy": "edge.policy.json", "manifest_version": edge_policy.manifest_version, "cases": edge_cases}
    )
    (HERE / "cases.json").write_text(json.dumps(vectors, indent=1) + "\n")
    bad = refused()
    check_refused(bad)
    (HERE / "refused.json").write_text(json.dumps(bad, indent=1) + "\n")


if __name__ == "__main__":
    main()
