"""The manifest: strict checks by path, one version whatever the file format, and `npcmind validate`."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import FOREST, cli, logged
from npcmind.manifest import ManifestError, from_data, load
from npcmind.manifest.fields import FieldSet, _decimals, check_fields, quantized
from npcmind.manifest.model import FieldSpec, ScopeSpec


def forest() -> dict[str, Any]:
    return yaml.safe_load(FOREST.read_text())


def problems_of(data: Any) -> dict[str, str]:
    with pytest.raises(ManifestError) as e:
        from_data(data)
    return {p.path: p.message for p in e.value.problems}


@pytest.mark.fast
def test_the_example_loads() -> None:
    m = load(FOREST)
    assert m.version.startswith("sha256:") and len(m.version) == 71
    assert m.types["bee"].perception_radius == 200 and m.types["swarm"].perception_radius == 150
    assert m.types["player"].observe_only and not m.types["bee"].observe_only
    assert [n for n, _ in m.scope_chain("forest_boss")] == ["forest", "forest_boss"]


@pytest.mark.fast
def test_the_version_is_the_same_in_every_format(tmp_path: Path) -> None:
    data = forest()
    (tmp_path / "m.json").write_text(json.dumps(data))
    import tomllib  # noqa: F401  (TOML is read by the stdlib; written here by hand below)

    toml = tmp_path / "m.toml"
    toml.write_text(_to_toml(data))
    versions = {load(FOREST).version, load(tmp_path / "m.json").version, load(toml).version}
    assert len(versions) == 1


@pytest.mark.fast
def test_a_changed_manifest_has_another_version() -> None:
    data = forest()
    data["types"]["bee"]["actions"]["idle"] = "Hover"
    assert from_data(data).version != load(FOREST).version


def _to_toml(data: dict[str, Any], prefix: str = "") -> str:
    scalars, tables = [], []
    for k, v in data.items():
        if isinstance(v, dict):
            tables.append((k, v))
        else:
            scalars.append(f"{k} = {json.dumps(v)}")
    out = ""
    if prefix and scalars:
        out += f"[{prefix}]\n"
    out += "".join(s + "\n" for s in scalars)
    for k, v in tables:
        out += _to_toml(v, f"{prefix}.{k}" if prefix else k)
    return out


@pytest.mark.fast
@pytest.mark.parametrize(
    ("mutate", "path", "words"),
    [
        (lambda d: d["types"]["bee"].update(actions={}), "types.bee.actions", "must not be empty"),
        (
            lambda d: d["types"].update(Bee=d["types"].pop("bee")),
            "types.Bee",
            "must be a name: a lowercase ASCII letter",
        ),
        (lambda d: d["types"]["bee"]["fields"].update(x={"type": "enum"}), "types.bee.fields.x.values", "enum"),
        (lambda d: d["types"]["bee"]["fields"].update(x={"type": "float"}), "types.bee.fields.x.type", "one of"),
        (
            lambda d: d["types"]["bee"]["fields"].update(x={"type": "string", "quantum": 1}),
            "types.bee.fields.x.quantum",
            "only a number",
        ),
        (
            lambda d: d["types"]["bee"]["fields"].update(x={"type": "number", "min": 2, "max": 1}),
            "types.bee.fields.x.min",
            "greater than max",
        ),
        (lambda d: d["profiles"].update(king={"type": "wasp", "text": "x"}), "profiles.king.type", "unknown type"),
        (lambda d: d["profiles"].update(king={"type": "player", "text": "x"}), "profiles.king.type", "observe-only"),
        (lambda d: d["scopes"]["forest"].update(parent="forest_boss"), "scopes.forest.parent", "cycle"),
        (lambda d: d["scopes"]["forest"].update(parent="moon"), "scopes.forest.parent", "unknown scope"),
        (lambda d: d["world"].update(text="x" * 4001), "world.text", "at most 4000"),
        (lambda d: d["types"]["bee"].update(speed=3), "types.bee.speed", "not a known field"),
        (lambda d: d.update(a2g="0.2"), "a2g", "one of"),
        (lambda d: d["defaults"].update(ttl_ms=0), "defaults.ttl_ms", "greater than 0"),
        (lambda d: d["types"].update({f"t{i}": {"text": ""} for i in range(70)}), "types", "at most 64"),
    ],
)
def test_every_problem_is_named_by_path(mutate: Any, path: str, words: str) -> None:
    data = forest()
    mutate(data)
    found = problems_of(data)
    assert path in found, found
    assert words in found[path]


@pytest.mark.fast
def test_all_problems_of_a_kind_at_once() -> None:
    """Shape problems are listed together; reference problems (checked on a well-shaped file) likewise."""
    data = forest()
    data["types"]["bee"]["actions"] = {}
    data["types"]["boss"]["ttl_ms"] = -1
    data["world"]["fields"]["x"] = {"type": "number", "text": 3}
    assert {"types.bee.actions", "types.boss.ttl_ms", "world.fields.x.text"} <= set(problems_of(data))
    data = forest()
    data["scopes"]["forest"]["parent"] = "moon"
    data["world"]["fields"]["x"] = {"type": "enum"}
    data["profiles"]["queen_bee"]["type"] = "wasp"
    assert {"scopes.forest.parent", "world.fields.x.values", "profiles.queen_bee.type"} <= set(problems_of(data))


@pytest.mark.fast
def test_shape_and_reference_problems_come_in_one_pass() -> None:
    """A first manifest has both kinds at once: fixing the shape problems must not reveal a second list."""
    data = forest()
    data["types"]["bee"]["perception_radius"] = -1  # shape: the whole bee type fails to convert
    data["defaults"]["ttl_ms"] = 0  # shape
    data["world"]["fields"]["x"] = {"type": "enum"}  # rule beyond shape: no values
    data["profiles"]["queen_bee"]["type"] = "wasp"  # reference
    data["profiles"]["worker"] = {"type": "bee", "text": "a worker"}  # the broken bee is still a known type
    data["scopes"]["forest_boss"]["parent"] = "moon"  # reference
    found = problems_of(data)
    assert set(found) == {
        "types.bee.perception_radius",
        "defaults.ttl_ms",
        "world.fields.x.values",
        "profiles.queen_bee.type",
        "scopes.forest_boss.parent",
    }, found
    assert "did you mean 'forest_boss'" not in found["scopes.forest_boss.parent"]  # not its own parent


@pytest.mark.fast
def test_a_field_with_a_shape_problem_still_has_its_rules_checked() -> None:
    """A field whose quantum is negative was left out of the rules: its min above its max came only once the
    quantum was fixed. A key of the wrong kind is told by its shape alone, not again as missing."""
    data = forest()
    data["world"]["fields"]["hp"] = {"type": "number", "min": 2, "max": 1, "quantum": -1}
    data["types"]["bee"]["fields"]["mood"] = {"type": "enum", "values": ["calm", 3]}
    data["types"]["bee"]["fields"]["size"] = {"type": "huge", "min": 3, "max": 1}
    found = problems_of(data)
    assert found == {
        "world.fields.hp.quantum": "must be greater than 0",
        "world.fields.hp.min": "must not be greater than max",
        "types.bee.fields.mood.values[1]": "must be a string, not integer",
        "types.bee.fields.size.type": found.get("types.bee.fields.size.type", "missing"),
    }, found
    assert "'number'" in found["types.bee.fields.size.type"]


@pytest.mark.fast
def test_broken_yaml_is_one_clear_problem(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("a2g: '0.1'\nworld: [unclosed\n")
    with pytest.raises(ManifestError) as e:
        load(p)
    assert "not valid YAML" in e.value.problems[0].message


def test_a_file_that_is_not_utf8_is_one_clear_problem(tmp_path: Path) -> None:
    p = tmp_path / "latin1.yaml"
    p.write_bytes("a2g: '0.1'\n# café\n".encode("latin-1"))  # an editor saving in Latin-1
    with pytest.raises(ManifestError) as e:
        load(p)
    assert [(x.path, x.message) for x in e.value.problems] == [
        ("", "not UTF-8 text (byte 0xe9 at offset 16, line 2): save the file as UTF-8")
    ]
    r = cli("serve", "--manifest", str(p))
    assert r.returncode == 2 and "not UTF-8 text" in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("option", ["--rulesets", "--clients"])
def test_serve_names_a_rulesets_or_clients_file_that_is_not_utf8(option: str, tmp_path: Path) -> None:
    p = tmp_path / "file.yaml"
    p.write_bytes("# café\n".encode("latin-1"))
    extra = ["--profile", "hosted"] if option == "--clients" else ["--manifest", str(FOREST)]
    r = cli("serve", *extra, option, str(p))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"npcmind: {p} cannot be used." in r.stderr
    assert "not UTF-8 text (byte 0xe9 at offset 5, line 1): save the file as UTF-8" in r.stderr


@pytest.mark.fast
def test_a_byte_order_mark_is_no_problem_and_an_empty_file_says_what_it_lacks(tmp_path: Path) -> None:
    bom = tmp_path / "m.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(forest()).encode())  # as Windows editors save UTF-8
    assert load(bom).version == load(FOREST).version
    empty = tmp_path / "empty.yaml"
    empty.write_text("# the manifest of my game\n")
    with pytest.raises(ManifestError) as e:
        load(empty)
    assert {x.path for x in e.value.problems} == {"a2g", "world", "types"}


def test_cli_validate(tmp_path: Path) -> None:
    ok = cli("validate", str(FOREST))
    assert ok.returncode == 0 and "ok" in ok.stdout and "sha256:" in ok.stdout
    assert "4 types (3 with actions), 1 profile, 2 scopes;" in ok.stdout
    small = int(re.search(r"static prompt prefix: (\d+) tokens", ok.stdout).group(1))  # type: ignore[union-attr]
    assert 100 < small < 1024  # the example's prefix is too short for a hosted provider's cache
    longer = forest()
    longer["world"]["text"] += " The forest is old." * 200
    (tmp_path / "long.yaml").write_text(yaml.safe_dump(longer))
    r = cli("validate", str(tmp_path / "long.yaml"))
    big = int(re.search(r"static prompt prefix: (\d+) tokens", r.stdout).group(1))  # type: ignore[union-attr]
    assert big - small >= 5 * 200, (small, big)
    data = forest()
    data["scopes"]["forest"]["parent"] = "moon"
    data["profiles"]["queen_bee"]["type"] = "wasp"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    r = cli("validate", str(bad))
    assert r.returncode == 1
    assert "scopes.forest.parent: unknown scope 'moon'" in r.stdout
    assert "profiles.queen_bee.type: unknown type 'wasp'" in r.stdout
    assert r.stderr.strip().endswith(f"{bad}: 2 problems")


def test_validate_gives_the_smallest_entity_part_the_service_really_counts(
    tmp_path: Path, start_service: Any, scripted: Any
) -> None:
    """A budget below it sends every entity of the type to `budget`: validate says so before a game finds out."""
    same = tmp_path / "forest.yaml"  # dumped as the services below are: YAML sorts the fields, and their order counts
    same.write_text(yaml.safe_dump(forest()))
    said = cli("validate", str(same)).stdout
    least = int(re.search(r"smallest entity part .*: bee (\d+) of 400", said).group(1))  # type: ignore[union-attr]
    obs = {"hp_fraction": 0.0, "distance_to_player": 0.0, "sees_player": False, "current_action": "idle"}
    body = {
        "client_id": "c",
        "epoch": 1,
        "world": {"player_hp_fraction": 0.5, "repellent": False},
        "entities": [{"id": "x", "type": "bee", "observation": obs, "legal_actions": ["idle"]}],
    }
    for budget, code in [(least, None), (least - 1, "budget")]:
        data = forest()
        data["types"]["bee"]["max_input_tokens"] = budget
        path = tmp_path / f"m{budget}.yaml"
        path.write_text(yaml.safe_dump(data))
        with logged("npcmind") as said_at_start:
            svc = start_service(
                manifest=path,
                provider="openai",
                base_url=scripted.base_url,
                model="gpt-4o-mini",
                answer_format="numbered",
                store=f"sqlite:///{tmp_path}/{budget}.db",
            )
        d = svc.decide(body).json()["decisions"][0]
        assert d.get("code") == code, (budget, d)
        warned = [m for m in said_at_start if "every bee will fall back with `budget`" in m]
        assert len(warned) == (code is not None), said_at_start  # serve says it too, at start
    r = cli("validate", str(path))
    assert (
        r.returncode == 0
        and f"warning: types.bee: max_input_tokens {least - 1} is below the {least} tokens" in r.stderr
    )


@pytest.mark.fast
def test_cli_output_into_a_closed_pipe_is_no_traceback() -> None:
    """`npcmind validate m.yaml | head -1`: the reader leaves early, and the command must not crash."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line is written: every write fails
    try:
        r = subprocess.run(
            [sys.executable, "-m", "npcmind.cli", "validate", str(FOREST)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=30,
        )
    finally:
        os.close(write_end)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr and "BrokenPipeError" not in r.stderr, r.stderr


def test_serve_refuses_a_bad_manifest(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"a2g": "0.1"}')
    r = cli("serve", "--manifest", str(bad))
    assert r.returncode == 2 and "world: is required" in r.stderr and "types: is required" in r.stderr


FIELDS = {
    "hp": FieldSpec(type="number", min=0, max=1, quantum=0.05),
    "dist": FieldSpec(type="number"),
    "level": FieldSpec(type="integer", min=1, max=9),
    "seen": FieldSpec(type="boolean"),
    "mood": FieldSpec(type="enum", values=["calm", "angry"]),
    "name": FieldSpec(type="string", max_length=5),
}
_any_value = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-20, 20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["calm", "angry", "x", "longer than five"]),
)


_valid = st.fixed_dictionaries(
    {
        "hp": st.floats(0, 1),
        "dist": st.one_of(st.integers(-(10**6), 10**6), st.floats(allow_nan=False, allow_infinity=False)),
        "level": st.integers(1, 9),
        "seen": st.booleans(),
        "mood": st.sampled_from(["calm", "angry"]),
        "name": st.text(max_size=5),
    }
)


@st.composite
def _observations(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly valid objects with at most one thing wrong: where a fast path and its slow twin could part."""
    values = dict(draw(_valid))
    how = draw(st.sampled_from(["valid", "value", "missing", "extra"]))
    if how == "value":
        values[draw(st.sampled_from(list(FIELDS)))] = draw(_any_value)
    elif how == "missing":
        del values[draw(st.sampled_from(list(FIELDS)))]
    elif how == "extra":
        values["extra"] = draw(_any_value)
    return values


@settings(max_examples=500)
@given(_observations())
def test_the_compiled_check_agrees_with_the_explaining_one(values: dict[str, Any]) -> None:
    fs = FieldSet(FIELDS, "type 't'")
    slow = check_fields(values, FIELDS, "o", "type 't'")
    assert fs.problems(values, "o") == slow  # the fast path passes exactly what the slow path finds no fault in


@pytest.mark.fast
def test_rendering_is_quantized_quoted_and_in_declared_order() -> None:
    fs = FieldSet(FIELDS, "type 't'")
    values = {"name": 'a"\nb', "mood": "calm", "seen": False, "level": 3, "dist": 12.34567, "hp": 0.512}
    assert fs.render(values) == 'hp=0.50 dist=12.346 level=3 seen=false mood="calm" name="a\\"\\nb"'
    assert fs.render({**values, "hp": -0.01}).startswith("hp=0 ")  # no negative zero
    assert fs.render({"seen": True, "hp": 1}) == "hp=1.00 seen=true"  # a part of the fields


@pytest.mark.fast
@given(
    st.lists(
        st.tuples(
            st.one_of(
                st.integers(-(10**18), 10**18),
                st.floats(-1e6, 1e6, allow_nan=False),
                st.floats(allow_nan=False, allow_infinity=False),
                st.sampled_from([0.0, -0.0, 0.005, -0.005, 0.0149999, 2.5, -2.5, 1.7e308, -1.7e308]),
            ),
            st.sampled_from([0.01, 0.05, 0.5, 1.0, 10.0, 0.001, 0.25]),
        ),
        max_size=40,
    )
)
def test_the_memo_of_a_quantized_number_never_changes_its_text(pairs: list[tuple[float, float]]) -> None:
    # a number and its equal of the other type (3 and 3.0, 10**18 and 1e18) share a memo entry: whichever came
    # first, the text is the one the formatting gives for either; negative zero shares zero's
    quantized.cache_clear()
    for value, q in pairs + [(float(v), q) for v, q in pairs] + [(v, q) for v, q in reversed(pairs)]:
        d = _decimals(q)
        assert quantized(value, q, d) == quantized.__wrapped__(value, q, d), (value, q)


@pytest.mark.fast
def test_a_session_scope_chain_is_compiled_once_per_content() -> None:
    m = load(FOREST)
    cave = {"cave": ScopeSpec(text="A cave.", parent="forest", fields={"depth": FieldSpec(type="integer")})}
    first = m.chain_fields(m.scope_chain("cave", cave))
    assert m.chain_fields(m.scope_chain("cave", dict(cave))) is first  # every request of the session
    replaced = {"cave": ScopeSpec(text="A cave.", parent="forest", fields={"depth": FieldSpec(type="number")})}
    again = m.chain_fields(m.scope_chain("cave", replaced))
    assert again is not first and again.problems({"depth": 2.5}, "s") == [] and first.problems({"depth": 2.5}, "s")


@pytest.mark.fast
def test_a_session_scope_chain_is_keyed_by_its_definitions_once_per_definition() -> None:
    """The decision cache's part for a scope: what its chain says, worked out once, not on every request."""
    m = load(FOREST)
    cave = {"cave": ScopeSpec(text="A cave.", parent="forest")}
    first = m.chain_key("cave", m.scope_chain("cave", cave))
    assert m.chain_key("cave", m.scope_chain("cave", dict(cave))) is first  # the next request: the digest kept
    same = {"cave": ScopeSpec(text="A cave.", parent="forest")}  # another session's equal definition
    assert m.chain_key("cave", m.scope_chain("cave", same)) == first
    for changed in (
        ScopeSpec(text="A wet cave.", parent="forest"),
        ScopeSpec(text="A cave.", parent="forest_boss"),
        ScopeSpec(text="A cave.", parent="forest", fields={"d": FieldSpec(type="integer")}),
    ):
        assert m.chain_key("cave", m.scope_chain("cave", {"cave": changed})) != first
    assert m.chain_key("forest_boss", m.scope_chain("forest_boss")) == "forest_boss"  # the version covers it


def test_serve_says_what_to_do_when_its_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = cli("serve", "--manifest", str(FOREST), "--port", str(port), "--store", f"sqlite:///{tmp_path}/s.db")
    assert r.returncode == 3, r.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr and "--port" in r.stderr
    assert "address already in use" in r.stderr.lower()
    assert "ready on" not in r.stdout


@pytest.mark.fast
def test_every_setting_variable_is_in_the_help_and_the_configuration_doc() -> None:
    root = Path(__file__).resolve().parents[1]
    names = set(re.findall(r'"(NPCMIND_[A-Z_]+)"', (root / "src/npcmind/config.py").read_text()))
    assert len(names) >= 10, names
    shown = cli("serve", "--help").stdout
    doc = (root / "docs" / "configuration.md").read_text()
    assert not {n for n in names if n not in shown.replace("\n", " ")}, "missing from `serve --help`"
    assert not {n for n in names if f"`{n}`" not in doc}, "missing from docs/configuration.md"


@pytest.mark.fast
@pytest.mark.parametrize(("port", "says"), [("99999", "99999 is not a port (0-65535)"), ("-1", "-1 is not a port")])
def test_serve_refuses_a_port_that_is_not_one(port: str, says: str) -> None:
    r = cli("serve", "--manifest", str(FOREST), "--port", port)  # uvicorn given 99999 used to hang
    assert r.returncode == 2 and says in r.stderr, r.stderr


def test_serve_goes_on_when_the_reader_of_its_ready_line_leaves(tmp_path: Path) -> None:
    """`npcmind serve | grep -m1 ready` waits for the ready line, then closes the pipe: the service serves on."""
    import httpx

    from npcmind.http.server import free_port

    port = free_port()
    read_end, write_end = os.pipe()
    os.close(read_end)
    args = ["serve", "--manifest", str(FOREST), "--port", str(port), "--store", f"sqlite:///{tmp_path}/s.db"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "npcmind.cli", *args], stdout=write_end, stderr=subprocess.PIPE, text=True
    )
    os.close(write_end)
    try:
        status, deadline = None, time.monotonic() + 300  # the deadline bounds a hang: a busy machine starts slowly
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=1).status_code
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        time.sleep(0.3)  # the banner is printed after the socket opens: give a crash the time to happen
        assert proc.poll() is None and status == 200, proc.stderr.read() if proc.poll() is not None else status
    finally:
        proc.terminate()
        err = proc.communicate(timeout=120)[1]
    assert f"ready on http://127.0.0.1:{port}" in err and "stdout is closed" in err, err
    assert f"what the model saw, in a browser: http://127.0.0.1:{port}/?client_id=" in err, err  # the page
    assert "Traceback" not in err, err


@pytest.mark.parametrize(
    ("name", "text"), [("m.json", '{"a2g": DEEP}'), ("m.yaml", "a2g: DEEP"), ("m.toml", "a2g = DEEP")]
)
def test_a_manifest_nested_too_deep_is_one_clear_problem(name: str, text: str, tmp_path: Path) -> None:
    p = tmp_path / name
    p.write_text(text.replace("DEEP", "[" * 5000 + "]" * 5000))
    with pytest.raises(ManifestError) as e:  # not a RecursionError
        load(p)
    first = e.value.problems[0]
    # Python 3.11's parsers give up on the depth; newer ones read it, and the array is then the wrong type
    assert (first.path, first.message) in [
        ("", f"{name[2:].upper()} nested too deep to read (hundreds of levels)"),
        ("a2g", "must be one of '0.1', not array"),
    ], e.value.problems
    rules = tmp_path / "rules.yaml"
    rules.write_text("rulesets: " + "[" * 5000 + "]" * 5000)
    r = cli("serve", "--manifest", str(FOREST), "--rulesets", str(rules))
    assert r.returncode == 2 and "YAML nested too deep" in r.stderr and "Traceback" not in r.stderr, r.stderr


_KEYS = st.sampled_from(["a2g", "world", "types", "profiles", "scopes", "defaults", "fields", "text", "type", "parent",
                         "actions", "values", "min", "max", "bee", "forest", 1, "Bee"])  # fmt: skip
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.sampled_from(["enum", "bee", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300)
@given(st.dictionaries(_KEYS, _VALUES, max_size=6))
@example(  # a number as a type's name (YAML's `1:`), beside a reference to a type that is unknown
    {
        "a2g": "0.1",
        "world": {"text": "w"},
        "types": {1: {}, "bee": {"actions": {"go": "g"}}},
        "profiles": {"q": {"type": "x", "text": ""}},
    }
)
def test_any_manifest_data_is_loaded_or_refused_with_problems_never_an_exception(data: dict[Any, Any]) -> None:
    try:
        from_data(data)
    except ManifestError as e:
        assert e.problems and all(isinstance(p.message, str) and p.message for p in e.problems)
