"""Property-based fuzzing of every route from the OpenAPI document: no input may give a 5xx."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import msgspec
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from conftest import BEE_OBS, Running, bee, decide_body
from npcmind.http.app import document

schema = schemathesis.openapi.from_dict(msgspec.json.decode(document()))


@schema.parametrize()
@settings(max_examples=60, suppress_health_check=list(HealthCheck))
def test_no_input_gives_a_5xx(case: Any, svc: Running) -> None:
    response = case.call(base_url=svc.server.url)
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert "error" in response.json()
    # A schema-valid body can still break the manifest (an unknown type): a 422 there is right, so the
    # positive-data check is left out; every answer must still match the documented shapes and statuses.
    case.validate_response(
        response,
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.integers(-(10**400), 10**400)  # no float holds most of these: the number rule, never a 500
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=80),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=12,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


# A valid body of every route that takes one; the fuzz below replaces a few of its leaves.
VALID: dict[str, dict[str, Any]] = {
    "/v1/decide": decide_body(bee("a", position=[1.0, 2.0], parent="swarm-1", trigger="hit"), bee("b")),
    "/v1/telemetry": {
        "client_id": "game-1",
        "epoch": 1,
        "entities": [
            {"id": "c", "type": "bee", "action": "chase", "state": "alive", "position": [1, 2, 3], "fields": BEE_OBS},
            {"id": "p", "type": "player", "fields": {"hp_fraction": 0.5}, "parent": "c"},
        ],
        "removed": ["zz"],
    },
    "/v1/report": {
        "client_id": "game-1",
        "reports": [{"decision_id": "d_AAAAAAABN3fFObMdkWgbDd9lU7j1ulzA", "outcome": "done", "detail": "stung"}],
    },
    "/v1/context": {
        "client_id": "game-1",
        "scopes": {"cave": {"text": "A cave.", "parent": "forest", "fields": {"depth": {"type": "integer", "min": 0}}}},
    },
    "/npcs/mara/process": {  # the first step; valid_body() walks it to its last (a tape carries a step token)
        "tape": {
            "observation": "Hello.",
            "npcState": {"turns": 4},
            "memories": [{"text": "The mine collapsed.", "kind": "knowledge", "importance": 0.5}],
            "rulesetId": "default",
            "actor": {"npcId": "mara", "persona": "An innkeeper.", "data": {}},
        },
        "lastResult": {"type": "QueryVectorResult", "memories": [{"text": "The mine collapsed.", "similarity": 0.9}]},
    },
}
NPC = "/npcs/mara/process"
NPC_OUTPUT = {
    "type": "ExecuteInferenceResult",
    "generatedOutput": '{"dialogue": "Welcome!", "action": {"type": "TALK"}}',
}


def valid_body(route: str, svc: Running) -> dict[str, Any]:
    """A valid body; the NPC step's is its Finalize step, on the tape (and step token) the service returned."""
    if route != NPC:
        return VALID[route]
    r = svc.http.post(NPC, json=VALID[NPC])
    assert r.status_code == 200 and r.json()["instruction"]["type"] == "ExecuteInference", r.text
    return {"tape": r.json()["tape"], "lastResult": NPC_OUTPUT}


@st.composite
def near_valid(draw: st.DrawFn, valid: dict[str, Any]) -> dict[str, Any]:
    """A valid body with a few leaves replaced by arbitrary JSON: deep paths, not just the envelope."""
    body = copy.deepcopy(valid)
    paths = _paths(body)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        node: Any = body
        try:
            for k in path[:-1]:
                node = node[k]
            node[path[-1]] = draw(json_values)
        except (KeyError, IndexError, TypeError):
            continue
    return body


@pytest.mark.fast
@pytest.mark.parametrize("route", list(VALID))
def test_the_valid_bodies_are_valid(route: str, svc: Running) -> None:
    """Else the fuzz below would only ever mutate a body that is refused anyway."""
    r = svc.http.post(route, json=valid_body(route, svc))
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("route", list(VALID))
def test_near_valid_bodies_never_give_a_5xx(route: str, svc: Running) -> None:
    @given(body=near_valid(valid_body(route, svc)))
    @settings(max_examples=150, suppress_health_check=list(HealthCheck))
    def check(body: dict[str, Any]) -> None:
        r = svc.http.post(route, json=body)
        assert r.status_code < 500, r.text
        if r.status_code >= 400:
            error = r.json()["error"]
            assert error["message"]
            if r.status_code == 422:
                assert error["details"] and all(d["path"] is not None for d in error["details"])

    check()


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _with_deep(route: str, old: str, new: str, answer: str = "4xx") -> tuple[str, str, str]:
    if route == NPC:  # the body is built at test time: the replacement travels with it
        return route, f"{old}\x00{new}", answer
    return route, msgspec.json.encode(VALID[route]).decode().replace(old, new), answer


# (route, a body with DEEP where arbitrary JSON may stand, the answer): the top level, a string field, a
# number field, an observation value, a list of ids and free-form data an NPC tape carries get a 4xx; a
# model's output is free text (a string holding JSON) that the service reads as well as it can: a 200
DEEP_PLACES = [
    ("/v1/decide", "DEEP", "4xx"),
    ("/v1/decide", '{"client_id": DEEP, "epoch": 1, "world": {}, "entities": []}', "4xx"),
    _with_deep("/v1/decide", '"epoch":7', '"epoch":DEEP'),
    _with_deep("/v1/decide", '"hp_fraction":0.333', '"hp_fraction":DEEP'),
    _with_deep("/v1/telemetry", '"removed":["zz"]', '"removed":DEEP'),
    _with_deep(NPC, '{"turns":4}', "DEEP"),
    _with_deep(NPC, '"data":{}', '"data":DEEP'),
    _with_deep(NPC, '"generatedOutput":"{', '"generatedOutput":"DEEP{', "200"),
    _with_deep(NPC, '\\"Welcome!\\"', "DEEP", "200"),  # {"dialogue": [[[...]]], ...}
]


@pytest.mark.parametrize("depth", [100, 900, 3000, 100_000])
@pytest.mark.parametrize(("route", "template", "answer"), DEEP_PLACES)
def test_deeply_nested_json_never_gives_a_5xx(route: str, template: str, answer: str, depth: int, svc: Running) -> None:
    """Arrays nested thousands deep are valid JSON; no route may answer them with a 5xx (Python's recursion)."""
    if route == NPC:
        old, new = template.split("\x00")
        template = msgspec.json.encode(valid_body(route, svc)).decode().replace(old, new)
    assert "DEEP" in template, template  # the placeholder must have found its place in the valid body
    body = template.replace("DEEP", _nested(depth)).encode()
    r = svc.http.post(route, content=body, headers={"content-type": "application/json"})
    if answer == "200":
        assert r.status_code == 200, (r.status_code, r.text[:300])
    else:
        assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
        assert r.json()["error"]["message"]
    assert svc.http.post(route, json=valid_body(route, svc)).status_code == 200  # and the service is still well


# A provider's answer, near the chat-completions shape: each part right, or arbitrary JSON in its place
def _maybe(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(valid, valid, valid, json_values)


# token counts and log-probabilities as servers have sent them, right and wrong
COUNTS = st.sampled_from([-5, -0.3, 0, 3, 2.0, 0.5, 1e300, 2**70, "12", None, True, [], {}])
COUNTS = st.one_of(COUNTS, COUNTS, COUNTS, json_values)
ANSWER_TEXTS = st.sampled_from(['{"E1": "idle"}', '{"E1": "flee"}', '{"E1": "dance"}', "idle", "", "{"])
_token = st.fixed_dictionaries({"token": _maybe(ANSWER_TEXTS), "logprob": COUNTS})
_choice = st.fixed_dictionaries(
    {"message": _maybe(st.fixed_dictionaries({"content": _maybe(ANSWER_TEXTS)}, optional={"refusal": json_values}))},
    optional={
        "logprobs": _maybe(st.fixed_dictionaries({"content": _maybe(st.lists(_token, max_size=3))})),
        "finish_reason": _maybe(st.sampled_from(["stop", "length", "content_filter"])),
    },
)
_usage = st.fixed_dictionaries(
    {"prompt_tokens": COUNTS, "completion_tokens": COUNTS},
    optional={"prompt_tokens_details": _maybe(st.fixed_dictionaries({"cached_tokens": COUNTS}))},
)
provider_answers = st.fixed_dictionaries(
    {"choices": _maybe(st.lists(_choice, min_size=1, max_size=2))}, optional={"usage": _maybe(_usage)}
)


def test_no_provider_answer_gives_a_5xx_or_an_action_outside_the_legal_ones(svc: Running, scripted: Any) -> None:
    """Whatever a provider answers (a negative token count once gave a 500), each entity gets a decision
    among its legal actions or a typed fallback, and the confidence is a probability or null."""
    legal = ["idle", "flee"]
    calls = itertools.count()

    @given(answer=provider_answers)
    @settings(max_examples=300, suppress_health_check=list(HealthCheck))
    def check(answer: dict[str, Any]) -> None:
        scripted.set(body=answer)
        far = 100.0 * next(calls)  # a new situation each time: never a cache hit, always the provider's answer
        r = svc.decide(decide_body(bee("a", legal_actions=legal, observation={**BEE_OBS, "distance_to_player": far})))
        assert r.status_code == 200, r.text
        assert r.json()["decisions"][0].get("cached") is not True
        d = r.json()["decisions"][0]
        if d["source"] == "AI":
            assert d["action"] in legal and (d["confidence"] is None or 0 <= d["confidence"] <= 1), d
        else:
            assert d["code"] in ("unavailable", "refused", "invalid_choice"), d
        assert svc.http.get("/metrics").status_code == 200

    check()
