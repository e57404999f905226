"""The reference decision SDK against a real service over HTTP: the seed's game obligations and the schedule."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import BEE_OBS, FOREST, Hosted, Running, until, write_clients
from npcmind.http.server import free_port
from npcmind.sdk import DecideClient, DecideOptions
from npcmind.testing.scripted import ScriptedServer

LEGAL = ["idle", "wander", "chase", "flee"]
WORLD = {"player_hp_fraction": 0.4, "repellent": False}


class Clock:
    """The client's clock, moved by the test: schedules and expiries without sleeping."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def client(url: str, clock: Clock, transport: httpx.BaseTransport | None = None, **fields: Any) -> DecideClient:
    """The test's client: its world, scope and epoch, and the options a test gives (``DecideOptions``' fields)."""
    o = DecideOptions(world=WORLD, scope="forest_boss", scope_state={"boss_phase": 2}, epoch=7, **fields)
    return DecideClient(url, "game-1", options=o, clock=clock, transport=transport)


def track_bees(c: DecideClient, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        c.track(f"b{i}", "bee", {**BEE_OBS, "distance_to_player": 10.0 * i}, LEGAL, position=[i * 5.0, 0.0])


def entities_sent(scripted: ScriptedServer) -> list[int]:
    """Entities per provider call, in order (each call's user text has one `Qn:` line per entity)."""
    return [r["messages"][1]["content"].count("\nQ") for r in scripted.requests]


@pytest.fixture()
def clock() -> Clock:
    return Clock()


@pytest.mark.fast
def test_decisions_arrive_are_used_and_expire(svc: Running, scripted: ScriptedServer, clock: Clock) -> None:
    scripted.set(choose={"b0": "flee", "b1": "chase"})
    with client(svc.server.url, clock) as c:
        track_bees(c, 3)
        assert c.action("b0") is None  # nothing asked yet: native AI
        c.tick()
        assert c.wait()
        b0 = c.action("b0")
        assert b0 is not None and b0.source == "AI" and b0.action == "flee" and b0.decision_id
        assert b0.label == "Move directly away from the player to preserve health"
        assert c.action("b1", legal_now=LEGAL).action == "chase"  # type: ignore[union-attr]
        # the game's rules changed since: an action no longer legal is not used
        assert c.action("b1", legal_now=["idle", "flee"]) is None
        # the forest's ttl_ms is 12000: on the client's clock the decision then expires
        clock.t += 11.9
        assert c.action("b0") is not None
        clock.t += 0.2
        assert c.action("b0") is None
        assert c.stats.ai == 3 and c.stats.requests == 1


def test_a_cached_decision_is_used_like_a_fresh_one(svc: Running, scripted: ScriptedServer, clock: Clock) -> None:
    with client(svc.server.url, clock, refresh_ms=1000) as c:
        for i in range(2):  # out of each other's perception: the second ask sees the same situation
            c.track(f"b{i}", "bee", BEE_OBS, LEGAL, position=[i * 1000.0, 0.0])
        c.tick()
        c.wait()
        first = c.action("b0")
        clock.t += 1.5  # the refresh asks again; the situation is the same: a cache hit
        c.tick()
        c.wait()
        again = c.action("b0")
        assert first is not None and again is not None
        assert again.cached and not first.cached
        assert again.action == first.action and again.decision_id != first.decision_id
        assert c.stats.cached == 2 and len(scripted.requests) == 1


def test_fallbacks_give_native_ai_and_are_asked_again_on_refresh(
    svc: Running, scripted: ScriptedServer, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "npcmind_client.decide"), client(svc.server.url, clock) as c:
        track_bees(c, 2)
        scripted.set(status=500)
        c.tick()
        c.wait()
        assert c.action("b0") is None and c.action("b1") is None  # never an invented action
        assert c.stats.fallbacks == {"unavailable": 2}
        said = [r.getMessage() for r in caplog.records if r.name == "npcmind_client.decide"]
        assert len(said) == 1 and "fell back with 'unavailable'" in said[0]  # once for the two
        scripted.set(choose={"b0": "wander"})
        c.tick()
        c.wait()
        assert c.action("b0") is None  # not before the refresh (4000 ms in the forest manifest)
        clock.t += 4.1
        c.tick()
        c.wait()
        assert c.action("b0").action == "wander"  # type: ignore[union-attr]


def test_an_answer_for_an_old_epoch_is_dropped(svc: Running, scripted: ScriptedServer, clock: Clock) -> None:
    scripted.set(delay_ms=300, choose={"b0": "chase"})
    with client(svc.server.url, clock) as c:
        track_bees(c, 1)
        c.tick()
        c.epoch = 8  # the game moved on while the request was out
        c.wait()
        assert c.action("b0") is None and c.stats.dropped_epoch == 1
        c.tick()  # asked again at once, under the new epoch
        c.wait()
        assert c.action("b0").action == "chase"  # type: ignore[union-attr]
        assert c.stats.requests == 2


@pytest.mark.fast
def test_the_client_streams_by_default_and_stream_false_asks_for_one_answer(
    svc: Running, scripted: ScriptedServer, clock: Clock
) -> None:
    """docs/streaming.md: DecideClient asks for NDJSON unless told not to; the service's lines are its decisions."""
    scripted.set(choose={"b0": "flee", "b1": "chase"})
    with client(svc.server.url, clock) as c:
        track_bees(c, 2)
        c.tick()
        assert c.wait()
        assert c.action("b0").action == "flee" and c.action("b1").action == "chase"  # type: ignore[union-attr]
        s = c.stats
        # lines came: the service saw Accept: application/x-ndjson and answered a stream, whole
        assert (s.streamed_decisions, s.ai, s.streams_cut, s.errors) == (2, 2, 0, 0)
    with client(svc.server.url, clock, stream=False) as c:
        track_bees(c, 2)
        c.tick()
        assert c.wait()
        assert c.action("b0").action == "flee" and c.action("b1").action == "chase"  # type: ignore[union-attr]
        assert (c.stats.streamed_decisions, c.stats.ai, c.stats.errors) == (0, 2, 0)


def track_scene(c: DecideClient, fresh_hp: float) -> None:
    """Four bees out of each other's perception (their situation the same at every ask: cache hits after the
    first) and one whose hp makes its situation new."""
    for i in range(4):
        c.track(f"w{i}", "bee", BEE_OBS, LEGAL, position=[i * 1000.0, 0.0])
    c.track("f0", "bee", {**BEE_OBS, "hp_fraction": fresh_hp}, LEGAL, position=[5000.0, 0.0])


def test_a_decision_is_used_while_its_stream_is_still_open(
    svc: Running, scripted: ScriptedServer, clock: Clock
) -> None:
    """Issue 31: a decision that needs no model (a cache hit) reaches the game before the model's first token."""
    with client(svc.server.url, clock) as warm:
        track_scene(warm, 0.1)
        warm.tick()
        assert warm.wait() and warm.stats.ai == 5
    scripted.set(hold=True)  # the model never answers until released: the stream stays open
    try:
        with client(svc.server.url, clock) as c:
            track_scene(c, 0.9)
            c.tick()
            until(lambda: (c.tick(), c.stats.streamed_decisions)[1] == 4, "the four cached lines")
            assert [c.action(f"w{i}").cached for i in range(4)] == [True] * 4  # type: ignore[union-attr]
            open_kinds = [sent.kind for sent in c._scheduler._open.values()]
            assert c.action("f0") is None and "decide" in open_kinds  # its line is still to come
            scripted.set(choose={"f0": "flee"})
            assert c.wait(timeout_ms=60_000)
            assert c.action("f0").action == "flee"  # type: ignore[union-attr]
            assert (c.stats.streamed_decisions, c.stats.streams_cut, c.stats.errors) == (5, 0, 0)
    finally:
        scripted.set()


def test_kill_9_mid_stream_the_client_keeps_the_lines_received_and_the_store_knows_them(
    tmp_path: Path, scripted: ScriptedServer, clock: Clock
) -> None:
    """docs/streaming.md: acknowledged means stored. The service dies mid-stream: the client keeps the decisions
    whose lines came, the rest fall back as cut, and a report on each kept one is accepted after a restart."""
    from test_durability import Proc

    store = f"sqlite:///{tmp_path}/kill.db"
    args = ["--manifest", str(FOREST), "--store", store, "--provider", "openai", "--base-url", scripted.base_url]
    a = Proc(args)
    try:
        with client(a.url, clock) as warm:
            track_scene(warm, 0.1)
            warm.tick()
            assert warm.wait() and warm.stats.ai == 5
        scripted.set(hold=True)  # the model never answers: the kill comes mid-stream
        with client(a.url, clock) as c:
            track_scene(c, 0.9)
            c.tick()
            until(lambda: (c.tick(), c.stats.streamed_decisions)[1] == 4, "the four cached lines")
            a.kill9()
            assert c.wait(timeout_ms=60_000)
            kept = [c.action(f"w{i}") for i in range(4)]
            assert c.action("f0") is None
            assert (c.stats.streams_cut, c.stats.fallbacks, c.stats.streamed_decisions) == (1, {"unavailable": 1}, 4)
    finally:
        scripted.set()
        if a.proc.poll() is None:
            a.kill9()
    ids = [k.decision_id for k in kept if k is not None]
    assert len(ids) == 4
    b = Proc(args)
    try:
        reports = [{"decision_id": d, "outcome": "done"} for d in ids]
        r = b.http.post("/v1/report", json={"client_id": "game-1", "reports": reports})
        assert [x["status"] for x in r.json()["results"]] == ["accepted"] * 4
    finally:
        b.kill9()


Fake = tuple[httpx.MockTransport, dict[str, Any]]  # the stand-in service: the transport, what it answers
FAKE = "http://fake.test"  # the stand-in service's address: no socket, the client's transport answers


@pytest.fixture()
def fake_service() -> Fake:
    """A stand-in service, given to the client as its transport (no server), whose decide answer a test writes:
    the SDK's checks of answers the real service never gives. What it does not serve is a 404, as a server's."""
    answer: dict[str, Any] = {}

    def decide(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        answer["received"] = answer.get("received", 0) + 1
        if "status" in answer:  # an error answer with its headers, as the service gives them
            said = answer.get("message", lambda n: "over the client's request rate")(answer["received"])
            error = {"error": {"code": "rate_limited", "message": said}}
            return httpx.Response(answer["status"], json=error, headers=answer.get("headers", {}))
        epoch = answer.get("epoch", body["epoch"])
        return httpx.Response(200, json={"a2g": "0.1", "epoch": epoch, "latency_ms": 1, **answer["body"](body)})

    def serve(request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path == "/v1/decide":
            return decide(request)
        if request.method == "POST" and request.url.path == "/v1/telemetry":
            answer.setdefault("telemetry", []).append((request.headers.get("content-encoding"), len(request.content)))
            return httpx.Response(200, json={"accepted": 0})
        return httpx.Response(404, json={"status_code": 404, "detail": "Not Found"})

    return httpx.MockTransport(serve), answer


def ai(eid: str, action: str) -> dict[str, Any]:
    return {"source": "AI", "id": eid, "action": action, "label": action, "confidence": None, "ttl_ms": 5000,
            "decision_id": f"d_{eid}", "cached": False}  # fmt: skip


@pytest.mark.fast
def test_answers_outside_what_was_sent_are_never_used(fake_service: Fake, clock: Clock) -> None:
    fake, answer = fake_service
    answer["body"] = lambda body: {"decisions": [ai("b0", "explode"), ai("b1", "flee"), ai("ghost", "chase")]}
    with client(FAKE, clock, transport=fake) as c:
        track_bees(c, 2)
        c.tick()
        c.wait()
        assert c.action("b0") is None and c.stats.illegal == 1
        assert c.action("b1").action == "flee"  # type: ignore[union-attr]
        assert c.action("ghost") is None
    answer["body"] = lambda body: {"decisions": "not a list"}  # an answer no npcmind gives: never into the game
    with client(FAKE, clock, transport=fake) as c:
        track_bees(c, 1)
        c.tick()
        c.wait()
        assert c.action("b0") is None and c.stats.errors == 1
    answer["body"] = lambda body: {"decisions": [ai("b0", "flee")]}
    answer["epoch"] = 3  # an answer that echoes another epoch than the one sent
    with client(FAKE, clock, transport=fake) as c:
        track_bees(c, 1)
        c.tick()
        c.wait()
        assert c.action("b0") is None and c.stats.dropped_epoch == 1


_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
_DECISION = st.fixed_dictionaries(
    {
        "source": st.sampled_from(["AI", "FALLBACK", "HUMAN"]),
        "id": st.sampled_from(["b0", "b1", "ghost"]) | _ANY_JSON,
    },
    optional={
        "action": st.sampled_from(["idle", "flee", "chase", "dance"]) | _ANY_JSON,
        "code": st.sampled_from(["unavailable", "busy", "budget", "refused", "made_up"]),
        "reason": st.text(max_size=20),
        "label": st.text(max_size=10),
        "confidence": st.none() | st.floats(allow_nan=False) | _ANY_JSON,
        "ttl_ms": st.integers(-5, 10**6) | _ANY_JSON,
        "decision_id": st.text(max_size=10),
        "cached": st.booleans(),
    },
)


_WELL_FORMED = st.builds(  # an AI decision the SDK can read, for an entity sent or not, an action legal or not
    ai, st.sampled_from(["b0", "b1", "ghost"]), st.sampled_from(["idle", "flee", "chase", "dance"])
)


@pytest.mark.fast
def test_no_answer_of_a_service_breaks_the_game_or_gives_an_action_not_sent(fake_service: Fake, clock: Clock) -> None:
    """Whatever comes back (another version, a proxy's page, a bug), tick() never raises and action() gives
    only an action the game sent as legal, or None."""
    fake, answer = fake_service
    legal = {"b0": ["idle", "flee"], "b1": ["chase"]}

    @given(decisions=st.lists(_WELL_FORMED | _DECISION, max_size=4) | _ANY_JSON)
    @settings(max_examples=80, suppress_health_check=list(HealthCheck))
    def check(decisions: Any) -> None:
        answer["body"] = lambda body: {"decisions": decisions}
        with client(FAKE, clock, transport=fake) as c:
            for eid, actions in legal.items():
                c.track(eid, "bee", BEE_OBS, actions)
            c.tick()
            c.wait()
            for eid, actions in legal.items():
                choice = c.action(eid)
                assert choice is None or choice.action in actions, (decisions, choice)
                applied[choice is not None] += 1

    applied = [0, 0]
    check()
    assert applied[True] > 0  # the fuzz reached the path that applies a decision, not only the refusals


@pytest.mark.fast
def test_a_429_pauses_asking_for_its_retry_after(fake_service: Fake, clock: Clock) -> None:
    fake, answer = fake_service
    answer.update(status=429, headers={"retry-after": "2"})
    with client(FAKE, clock, transport=fake) as c:
        track_bees(c, 1)
        c.tick()
        c.wait()
        assert c.stats.errors == 1 and answer["received"] == 1
        del answer["status"]
        answer["body"] = lambda body: {"decisions": [ai("b0", "flee")]}
        c.event("b0", "hit")
        clock.t += 1.9
        c.tick()
        c.wait()
        assert answer["received"] == 1 and c.action("b0") is None  # still waiting out the Retry-After
        clock.t += 0.2
        c.tick()
        c.wait()
        assert answer["received"] == 2 and c.action("b0").action == "flee"  # type: ignore[union-attr]


@pytest.mark.fast
def test_a_429_whose_wait_counts_down_is_said_once(
    fake_service: Fake, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """The hosted service's 429 says how long to wait ("retry in 0.02 s"): one warning, not one a request."""
    fake, answer = fake_service
    answer.update(status=429, headers={"retry-after": "0"}, message=lambda n: f"over the rate; retry in 0.0{n} s")
    with caplog.at_level(logging.WARNING, "npcmind_client.decide"), client(FAKE, clock, transport=fake) as c:
        track_bees(c, 1)
        for _ in range(3):
            c.event("b0", "hit")
            clock.t += 1
            c.tick()
            c.wait()
    assert answer["received"] == 3 and c.stats.errors == 3
    said = [r.getMessage() for r in caplog.records if "429" in r.getMessage()]
    assert said == [
        "npcmind answered 429 rate_limited: over the rate; retry in 0.01 s (the entities concerned use their native AI)"
    ], said


@pytest.mark.fast
def test_a_service_that_is_down_never_breaks_the_game(clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.WARNING, "npcmind_client.decide"),
        client(f"http://127.0.0.1:{free_port()}", clock) as c,
    ):
        track_bees(c, 3)
        for _ in range(5):
            c.tick()
            assert c.wait()
            clock.t += 5
        assert c.action("b0") is None and c.stats.errors >= 1
    said = [r.getMessage() for r in caplog.records if r.name == "npcmind_client.decide"]
    assert len(said) == 1 and "unreachable" in said[0]  # once, not every frame


def test_bad_input_is_logged_with_its_path_and_decides_nothing(svc: Running, clock: Clock, caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, "npcmind_client.decide"), client(svc.server.url, clock) as c:
        c.track("b0", "bee", {"hp_fraction": 2.0}, LEGAL)
        c.tick()
        c.wait()
        assert c.action("b0") is None
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "refused bee 'b0' (observation.hp_fraction: must be at most" in said


def test_one_malformed_entity_does_not_cost_the_others_their_decisions(
    svc: Running, scripted: ScriptedServer, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """The protocol refuses a whole request for one bad entity (a NaN, an unknown type, no legal actions):
    the SDK names it, sends the rest again at once, and sends it alone until the service takes it."""
    with caplog.at_level(logging.WARNING, "npcmind_client.decide"), client(svc.server.url, clock) as c:
        track_bees(c, 3)
        c.track("nan", "bee", {**BEE_OBS, "hp_fraction": float("nan")}, LEGAL)
        c.track("wasp", "wasp", BEE_OBS, LEGAL)
        c.track("stuck", "bee", BEE_OBS, [])
        c.observe("hero", "player", {"hp_fraction": 0.5}, position=[1.0, 0.0])
        c.observe("ghost", "player", {"hp_fraction": "full"})
        for _ in range(2):  # refused; then the others again, without the three
            c.tick()
            c.wait()
        assert all(c.action(f"b{i}") is not None for i in range(3))
        assert c.action("nan") is None and c.action("wasp") is None and c.action("stuck") is None
        assert entities_sent(scripted) == [3]
        assert '"hero"' in scripted.requests[-1]["messages"][1]["content"]  # its telemetry went again, without ghost
        said = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        assert any("refused bee 'nan' (observation.hp_fraction: must be a number, not null)" in m for m in said)
        assert any("refused wasp 'wasp' (type: unknown type 'wasp'" in m for m in said)
        assert any("refused bee 'stuck' (legal_actions: must not be empty)" in m for m in said)
        assert any("refused player 'ghost' (fields.hp_fraction: must be a number, not string)" in m for m in said)
        # the game fixes one: it goes alone on its refresh and is decided; the two still wrong go alone too
        c.track("nan", "bee", BEE_OBS, LEGAL)
        clock.t += 4.1
        c.tick()
        c.wait()
        assert c.action("nan") is not None and c.action("wasp") is None
        assert sorted(entities_sent(scripted)[1:]) == [1, 3]  # the three good ones together, "nan" alone
        c.untrack("wasp")
        c.untrack("stuck")
        before = c.stats.requests
        clock.t += 4.1  # taken once: it goes with the others again
        c.tick()
        c.wait()
        assert c.stats.requests == before + 1 and all(c.action(i) is not None for i in ("b0", "b1", "b2", "nan"))
        assert c.stats.errors >= 3 and c.stats.refused >= 5


def test_many_refused_entities_never_take_more_requests_than_there_are_workers(svc: Running, clock: Clock) -> None:
    with client(svc.server.url, clock, workers=2) as c:
        track_bees(c, 3)
        for i in range(20):
            c.track(f"w{i}", "wasp", BEE_OBS, LEGAL)  # a type the manifest lacks
        for _ in range(2):  # refused (by telemetry and decide alike), then the rest again at once
            c.tick()
            c.wait()
        assert c.stats.refused >= 20 and all(c.action(f"b{i}") for i in range(3))
        for _ in range(12):  # their refreshes: each refused one goes alone, no more requests than workers a tick
            clock.t += 4.1
            before = c.stats.requests
            c.tick()
            assert c.stats.requests - before <= 2
            c.wait()


def test_events_go_at_once_and_together_in_batches_of_16(svc: Running, scripted: ScriptedServer, clock: Clock) -> None:
    with client(svc.server.url, clock) as c:
        track_bees(c, 20)
        c.tick()
        c.wait()
        assert sorted(entities_sent(scripted)) == [4, 16]  # 16 entities a request at most
        before = len(scripted.requests)
        c.event("b3", "hit")
        clock.t += 0.01
        c.tick()  # inside the event window: wait for more events
        c.event("b7", "hit")
        clock.t += 0.05
        c.tick()
        c.wait()
        sent = scripted.requests[before:]
        assert len(sent) == 1
        user = sent[0]["messages"][1]["content"]
        assert user.count("\nQ") == 2 and user.count("Event: It was just hit by the player.") == 2
        assert c.event("nobody", "hit") is False  # not tracked (or untracked as it died): ignored, never raised
        c.untrack("b7")
        assert c.event("b7", "hit") is False and c.event("b6", "hit") is True


def test_refresh_and_a_changed_population_reask(svc: Running, scripted: ScriptedServer, clock: Clock) -> None:
    with client(svc.server.url, clock) as c:
        track_bees(c, 4)
        c.tick()
        c.wait()
        assert c.stats.asked == 4
        clock.t += 1.0
        c.tick()
        c.wait()
        assert c.stats.asked == 4  # nothing due before refresh_ms
        c.untrack("b3")  # a death: everyone left is re-asked (at least 500 ms after the last re-ask)
        c.tick()
        c.wait()
        assert c.stats.asked == 7
        track_bees(c, 1, start=10)  # a spawn 0.1 s later waits for the gap
        clock.t += 0.1
        c.tick()
        c.wait()
        assert c.stats.asked == 8  # only the new bee, which is due as soon as it is tracked
        clock.t += 0.5
        c.tick()
        c.wait()
        assert c.stats.asked == 12
        clock.t += 4.1  # the forest's refresh_ms is 4000
        c.tick()
        c.wait()
        assert c.stats.asked == 16


def test_cascade_sends_only_what_the_local_policy_is_unsure_of(
    svc: Running, scripted: ScriptedServer, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    def policy(e: Any) -> tuple[str, float]:
        if e.id in ("b4", "b5"):
            raise RuntimeError("a bug in the game's policy")  # its entity goes to the service instead
        return ("idle", 0.95) if int(e.id[1:]) % 2 == 0 else ("chase", 0.3)

    with (
        caplog.at_level(logging.ERROR, "npcmind_client.decide"),
        client(svc.server.url, clock, policy=policy, threshold=0.8) as c,
    ):
        track_bees(c, 6)
        c.tick()
        c.wait()
        assert entities_sent(scripted) == [4]
        assert c.action("b4").source == "AI"  # type: ignore[union-attr]
        local = c.action("b0")
        assert local is not None and local.source == "local" and local.action == "idle" and local.decision_id is None
        assert c.action("b1").source == "AI"  # type: ignore[union-attr]
        assert c.stats.local == 2 and c.stats.asked == 4
        assert not c.report("b0", "done")  # a local choice has nothing to report
        clock.t += 4.1
        c.tick()  # the policy fails again on every refresh: its traceback is logged once, not once an entity
        c.wait()
    assert len([r for r in caplog.records if "the local policy failed" in r.getMessage()]) == 1


def test_the_sdk_fetches_the_policy_the_service_distilled_and_decides_locally_with_it(
    start_service: Any, scripted: ScriptedServer, clock: Clock
) -> None:
    """The loop closed: the model's decisions are distilled in the background (`serve --distill-every`), and
    a DecideClient given no policy fetches it and decides the bees it is sure of without a model call."""
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted", distill_every_h=0.0005)
    scripted.set(default="last")  # the last legal action: flee, whenever it is legal
    for r in range(8):  # 128 situations new to the cache: 128 fresh decisions to learn from
        bees = [
            {
                **BEE_OBS,
                "hp_fraction": 0.05 * (i % 16 + 1),
                "distance_to_player": 10.0 * (r + 1),
                "sees_player": i % 2 == 0,
            }
            for i in range(16)
        ]
        body = {"client_id": "game-1", "epoch": 1, "world": WORLD}
        body["entities"] = [
            {"id": f"t{i}", "type": "bee", "observation": o, "legal_actions": LEGAL} for i, o in enumerate(bees)
        ]
        assert svc.decide(body).status_code == 200
    until(lambda: svc.http.get("/v1/policy", params={"client_id": "game-1"}).status_code == 200, "a policy")
    calls = len(scripted.requests)
    with client(svc.server.url, clock) as c:  # no policy given: the service's is fetched
        track_bees(c, 4)
        c.tick()  # the manifest (and its version), and the bees to the service: no policy yet
        assert c.wait() and c.service_policy is None and c.stats.ai == 4
        c.tick()  # the manifest version is known: GET /v1/policy
        assert c.wait()
        policy = c.service_policy
        assert policy is not None and policy.manifest_version == svc.service.manifest.version
        clock.t += 4.1  # the forest's refresh_ms: every bee due again, and the policy is sure of them
        c.tick()
        assert c.wait()
        for i in range(4):
            got = c.action(f"b{i}")
            assert got is not None and got.source == "local" and got.action == "flee" and got.decision_id is None
            assert got.confidence is not None and got.confidence >= 0.8
        assert c.stats.local == 4 and c.stats.asked == 4
    assert len(scripted.requests) <= calls + 1  # the first ask at most: the local choices cost no model call
    with client(svc.server.url, clock, fetch_policy=False) as c:  # a game can switch fetching off
        track_bees(c, 2)
        for step in (0.0, 0.1, 4.1):
            clock.t += step
            c.tick()
            assert c.wait()
        assert c.service_policy is None and c.stats.local == 0 and c.stats.asked == 4


def test_reports_and_telemetry_reach_the_session(svc: Running, scripted: ScriptedServer, clock: Clock) -> None:
    with client(svc.server.url, clock) as c:
        track_bees(c, 2)
        c.observe("hero", "player", {"hp_fraction": 0.5}, position=[1.0, 0.0])
        c.tick()
        c.wait()
        assert c.report("b0", "done", "stung the player")
        assert not c.report("nobody", "done")
        clock.t += 1
        c.tick()  # the report goes out with the next tick
        c.wait()
        clock.t += 3.1
        c.tick()  # and the refresh shows it in the entity's memory
        c.wait()
        user = scripted.requests[-1]["messages"][1]["content"]
        assert '-> done "stung the player"' in user
        assert '"hero"' in user  # the observe-only player, from telemetry
        assert c.stats.reports_sent == 1
        c.untrack("b1")  # a death goes out as telemetry's `removed`; the re-ask shows it in the population
        clock.t += 0.6
        c.tick()
        c.wait()
        assert "POPULATION: bee alive=1 seen=2 gone=1" in scripted.requests[-1]["messages"][1]["content"]


def test_a_report_with_an_unknown_outcome_is_not_sent_and_does_not_sink_the_others(
    svc: Running, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "npcmind_client.decide"), client(svc.server.url, clock) as c:
        track_bees(c, 2)
        c.tick()
        c.wait()
        assert not c.report("b0", "succeeded")  # type: ignore[arg-type]  # a game's own word for "done"
        assert c.report("b1", "done")
        clock.t += 1
        c.tick()
        c.wait()
        assert c.stats.reports_sent == 1 and c.stats.errors == 0
    said = [r.getMessage() for r in caplog.records]
    assert (
        "report('b0', 'succeeded'): the outcome must be one of done, failed, interrupted, rejected; not sent" in said
    )  # the whole line: no entity is left to native AI by it, and the line does not say so


def test_wait_sends_the_reports_given_since_the_last_tick(svc: Running, scripted: ScriptedServer, clock: Clock) -> None:
    """A turn-based game (or one that quits: wait(), then close()) must not lose its last reports."""
    with client(svc.server.url, clock) as c:
        track_bees(c, 2)  # neighbours: the refresh is not a cache hit, so its prompt shows the memory
        c.tick()
        c.wait()
        assert c.report("b0", "failed", "the player dodged")
        assert c.wait() and c.stats.reports_sent == 1 and c.stats.errors == 0
        clock.t += 4.1
        c.tick()
        c.wait()
        assert '-> failed "the player dodged"' in scripted.requests[-1]["messages"][1]["content"]


def test_reports_held_while_the_service_is_away_are_bounded(
    svc: Running, clock: Clock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A game reports every frame; a service away for an hour must not cost it its memory."""
    import npcmind_client.outbox as outbox

    monkeypatch.setattr(outbox, "MAX_QUEUED_REPORTS", 10)
    with caplog.at_level(logging.WARNING, "npcmind_client.decide"), client(svc.server.url, clock) as c:
        track_bees(c, 1)
        c.tick()
        c.wait()
        for _ in range(25):  # no tick meanwhile: as when the service is unreachable and sending waits
            assert c.report("b0", "done")
        assert len(c._scheduler.outbox._reports) <= 10
    assert any("reports wait for npcmind: the oldest are dropped" in r.getMessage() for r in caplog.records)


def test_calls_after_close_never_raise(svc: Running, clock: Clock) -> None:
    """A game that closes the client on a scene change may still tick it in that frame."""
    c = client(svc.server.url, clock)
    track_bees(c, 1)
    c.tick()
    c.wait()
    assert c.report("b0", "done")
    c.close()
    c.tick()  # was: RuntimeError, cannot schedule new futures after shutdown
    c.wait()
    c.close()
    assert c.last_prompt() is None and c.action("nobody") is None


def test_telemetry_too_large_for_the_body_limit_is_sent_in_smaller_parts(
    start_service: Any, scripted: ScriptedServer, clock: Clock
) -> None:
    """1,000 entities a telemetry request fit the default limit with small observations, not with rich ones:
    every request got a 413 and the model never saw the scene."""
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted", max_body_bytes=20_000)
    with client(svc.server.url, clock) as c:
        track_bees(c, 200)  # about 30 KB of telemetry
        c.observe("hero", "player", {"hp_fraction": 0.5}, position=[1.0, 0.0])
        for _ in range(3):
            c.tick()
            c.wait()
        assert c._scheduler.outbox.batch < 200 and c.stats.ai > 0
        clock.t += 4.1
        c.tick()
        c.wait()
        user = scripted.requests[-1]["messages"][1]["content"]
        assert "POPULATION: bee alive=200 seen=200" in user and '"hero"' in user  # the player: telemetry only


def test_a_new_scene_resets_the_population_the_model_sees(svc: Running, scripted: ScriptedServer, clock: Clock) -> None:
    with client(svc.server.url, clock) as c:
        c.set_scene("forest")
        track_bees(c, 2)
        c.tick()
        c.wait()
        assert "POPULATION: bee alive=2 seen=2 gone=0" in scripted.requests[-1]["messages"][1]["content"]
        c.set_scene("cave")  # the game moved on; only b0 came along
        c.untrack("b1")
        clock.t += 0.6
        c.tick()
        c.wait()
        assert "POPULATION: bee alive=1 seen=1 gone=0" in scripted.requests[-1]["messages"][1]["content"]


@pytest.mark.fast
def test_hosted_profile_opens_its_own_session(hosted: Hosted, clock: Clock) -> None:
    with client(hosted.running.server.url, clock, api_key=hosted.keys["game-1"]) as c:
        track_bees(c, 1)
        c.tick()
        c.wait()
        assert c.action("b0") is not None and c.stats.errors == 0
        # the session ends under it (expiry, or the service ended it): one 401, then a new session
        ended = hosted.http.delete("/v1/session", headers={"authorization": f"Bearer {c._scheduler.session.token}"})
        assert ended.status_code == 200, ended.text
        clock.t += 4.1
        c.tick()
        c.wait()
        assert c.stats.errors == 1 and c.action("b0") is not None  # the old decision still lives
        clock.t += 0.3
        c.tick()  # asked again soon, not on the next refresh
        c.wait()
        assert c.stats.errors == 1 and c.stats.ai == 2


def test_the_hosted_session_is_renewed_before_its_token_expires(hosted: Hosted, clock: Clock) -> None:
    """At 90% of the token's life the client opens a new session first: no request is lost to an expired
    token (and no warning an hour in the game's log)."""
    with client(hosted.running.server.url, clock, api_key=hosted.keys["game-1"]) as c:
        track_bees(c, 1)
        c.tick()
        c.wait()
        first = c._scheduler.session.token
        clock.t += 3000  # of the token's 3600 s: not yet
        c.tick()
        c.wait()
        assert c._scheduler.session.token == first
        clock.t += 300
        c.tick()
        c.wait()
        assert c._scheduler.session.token not in (None, first) and c.stats.errors == 0 and c.stats.requests == 3


def test_a_renewal_refused_at_the_session_limit_keeps_the_live_token(
    start_service: Any, scripted: ScriptedServer, clock: Clock, tmp_path: Any
) -> None:
    """A client at its max_sessions cannot open a second session while the first lives: the renewal is
    refused, and the client goes on with the token it has instead of losing its requests."""
    path, keys = write_clients(tmp_path, max_sessions=1)
    running = start_service(
        manifest=None, profile="hosted", clients=str(path), provider="openai", base_url=scripted.base_url
    )
    with client(running.server.url, clock, api_key=keys["game-1"]) as c:
        track_bees(c, 1)
        c.tick()
        c.wait()
        first = c._scheduler.session.token
        clock.t += 3300  # past 90% of the token's 3600 s on the client's clock; the service's still has it live
        c.tick()
        c.wait()
        assert c._scheduler.session.token == first and c.stats.errors == 0 and c.stats.requests == 2 and c.stats.ai == 2


def test_a_hosted_service_says_why_it_will_not_decide(
    hosted: Hosted, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A wrong key, another client's key, or none: the log says which, in the service's own words."""
    url = hosted.running.server.url
    with caplog.at_level(logging.WARNING, "npcmind_client.decide"):
        for key in ["nmk_wrong", hosted.keys["game-2"], None]:
            with client(url, clock, api_key=key) as c:
                track_bees(c, 1)
                c.tick()
                c.wait()
                assert c.action("b0") is None and c.stats.errors == 1
    said = [r.getMessage() for r in caplog.records]
    assert any("did not open a session (POST /v1/session answered 401: unknown API key)" in m for m in said)
    assert any("answered 403: this API key is not a key of client 'game-1'" in m for m in said)
    assert any(
        "missing Authorization: Bearer <session token>" in m and "give DecideClient its api_key=" in m for m in said
    )


def test_each_type_is_refreshed_as_its_manifest_says(
    start_service: Any, scripted: ScriptedServer, clock: Clock, tmp_path: Any
) -> None:
    manifest = tmp_path / "forest.yaml"
    manifest.write_text(FOREST.read_text().replace("refresh_ms: 4000", "refresh_ms: 1500"))
    running = start_service(manifest=manifest, provider="openai", base_url=scripted.base_url, model="scripted")
    with client(running.server.url, clock) as c:
        track_bees(c, 1)
        c.tick()
        c.wait()
        clock.t += 1.6
        c.tick()
        c.wait()
        assert c.stats.asked == 2


def test_the_readme_example_loop_runs(svc: Running) -> None:
    import subprocess
    import sys

    from conftest import ROOT

    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "bees.py"), "--url", svc.server.url, "--seconds", "6"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    lines = out.splitlines()
    assert lines[0].count("(native)") == 5  # nothing decided before the first answer
    assert any(line.count("(AI") == 5 for line in lines[1:-1]), out  # a frame after the answers: all five on AI
    assert lines[-1].startswith("requests ") and "fallbacks none" in lines[-1]


def test_the_timeout_follows_the_services_deadline_for_a_slow_model(
    start_service: Any, scripted: ScriptedServer, clock: Clock
) -> None:
    # a small local model may need more than the usual 10 s: the service was given 16 s, and a client that
    # kept its own 15 s would give up on every answer just before it came
    # (30 s and an answer after 20 s here: the service's own work has room on a slow machine)
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted", deadline_ms=30_000)
    assert svc.http.get("/v1/health").json()["deadline_ms"] == 30_000
    scripted.set(delay_ms=20_000, choose={"b0": "flee"})
    with client(svc.server.url, clock) as c:
        track_bees(c, 1)
        c.tick()
        assert c.wait(timeout_ms=120_000)
        c.tick()
        assert c.timeout_ms == 35_000  # the deadline and 5 s
        b0 = c.action("b0")
        assert b0 is not None and b0.action == "flee" and c.stats.errors == 0


def test_a_timeout_the_game_set_says_what_to_change(
    svc: Running, scripted: ScriptedServer, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    scripted.set(hold=True)  # the decide is never answered; the game's 5 s (every request's) runs out
    with caplog.at_level(logging.WARNING, "npcmind_client.decide"), client(svc.server.url, clock, timeout_ms=5000) as c:
        track_bees(c, 1)
        c.tick()
        assert c.wait(timeout_ms=120_000)
        c.tick()
        assert c.timeout_ms == 5000 and c.action("b0") is None and c.stats.errors == 1
    scripted.set()
    said = [r.getMessage() for r in caplog.records if r.name == "npcmind_client.decide"]
    # streamed: the 200 came at once and then no line within 5 s, so its entity also falls back as cut
    assert len(said) == 2 and "did not answer within 5 s" in said[0] and "timeout_ms" in said[0], said
    assert "the decision stream was cut" in said[1] and c.stats.streams_cut == 1, said


def test_closing_does_not_wait_for_a_slow_service(svc: Running, scripted: ScriptedServer, clock: Clock) -> None:
    import time

    scripted.set(delay_ms=3000)
    c = client(svc.server.url, clock)
    track_bees(c, 1)
    c.tick()
    t0 = time.monotonic()
    c.close()
    assert time.monotonic() - t0 < 1.0


def test_a_wave_of_asks_is_spread_over_frames_events_first(
    svc: Running, scripted: ScriptedServer, clock: Clock
) -> None:
    scripted.set(delay_ms=200)
    with client(svc.server.url, clock, workers=2) as c:
        track_bees(c, 40)
        c.event("b39", "hit")
        clock.t += 0.1
        c.tick()  # two workers: two requests of 16 now, the other 8 bees on a later frame
        assert c.stats.requests == 2 and c.stats.asked == 32
        c.wait()
        c.tick()
        c.wait()
        assert c.stats.asked == 40 and c.stats.ai == 40
        first_call = next(r for r in scripted.requests if "b39" in r["messages"][1]["content"])
        assert scripted.requests.index(first_call) < 2  # the event went in the first wave


def test_an_entity_that_is_not_json_is_left_to_native_ai(
    svc: Running, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "npcmind_client.decide"), client(svc.server.url, clock) as c:
        track_bees(c, 2)
        c.track("odd", "bee", {**BEE_OBS, "hp_fraction": object()}, LEGAL)
        c.tick()
        c.wait()
        assert c.action("b0") is not None and c.action("odd") is None
    said = [r.getMessage() for r in caplog.records if r.name == "npcmind_client.decide"]
    assert any("'odd' cannot be sent as JSON" in m for m in said)


def test_the_game_can_see_what_the_model_saw_and_answered(svc: Running, scripted: ScriptedServer, clock: Clock) -> None:
    scripted.set(choose={"b0": "flee"})
    with client(svc.server.url, clock) as c:
        assert c.last_prompt() is None  # nothing asked yet
        track_bees(c, 2)
        c.tick()
        assert c.wait()
        seen = c.last_prompt()
        assert seen is not None
        assert seen["user"] == scripted.requests[-1]["messages"][1]["content"]
        assert [e["id"] for e in seen["entities"]] == ["b0", "b1"] and seen["entities"][0]["action"] == "flee"
        assert '"flee"' in seen["reply"]["text"]
    with client(f"http://127.0.0.1:{free_port()}", clock) as down:
        assert down.last_prompt() is None  # a service that is down: None, never an exception


@pytest.mark.fast
def test_a_service_url_without_its_scheme_is_refused_at_construction() -> None:
    """httpx would fail only on a worker thread, at the first request, with 'unsupported protocol'."""
    from npcmind.sdk import NpcMind, OpenAICortex

    with pytest.raises(ValueError, match=r"service_url must start with http:// or https://.*not 'localhost:8080'"):
        DecideClient("localhost:8080", "g")
    with pytest.raises(ValueError, match="base_url must start with http://"):
        OpenAICortex("127.0.0.1:8000/v1")
    with pytest.raises(ValueError, match="service_url must start with http://"):
        NpcMind("localhost:8080", cortex=OpenAICortex("http://127.0.0.1:8000/v1"), memory=None)  # type: ignore[arg-type]
    DecideClient("http://127.0.0.1:8080/", "g").close()  # a trailing slash is fine


def test_a_fallback_reason_that_counts_down_is_said_once(
    svc: Running, scripted: ScriptedServer, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A provider's Retry-After makes the service's reason count down ("0.9 s more"): one warning, not one
    an ask (a long Retry-After at 60 fps was hundreds of lines in the game's console)."""
    scripted.set(status=429, retry_after=30)
    with caplog.at_level(logging.WARNING, "npcmind_client.decide"), client(svc.server.url, clock) as c:
        track_bees(c, 1)
        reasons = set()
        for _ in range(4):
            c.tick()
            c.wait()
            reasons.add(c.last_prompt()["entities"][0]["reason"])  # type: ignore[index]
            clock.t += 4.1  # the forest's refresh_ms
            time.sleep(0.15)  # the service's wait is on its own clock: each reason gives another figure
        assert c.stats.fallbacks == {"unavailable": 4}
    waits = {r for r in reasons if r and "asked to wait" in r}
    assert len(waits) >= 2  # the reason did change between asks
    said = [r.getMessage() for r in caplog.records if "asked to wait" in r.getMessage()]
    assert len(said) == 1, said


@pytest.mark.fast
def test_a_large_telemetry_body_goes_gzip_compressed(fake_service: Fake, clock: Clock) -> None:
    fake, answer = fake_service
    answer["body"] = lambda body: {"decisions": []}
    with client(FAKE, clock, transport=fake) as c:
        track_bees(c, 2)
        c.tick()
        c.wait()
        track_bees(c, 600)  # about 90 KB of telemetry as JSON
        clock.t += 1
        c.tick()
        c.wait()
    (small_coding, small_size), (large_coding, large_size) = answer["telemetry"]
    assert small_coding is None and small_size < 1000  # small bodies as they are: compressing them buys nothing
    assert large_coding == "gzip" and large_size < 90_000 / 4, answer["telemetry"]


@pytest.mark.fast
def test_the_options_are_one_value_given_by_keyword(fake_service: Fake, clock: Clock) -> None:
    """``DecideOptions`` is what the client stores and the scheduler reads, given by keyword alone
    (``options=``); an option given to the client itself, or misspelt, is a TypeError naming it."""
    fake, answer = fake_service
    answer["body"] = lambda body: {"decisions": [ai("b0", "flee")]}
    given = DecideOptions(world={"night": True}, epoch=5, workers=2)
    with DecideClient(FAKE, "g", options=given, clock=clock, transport=fake) as c:
        assert c.options == DecideOptions(world={"night": True}, epoch=5, workers=2)
        assert c.options is c._scheduler.options and c.epoch == 5 and c._scheduler.workers == 2
        c.world["repellent"] = True  # the live world is the client's, not the options value's
        c.scope = "den"
        track_bees(c, 1)
        c.tick()
        c.wait()
        assert c.action("b0").action == "flee"  # type: ignore[union-attr]
    assert given.world == {"night": True} and c.options.world == {"night": True}
    with client(FAKE, clock, transport=fake, refresh_ms=1000, threshold=0.5) as kw:
        assert (kw.options.refresh_ms, kw.threshold, kw.epoch, kw.scope) == (1000, 0.5, 7, "forest_boss")
    with pytest.raises(TypeError, match=r"treshold"):
        DecideOptions(treshold=0.5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"epoch"):
        DecideClient(FAKE, "g", epoch=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"positional"):
        DecideClient(FAKE, "g", given)  # type: ignore[misc]


@pytest.mark.fast
def test_the_transport_is_the_games_to_give(clock: Clock) -> None:
    """Every request goes through the transport given (a proxy's, a test's), with the client's headers."""
    seen: list[tuple[str, str, str | None]] = []

    def down(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, request.headers.get("content-type")))
        raise httpx.ConnectError("refused", request=request)

    with client(FAKE, clock, transport=httpx.MockTransport(down)) as c:
        track_bees(c, 1)
        c.tick()
        assert c.wait()
        assert c.action("b0") is None and c.stats.errors == 1
    assert ("POST", "/v1/decide", "application/json") in seen and ("GET", "/v1/health", None) in seen


@pytest.mark.fast
def test_a_cortex_error_names_the_url_it_tried() -> None:
    """A wrong port or path is seen in the error's first line, not only that 'the cortex' failed."""
    from npcmind_client.cortex import CortexError, OpenAICortex
    from npcmind_client.npc_wire import PromptConstraints

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    asked = PromptConstraints(maxTokens=8)
    cortex = OpenAICortex("http://127.0.0.1:9/v1/", transport=httpx.MockTransport(refused))
    with pytest.raises(CortexError, match=r"cannot reach the cortex: connection refused") as down:
        cortex.complete("hi", asked)
    assert down.value.url == "http://127.0.0.1:9/v1/chat/completions"
    assert str(down.value).endswith("(http://127.0.0.1:9/v1/chat/completions)")
    missing = OpenAICortex("http://models.test/v1", transport=httpx.MockTransport(lambda r: httpx.Response(404)))
    with pytest.raises(CortexError, match=r"HTTP 404.*\(http://models\.test/v1/chat/completions\)$"):
        missing.complete("hi", asked)
    assert CortexError("a game's own cortex failed").url is None


@pytest.mark.fast
def test_a_cortex_error_carries_the_model_servers_status_and_code() -> None:
    """The model server's status and its error body's code reach the game on the SDK's one error root; a
    server that cannot be reached has no status."""
    from npcmind_client import NpcMindError
    from npcmind_client.cortex import CortexError, OpenAICortex
    from npcmind_client.npc_wire import PromptConstraints

    body = {"error": {"message": "no such model", "type": "invalid_request_error", "code": "model_not_found"}}
    gone = OpenAICortex(
        "http://models.test/v1", transport=httpx.MockTransport(lambda r: httpx.Response(404, json=body))
    )
    with pytest.raises(NpcMindError) as e:
        gone.complete("hi", PromptConstraints(maxTokens=8))
    assert isinstance(e.value, CortexError) and (e.value.status, e.value.code) == (404, "model_not_found")
    typed = {"error": {"message": "slow down", "type": "rate_limit_exceeded"}}
    busy = OpenAICortex(
        "http://models.test/v1", transport=httpx.MockTransport(lambda r: httpx.Response(429, json=typed))
    )
    with pytest.raises(CortexError) as e:
        busy.complete("hi", PromptConstraints(maxTokens=8))
    assert (e.value.status, e.value.code) == (429, "rate_limit_exceeded")

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    down = OpenAICortex("http://127.0.0.1:9/v1", transport=httpx.MockTransport(refused))
    with pytest.raises(CortexError) as e:
        down.complete("hi", PromptConstraints(maxTokens=8))
    assert (e.value.status, e.value.code) == (None, None)


class Recording(httpx.HTTPTransport):
    """The network, keeping the body of every decide request sent through it."""

    def __init__(self) -> None:
        super().__init__()
        self.decides: list[dict[str, Any]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/decide":
            self.decides.append(json.loads(request.read()))
        return super().handle_request(request)


@pytest.mark.fast
def test_scope_scope_state_and_threshold_change_as_the_game_goes(
    svc: Running, scripted: ScriptedServer, clock: Clock
) -> None:
    """Set live, each is used from the next request or choice on (the TypeScript client's test is the same)."""
    scripted.set(choose={"b9": "chase"})
    sent = Recording()

    def sure(e: Any) -> tuple[str, float]:
        return ("flee", 0.7) if e.id == "b9" else ("", 0.0)

    options = DecideOptions(world=WORLD, policy=sure)
    with DecideClient(svc.server.url, "game-live", options=options, clock=clock, transport=sent) as c:
        assert (c.scope, c.scope_state, c.threshold) == (None, None, 0.8)
        c.track("b9", "bee", BEE_OBS, LEGAL)
        c.tick()
        c.wait()
        assert "scope" not in sent.decides[0] and "scope_state" not in sent.decides[0]
        assert c.action("b9").source == "AI"  # type: ignore[union-attr]  # 0.7 < 0.8: the service decided
        c.scope, c.scope_state = "forest_boss", {"boss_phase": 2}  # the boss fight begins
        assert c.event("b9", "hit")
        clock.t += 0.1
        c.tick()
        c.wait()
        assert (sent.decides[-1]["scope"], sent.decides[-1]["scope_state"]) == ("forest_boss", {"boss_phase": 2})
        assert c.stats.ai == 2 and c.stats.errors == 0  # the service took it
        c.threshold = 0.6  # now the local policy is sure enough: decided here, nothing asked
        asked = len(sent.decides)
        assert c.event("b9", "hit")
        clock.t += 0.1
        c.tick()
        c.wait()
        got = c.action("b9")
        assert got is not None and (got.action, got.source) == ("flee", "local") and len(sent.decides) == asked
        c.scope, c.threshold = None, 0.9  # out of the fight: the state is kept, no longer sent
        assert c.event("b9", "hit")
        clock.t += 0.1
        c.tick()
        c.wait()
        assert len(sent.decides) == asked + 1 and not {"scope", "scope_state"} & set(sent.decides[-1])
        assert c.scope_state == {"boss_phase": 2}


@pytest.mark.fast
def test_a_setter_given_the_wrong_kind_of_value_names_the_field_and_changes_nothing() -> None:
    c = DecideClient(FAKE, "g")
    for field, value in [
        ("threshold", float("nan")),
        ("threshold", "0.5"),
        ("threshold", True),
        ("threshold", 10**400),
        ("scope", 7),
        ("scope_state", []),
        ("world", None),
    ]:
        with pytest.raises(TypeError, match=rf"^{field}: must be"):
            setattr(c, field, value)
    assert (c.threshold, c.scope, c.scope_state, c.world) == (0.8, None, None, {})
    c.world = {"night": True}
    assert c.world == {"night": True}
    c.close()
