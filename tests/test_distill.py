"""The learned cascade, service side: what each fresh decision keeps, `npcmind distill`, GET /v1/policy."""

from __future__ import annotations

import asyncio
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from conftest import FOREST, Running, bee, cli, decide_body, logged, until
from npcmind.storage import open_store
from npcmind.storage.base import TrainingRow


def _training(tmp_path: Path, client: str = "game-1") -> list[TrainingRow]:
    async def read() -> list[TrainingRow]:
        store = open_store(f"sqlite:///{tmp_path}/npcmind.db", read_only=True)  # beside the running service
        try:
            return await store.policies.training(client, 0.0)
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


def _fill(
    path: Path,
    rows: list[tuple[dict[str, Any], str, str | None]],
    client: str = "game-1",
    session: str = "s",
    scope_state: dict[str, Any] | None = None,
    kind: str = "bee",
) -> None:
    """A store holding these fresh decisions of a session (observation, action, outcome), as the service keeps
    them."""
    from npcmind.manifest import load
    from npcmind.storage.base import DecisionFeatures, IssuedDecision, RequestFeatures
    from npcmind.storage.sqlite import SqliteStore

    version = load(FOREST).version
    legal = ["idle", "wander", "chase", "flee"] if kind == "bee" else ["idle", "chase", "flee"]

    async def go() -> None:
        s = SqliteStore(path)
        for obs, action, outcome in rows:
            seq = await s.decisions.allocate(1)
            issued = IssuedDecision(seq, f"d{seq}", session, "b", kind, action, action, 1000.0 + seq)
            f = DecisionFeatures(seq, kind, None, obs, None, legal, action, 0.9)
            request = RequestFeatures(client, version, 1000.0 + seq, WORLD, scope_state, [f])
            await s.decisions.record([issued], request)
            if outcome is not None:
                await s.decisions.set_outcome(seq, outcome, None, 2000.0)
        await s.close()

    asyncio.run(go())


WORLD = {"player_hp_fraction": 0.5, "repellent": False}


def _obs(hp: float, distance: float) -> dict[str, Any]:
    return {"hp_fraction": hp, "distance_to_player": distance, "sees_player": True, "current_action": "idle"}


def test_distill_with_too_few_decisions_says_how_many_it_has_and_needs_and_writes_nothing(tmp_path: Path) -> None:
    _fill(tmp_path / "s.db", [(_obs(0.5, 50.0), "chase", None)] * 40)
    out = tmp_path / "p.json"
    r = cli("distill", "--store", f"sqlite:///{tmp_path}/s.db", "--client", "game-1", "--out", str(out))
    assert r.returncode == 1, r.stderr
    assert "bee: 40 decisions, needs 100: no policy for it" in r.stdout and not out.exists()
    r = cli("distill", "--store", f"sqlite:///{tmp_path}/s.db", "--client", "game-2", "--out", str(out))
    assert r.returncode == 1 and "no decisions of client 'game-2'" in r.stdout and not out.exists()
    r = cli("distill", "--store", f"sqlite:///{tmp_path}/s.db", "--client", "game-1", "--out", str(out), "--since", "0")
    assert r.returncode == 2 and "--since: must be a number of hours above 0" in r.stderr


def test_distill_learns_the_rule_the_model_followed_and_defers_where_it_tossed_a_coin(tmp_path: Path) -> None:
    """Near: always chase; far: idle or wander, one then the other. The tree covers the first and defers on the
    second; the file it writes loads in the SDK's evaluator and chooses as the table said."""
    rows = [(_obs(0.5 + (i % 5) / 20, 40.0 + 10 * (i % 4)), "chase", "done") for i in range(300)]
    coin = random.Random(5)
    rows += [
        (_obs(0.5 + (i % 5) / 20, 200.0 + 10 * (i % 4)), coin.choice(["idle", "wander"]), None) for i in range(300)
    ]
    _fill(tmp_path / "s.db", rows)
    out = tmp_path / "p.json"
    r = cli(
        "distill", "--store", f"sqlite:///{tmp_path}/s.db", "--client", "game-1", "--out", str(out),
        "--manifest", str(FOREST),
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "bee: 600 decisions, trained on 480, 120 held back" in r.stdout
    assert "3/3 bee: " in r.stderr  # the progress bar
    table = {float(line.split()[0]): line.split()[1:] for line in r.stdout.splitlines() if line[:3] == "   "}
    assert float(table[0.8][0].rstrip("%")) == pytest.approx(50.0, abs=15)  # the near half, about
    assert table[0.8][1] == "100.0%"
    from npcmind.manifest import load
    from npcmind_client.policy import Policy

    p = Policy.load(out, manifest_version=load(FOREST).version)
    near = p.choose("bee", _obs(0.61, 52.0), ["idle", "wander", "chase", "flee"], world=WORLD)
    assert near is not None and near[0] == "chase" and near[1] >= 0.9
    far = p.choose("bee", _obs(0.61, 221.0), ["idle", "wander", "chase", "flee"], world=WORLD)
    assert far is not None and far[0] in ("idle", "wander") and far[1] < 0.8


def test_serve_distill_every_trains_in_the_background_and_get_policy_serves_it_with_an_etag(
    start_service: Any, scripted: Any
) -> None:
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted", distill_every_h=0.0005)
    gone = svc.http.get("/v1/policy", params={"client_id": "game-1"})
    assert gone.status_code == 404 and "no policy of 'game-1' for manifest version sha256:" in gone.text
    assert "--distill-every" in gone.text
    scripted.set(default="last")  # the last legal action: flee whenever it is legal
    for r in range(8):  # 128 situations, each new to the cache: 128 fresh decisions to learn from
        entities = [
            bee(f"b{i}", observation={**_obs(0.05 * (i % 16 + 1), 10.0 * (r + 1)), "sees_player": i % 2 == 0})
            for i in range(16)
        ]
        assert svc.decide(decide_body(*entities)).status_code == 200
    got = until(
        lambda: (x := svc.http.get("/v1/policy", params={"client_id": "game-1"})).status_code == 200 and x, "a policy"
    )
    etag = got.headers["etag"]
    from npcmind_client.policy import Policy

    version = svc.service.manifest.version
    p = Policy.load(got.content, manifest_version=version)
    world = {"player_hp_fraction": 0.4, "repellent": False}
    choice = p.choose("bee", _obs(0.5, 40.0), ["idle", "wander", "chase", "flee"], world=world, scope_state={})
    assert choice is not None and choice[0] == "flee" and choice[1] > 0.9
    again = svc.http.get("/v1/policy", params={"client_id": "game-1"}, headers={"if-none-match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    other = svc.http.get("/v1/policy", params={"client_id": "game-1"}, headers={"if-none-match": '"old"'})
    assert other.status_code == 200 and other.content == got.content
    assert svc.http.get("/v1/policy", params={"client_id": "game-2"}).status_code == 404
    assert svc.http.get("/v1/policy").status_code == 422  # no client named: said, not a 500
    assert "/v1/policy" in svc.http.get("/openapi.json").json()["paths"]


def test_outcomes_matter_the_policy_picks_the_coin_side_that_worked_above_the_threshold(
    svc: Running, scripted: Any, tmp_path: Path
) -> None:
    """The teacher tosses a coin between chase and idle; chase is always reported failed, idle done. The model
    is right half the time; the policy learnt from the outcomes picks idle, sure enough to act on it."""
    scripted.set(rules=[{"type": "bee", "toss": ["chase", "idle"]}], seed=3)
    legal = ["chase", "idle"]
    chosen: list[str] = []
    for r in range(10):  # 160 situations, each new to the cache: 160 fresh coin tosses
        entities = [
            bee(f"b{r}.{i}", observation=_obs(0.05 * (i + 4), 10.0 * (r + 1)), legal_actions=legal) for i in range(16)
        ]
        decisions = svc.decide(decide_body(*entities)).json()["decisions"]
        reports = [
            {"decision_id": d["decision_id"], "outcome": "failed" if d["action"] == "chase" else "done"}
            for d in decisions
        ]
        assert svc.http.post("/v1/report", json={"client_id": "game-1", "reports": reports}).status_code == 200
        chosen += [d["action"] for d in decisions]
    assert 0.3 < chosen.count("chase") / len(chosen) < 0.7  # the teacher really tossed a coin
    from npcmind.distill.run import distill
    from npcmind.manifest import load
    from npcmind_client.policy import Policy

    manifest = load(FOREST)
    result = distill(_training(tmp_path), "game-1", manifest)
    assert result.policy is not None, result.lines
    p = Policy.load(result.policy, manifest_version=manifest.version)
    for hp, distance in ((0.3, 20.0), (0.6, 50.0), (0.9, 90.0)):
        got = p.choose("bee", _obs(hp, distance), legal, world={"player_hp_fraction": 0.4, "repellent": False})
        assert got is not None and got[0] == "idle" and got[1] >= 0.8, got


@pytest.mark.fast
def test_the_scripted_teacher_follows_its_rules_on_the_prompt_it_reads(svc: Running, scripted: Any) -> None:
    scripted.set(
        rules=[
            {"type": "bee", "when": {"world.repellent": True}, "choose": "flee"},
            {"type": "bee", "when": {"hp_fraction": {"lt": 0.3}, "current_action": "chase"}, "choose": "wander"},
            {"type": "bee", "when": {"distance_to_player": {"ge": 100, "lt": 200}}, "choose": "idle"},
            {"type": "bee", "when": {"scope.boss_phase": 2}, "choose": "flee"},  # not legal below: the next applies
            {"type": "bee", "choose": "chase"},
        ]
    )
    low = bee("low", observation={**_obs(0.2, 10.0), "current_action": "chase"})
    far = bee("far", observation=_obs(0.9, 150.0))
    other = bee("other", observation=_obs(0.9, 10.0), legal_actions=["idle", "chase"])
    got = svc.decide(decide_body(low, far, other)).json()["decisions"]
    assert [d["action"] for d in got] == ["wander", "idle", "chase"]
    body = decide_body(bee("r", observation=_obs(0.9, 10.0)), world={"player_hp_fraction": 0.4, "repellent": True})
    assert svc.decide(body).json()["decisions"][0]["action"] == "flee"
    assert svc.http.put(f"{scripted.url}/_script", json={"rules": [{"when": {"x": {"below": 1}}}]}).status_code == 422


def test_hosted_get_policy_is_the_tokens_client_and_needs_a_token(hosted: Any, tmp_path: Path) -> None:
    import sqlite3

    version = hosted.running.service.guard.manifest_for("game-1").version
    data = b'{"format": "npcmind-policy"}'
    db = sqlite3.connect(tmp_path / "npcmind.db")  # as a background distill keeps it (WAL: beside the service)
    db.execute("INSERT INTO policies VALUES (?, ?, ?, ?)", ("game-1", version, 1.0, data))
    db.commit()
    db.close()
    assert hosted.http.get("/v1/policy").status_code == 401
    token = hosted.auth(hosted.open("game-1"))
    mine = hosted.http.get("/v1/policy", headers=token)
    assert mine.status_code == 200 and mine.content == data and mine.headers["etag"]
    anything = hosted.http.get("/v1/policy", headers={**token, "if-none-match": "*"})  # RFC 9110: one exists
    assert anything.status_code == 304 and anything.headers["etag"] == mine.headers["etag"]
    named = hosted.http.get("/v1/policy", params={"client_id": "game-2"}, headers=token)
    assert named.status_code == 403, named.text
    assert "the token is for client 'game-1', the query parameter client_id names 'game-2'" in named.text
    theirs = hosted.http.get("/v1/policy", headers=hosted.auth(hosted.open("game-2")))
    assert theirs.status_code == 404 and "'game-2'" in theirs.text
    none = hosted.http.get("/v1/policy", headers={**hosted.auth(hosted.open("game-2")), "if-none-match": "*"})
    assert none.status_code == 404  # `*` and no policy: nothing current to match


def test_distill_never_writes_over_a_file_of_its_store(tmp_path: Path) -> None:
    """A policy written on the store's database had turned it into JSON; the live service answered 503 after."""
    _fill(tmp_path / "s.db", [(_obs(0.5 + (i % 5) / 20, 40.0), "chase", None) for i in range(120)])
    before = (tmp_path / "s.db").read_bytes()
    (tmp_path / "sub").mkdir()
    os.link(tmp_path / "s.db", tmp_path / "hard.db")
    store = f"sqlite:///{tmp_path}/s.db"
    for out in ("s.db", "s.db-wal", "s.db-shm", "s.db.lock", "sub/../s.db", "hard.db"):
        r = cli("distill", "--store", store, "--client", "game-1", "--out", str(tmp_path / out))
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert f"is a file of the store {store}: give the policy a file of its own" in r.stderr, r.stderr
    assert (tmp_path / "s.db").read_bytes() == before


@pytest.mark.parametrize(
    ("out", "says"),
    [
        ("/nonexistent/dir/p.json", "the folder /nonexistent/dir does not exist"),
        ("{tmp}", "is a folder: give a file name in it"),
        ("/proc/p.json", "cannot be written"),
    ],
)
def test_an_out_that_cannot_be_written_is_one_line_before_the_store_is_read(
    tmp_path: Path, out: str, says: str
) -> None:
    """The store given does not even exist: --out is checked first, so nobody waits for training to learn it."""
    out = out.format(tmp=tmp_path)
    r = cli("distill", "--store", f"sqlite:///{tmp_path}/none.db", "--client", "game-1", "--out", out)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert says in r.stderr and "does not exist" not in r.stderr.replace(says, ""), r.stderr


def test_the_policy_file_is_written_whole_and_an_old_one_replaced(tmp_path: Path) -> None:
    _fill(tmp_path / "s.db", [(_obs(0.5 + (i % 5) / 20, 40.0), "chase", None) for i in range(120)])
    out = tmp_path / "p.json"
    out.write_text("an old policy, longer than the new one will be " * 400)
    out.chmod(0o644)
    old = out.stat().st_ino
    r = cli("distill", "--store", f"sqlite:///{tmp_path}/s.db", "--client", "game-1", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["format"] == "npcmind-policy"
    assert out.stat().st_ino != old  # renamed into place: a game loading the old one never reads half of the new
    assert out.stat().st_mode & 0o777 == 0o644  # the old file's permissions (a temporary file's are 0o600)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "s.db", "s.db-shm", "s.db-wal"]


def test_a_store_that_is_a_folder_or_holds_a_bad_version_is_named_in_one_line(tmp_path: Path) -> None:
    import sqlite3

    out = str(tmp_path / "p.json")
    r = cli("distill", "--store", f"sqlite:///{tmp_path}", "--client", "game-1", "--out", out)
    assert r.returncode == 2 and f"the store {tmp_path} is a folder, not a store file" in r.stderr, r.stderr
    _fill(tmp_path / "s.db", [(_obs(0.5, 40.0), "chase", None)])
    db = sqlite3.connect(tmp_path / "s.db")
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (b"abc",))
    db.commit()
    db.close()
    r = cli("distill", "--store", f"sqlite:///{tmp_path}/s.db", "--client", "game-1", "--out", out)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"the store {tmp_path}/s.db has a schema_version of 'abc', not a number" in r.stderr, r.stderr


def test_one_decision_is_said_as_one_decision(tmp_path: Path) -> None:
    _fill(tmp_path / "s.db", [(_obs(0.5, 40.0), "chase", None)])
    r = cli("distill", "--store", f"sqlite:///{tmp_path}/s.db", "--client", "game-1", "--out", str(tmp_path / "p"))
    assert r.returncode == 1 and "bee: 1 decision, needs 100: no policy for it" in r.stdout, r.stdout


@pytest.mark.fast
def test_the_first_background_round_comes_soon_after_start_then_one_every_interval(tmp_path: Path) -> None:
    """A service restarted more often than every HOURS had never trained: the first round waited a whole one."""
    from npcmind.distill.background import FIRST_ROUND_S, BackgroundDistill
    from npcmind.storage.sqlite import SqliteStore

    delays: list[float] = []

    async def sleep(s: float) -> None:  # the test's clock: no round waits for real
        delays.append(s)
        if len(delays) == 3:
            raise asyncio.CancelledError

    async def go() -> int:
        store = SqliteStore(tmp_path / "s.db")
        job = BackgroundDistill(store, f"sqlite:///{tmp_path}/s.db", lambda c: None, 24.0, sleep)
        with pytest.raises(asyncio.CancelledError):
            await job.run()
        await store.close()
        return job.runs

    assert asyncio.run(go()) == 2
    assert delays == [FIRST_ROUND_S, 24 * 3600.0, 24 * 3600.0] and FIRST_ROUND_S <= 60


@pytest.mark.timeout(600)  # two rounds of three clients, each trained in a process of its own: 82 s under
# suite_under_load's busy loops, and past the suite's 120 s with other work beside them
def test_a_bad_client_or_row_stops_no_round_and_an_unchanged_policy_is_not_kept_again(tmp_path: Path) -> None:
    """game-0 fails (its manifest cannot be had), game-1 has a damaged features row: game-1 and game-2 still get
    their policies, each problem one line; the next round changes nothing, so GET /v1/policy's ETag stays."""
    import sqlite3

    from npcmind.distill.background import BackgroundDistill
    from npcmind.manifest import load
    from npcmind.storage.sqlite import SqliteStore

    good = [(_obs(0.5 + (i % 5) / 20, 40.0), "chase", None) for i in range(120)]
    for client in ("game-0", "game-1", "game-2"):
        _fill(tmp_path / "s.db", good, client)
    db = sqlite3.connect(tmp_path / "s.db")
    db.execute(
        "INSERT INTO features (first_seq, client_id, created_at, data) VALUES (?, ?, ?, ?)",
        (10**9, "game-1", 5000.0, b"not zlib at all"),
    )
    db.commit()
    db.close()
    manifest = load(FOREST)

    def manifest_of(client: str) -> Any:
        if client == "game-0":
            raise RuntimeError("the clients file\nchanged")
        return manifest

    async def rounds() -> tuple[int, int, list[float]]:
        store = SqliteStore(tmp_path / "s.db")
        job = BackgroundDistill(store, f"sqlite:///{tmp_path}/s.db", manifest_of, 24.0)
        first = await job.once()
        kept = [await store.policies.get(c, manifest.version) for c in ("game-1", "game-2")]
        second = await job.once()
        again = [await store.policies.get(c, manifest.version) for c in ("game-1", "game-2")]
        await store.close()
        assert all(k is not None for k in kept) and kept == again  # the same data, the same created_at
        return first, second, [k.created_at for k in kept if k is not None]

    with logged("npcmind") as said:
        first, second, _ = asyncio.run(rounds())
    assert (first, second) == (2, 0), said
    assert "distill: game-0: no new policy this round: RuntimeError: the clients file changed" in said, said
    unreadable = "store: 1 features row of client 'game-1' cannot be read and was skipped (the first: error: "
    assert any(line.startswith(unreadable) for line in said), said
    r = cli("distill", "--store", f"sqlite:///{tmp_path}/s.db", "--client", "game-1", "--out", str(tmp_path / "p"))
    assert r.returncode == 0 and "Traceback" not in r.stderr and unreadable in r.stderr, r.stderr


def test_serve_refuses_background_distill_on_a_memory_store_and_rounds_too_close(tmp_path: Path) -> None:
    memory = ("--store", "sqlite:///:memory:")
    r = cli("serve", "--manifest", str(FOREST), *memory, "--distill-every", "1", "--port", "0")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "--distill-every trains from the store beside the service, and sqlite:///:memory:" in r.stderr, r.stderr
    r = cli("serve", "--manifest", str(FOREST), "--distill-every", "1e-300", "--port", "0")
    assert r.returncode == 2 and "--distill-every: must be at least 0.05 hours (3 minutes" in r.stderr, r.stderr


def test_distill_publish_puts_the_policy_where_the_running_service_serves_it(
    start_service: Any, tmp_path: Path
) -> None:
    """`npcmind distill` alone writes a file; --publish is how a run reaches GET /v1/policy (the service keeps
    running on the store meanwhile), and publishing the same policy again keeps its ETag."""
    db = tmp_path / "live.db"
    _fill(db, [(_obs(0.5 + (i % 5) / 20, 40.0 + 10 * (i % 4)), "chase", None) for i in range(150)])
    svc = start_service(store=f"sqlite:///{db}")
    assert svc.http.get("/v1/policy", params={"client_id": "game-1"}).status_code == 404
    store = ("--store", f"sqlite:///{db}", "--client", "game-1")
    r = cli("distill", *store)
    assert r.returncode == 2 and "give --out FILE, --publish, or both" in r.stderr, r.stderr
    out = tmp_path / "p.json"
    r = cli("distill", *store, "--out", str(out))
    assert r.returncode == 0 and "published" not in r.stdout, r.stdout
    assert svc.http.get("/v1/policy", params={"client_id": "game-1"}).status_code == 404  # a file only
    r = cli("distill", *store, "--publish", "--manifest", str(FOREST))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"published to sqlite:///{db} for manifest sha256:" in r.stdout and "wrote" not in r.stdout, r.stdout
    got = svc.http.get("/v1/policy", params={"client_id": "game-1"})
    assert got.status_code == 200 and json.loads(got.content)["types"].keys() == {"bee"}
    r = cli("distill", *store, "--publish", "--manifest", str(FOREST))
    assert r.returncode == 0 and "is the same: left as it is" in r.stdout, r.stdout
    again = svc.http.get("/v1/policy", params={"client_id": "game-1"})
    assert again.headers["etag"] == got.headers["etag"]


@pytest.mark.fast
def test_the_docs_say_both_ways_a_policy_reaches_get_policy_and_no_other() -> None:
    """They had said running `distill` opted in: it only wrote a file, and GET /v1/policy stayed 404."""
    root = Path(__file__).resolve().parent.parent
    for doc in (root / "README.md", root / "docs" / "policy.md"):
        text = " ".join(doc.read_text().split())
        assert "--publish" in text and "--distill-every" in text, doc
        assert "opted in by running `distill`" not in text and "has run `distill`" not in text, doc
        assert "only writes `--out` publishes nothing" in text, doc


# --- issue 29: what one session can do to training ------------------------------------------------------------


def _rows(path: Path) -> list[TrainingRow]:
    async def read() -> list[TrainingRow]:
        store = open_store(f"sqlite:///{path}", read_only=True)
        try:
            return await store.policies.training("game-1", 0.0)
        finally:
            await store.close()

    return asyncio.run(read())


def test_a_session_chain_of_undeclared_scope_fields_gives_a_type_at_most_8_features_more(tmp_path: Path) -> None:
    """A session adds a chain of scopes of 64 boolean fields and sets them all: each had become a feature of every
    decision of the type (65,536 columns: 9x the time, 5x the memory of a round). Rows past 256 scope fields are
    no longer read back at all (test_replay_store.py); with 256, the most a row read back may carry, the type
    gets its declared fields' features and at most 8 undeclared ones, the most widely carried first."""
    from npcmind.distill.features import candidate_features
    from npcmind.manifest import load

    manifest = load(FOREST)
    honest = [(_obs(0.5 + (i % 5) / 20, 40.0 + 10 * (i % 4)), "chase", None) for i in range(120)]
    _fill(tmp_path / "s.db", honest, session="honest", scope_state={"boss_phase": 2, "weather": "rain"})
    clean = candidate_features("bee", _rows(tmp_path / "s.db"), manifest)
    hostile = {f"s{i}_f{j}": (i + j) % 2 == 0 for i in range(4) for j in range(64)}
    _fill(tmp_path / "s.db", honest[:16], session="hostile", scope_state=hostile)
    rows = _rows(tmp_path / "s.db")
    for manifest_or_none in (manifest, None):
        got = candidate_features("bee", rows, manifest_or_none)
        declared = [f for f in got if not (f["source"] == "scope_state" and f["field"] != "boss_phase")]
        assert len(got) - len(declared) <= 8, len(got)
        assert len(got) <= len(clean) + 8
        # the field two sessions carry comes before those only the hostile one does
        assert {"source": "scope_state", "field": "weather", "encoding": "enum", "value": "rain"} in got
    from npcmind.distill.run import distill

    result = distill(rows, "game-1", manifest)
    assert result.policy is not None, result.lines
    assert len(result.policy["types"]["bee"]["features"]) <= len(clean) + 8
    from npcmind.distill.features import MAX_UNDECLARED_FEATURES

    assert MAX_UNDECLARED_FEATURES == 8  # the cap docs/policy.md states
    assert {r.session_id for r in rows} == {"honest", "hostile"}  # the store names each decision's session


def _held(store_url: str, client_id: str, file: Any) -> tuple[bytes | None, list[str]]:
    """A training round held until the test lets it go (it runs in the training process)."""
    import time

    folder = Path(store_url.removeprefix("sqlite:///")).parent
    (folder / "started").write_text(str(os.getpid()))
    while not (folder / "release").exists():  # a condition, polled: the test creates it
        time.sleep(0.01)
    return None, ["held by the test"]


def test_decide_is_answered_while_a_training_round_is_held_in_a_process_of_its_own(
    start_service: Any, scripted: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a thread of the service, a round's Python held the loop's interpreter lock (decide's p50 6 -> 45 ms, a
    stall of 2.5 s). The round runs in another process: while one is held, decisions are answered."""
    from npcmind.distill import background

    monkeypatch.setattr(background, "train", _held)
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted", distill_every_h=0.0005)
    assert svc.decide(decide_body(bee("b1"))).status_code == 200  # a fresh decision: a client to train
    pid = int(until(lambda: (tmp_path / "started").exists() and (tmp_path / "started").read_text(), "a round"))
    try:
        for i in range(3):  # answered while the round is held
            got = svc.decide(decide_body(bee(f"h{i}", observation=_obs(0.1 * i, 10.0 * i))))
            assert got.status_code == 200, got.text
        assert pid != os.getpid() and not (tmp_path / "release").exists()
    finally:
        (tmp_path / "release").write_text("go")


def test_a_huge_number_in_one_decision_stops_no_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bee's distance of 1e300 (legal: no max) had made `distill` exit 2 ("Input X contains infinity") for
    every type. Numbers are clipped to 1e30, which keeps them on the same side of every threshold; one type's
    failure is that type's line, and the others are trained."""
    rows = [(_obs(0.5 + (i % 5) / 20, 40.0 + 10 * (i % 4)), "chase", None) for i in range(150)]
    rows += [
        (_obs(0.5, 1e300), "flee", "done"),
        (_obs(-1e308, -1e300), "flee", None),
        (_obs(1e308, 1e308), "idle", None),
    ]
    _fill(tmp_path / "s.db", rows)
    boss = [(_obs(0.5, 1e300 if i == 7 else 40.0 + i), "chase" if i % 2 else "flee", None) for i in range(120)]
    _fill(tmp_path / "s.db", boss, kind="boss")
    out = tmp_path / "p.json"
    r = cli(
        "distill", "--store", f"sqlite:///{tmp_path}/s.db", "--client", "game-1", "--out", str(out),
        "--manifest", str(FOREST),
    )  # fmt: skip
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert set(json.loads(out.read_text())["types"]) == {"bee", "boss"}
    from npcmind.distill import run
    from npcmind.manifest import load

    fit = run.fit

    def boss_fails(rows: Any, specs: Any, actions: list[str], step: Any) -> Any:
        if actions == ["idle", "chase", "flee"]:
            raise ValueError("a type that cannot be trained")
        return fit(rows, specs, actions, step)

    monkeypatch.setattr(run, "fit", boss_fails)
    result = run.distill(_rows(tmp_path / "s.db"), "game-1", load(FOREST))
    assert result.policy is not None and set(result.policy["types"]) == {"bee"}
    assert "boss: training failed (ValueError: a type that cannot be trained); no policy for it" in result.lines


def _coin_store(path: Path, hostile: str | None) -> None:
    """Issue 29's scenario: the teacher tosses a coin between chase and flee; an honest session (160 decisions)
    reports all done; another (960 decisions) reports ``hostile`` ("lies": flee done and chase failed;
    "honest": all done, the control), or is not there (None)."""
    rng = random.Random(29)

    def tosses(n: int) -> list[tuple[dict[str, Any], str]]:
        return [
            (_obs(0.05 * rng.randrange(20), 10.0 * rng.randrange(30)), rng.choice(["chase", "flee"])) for _ in range(n)
        ]

    _fill(path, [(obs, a, "done") for obs, a in tosses(160)], session="honest")
    if hostile is not None:
        lie = hostile == "lies"
        rows = [(obs, a, "failed" if lie and a == "chase" else "done") for obs, a in tosses(960)]
        _fill(path, rows, session="hostile")


def _p_flee(path: Path, situations: list[dict[str, Any]]) -> list[float]:
    """The policy distilled from the store: its probability of flee (against chase) in each situation."""
    from npcmind.distill.run import distill
    from npcmind.manifest import load
    from npcmind_client.policy import Policy

    manifest = load(FOREST)
    result = distill(_rows(path), "game-1", manifest)
    assert result.policy is not None, result.lines
    p = Policy.load(result.policy, manifest_version=manifest.version)
    out = []
    for obs in situations:
        got = p.choose("bee", obs, ["chase", "flee"], world=WORLD)
        assert got is not None
        out.append(got[1] if got[0] == "flee" else 1 - got[1])
    return out


@pytest.mark.fast
def test_one_session_reporting_flee_done_and_chase_failed_does_not_steer_the_policy(tmp_path: Path) -> None:
    """A hostile session's reports had made the policy flee at >= 0.8 in 261 of 500 situations, chase in none.
    Each session's reports are now one vote an action (relative to its other actions), the weight the median
    vote (one against one: the one nearer no pull), and no session weighs more than the others together. Over
    500 situations (docs/policy.md): the lies move no probability at all (the same store with the hostile
    session reporting all done gives the same policy); against the honest session's alone, the mean P(flee)
    moves by at most 0.1 and the policy acts on flee (>= 0.8) in at most 25 (5%)."""
    rng = random.Random(500)
    situations = [_obs(0.05 * rng.randrange(20), 10.0 * rng.randrange(30)) for _ in range(500)]
    p: dict[str | None, list[float]] = {}
    for hostile in (None, "honest", "lies"):
        _coin_store(tmp_path / f"{hostile}.db", hostile)
        p[hostile] = _p_flee(tmp_path / f"{hostile}.db", situations)
    lies = max(abs(m - c) for m, c in zip(p["lies"], p["honest"], strict=True))
    shift = abs(sum(p["lies"]) - sum(p[None])) / len(situations)
    acts = sum(1 for m in p["lies"] if m >= 0.8)
    print(f"reports' effect {lies:.3f}; mean P(flee) shift {shift:.3f} vs the honest alone; flee >= 0.8 in {acts}")
    assert lies == 0.0 and shift <= 0.1 and acts <= 25, (lies, shift, acts)


# --- issue 39: a session's share of what distill learns -----------------------------------------------------------


def _teacher(obs: dict[str, Any]) -> str:
    """The honest sessions' model: it never flees."""
    if obs["hp_fraction"] < 0.2 or not obs["sees_player"]:
        return "wander"
    return "chase" if obs["distance_to_player"] <= 120 else "idle"


def _situation(rng: random.Random) -> dict[str, Any]:
    return {
        "hp_fraction": 0.05 * rng.randrange(20),
        "distance_to_player": 10.0 * rng.randrange(30),
        "sees_player": rng.random() < 0.8,
        "current_action": rng.choice(["idle", "wander", "chase", "flee"]),
    }


def _sessions_store(path: Path, sessions: list[tuple[str, list[tuple[dict[str, Any], str]]]]) -> None:
    """A store of these sessions' decisions, in requests of 16, as the service keeps them."""
    from npcmind.manifest import load
    from npcmind.storage.base import DecisionFeatures, IssuedDecision, RequestFeatures
    from npcmind.storage.sqlite import SqliteStore

    version, legal = load(FOREST).version, ["idle", "wander", "chase", "flee"]

    async def go() -> None:
        s = SqliteStore(path)
        for name, rows in sessions:
            for i in range(0, len(rows), 16):
                part = rows[i : i + 16]
                first = await s.decisions.allocate(len(part))
                issued = [
                    IssuedDecision(first + k, f"d{first + k}", name, f"b{k}", "bee", a, a, 1000.0)
                    for k, (_, a) in enumerate(part)
                ]
                f = [DecisionFeatures(first + k, "bee", None, o, None, legal, a, 0.9) for k, (o, a) in enumerate(part)]
                await s.decisions.record(issued, RequestFeatures("game-1", version, 1000.0, WORLD, None, f))
        await s.close()

    asyncio.run(go())


def test_one_session_with_as_many_decisions_as_all_honest_ones_cannot_make_the_policy_act_on_its_action(
    tmp_path: Path,
) -> None:
    """Issue 39, finding 4: beside six honest sessions of 960 decisions whose model never flees, one session of
    5,760 decisions, all `flee`, each in a situation where the honest model chased. Before, the policy acted on
    flee (>= 0.8) in 60 of 500 honest situations and moved P(flee) by 0.219 on average. Now a session's decisions
    count in each leaf at most as much as the other sessions' there on average (and the fit takes no more of one
    session's than of all the others together): over 500 situations drawn as the honest sessions' are, the policy
    acts on flee in at most 25 and the mean P(flee) (against chase) moves by at most 0.1 (docs/policy.md)."""
    rng = random.Random(39)
    honest = [(f"honest{h}", [(o, _teacher(o)) for o in (_situation(rng) for _ in range(960))]) for h in range(6)]
    hostile: list[tuple[dict[str, Any], str]] = []
    while len(hostile) < 5_760:
        o = _situation(rng)
        if _teacher(o) == "chase":
            hostile.append((o, "flee"))
    _sessions_store(tmp_path / "clean.db", honest)
    _sessions_store(tmp_path / "poisoned.db", [*honest, ("hostile", hostile)])
    srng = random.Random(500)
    situations = [_situation(srng) for _ in range(500)]
    clean, poisoned = _p_flee(tmp_path / "clean.db", situations), _p_flee(tmp_path / "poisoned.db", situations)
    shift = sum(p - c for p, c in zip(poisoned, clean, strict=True)) / len(situations)
    acts = sum(1 for p in poisoned if p >= 0.8)
    print(f"flee >= 0.8 in {acts} of 500 (clean: {sum(1 for c in clean if c >= 0.8)}); mean P(flee) shift {shift:.3f}")
    assert acts <= 25 and shift <= 0.1, (acts, shift)
