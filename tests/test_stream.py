"""Streamed decisions (issue 31, docs/streaming.md): POST /v1/decide with Accept: application/x-ndjson answers a line
per entity as soon as its decision is final and stored, then a last line; without it, the JSON answer as before.
Real HTTP against the service and the scripted provider; no test reads a clock."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import yaml

from conftest import FOREST, Running, bee, decide_body, queen, until
from npcmind.protocol.a2g import DecideEnd, DecideResponse, Decision

NDJSON = {"accept": "application/x-ndjson"}
_decision = msgspec.json.Decoder(Decision)
_end = msgspec.json.Decoder(DecideEnd)


def obs(**over: Any) -> dict[str, Any]:
    """A bee's observation; a different hp_fraction is a different situation (no cache hit)."""
    return {**bee("x")["observation"], **over}


def lines_of(r: httpx.Response) -> list[dict[str, Any]]:
    """A whole streamed answer's lines, each checked to be one of the contract's two shapes."""
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/x-ndjson"
    assert r.content.endswith(b"\n")
    raw = r.content.split(b"\n")[:-1]
    for line in raw[:-1]:
        _decision.decode(line)  # a decision (with source), exactly as in the JSON answer's decisions
    _end.decode(raw[-1])  # then the last line (with a2g)
    return [msgspec.json.decode(line) for line in raw]


@contextlib.contextmanager
def streaming(svc: Running, body: dict[str, Any]) -> Iterator[Iterator[dict[str, Any]]]:
    """A streamed decide request read line by line as the lines come."""
    with svc.http.stream("POST", "/v1/decide", json=body, headers=NDJSON) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "application/x-ndjson"
        yield (msgspec.json.decode(line) for line in r.iter_lines() if line)


def check_whole(lines: list[dict[str, Any]], body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every entity of the request has exactly one decision line, then comes the last line; the decisions by id."""
    *decided, end = lines
    assert [set(d) >= {"source", "id"} for d in decided] == [True] * len(decided)
    assert sorted(d["id"] for d in decided) == sorted(e["id"] for e in body["entities"])
    assert "source" not in end and end["a2g"] == "0.1" and end["epoch"] == body["epoch"]
    assert list(end["sent_ms"]) == [d["id"] for d in decided]  # in the order the lines went out
    assert all(isinstance(ms, int) and 0 <= ms <= end["latency_ms"] for ms in end["sent_ms"].values())
    return {d["id"]: d for d in decided}


def by_id(r: httpx.Response) -> dict[str, dict[str, Any]]:
    """A JSON answer's decisions by entity id."""
    return {d["id"]: d for d in r.json()["decisions"]}


def budget_manifest(tmp_path: Path) -> Path:
    """The forest example with a boss budget no boss meets: every boss falls back with `budget`."""
    data = yaml.safe_load(FOREST.read_text())
    data["types"]["boss"]["max_input_tokens"] = 10
    p = tmp_path / "m.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_streamed_and_unstreamed_answers_hold_the_same_decisions_and_the_json_is_as_before(
    svc: Running, scripted: Any
) -> None:
    scripted.set(choose={"b1": "flee", "b2": "chase"}, decline=["b3"], omit=["b4"])
    ids = ["b1", "b2", "b3", "b4", "b5"]
    one = decide_body(*[bee(i, observation=obs(hp_fraction=0.1)) for i in ids])
    two = decide_body(*[bee(i, observation=obs(hp_fraction=0.6)) for i in ids])  # the same, but no cache hit
    plain = svc.decide(one)
    assert plain.headers["content-type"] == "application/json"
    assert "stream" not in scripted.requests[-1]  # the JSON answer's call is today's, read whole
    streamed = check_whole(lines_of(svc.decide(two, headers=NDJSON)), two)
    assert scripted.requests[-1]["stream"] is True

    def no_id(d: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in d.items() if k != "decision_id"}

    assert {i: no_id(d) for i, d in streamed.items()} == {d["id"]: no_id(d) for d in plain.json()["decisions"]}
    assert streamed["b1"]["action"] == "flee" and streamed["b3"]["code"] == "refused"
    assert streamed["b4"]["code"] == "invalid_choice" and streamed["b5"]["cached"] is False
    # byte for byte: the JSON answer is today's document of the same decisions, in the request's order
    got = plain.json()
    ours = {d["id"]: d.get("decision_id") for d in got["decisions"]}
    swapped = [
        {**streamed[i], "decision_id": ours.get(i)} if "decision_id" in streamed[i] else streamed[i] for i in ids
    ]
    as_before = {"a2g": "0.1", "epoch": 7, "latency_ms": got["latency_ms"], "decisions": swapped}
    assert plain.content == msgspec.json.encode(msgspec.convert(as_before, DecideResponse))
    # an Accept that does not ask for the stream is answered as before
    for accept in ("*/*", "application/json", "application/json, text/plain;q=0.5", "application/x-ndjson;q=0"):
        r = svc.decide(decide_body(bee("z", observation=obs(hp_fraction=0.3))), headers={"accept": accept})
        assert r.headers["content-type"] == "application/json" and "decisions" in r.json(), accept


def test_the_decisions_that_need_no_model_come_first_before_the_model_answers(
    start_service: Any, scripted: Any, tmp_path: Path
) -> None:
    svc = start_service(budget_manifest(tmp_path), provider="openai", base_url=scripted.base_url, model="scripted")
    warm = by_id(svc.decide(decide_body(bee("a", observation=obs(hp_fraction=0.1)), bee("c"), queen("q"))))["c"]
    assert warm["source"] == "AI" and warm["cached"] is False
    body = decide_body(bee("a", observation=obs(hp_fraction=0.9)), bee("c"), queen("q"))  # c: a cache hit
    scripted.set(hold=True)  # the model answers nothing until told: what comes meanwhile needed none
    try:
        with streaming(svc, body) as lines:
            first = [next(lines), next(lines)]
            until(lambda: scripted.model.in_flight == 1, "the provider call, held")  # made, and unanswered
            scripted.set()
            rest = list(lines)
    finally:
        scripted.set()
    d = check_whole(first + rest, body)
    assert {x["id"] for x in first} == {"c", "q"}
    assert d["c"]["source"] == "AI" and d["c"]["cached"] is True and d["c"]["action"] == warm["action"]
    assert d["q"]["code"] == "budget" and d["a"]["source"] == "AI" and d["a"]["cached"] is False
    seen = svc.http.get("/v1/prompt", params={"client_id": "game-1"}).json()["entities"]
    sent_ms = {e["id"]: e["sent_ms"] for e in seen}
    assert sent_ms == rest[-1]["sent_ms"]  # the inspector shows when each line went out
    assert sent_ms["c"] <= sent_ms["a"] and sent_ms["q"] <= sent_ms["a"]


def test_refusals_come_before_the_stream_as_todays_errors(shared_svc: Running) -> None:
    r = shared_svc.decide(decide_body(bee("a")), headers={"accept": "text/event-stream"})
    assert r.status_code == 406 and r.headers["content-type"] == "application/json"
    assert r.json()["error"]["code"] == "not_acceptable" and "application/x-ndjson" in r.json()["error"]["message"]
    bad = decide_body(bee("a", legal_actions=["dance"]))
    r = shared_svc.decide(bad, headers=NDJSON)
    assert r.status_code == 422 and r.headers["content-type"] == "application/json"
    assert r.json()["error"]["details"][0]["path"] == "entities[0].legal_actions[0]"
    for urgency in (101, -1, 2.5, "high"):
        r = shared_svc.decide(decide_body(bee("a", urgency=urgency)), headers=NDJSON)
        assert r.status_code == 422, (urgency, r.text)
        assert [p["path"] for p in r.json()["error"]["details"]] == ["entities[0].urgency"], r.text


def test_urgency_then_a_trigger_orders_the_prompt_and_the_static_prefix_stays_the_same(
    svc: Running, scripted: Any
) -> None:
    body = decide_body(bee("a"), bee("b", trigger="hit"), bee("c", urgency=90), bee("d", urgency=90, trigger="hit"))
    r = svc.decide(body)
    assert [d["id"] for d in r.json()["decisions"]] == ["a", "b", "c", "d"]  # the answer: the request's order
    seen = svc.http.get("/v1/prompt", params={"client_id": "game-1"}).json()
    assert [(e["id"], e["number"]) for e in seen["entities"]] == [("d", 1), ("c", 2), ("b", 3), ("a", 4)]
    assert all(isinstance(e["sent_ms"], int) for e in seen["entities"])  # the JSON answer went out whole
    user = scripted.requests[-1]["messages"][1]["content"]
    assert re.findall(r'^E(\d) "(\w)"', user, re.M) == [("1", "d"), ("2", "c"), ("3", "b"), ("4", "a")]
    # an entity's cache entry does not depend on its place: reordered, every one is a hit
    moved = decide_body(bee("d", urgency=0, trigger="hit"), bee("c", urgency=5), bee("b", trigger="hit"), bee("a"))
    calls = scripted.model.received
    got = svc.decide(moved, headers=NDJSON)
    assert all(d["cached"] is True for d in check_whole(lines_of(got), moved).values())
    assert scripted.model.received == calls  # no model call
    # the same entities in another order: another tail, the static prefix byte for byte the same
    again = decide_body(*[bee(i, observation=obs(hp_fraction=0.8)) for i in "abcd"], bee("e", urgency=100))
    svc.decide(again)
    s1, s2 = (r["messages"][0]["content"] for r in scripted.requests[-2:])
    assert s1 == s2
    assert re.findall(r'^E1 "(\w)"', scripted.requests[-1]["messages"][1]["content"], re.M) == ["e"]


def test_the_openapi_document_describes_both_answers_and_the_406(shared_svc: Running) -> None:
    doc = shared_svc.http.get("/openapi.json").json()
    op = doc["paths"]["/v1/decide"]["post"]
    content = op["responses"]["200"]["content"]
    assert content["application/json"]["schema"] == {"$ref": "#/components/schemas/DecideResponse"}
    lines = content["application/x-ndjson"]["schema"]
    assert "one JSON document a line" in lines["description"]
    assert {"$ref": "#/components/schemas/DecideEnd"} in lines["anyOf"]
    assert "sent_ms" in doc["components"]["schemas"]["DecideEnd"]["properties"]
    assert "406" in op["responses"] and "urgency" in doc["components"]["schemas"]["DecideEntity"]["properties"]
    page = shared_svc.http.get("/").text
    assert "out at" in page and "sent_ms" in page  # the inspector shows when each decision went out


@pytest.mark.parametrize("accept", ["application/x-ndjson", None])
def test_a_provider_failure_is_fallback_lines_and_the_last_line_is_written(
    svc: Running, scripted: Any, accept: str | None
) -> None:
    scripted.set(status=500)
    body = decide_body(bee("a", observation=obs(hp_fraction=0.15)), bee("b", observation=obs(hp_fraction=0.2)))
    r = svc.decide(body, headers={"accept": accept} if accept else {})
    decided = check_whole(lines_of(r), body) if accept else {d["id"]: d for d in r.json()["decisions"]}
    assert [d["code"] for d in decided.values()] == ["unavailable", "unavailable"]
    assert "500" in decided["a"]["reason"]


def serve_args(tmp_path: Path, base_url: str) -> list[str]:
    """`npcmind serve` on a SQLite file of the test's own, its provider the scripted server."""
    store = f"sqlite:///{tmp_path}/kill.db"
    return ["--manifest", str(FOREST), "--store", store, "--provider", "openai", "--base-url", base_url]


def test_kill_9_mid_stream_loses_no_acknowledged_decision(tmp_path: Path, scripted: Any) -> None:
    """Every decision line received before a kill -9 is known to the store afterwards: a line is written only
    once its decision is kept."""
    from test_durability import Proc

    args = serve_args(tmp_path, scripted.base_url)
    a = Proc(args)
    entities = [bee(f"w{i}") for i in range(4)]  # decided once, then from the cache, the scene the same
    warm = decide_body(*entities, *[bee(f"f{i}", observation=obs(hp_fraction=0.1)) for i in range(4)])
    try:
        assert all(d["source"] == "AI" for d in a.http.post("/v1/decide", json=warm).json()["decisions"])
        fresh = [bee(f"f{i}", observation=obs(hp_fraction=0.9)) for i in range(4)]
        scripted.set(hold=True)  # the model never answers: the kill comes mid-stream
        received: list[dict[str, Any]] = []
        with a.http.stream("POST", "/v1/decide", json=decide_body(*entities, *fresh), headers=NDJSON) as r:
            for line in r.iter_lines():
                received.append(msgspec.json.decode(line))
                if len(received) == len(entities):
                    break
            a.kill9()
    finally:
        scripted.set()
        if a.proc.poll() is None:
            a.kill9()
    ids = [d["decision_id"] for d in received if d.get("source") == "AI"]
    assert len(ids) == len(entities) and "a2g" not in received[-1], received  # acknowledged lines, and no last line
    b = Proc(args)
    try:
        reports = [{"decision_id": d, "outcome": "done"} for d in ids]
        r = b.http.post("/v1/report", json={"client_id": "game-1", "reports": reports})
        assert [x["status"] for x in r.json()["results"]] == ["accepted"] * len(ids)
    finally:
        b.kill9()


def test_a_client_that_leaves_mid_stream_cancels_the_call_and_nothing_is_said(
    start_service: Any, scripted: Any
) -> None:
    from conftest import logged

    svc = start_service(base_url=scripted.base_url, provider="openai", model="scripted", max_concurrent_calls=1)
    scripted.set(hold=True)
    try:
        with logged("npcmind") as said:
            with svc.http.stream("POST", "/v1/decide", json=decide_body(bee("a"), bee("b")), headers=NDJSON) as r:
                assert r.status_code == 200
                until(lambda: scripted.model.in_flight == 1, "the provider call, held")
            # the client is gone: its call is cancelled and its slot free, though the model never answered
            until(lambda: not svc.service.pipeline.local._slots.locked(), "the call slot freed")
            assert svc.service.pipeline.seen_sessions() == []  # no half batch kept to show
        assert not [m for m in said if "bug" in m or "Traceback" in m or "failed" in m], said
    finally:
        scripted.set()
    d = svc.decide(decide_body(bee("c", observation=obs(hp_fraction=0.7)))).json()["decisions"][0]
    assert d["source"] == "AI"  # the one slot serves the next request


def test_a_bug_after_the_200_is_unavailable_lines_and_the_last_line_said_once(
    svc: Running, scripted: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import logged

    def broken(session: Any, issued: Any) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(svc.service.pipeline.situation, "decided", broken)
    with logged("npcmind") as said:
        for k in range(3):
            body = decide_body(
                bee("a", observation=obs(hp_fraction=k / 10)), bee("b", observation=obs(hp_fraction=k / 10))
            )
            r = svc.decide(body, headers=NDJSON)
            decided = check_whole(lines_of(r), body)  # every entity a line, then the last line
            assert {d["code"] for d in decided.values()} == {"unavailable"}
            assert decided["a"]["reason"] == "internal error; the service logged it"
            assert b"Traceback" not in r.content and b"ZeroDivisionError" not in r.content
    assert len([m for m in said if "(a bug: please report it" in m]) == 1, said


def provider_service(
    start_service: Any, scripted: Any, protocol: str, monkeypatch: pytest.MonkeyPatch, **kw: Any
) -> Running:
    """The service on the scripted server, in the OpenAI protocol (enum form) or Anthropic's (tool input)."""
    if protocol == "anthropic":
        monkeypatch.setenv("GAME_CLAUDE_KEY", "sk-ant-test")
        return start_service(provider="anthropic", base_url=scripted.base_url, api_key_env="GAME_CLAUDE_KEY", **kw)
    return start_service(provider="openai", base_url=scripted.base_url, model="scripted", **kw)


PROTOCOLS = ["openai", "anthropic"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_streamed_answer_comes_a_line_an_entity_as_the_model_writes(
    start_service: Any, scripted: Any, protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = provider_service(start_service, scripted, protocol, monkeypatch)
    scripted.set(choose={"a": "flee", "c": "chase"}, stream_tokens_per_s=40)  # 25 ms a token, paced by the server
    body = decide_body(*[bee(i) for i in "abcd"])
    *decided, end = lines_of(svc.decide(body, headers=NDJSON))
    assert [(d["id"], d.get("action")) for d in decided] == [
        ("a", "flee"),
        ("b", "idle"),
        ("c", "chase"),
        ("d", "idle"),
    ]
    assert scripted.requests[-1]["stream"] is True
    sent = [end["sent_ms"][i] for i in "abcd"]
    assert sent == sorted(sent) and len(set(sent)) == 4, sent  # four lines, each written when its part was


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_cut_provider_stream_keeps_what_was_written_and_the_rest_fall_back(
    start_service: Any, scripted: Any, protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = provider_service(start_service, scripted, protocol, monkeypatch)
    ids = [f"b{i}" for i in range(6)]
    scripted.set(stream_cut_after=24)  # the connection closes mid-answer: a few entities written, the rest not
    body = decide_body(*[bee(i) for i in ids])
    decided = check_whole(lines_of(svc.decide(body, headers=NDJSON)), body)
    codes = [decided[i].get("code", "AI") for i in ids]
    k = codes.index("unavailable")
    assert k > 0 and codes == ["AI"] * k + ["unavailable"] * (len(ids) - k), codes  # those written stand
    assert "the provider's stream was cut" in decided[ids[-1]]["reason"]
    reported = [{"decision_id": decided[i]["decision_id"], "outcome": "done"} for i in ids[:k]]
    r = svc.http.post("/v1/report", json={"client_id": "game-1", "reports": reported})
    assert [x["status"] for x in r.json()["results"]] == ["accepted"] * k
    # the JSON answer asks for the whole answer at once, as it always did: no stream to cut
    plain = by_id(svc.decide(decide_body(*[bee(i, observation=obs(hp_fraction=0.9)) for i in ids])))
    assert "stream" not in scripted.requests[-1] and {plain[i]["source"] for i in ids} == {"AI"}


def test_the_deadline_is_per_entity_the_written_stand_the_rest_are_unavailable(
    start_service: Any, scripted: Any
) -> None:
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted", deadline_ms=3000)
    scripted.set(stream_tokens_per_s=8)  # the first entity in about a second, all 16 in over ten
    ids = [f"b{i}" for i in range(16)]
    body = decide_body(*[bee(i) for i in ids])
    decided = check_whole(lines_of(svc.decide(body, headers=NDJSON)), body)
    codes = [decided[i].get("code", "AI") for i in ids]
    k = codes.index("unavailable")
    assert k > 0 and codes == ["AI"] * k + ["unavailable"] * (len(ids) - k), codes
    assert decided[ids[-1]]["reason"] == "not written by the deadline of 3000 ms (NPCMIND_DEADLINE_MS)"


def test_kill_9_mid_stream_loses_none_of_the_models_streamed_decisions(tmp_path: Path, scripted: Any) -> None:
    from test_durability import Proc

    args = serve_args(tmp_path, scripted.base_url)
    a = Proc(args)
    scripted.set(stream_tokens_per_s=4)  # an entity every second or two: the kill comes mid-answer
    received: list[dict[str, Any]] = []
    try:
        body = decide_body(*[bee(f"b{i}") for i in range(16)])
        with a.http.stream("POST", "/v1/decide", json=body, headers=NDJSON) as r:
            for line in r.iter_lines():
                received.append(msgspec.json.decode(line))
                if len(received) == 2:
                    break
            a.kill9()
    finally:
        if a.proc.poll() is None:
            a.kill9()
    assert [(d["source"], d["cached"]) for d in received] == [("AI", False)] * 2, received
    b = Proc(args)
    try:
        reports = [{"decision_id": d["decision_id"], "outcome": "done"} for d in received]
        r = b.http.post("/v1/report", json={"client_id": "game-1", "reports": reports})
        assert [x["status"] for x in r.json()["results"]] == ["accepted", "accepted"]
    finally:
        b.kill9()
