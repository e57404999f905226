"""`npcmind replay` (issue 33): decisions recorded through the real service with the scripted provider following
rules A, replayed as a user runs the command against the scripted provider following rules B, another manifest,
or a published policy; the report must find what truly changed, and nothing else."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from cdp import CHROMIUM, Browser
from conftest import BEE_OBS, FOREST, ROOT, SCRIPTED_SVC, bee, cli, decide_body, queen, service_settings, serving
from docblocks import bash, run_by
from npcmind.decide.read import ReadCall, decode_read
from npcmind.http.server import free_port
from npcmind.storage import open_store
from npcmind.storage.base import MAX_READ_BYTES, inflate
from npcmind.testing.scripted import ScriptedServer
from stores import opened, run

RULES_A: list[dict[str, Any]] = [
    {"type": "bee", "when": {"sees_player": True}, "choose": "chase"},
    {"type": "bee", "choose": "wander"},
    {"type": "boss", "when": {"hp_fraction": {"lt": 0.5}}, "choose": "flee"},
    {"type": "boss", "choose": "chase"},
]
# B differs from A for bees alone, in the situations where a bee is low and sees the player: it flees
CHANGED = {"type": "bee", "when": {"hp_fraction": {"lt": 0.3}, "sees_player": True}, "choose": "flee"}
RULES_B = [CHANGED, *RULES_A]
REQUESTS, BEES = 100, 9  # and a queen a request: 1,000 decisions


@dataclass
class Recorded:
    """A store of 1,000 fresh decisions made by rules A, what the bees were, and the provider that made them."""

    store: str
    bees: list[dict[str, Any]]
    queens: int
    a: ScriptedServer
    calls_to_a: int


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """Rules A decide 100 requests of 9 bees and a queen through the service (no cache: every one is fresh)."""
    tmp = tmp_path_factory.mktemp("replay")
    rng = random.Random(33)
    bees: list[dict[str, Any]] = []
    with ScriptedServer() as a:
        a.set(rules=RULES_A)
        settings = service_settings(tmp, base_url=a.base_url, cache_entries=0, **SCRIPTED_SVC)
        with serving(settings) as svc:
            for r in range(REQUESTS):
                batch = [
                    bee(
                        f"b{r}-{i}",
                        observation={
                            "hp_fraction": rng.choice([0.1, 0.5, 0.9]),
                            "distance_to_player": rng.choice([50.0, 300.0]),
                            "sees_player": rng.random() < 0.5,
                            "current_action": rng.choice(["idle", "chase"]),
                        },
                    )
                    for i in range(BEES)
                ]
                boss = {**queen(f"q{r}")["observation"], "hp_fraction": rng.choice([0.2, 0.8])}
                got = svc.decide(decide_body(*batch, queen(f"q{r}", observation=boss)))
                assert got.status_code == 200 and all(d["source"] == "AI" for d in got.json()["decisions"]), got.text
                failed = [d["decision_id"] for d in got.json()["decisions"][:BEES:3]]  # a third of the bees failed
                reports = [{"decision_id": d, "outcome": "failed"} for d in failed]
                told = svc.http.post("/v1/report", json={"client_id": "game-1", "reports": reports})
                assert told.status_code == 200 and told.text.count('"accepted"') == len(failed), told.text
                bees += [{**b["observation"], "failed": i % 3 == 0} for i, b in enumerate(batch)]
        yield Recorded(f"sqlite:///{tmp}/npcmind.db", bees, REQUESTS, a, len(a.requests))


def replay(out: Path, *args: str) -> dict[str, Any]:
    """`npcmind replay` as a user runs it; its report."""
    r = cli("replay", "--rate", "1000", "--in-flight", "8", *args, "--out", str(out))  # a flag given twice: the last
    assert r.returncode == 0, r.stderr
    assert f"report in {out}" in r.stderr, r.stderr
    assert re.search(r"^replay: (\d+)/\1 calls, \d+ decisions, \d+ fallbacks, [\d.]+ calls/s$", r.stderr, re.M), (
        r.stderr
    )
    report: dict[str, Any] = json.loads(out.read_text())
    return report


@dataclass
class AgainstB:
    """The known truth's replay: its report, where it was written, and what rules B were sent."""

    report: dict[str, Any]
    path: Path
    sent: list[dict[str, Any]]


@pytest.fixture(scope="module")
def against_b(recorded: Recorded, tmp_path_factory: pytest.TempPathFactory) -> AgainstB:
    """Rules A's store replayed against the scripted provider following rules B, as a user runs it."""
    out = tmp_path_factory.mktemp("against-b") / "report.json"
    with ScriptedServer() as b:
        b.set(rules=RULES_B)
        target = ("--provider", "openai", "--base-url", b.base_url, "--model", "scripted")
        report = replay(out, "--store", recorded.store, "--client", "game-1", *target, "--price-in", "0.15")
        return AgainstB(report, out, b.requests)


def test_rules_that_differ_for_one_type_in_stated_situations_are_found_exactly(
    recorded: Recorded, against_b: AgainstB
) -> None:
    report, sent_to_b = against_b.report, against_b.sent
    assert report["decisions"] == 1000 and report["calls"] == REQUESTS and report["left_out"] == {}
    assert len(recorded.a.requests) == recorded.calls_to_a  # nothing went to the provider not named
    assert len(sent_to_b) == REQUESTS

    # the very prompts: what B read is what A read, call for call
    def prompts(bodies: list[dict[str, Any]]) -> list[list[str]]:
        return sorted([m["content"] for m in body["messages"]] for body in bodies)

    assert prompts(sent_to_b) == prompts(recorded.a.requests[: recorded.calls_to_a])

    types = report["types"]
    assert types["boss"]["agreement"] == 1.0 and types["boss"]["decisions"] == REQUESTS
    truth = sum(o["hp_fraction"] < 0.3 and o["sees_player"] for o in recorded.bees) / len(recorded.bees)
    assert 0.05 < truth < 0.5  # the changed situations are a real part of the traffic
    assert abs((1 - types["bee"]["agreement"]) - truth) <= 0.02
    assert types["bee"]["confusion"]["chase"]["flee"] == round(truth * len(recorded.bees))
    # where the game reported the decision failed: how often the replay chose otherwise
    failed = [o for o in recorded.bees if o["failed"]]
    assert types["bee"]["failed"] == len(failed) == REQUESTS * 3
    assert types["bee"]["failed_changed"] == sum(o["hp_fraction"] < 0.3 and o["sees_player"] for o in failed) > 0
    assert types["boss"]["failed"] == 0 and types["boss"]["failed_changed_share"] is None

    # exactly the stated situations: low bees that see the player, each of their four (distance, action) pairs
    differ = report["differ"]
    assert report["situations_differing"] == len(differ) == 4
    found = set()
    for s in differ:
        assert s["type"] == "bee" and s["differ"] == s["decisions"], s
        assert "hp_fraction=0.10 " in s["prompt_before"] and "sees_player=true" in s["prompt_before"], s
        assert s["decided"] == {"chase": s["decisions"]} and s["replayed"] == {"flee": s["decisions"]}
        assert s["prompt_after"] == s["prompt_before"]  # the same prompt, another model
        found.add((_field(s["prompt_before"], "distance_to_player"), _field(s["prompt_before"], "current_action")))
    assert found == {("50", '"idle"'), ("50", '"chase"'), ("300", '"idle"'), ("300", '"chase"')}
    assert report["tokens"]["in"] > 0 and report["tokens"]["out"] > 0 and report["cost"]["out"] == 0
    assert report["latency_ms"]["calls"] == REQUESTS and report["latency_ms"]["p50"] <= report["latency_ms"]["p99"]
    assert report["fallbacks"] == {} and report["cost"]["total"] == round(report["tokens"]["in"] * 0.15 / 1e6, 6)


def _field(text: str, name: str) -> str:
    return text.split(f"{name}=", 1)[1].split()[0]


def test_another_manifest_changes_only_the_prompts_that_carry_the_changed_type(
    recorded: Recorded, tmp_path: Path
) -> None:
    data = yaml.safe_load(FOREST.read_text())
    data["types"]["boss"]["actions"]["chase"] = "Charge the player, wings roaring"
    changed = tmp_path / "new.yaml"
    changed.write_text(yaml.safe_dump(data, sort_keys=False))  # the order of actions is what options show
    with ScriptedServer() as a2:
        a2.set(rules=RULES_A)
        target = ("--provider", "openai", "--base-url", a2.base_url, "--model", "scripted", "--manifest", str(changed))
        report = replay(tmp_path / "r.json", "--store", recorded.store, "--client", "game-1", *target)
        sent = a2.requests
    types = report["types"]
    assert types["boss"]["prompts_changed"] == types["boss"]["decisions"] == REQUESTS
    assert types["bee"]["prompts_changed"] == 0 and types["bee"]["decisions"] == REQUESTS * BEES
    assert report["target"]["kind"] == "manifest" and report["target"]["manifest"] == str(changed)
    assert all("Charge the player, wings roaring" in body["messages"][0]["content"] for body in sent)
    assert report["agreement"] == 1.0  # rules A read no action's text: the same choices


def test_the_published_policy_is_replayed_without_sending_anything(recorded: Recorded, tmp_path: Path) -> None:
    from npcmind.storage.base import StoredPolicy

    async def publish() -> str:
        s = await opened(recorded.store)  # the service stopped: the store is free
        rows = await s.policies.training("game-1", 0.0)
        version = rows[0].manifest_version
        leaf = {"feature": [-1], "threshold": [0.0], "left": [-1], "right": [-1], "value": [[1.0, 0.0]]}
        policy = {
            "format": "npcmind-policy",
            "format_version": 1,
            "manifest_version": version,
            "types": {"bee": {"actions": ["chase", "wander"], "features": [], "trees": [leaf]}},
        }
        await s.policies.put(StoredPolicy("game-1", version, 1.0, json.dumps(policy).encode()))
        await s.close()
        return version

    run(publish)
    before = len(recorded.a.requests)
    report = replay(tmp_path / "r.json", "--store", recorded.store, "--client", "game-1", "--policy", "--type", "bee")
    assert len(recorded.a.requests) == before
    chased = sum(o["sees_player"] for o in recorded.bees)
    assert report["types"]["bee"]["agreed"] == chased and list(report["types"]) == ["bee"]
    assert report["fallbacks"] == {} and report["tokens"] == {"in": 0, "out": 0}
    assert report["latency_ms"]["calls"] == 0 and report["target"]["kind"] == "policy"


def test_a_sample_and_since_bound_the_replay_and_the_price_gives_a_cost(recorded: Recorded, tmp_path: Path) -> None:
    with ScriptedServer() as b:
        b.set(rules=RULES_A, delay_ms=50)  # calls overlap: the bound on calls at once is what holds them
        target = ("--provider", "openai", "--base-url", b.base_url, "--model", "scripted", "--in-flight", "2")
        report = replay(
            tmp_path / "r.json",
            *("--store", recorded.store, "--client", "game-1", "--sample", "95", "--since", "2h"),
            *(*target, "--price-in", "0.15", "--price-out", "0.6"),
        )
        assert len(b.requests) == report["calls"] == 10  # whole calls of ten until 95 decisions are in
        assert 1 <= b.model.most_in_flight <= 2
    assert report["decisions"] == 100 and report["agreement"] == 1.0
    cost = report["cost"]
    expected = report["tokens"]["in"] * 0.15 / 1e6 + report["tokens"]["out"] * 0.6 / 1e6
    assert cost["total"] == pytest.approx(expected, abs=1e-6) and cost["total"] > 0


def test_what_is_kept_is_the_call_once_and_each_decision_by_its_number(recorded: Recorded) -> None:
    """The rows of a call: the first keeps the situation; each decision is named by its number in the prompt."""

    async def read() -> list[tuple[int, Any]]:
        s = await opened(recorded.store)
        got = [
            (seq, decode_read(inflate(blob, MAX_READ_BYTES, None)))
            for seq, blob in await s.policies.reads("game-1", 0.0)
        ]
        await s.close()
        return got

    reads = run(read)
    assert len(reads) == REQUESTS  # a JSON answer is one group: one row a call
    first, r = reads[0]
    assert isinstance(r.call, ReadCall) and len(r.call.entities) == BEES + 1
    assert [n for _, n in r.numbers] == sorted(n for _, n in r.numbers) and r.numbers[0][0] >= first
    assert r.call.world == {"player_hp_fraction": 0.4, "repellent": False} and r.call.scope == "forest_boss"
    assert msgspec.json.encode(r.call.entities[0].entity)  # the entity as the game sent it


@pytest.mark.fast
@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "--provider: say what to replay against"),
        (("--provider", "openai"), "--model: name the openai model"),
        (
            ("--policy", "--model", "x"),
            "--policy replays the published learned policy and sends nothing: leave out --model",
        ),
        (("--policy", "--rate", "0"), "argument --rate: must be above 0, not 0"),
        (("--policy", "--since", "2x"), "argument --since: '2x' is not a duration"),
        (("--policy", "--sample", "0"), "argument --sample: must be 1 or more, not 0"),
        (("--policy", "--price-in", "-1"), "argument --price-in: a price is 0 or more, not -1"),
        (("--provider", "openai", "--model", "m", "--manifest", "/nonexistent.yaml"), "--manifest /nonexistent.yaml"),
        (("--provider", "anthropic", "--model", "m", "--api-key-env", "NPCMIND_NO_SUCH_KEY"), "no API key in"),
    ],
)
def test_a_bad_flag_is_one_line_that_names_it(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    r = cli("replay", "--store", f"sqlite:///{tmp_path}/none.db", "--client", "game-1", *args)
    assert r.returncode == 2, r.stderr
    assert any(said in line for line in r.stderr.splitlines()) and "Traceback" not in r.stderr, r.stderr


@pytest.mark.fast
def test_a_store_without_kept_calls_says_so(tmp_path: Path) -> None:
    r = cli("replay", "--store", f"sqlite:///{tmp_path}/none.db", "--client", "game-1", "--policy")
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_streamed_answer_kept_once_a_batch_is_replayed_whole(
    svc: Any, scripted: ScriptedServer, tmp_path: Path
) -> None:
    """A streamed answer keeps each decision as it is written and what the call read once, with the group that
    completes the batch, naming every decision of it; replay (beside the running service) finds every decision
    and sends the very prompt again."""
    scripted.set(rules=RULES_A, stream_tokens_per_s=100)  # an entity every ~60 ms: a group each, or nearly
    for r in range(3):
        batch = [bee(f"s{r}-{i}", observation={**BEE_OBS, "hp_fraction": 0.05 * (r * 4 + i)}) for i in range(4)]
        got = svc.decide(decide_body(*batch), headers={"accept": "application/x-ndjson"})
        assert got.status_code == 200 and got.text.count('"source":"AI"') == 4, got.text
    store = svc.service.settings.store
    assert store is not None

    async def rows() -> list[Any]:
        s = open_store(store, read_only=True)
        await s.open()
        got = [decode_read(inflate(blob, MAX_READ_BYTES, None)) for _, blob in await s.policies.reads("game-1", 0.0)]
        await s.close()
        return got

    kept = run(rows)
    calls = [r for r in kept if isinstance(r.call, ReadCall)]
    assert len(calls) == 3 and len(kept) == 3, kept  # a row a batch, holding the call
    assert all(len(r.numbers) == 4 for r in kept)  # each names its 4 decisions, not only its last group's
    assert sum(len(r.numbers) for r in kept) == 12
    with ScriptedServer() as b:
        b.set(rules=RULES_A)
        target = ("--provider", "openai", "--base-url", b.base_url, "--model", "scripted")
        report = replay(tmp_path / "r.json", "--store", store, "--client", "game-1", *target)
        again = b.requests
    assert report["decisions"] == 12 and report["left_out"] == {} and report["agreement"] == 1.0
    sent = scripted.requests
    assert sorted(m["content"] for body in again for m in body["messages"]) == sorted(
        m["content"] for body in sent for m in body["messages"]
    )


needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="no chromium here (apt-get install chromium)")
REPLAY_PNG = ROOT / "docs" / "replay.png"


@needs_browser
def test_the_page_beside_the_inspector_shows_a_report_opened_from_a_file(
    against_b: AgainstB, shared_svc: Any, tmp_path: Path
) -> None:
    """GET /replay in Chromium: the report file chosen as a person chooses it; the numbers, the confusion table
    and the situations that differ are the report's. The screenshot in docs/ is this test's
    (NPCMIND_WRITE_SCREENSHOT=1 writes it there; a plain run leaves the checkout as it was)."""
    with Browser(tmp_path / "profile", size=(1280, 1500)) as browser:
        browser.open(shared_svc.server.url + "/replay")
        assert browser.js("document.getElementById('status').dataset.state") == "idle"
        root = browser.call("DOM.getDocument")["root"]["nodeId"]
        node = browser.call("DOM.querySelector", nodeId=root, selector="#file")["nodeId"]
        browser.call("DOM.setFileInputFiles", nodeId=node, files=[str(against_b.path)])
        browser.wait_for("document.getElementById('status').dataset.state === 'shown'", deadline_s=60)
        shown = browser.js(
            """(() => ({
              types: [...document.querySelectorAll('#types tr')].map(r => [...r.cells].map(c => c.textContent)),
              differ: [...document.querySelectorAll('#differ h3')].map(h => h.textContent),
              pre: [...document.querySelectorAll('#differ pre')].map(p => p.textContent),
              other: [...document.querySelectorAll('#confusion td.other')].map(c => c.textContent),
              facts: document.getElementById('facts').textContent,
            }))()"""
        )
        report = against_b.report
        bee, boss = report["types"]["bee"], report["types"]["boss"]
        assert shown["types"][0][:3] == ["bee", "900", f"{100 * bee['agreement']:.1f}%"], shown
        assert shown["types"][1][:3] == ["boss", "100", "100.0%"], shown
        assert shown["other"] == [str(bee["confusion"]["chase"]["flee"])]  # the one cell off the diagonal
        assert len(shown["differ"]) == 4 and all(h.startswith(tuple("1234")) and "bee" in h for h in shown["differ"])
        assert shown["pre"][0] == report["differ"][0]["prompt_before"]  # both entity parts, as text
        assert "1000 decisions in 100 calls" in shown["facts"] and "cost" in shown["facts"], shown["facts"]
        assert not browser.errors, browser.errors
        shot = REPLAY_PNG if os.environ.get("NPCMIND_WRITE_SCREENSHOT") == "1" else tmp_path / "replay.png"
        browser.screenshot(shot)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and (int.from_bytes(png[16:20]), int.from_bytes(png[20:24])) == (1280, 1500)
    assert boss["agreement"] == 1.0


def test_the_docs_example_finds_the_one_rule_that_differs(tmp_path: Path) -> None:
    """docs/replay.md's example, pasted whole (ports, store and report moved into this test's folder): the report
    finds the bee that flees under rules B, and the queen that agrees."""
    (block,) = run_by(ROOT / "docs" / "replay.md", "test_the_docs_example_finds_the_one_rule_that_differs")
    ports = {p: str(free_port()) for p in ("9201", "9202", "8082")}
    script = block.text.replace(".venv/bin/", f"{Path(sys.executable).parent}/")
    for old, new in ports.items():
        script = script.replace(old, new)
    script = script.replace("sqlite:///replay-demo.db", f"sqlite:///{tmp_path}/replay-demo.db")
    script = script.replace("--out report.json", f"--out {tmp_path}/report.json")
    assert bash(script, ROOT, tmp_path / "out") == 0, (tmp_path / "out").read_text()[-3000:]
    out = (tmp_path / "out").read_text()
    assert "replay: 1/1 calls, 2 decisions, 0 fallbacks" in out, out[-3000:]
    assert "replay: 2 decisions in 1 calls, agreement 50.0%, 1 situations differ; report in" in out, out[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["types"]["bee"]["confusion"] == {"chase": {"flee": 1}}
    assert report["types"]["boss"]["agreement"] == 1.0
    (s,) = report["differ"]
    assert s["decided"] == {"chase": 1} and s["replayed"] == {"flee": 1} and "hp_fraction=0.35 " in s["prompt_before"]


@pytest.mark.fast
def test_a_store_that_kept_nothing_to_replay_says_so_in_one_line(tmp_path: Path) -> None:
    from npcmind.storage.sqlite import SqliteStore

    run(lambda: SqliteStore(tmp_path / "empty.db").close())
    r = cli("replay", "--store", f"sqlite:///{tmp_path}/empty.db", "--client", "game-1", "--policy", "--type", "guard")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip() == (
        f"npcmind replay: --client game-1: no kept decision of type guard to replay in sqlite:///{tmp_path}/empty.db "
        f"({NO_MODEL_DECISION.format(client='game-1')})"
    )


NO_MODEL_DECISION = (
    "no decision of client {client} was made by a model there: a service with no provider (as `serve` without an "
    "API key) answers every decision with a fallback and keeps nothing to replay; decide through one with a provider"
)


def test_the_readme_replay_on_the_quick_start_store_says_the_service_had_no_provider(
    start_service: Any, tmp_path: Path
) -> None:
    """The quick start's service has no provider: the README's replay on its store said no call was kept "since
    schema version 4", as if the store were too old, when the reason is that no model decided anything."""
    store = f"sqlite:///{tmp_path}/npcmind.db"
    svc = start_service(provider="none", store=store)
    body = (ROOT / "examples" / "decide.json").read_bytes()
    got = svc.http.post("/v1/decide", content=body, headers={"content-type": "application/json"})
    assert got.status_code == 200 and '"no provider configured"' in got.text, got.text
    command = re.search(r"`(npcmind replay --store sqlite:///npcmind\.db [^`]+)`", (ROOT / "README.md").read_text())
    assert command is not None, "the README's replay command"
    argv = command[1].replace("sqlite:///npcmind.db", store).split()[1:]
    argv = [a for a in argv if a not in ("--out", "report.json")]
    env = {**os.environ, "OPENAI_API_KEY": "sk-unused"}  # nothing is sent: there is nothing to send
    r = subprocess.run([sys.executable, "-m", "npcmind.cli", *argv], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    client = argv[argv.index("--client") + 1]
    assert r.stderr.strip() == (
        f"npcmind replay: --client {client}: no kept decision to replay in {store} "
        f"({NO_MODEL_DECISION.format(client=client)})"
    )


def test_a_session_scope_neighbours_and_memory_are_sent_again_as_the_model_read_them(
    svc: Any, scripted: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the service adds to a prompt from what it knows: a scope the session added (with its state), the
    neighbours of an entity with a position, and its memory with an age; replayed, each prompt is the one sent.
    What is kept is encoded from tuples laid out as Read's arrays: byte for byte what its structs encode to."""
    from npcmind.decide import keep
    from npcmind.decide.read import Read, encode_read, read_call

    kept: list[bytes] = []

    def both_ways(batch: Any, features: Any) -> bytes:
        got = read_of(batch, features)
        by_entity = {ep.entity.id: ep.number for _, ep, _ in batch.asked}
        numbers = [(f.seq, by_entity[batch.entity_of[f.seq]]) for f in features.decisions]
        assert got == encode_read(Read(read_call(batch), numbers))
        kept.append(got)
        return got

    read_of = keep.read_of
    monkeypatch.setattr(keep, "read_of", both_ways)
    scripted.set(rules=RULES_A)
    scope = {"cave_7": {"parent": "forest", "text": "A damp cave.", "fields": {"depth": {"type": "integer", "min": 0}}}}
    assert svc.http.post("/v1/context", json={"client_id": "game-1", "scopes": scope}).status_code == 200
    for r in range(3):
        swarm = [
            bee(f"m{i}", position=[100.0 + 30 * i, 200.0], observation={**BEE_OBS, "hp_fraction": 0.1 * (r + 1)})
            for i in range(3)
        ]
        got = svc.decide(decide_body(*swarm, scope="cave_7", scope_state={"depth": r}))
        assert got.status_code == 200 and all(d["source"] == "AI" for d in got.json()["decisions"]), got.text
        first = got.json()["decisions"][0]["decision_id"]
        told = svc.http.post(
            "/v1/report", json={"client_id": "game-1", "reports": [{"decision_id": first, "outcome": "failed"}]}
        )
        assert told.status_code == 200
    sent = [[m["content"] for m in body["messages"]] for body in scripted.requests]
    assert len(sent) == 3 and "SCOPE cave_7" in sent[0][0] and "nearby:" in sent[0][1] and "failed" in sent[2][1]
    with ScriptedServer() as b:
        b.set(rules=RULES_A)
        target = ("--provider", "openai", "--base-url", b.base_url, "--model", "scripted")
        report = replay(tmp_path / "r.json", "--store", str(svc.service.settings.store), "--client", "game-1", *target)
        again = [[m["content"] for m in body["messages"]] for body in b.requests]
    assert sorted(again) == sorted(sent) and report["decisions"] == 9 and report["agreement"] == 1.0
    assert len(kept) == 3 and all(b'"cave_7"' in k and b'"nearby: ' in k for k in kept) and b"failed" in kept[2]


@pytest.mark.fast
def test_a_kept_call_renders_as_the_pipeline_renders_and_the_report_tallies_it() -> None:
    """In-process, no service: a kept call rendered again is the pipeline's builder's prompt; the view of an entity
    leaves other types' lines out; the policy target chooses from the kept situation; the report tallies it."""
    import asyncio
    import io

    from npcmind.decide.prompt import PromptBuilder
    from npcmind.decide.read import ReadEntity
    from npcmind.manifest import load
    from npcmind.protocol.a2g import DecideEntity
    from npcmind.replay import report
    from npcmind.replay.kept import Kept, KeptCall
    from npcmind.replay.render import Renderer, view
    from npcmind.replay.run import PolicyTarget, Progress
    from npcmind_client.policy import Policy

    m = load(FOREST)
    e = DecideEntity("b1", "bee", dict(BEE_OBS), ["idle", "chase"])
    call = ReadCall(
        "enum",
        None,
        {},
        [],
        {"player_hp_fraction": 0.4, "repellent": False},
        None,
        ["POPULATION: x"],
        [ReadEntity(1, e, ["nearby: nobody"], ["parent decided 2 s ago"])],
    )
    rendered = Renderer().render(call, m, "enum")
    (ep,) = rendered.prompt.entities
    assert rendered.left_out == []
    assert ep.text.startswith('E1 "b1" bee\n') and "  nearby: nobody\n  parent decided 2 s ago\nQ1:" in ep.text
    assert rendered.prompt.static == PromptBuilder(m, "enum").static([], [])
    seen = view(m, rendered.prompt, ep)
    assert "- bee:" in seen and "- boss:" not in seen and "- swarm:" not in seen and seen.endswith(ep.text)

    leaf = {"feature": [-1], "threshold": [0.0], "left": [-1], "right": [-1], "value": [[1.0, 0.0]]}
    data = {
        "format": "npcmind-policy",
        "format_version": 1,
        "manifest_version": m.version,
        "types": {"bee": {"actions": ["chase", "idle"], "features": [], "trees": [leaf]}},
    }
    kept = KeptCall(m.version, 1.0, call, [Kept(7, 1, "bee", "idle", "failed")])
    result = asyncio.run(PolicyTarget({m.version: Policy.load(data)}).replay(kept, m))
    out = io.StringIO()
    Progress(1, out).add(result)
    assert out.getvalue().startswith("replay: 1/1 calls, 1 decisions, 0 fallbacks, ")
    r = report.build({"kind": "policy"}, [result], {}, None, None)
    assert r["types"]["bee"] | {"confusion": None} == {
        "decisions": 1,
        "agreed": 0,
        "agreement": 0.0,
        "failed": 1,
        "failed_changed": 1,
        "failed_changed_share": 1.0,
        "prompts_changed": 0,
        "fallbacks": 0,
        "confusion": None,
    }
    assert r["types"]["bee"]["confusion"] == {"idle": {"chase": 1}} and r["situations_differing"] == 1
    assert r["differ"][0]["prompt_before"] == ep.text and r["differ"][0]["prompt_after"] == ""


def test_a_provider_of_the_other_answer_form_reads_every_prompt_in_its_own(
    recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept calls were asked in the enum form; Anthropic reads the numbered one: replay renders each prompt in
    it (so each reads differently, and the report says so) and the choices, by the same rules, agree."""
    monkeypatch.setenv("REPLAY_CLAUDE_KEY", "sk-ant-test")  # the scripted server takes any key
    with ScriptedServer() as b:
        b.set(rules=RULES_A)
        target = ("--provider", "anthropic", "--base-url", b.base_url, "--model", "claude-haiku-4-5")
        report = replay(
            tmp_path / "r.json",
            *("--store", recorded.store, "--client", "game-1", "--sample", "50", *target),
            *("--api-key-env", "REPLAY_CLAUDE_KEY"),
        )
        sent = b.requests
    assert len(sent) == report["calls"] == 5 and all("tools" in body for body in sent)  # Anthropic's form
    assert report["agreement"] == 1.0 and report["target"]["provider"] == "anthropic"
    assert all(t["prompts_changed"] == t["decisions"] for t in report["types"].values())
    assert "Options: 1 idle, 2 wander, 3 chase, 4 flee" in report_prompt(sent[0])


def report_prompt(body: dict[str, Any]) -> str:
    """The user part of an Anthropic request the scripted server received."""
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else "".join(c.get("text", "") for c in content)


def test_a_postgresql_store_is_replayed_as_a_sqlite_one(
    start_service: Any, scripted: ScriptedServer, postgres_url: str, tmp_path: Path
) -> None:
    """The service on PostgreSQL keeps what the model read there; replay reads it beside the running service."""
    scripted.set(rules=RULES_A)
    svc = start_service(store=postgres_url, base_url=scripted.base_url, **SCRIPTED_SVC)
    for r in range(4):
        batch = [bee(f"p{r}-{i}", observation={**BEE_OBS, "hp_fraction": 0.05 * (4 * r + i)}) for i in range(4)]
        assert svc.decide(decide_body(*batch, queen(f"q{r}"))).status_code == 200
    with ScriptedServer() as b:
        b.set(rules=RULES_B)
        target = ("--provider", "openai", "--base-url", b.base_url, "--model", "scripted")
        report = replay(tmp_path / "r.json", "--store", postgres_url, "--client", "game-1", *target)
        again = sorted([m["content"] for m in body["messages"]] for body in b.requests)
    assert again == sorted([m["content"] for m in body["messages"]] for body in scripted.requests)
    low = sum(0.05 * k < 0.3 for k in range(16))  # the bees that see the player (all do) and are low: B flees
    assert report["decisions"] == 20 and report["types"]["bee"]["confusion"]["chase"] == {
        "chase": 16 - low,
        "flee": low,
    }


def test_a_manifest_without_a_type_leaves_its_entities_out_and_says_so(recorded: Recorded, tmp_path: Path) -> None:
    data = yaml.safe_load(FOREST.read_text())
    del data["types"]["boss"], data["profiles"]
    smaller = tmp_path / "no-boss.yaml"
    smaller.write_text(yaml.safe_dump(data, sort_keys=False))
    with ScriptedServer() as a2:
        a2.set(rules=RULES_A)
        target = ("--provider", "openai", "--base-url", a2.base_url, "--model", "scripted", "--manifest", str(smaller))
        report = replay(
            tmp_path / "r.json", "--store", recorded.store, "--client", "game-1", "--sample", "100", *target
        )
        sent = a2.requests
    boss = report["types"]["boss"]
    assert report["fallbacks"] == {"left_out": 10} and boss["decisions"] == boss["fallbacks"] == 10
    assert {col for row in boss["confusion"].values() for col in row} == {"(left_out)"}
    assert report["types"]["bee"]["agreement"] == 1.0 and not any(
        '"q' in body["messages"][1]["content"] for body in sent
    )


def test_a_replay_whose_calls_all_failed_says_why_and_fails(svc: Any, scripted: ScriptedServer, tmp_path: Path) -> None:
    """Against a provider it could not reach, replay printed "agreement 0.0%, 4 situations differ" and exited 0:
    every call failed, and the user read it as a model that disagrees. It says so, with the reason, and fails."""
    scripted.set(rules=RULES_A)
    for r in range(2):
        got = svc.decide(
            decide_body(*(bee(f"u{r}-{i}", observation={**BEE_OBS, "hp_fraction": 0.2 * i}) for i in range(2)))
        )
        assert got.status_code == 200 and got.text.count('"source":"AI"') == 2, got.text
    store = svc.service.settings.store
    assert store is not None
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    out = tmp_path / "r.json"
    args = ("--store", store, "--client", "game-1", "--provider", "openai", "--base-url", dead, "--model", "m")
    r = cli("replay", "--rate", "1000", *args, "--out", str(out))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("npcmind replay: all 2 calls failed, so the report compares nothing: "), r.stderr
    assert "Connect" in last or "refused" in last, last  # the reason, as the provider's client said it
    report = json.loads(out.read_text())  # written still: what was tried, and why each call failed
    assert report["calls_failed"] == 2 and report["agreement"] == 0.0, report
    with ScriptedServer() as b:  # the same replay, reached: 0, and no word of failure
        b.set(rules=RULES_A)
        ok = cli(
            "replay", "--rate", "1000", *args[:6], "--base-url", b.base_url, "--model", "scripted", "--out", str(out)
        )
    assert ok.returncode == 0 and "failed" not in ok.stderr, ok.stderr
    assert json.loads(out.read_text())["calls_failed"] == 0
