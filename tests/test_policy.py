"""The portable policy file and its Python evaluator (npcmind_client.policy), on the shared vectors.

The vectors in clients/conformance/policy/ are what the TypeScript SDK checks too: the same choices and
confidences from the same files.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT
from npcmind_client.policy import Policy, PolicyError

pytestmark = pytest.mark.fast  # the whole file is in the fast tier (docs/testing.md)

VECTORS = ROOT / "clients" / "conformance" / "policy"
HANDMADE = VECTORS / "handmade.policy.json"
BEE = {"hp_fraction": 0.8, "distance_to_player": 50, "sees_player": True, "current_action": "idle"}
ALL = ["idle", "wander", "chase", "flee"]


def _cases() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for v in json.loads((VECTORS / "cases.json").read_text()):
        out += [(v["policy"], c) for c in v["cases"]]
    return out


@pytest.mark.parametrize(("policy", "case"), _cases(), ids=lambda x: x if isinstance(x, str) else x["name"])
def test_the_shared_vectors(policy: str, case: dict[str, Any]) -> None:
    p = Policy.load(VECTORS / policy)
    args = {k: case[k] for k in ("world", "scope_state", "trigger", "profile") if k in case}
    got = p.choose(case["type"], case["observation"], case["legal_actions"], **args)
    want = case["expect"]
    if want is None:
        assert got is None
    else:
        assert got is not None and got[0] == want["action"] and got[1] == pytest.approx(want["confidence"], abs=1e-12)


def test_the_vectors_cover_a_policy_written_by_distill_and_every_kind_of_answer() -> None:
    data = json.loads((VECTORS / "forest.policy.json").read_text())
    assert data["manifest_version"].startswith("sha256:") and data["types"]["bee"]["trained_on"] > 0
    expects = [c["expect"] for _, c in _cases()]
    assert any(e is None for e in expects) and len({e["action"] for e in expects if e}) >= 3
    assert any(e and e["confidence"] < 0.8 for e in expects) and any(e and e["confidence"] > 0.95 for e in expects)


def test_choices_worked_out_by_hand() -> None:
    """Two trees averaged, then masked to the legal actions: each figure below is the docs' arithmetic."""
    p = Policy.load(HANDMADE)
    # repellent: tree 1 says flee 0.9, tree 2 (current_action is not chase) 0.25 each: flee (0.9 + 0.25) / 2
    assert p.choose("bee", BEE, ALL, world={"repellent": True}) == ("flee", pytest.approx(0.575))
    # flee not legal: chase (0.05 + 0.25) / 2 = 0.15 of idle 0.135 + wander 0.14 + chase 0.15 = 0.425
    assert p.choose("bee", BEE, ["idle", "wander", "chase"], world={"repellent": True}) == (
        "chase",
        pytest.approx(0.15 / 0.425),
    )
    # 0.27 rounds to its quantum 0.05 as 0.25, under the split at 0.275: the low-health leaf
    assert p.choose("bee", {**BEE, "hp_fraction": 0.27}, ALL, world={"repellent": False}) == (
        "flee",
        pytest.approx(0.475),
    )
    # a tie between chase and flee (0.375 each) goes to the first in the file's order
    assert p.choose("bee", BEE, ["flee", "chase"], world={"repellent": False}, trigger="hit") == (
        "chase",
        pytest.approx(0.5),
    )
    assert p.choose("swarm", {"size": 3}, ["surround"]) is None  # a type it does not cover: ask the service


def test_a_policy_for_another_manifest_version_is_refused_with_a_message_that_says_so() -> None:
    mine = "sha256:" + "2" * 64
    with pytest.raises(PolicyError) as e:
        Policy.load(HANDMADE, manifest_version=mine)
    said = str(e.value)
    assert "distilled for manifest version sha256:000" in said and mine in said and "never used" in said
    p = Policy.load(HANDMADE)  # the SDK can also check one it holds, when the game's manifest changes
    with pytest.raises(PolicyError, match="another manifest version"):
        p.check(mine)
    p.check(p.manifest_version)


def test_load_takes_a_path_text_bytes_or_an_object() -> None:
    text = HANDMADE.read_text()
    for source in (HANDMADE, str(HANDMADE), text, text.encode(), json.loads(text)):
        assert Policy.load(source).choose("bee", BEE, ALL, world={"repellent": True}) == ("flee", pytest.approx(0.575))


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d.update(format="other"), "not a policy file this SDK reads"),
        (lambda d: d.update(format_version=2), "format_version"),
        (lambda d: d.pop("manifest_version"), "`manifest_version` must be"),
        (lambda d: d["types"]["bee"]["trees"][0]["left"].__setitem__(0, 0), "types.bee.trees[0]` node 0 must point"),
        (lambda d: d["types"]["bee"]["trees"][0]["feature"].__setitem__(0, 9), "feature[0]` is not a feature"),
        (lambda d: d["types"]["bee"]["trees"][0]["value"].__setitem__(2, [1.0]), "value[2]` must hold one"),
        (lambda d: d["types"]["bee"]["features"][0].update(source="moon"), "features[0].source` must be one of"),
        (lambda d: d["types"]["boss"]["trees"][0]["threshold"].pop(), "trees[0].threshold` must be a list"),
    ],
)
def test_a_malformed_file_is_refused_naming_the_field(change: Any, said: str) -> None:
    data = json.loads(HANDMADE.read_text())
    change(data)
    with pytest.raises(PolicyError, match=said.replace("[", r"\[").replace("]", r"\]")):
        Policy.load(data)


def test_a_file_that_is_not_there_or_not_json_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot be read"):
        Policy.load(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(PolicyError, match="not JSON"):
        Policy.load(tmp_path / "bad.json")


def test_the_evaluator_imports_nothing_from_npcmind_and_nothing_outside_the_standard_library() -> None:
    """Loaded from its file alone, with no npcmind_client to import (a game copied it): it needs nothing else,
    and its PolicyError still says ``status`` and ``code``; in the SDK, PolicyError is an NpcMindError."""
    path = ROOT / "clients" / "python" / "src" / "npcmind_client" / "policy.py"
    code = (
        "import sys, importlib.util as u; sys.modules['npcmind_client'] = None; before = set(sys.modules); "
        f"spec = u.spec_from_file_location('standalone_policy', {str(path)!r}); m = u.module_from_spec(spec); "
        "sys.modules['standalone_policy'] = m; spec.loader.exec_module(m); "
        "new = {n.split('.')[0] for n in set(sys.modules) - before} - {'standalone_policy'}; "
        "print(sorted(n for n in new if n not in sys.stdlib_module_names)); "
        f"print(m.Policy.load({str(HANDMADE)!r}).choose('bee', {{}}, ['flee'], world={{'repellent': True}})); "
        "e = m.PolicyError('x'); print(e.status, e.code, isinstance(e, ValueError))"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "('flee', 1.0)", "None None True"]
    from npcmind_client import NpcMindError

    assert issubclass(PolicyError, NpcMindError) and issubclass(PolicyError, ValueError)


def _refused() -> list[dict[str, Any]]:
    return list(json.loads((VECTORS / "refused.json").read_text()))


def _sources(v: dict[str, Any]) -> list[Any]:
    """A refused vector's input in every form Policy.load takes it: the object and its JSON text and bytes."""
    if "policy" in v:
        text = json.dumps(v["policy"])
        return [v["policy"], text, text.encode()]
    if "text" in v:
        text = "".join(p if isinstance(p, str) else p[0] * p[1] for p in v["text"])
        return [text, text.encode()]
    return [bytes.fromhex(v["bytes_hex"])]


@pytest.mark.parametrize("vector", _refused(), ids=lambda v: v["name"])
def test_the_shared_refused_vectors_are_a_policy_error_naming_the_place(vector: dict[str, Any]) -> None:
    for source in _sources(vector):
        with pytest.raises(PolicyError) as e:
            Policy.load(source)
        assert vector["says"] in str(e.value)


def test_the_refused_vectors_reach_every_rule() -> None:
    said = " ".join(v["says"] for v in _refused())
    for rule in ("nested deeper", "not UTF-8", "larger than", "nodes in all", "finite number", "must be an integer",
                 "probabilities from 0 to 1", "quantum` must be above 0", "`format_version` 1", "action twice",
                 "deeper than 64 levels", "types: at most", "trees: at most", "actions: at most",
                 "features: at most"):  # fmt: skip
        assert rule in said, rule


def test_the_attacks_of_the_findings_are_policy_errors(tmp_path: Path) -> None:
    """Finding 7: each of these raised RecursionError, UnicodeDecodeError, OverflowError or ValueError."""
    data = json.loads(HANDMADE.read_text())
    data["types"]["bee"]["features"][0]["quantum"] = 10**400
    chain = {"feature": [0] * 250_000 + [-1], "threshold": [0.5] * 250_001, "value": [[]] * 250_000 + [[1.0, 0.0]]}
    chain |= {"left": [i + 1 for i in range(250_000)] + [-1], "right": [i + 1 for i in range(250_000)] + [-1]}
    deep = {**data, "types": {"t": {"actions": ["a", "b"], "features": [data["types"]["bee"]["features"][1]],
                                    "trees": [chain]}}}  # fmt: skip
    for source in (b"[" * 200_000, '{"a":' * 200_000, b"\xff\xfe{}", "pol\0icy.json", data, deep, tmp_path):
        with pytest.raises(PolicyError):
            Policy.load(source)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        -float("inf"),
        10**400,
        -(10**400),
        1e308,
        "0.3",
        b"1",
        [0.3],
        {"v": 1},
        True,
        None,
        object(),
    ],
)
def test_choose_never_raises_and_a_value_not_of_its_kind_is_missing(value: Any) -> None:
    """NaN and infinities are not JSON, so the shared vectors cannot hold them: the TypeScript test checks the same."""
    edge = Policy.load(VECTORS / "edge.policy.json")
    for t in ("tiny_quantum", "plain"):
        want = ("positive", 1.0) if t == "plain" and value == 1e308 else ("missing", 1.0)
        assert edge.choose(t, {"n": value}, ["nonpositive", "positive", "missing"]) == want
    assert edge.choose("flag", {"flag": value}, ["no", "yes", "missing"]) == (
        ("yes", 1.0) if value is True else ("missing", 1.0)
    )
    assert edge.choose("mode", {"mode": value}, ["off", "on"], trigger=value) == ("off", 1.0)
    p = Policy.load(HANDMADE)
    for observation, legal in ((value, value), (BEE, value), ({**BEE, "hp_fraction": value}, [*ALL, value])):
        got = p.choose("bee", observation, legal, world=value, scope_state=value, trigger=value, profile=value)
        assert got is None or got[0] in ALL
        assert p.choose(value, observation, legal) is None


def test_a_seeded_fuzz_of_the_handmade_file_gives_a_policy_or_a_policy_error_and_choose_never_raises() -> None:
    """Up to three places of the file set to an odd value (or removed): load is a policy or a PolicyError, and
    choose on odd situations answers. The same fuzz runs in the TypeScript tests."""
    import random

    base = json.loads(HANDMADE.read_text())
    odd: list[Any] = [None, True, 0, -1, 1.5, 10**400, float("nan"), float("inf"), "x", [], {}, [1], 5e-324, 1e308]

    def places(o: Any, pre: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else []
        return [pre] + [p for k, v in items for p in places(v, (*pre, k))]

    every = places(base)[1:]
    rng = random.Random(7)
    loaded = 0
    for _ in range(3000):
        data = json.loads(json.dumps(base))
        for place in rng.sample(every, rng.randint(1, 3)):
            _set(data, place, rng.choice(odd))
        try:
            policy = Policy.load(data)
        except PolicyError:
            continue
        loaded += 1
        for t in ("bee", "boss"):
            obs = {k: rng.choice([*odd, "chase"]) for k in ("hp_fraction", "current_action", "sees_player")}
            got = policy.choose(t, obs, rng.choice([ALL, ["chase", 1], []]), world={"repellent": rng.choice(odd)},
                                trigger=rng.choice([*odd, "hit"]), profile=rng.choice([*odd, "queen_bee"]))  # fmt: skip
            assert got is None or 0.0 < got[1] <= 1.0
    assert 100 < loaded < 3000  # both outcomes reached


def _set(data: Any, place: tuple[Any, ...], value: Any) -> None:
    """Set one place of a JSON document, if an earlier change left it there."""
    try:
        for k in place[:-1]:
            data = data[k]
        data[place[-1]] = value
    except (KeyError, IndexError, TypeError):
        pass


HOSTILE = {  # each a mebibyte; the first is the finding's: 32 KB of it took 9 s, so this one took hours
    "escaped quotes": '{"format":"npcmind-policy","format_version":1,"x":"' + '\\"' * (1 << 19),
    "quotes": '{"x":[' + '"' * (1 << 20) + "]}",
    "brackets": "[" + "[]," * (1 << 18) + "[]]",
    "an unterminated string": '["' + "a" * (1 << 20),
    "a deep nesting at the end": "[" + "[]," * (1 << 18) + "[" * 40,
    "closings": "]" * (1 << 20),
}


def test_a_hostile_mebibyte_of_any_shape_is_refused_or_loaded_without_hanging() -> None:
    """Finding 7: the nesting check was quadratic on an unterminated string of escaped quotes. Each shape is
    loaded in a child process; the subprocess timeout is only a hang limit (the loads take well under a second
    here; the first shape took hours before the fix)."""
    code = (
        "import json, sys\n"
        "from npcmind_client.policy import Policy, PolicyError\n"
        "for text in json.loads(sys.stdin.read()):\n"
        "    try:\n"
        "        Policy.load(text.encode())  # bytes: text, never a path\n"
        "    except PolicyError as e:\n"
        "        print(str(e)[:60])\n"
    )
    r = subprocess.run([sys.executable, "-c", code], input=json.dumps(list(HOSTILE.values())), text=True,
                       capture_output=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr
    said = r.stdout.splitlines()
    assert len(said) == len(HOSTILE)
    assert said[4].startswith("policy JSON: nested deeper than 32 levels")
    assert all(line.startswith("policy JSON: not JSON") or line.startswith("a policy must") or "nested" in line
               for line in said), said  # fmt: skip


class _Counting(dict):  # type: ignore[type-arg]
    """An observation that counts the fields a choose reads."""

    reads = 0

    def get(self, key: Any, default: Any = None) -> Any:
        _Counting.reads += 1
        return super().get(key, default)


def _wide(features: int, trees: int, actions: int) -> dict[str, Any]:
    """A type of many features and actions whose trees each split once, on feature i, to two leaves."""
    acts = [f"a{i}" for i in range(actions)]
    feats = [{"source": "observation", "field": f"f{i}", "encoding": "number"} for i in range(features)]
    leaf = [1.0] * actions
    one = [{"feature": [i, -1, -1], "threshold": [0.5, 0, 0], "left": [1, -1, -1], "right": [2, -1, -1],
            "value": [[], leaf, leaf]} for i in range(trees)]  # fmt: skip
    return {"actions": acts, "features": feats, "trees": one}


def test_choose_reads_only_what_its_walk_reaches_not_the_whole_type_or_file() -> None:
    """Finding 7: choose encoded every feature of the type and summed every action of every leaf. Now its work
    is the nodes it walks: doubling the features a type holds does not change what a choose reads, and
    another type's trees are never touched."""
    data = json.loads(HANDMADE.read_text())
    reads = []
    for features in (2048, 4096):
        data["types"] = {"big": _wide(features, 2, 256), "other": _wide(features, 32, 256)}
        p = Policy.load(data)
        _Counting.reads = 0
        got = p.choose("big", _Counting({f"f{i}": 0.0 for i in range(features)}), ["a3", "a1"])
        reads.append(_Counting.reads)
        assert got == ("a1", 0.5)  # a tie: the first in the file's order, half of the legal mass
    assert reads == [2, 2]  # one field a tree, whatever the type or the file holds (it read 2,048 and 4,096)


def test_a_fetched_policy_is_read_no_further_than_its_bound_and_refused_clearly(caplog: Any) -> None:
    """Finding 7: GET /v1/policy was read whole, whatever its size, before any bound was checked. The body is
    now streamed and reading stops one byte past ``policy_max_bytes``; the cascade says why it is not used."""
    import httpx

    from npcmind_client.cascade import Cascade
    from npcmind_client.say import SayOnce
    from npcmind_client.transport import Transport

    sent = [0]

    def endless() -> Any:
        for _ in range(10_000):  # 640 MiB if read whole
            sent[0] += 1
            yield b" " * 65536

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=endless())

    t = Transport("http://npcmind.test", 5.0, 1, policy_max_bytes=100_000)
    t._http = httpx.Client(base_url="http://npcmind.test", transport=httpx.MockTransport(handler))
    try:
        status, body, headers = t.call("GET", "/v1/policy?client_id=g", {})
    finally:
        t.close()
    assert status == 200 and isinstance(body, PolicyError)  # refused on the worker, never loaded in a tick
    assert sent[0] <= 3  # stopped at the bound: two chunks of 64 KiB hold 100,001 bytes
    cascade = Cascade("g", None, None, 60_000, SayOnce(), "sha256:1", max_bytes=100_000)
    assert cascade.answered(200, body, headers) and cascade.fetched is None
    assert "larger than 100,000 bytes (policy_max_bytes), not read past that" in caplog.text
    caplog.clear()
    own = Cascade("g", None, None, 60_000, SayOnce(), "sha256:1", max_bytes=100_000)  # a game's own HTTP's bytes
    assert own.answered(200, b" " * 100_001, {}) and own.fetched is None
    assert "larger than 100,000 bytes (policy_max_bytes), not read past that" in caplog.text
    small = json.dumps(json.loads(HANDMADE.read_text())).encode()  # raw bytes within the bound: loaded
    version = json.loads(small)["manifest_version"]
    ok = Cascade("g", None, None, 60_000, SayOnce(), version, max_bytes=100_000)
    assert ok.answered(200, small, {}) and ok.fetched is not None
