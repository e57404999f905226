"""Fuzz at the edges every route shares: huge integers in any number's place, deep and wide JSON, and every
content type, on both profiles. No input may give a 5xx; every refusal is the service's own JSON error."""

from __future__ import annotations

import copy
import http.client
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import BEE_OBS, HOSTED, Hosted, Running, bee, decide_body, service_settings, serving, write_clients
from npcmind.testing.scripted import ScriptedServer

HUGE = st.sampled_from([10**400, -(10**400), 2**64, 2**53, -(2**63) - 1, 10**4000]) | st.integers(
    min_value=2**53, max_value=10**500
)

# a valid body of every route that takes one (the hosted profile's session route is below)
BODIES: dict[str, dict[str, Any]] = {
    "/v1/decide": decide_body(bee("a", position=[1.0, 2.0], parent="swarm-1", trigger="hit"), bee("b")),
    "/v1/telemetry": {
        "client_id": "game-1",
        "epoch": 1,
        "entities": [
            {"id": "c", "type": "bee", "action": "chase", "state": "alive", "position": [1, 2, 3], "fields": BEE_OBS},
            {"id": "p", "type": "player", "fields": {"hp_fraction": 0.5}},
        ],
        "removed": ["zz"],
    },
    "/v1/report": {
        "client_id": "game-1",
        "reports": [{"decision_id": "d_AAAAAAABN3fFObMdkWgbDd9lU7j1ulzA", "outcome": "done", "detail": "stung"}],
    },
    "/v1/context": {
        "client_id": "game-1",
        "scopes": {
            "cave": {
                "text": "A cave.",
                "parent": "forest",
                "fields": {"depth": {"type": "number", "min": 0, "max": 10, "quantum": 0.5}},
            }
        },
    },
    "/npcs/mara/process": {
        "tape": {
            "observation": "Hello.",
            "npcState": {"turns": 4},
            "memories": [{"text": "The mine collapsed.", "type": "knowledge", "importance": 0.5}],
            "constraints": {"maxTokens": 64, "temperature": 0.5},
        }
    },
}


def _numbers(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a body that holds a number (booleans are not numbers here)."""
    if isinstance(node, bool):
        return []
    if isinstance(node, int | float):
        return [path]
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _numbers(v, (*path, k))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _numbers(v, (*path, i))]
    return []


def _set(body: Any, path: tuple[Any, ...], value: Any) -> None:
    for k in path[:-1]:
        body = body[k]
    body[path[-1]] = value


def _refusal(r: httpx.Response) -> None:
    """A 4xx in the service's error form, or a 200."""
    assert r.status_code < 500, (r.status_code, r.text[:500])
    if r.status_code >= 400:
        error = r.json()["error"]
        assert error["code"] and error["message"], error
        if r.status_code == 422:
            assert error["details"] and all(d["path"] is not None for d in error["details"]), error


def test_the_bodies_are_valid(svc: Running) -> None:
    """Else the fuzz below would only mutate bodies that are refused anyway."""
    for route, body in BODIES.items():
        r = svc.http.post(route, json=body)
        assert r.status_code == 200, (route, r.text)


@pytest.mark.parametrize("route", [r for r in BODIES if _numbers(BODIES[r])])  # a report holds no number
def test_a_huge_integer_in_any_numbers_place_is_a_4xx_naming_it(route: str, svc: Running) -> None:
    places = _numbers(BODIES[route])

    @given(place=st.sampled_from(places), value=HUGE)
    @settings(max_examples=40, suppress_health_check=list(HealthCheck))
    def check(place: tuple[Any, ...], value: int) -> None:
        body = copy.deepcopy(BODIES[route])
        _set(body, place, value)
        r = svc.http.post(route, content=msgspec.json.encode(body), headers={"content-type": "application/json"})
        _refusal(r)
        if r.status_code == 200:  # accepted: then it was within what the field holds, and echoed as sent
            assert "epoch" not in place or value <= 2**53 - 1
        elif r.status_code == 422:  # named at the field that holds it (or its sibling: min above a huge max)
            names = [str(k) for k in reversed(place) if isinstance(k, str)][:2]  # the field, and its parent's
            assert any(n in d["path"] for n in names for d in r.json()["error"]["details"]), r.text

    check()


@pytest.mark.fast
def test_a_huge_scope_state_on_a_fine_quantum_is_refused_not_a_5xx(svc: Running) -> None:
    """quantum 0.001 and 1.7e308: quantizing overflowed to inf."""
    scope = {"text": "A vault.", "fields": {"gold": {"type": "number", "quantum": 0.001}}}
    assert svc.http.post("/v1/context", json={"client_id": "game-1", "scopes": {"vault": scope}}).status_code == 200
    for value in (1.7e308, -1.7e308, 1e300):
        r = svc.decide(decide_body(bee("a"), scope="vault", scope_state={"gold": value}))
        _refusal(r)


@pytest.mark.parametrize("route", list(BODIES))
@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "",
        "text/plain",
        "text/plain;charset=json",
        "text/plain; charset=utf-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "application/xml",
        "json",
        "application/json; charset=utf-8",
        "application/vnd.game+json",
        "APPLICATION/JSON",
        "application/json; charset=latin-1",
        "*/*",
        "application/json, text/plain",
    ],
)
def test_every_content_type_is_json_or_a_clear_415(
    route: str, content_type: str | None, request: pytest.FixtureRequest
) -> None:
    """Browsers send text/plain and form bodies across origins without asking first: only JSON is JSON."""
    headers = {} if content_type is None else {"content-type": content_type}
    media = (content_type or "").split(";")[0].strip().lower()
    taken = media == "application/json" or (media.startswith("application/") and media.endswith("+json"))
    # a body taken is kept (a service of its own); a refused one changes nothing (the module's shared service)
    svc: Running = request.getfixturevalue("svc" if taken else "shared_svc")
    r = svc.http.post(route, content=msgspec.json.encode(BODIES[route]), headers=headers)
    _refusal(r)
    if taken:
        assert r.status_code == 200, (content_type, r.text)
    else:
        assert r.status_code == 415, (content_type, r.status_code, r.text)
        assert "application/json" in r.json()["error"]["message"]


@pytest.mark.fast
@pytest.mark.parametrize("route", list(BODIES))
def test_wide_json_is_a_4xx(route: str, shared_svc: Running) -> None:
    """Wide where the body takes maps and lists: a hundred thousand keys or items, still under the body limit."""
    wide_map = {f"k{i}": i for i in range(20_000)}
    for body in (
        {**BODIES[route], "extra": wide_map},
        [BODIES[route]] * 2_000,
        {"a" * 100_000: 1},
        list(range(40_000)),
    ):
        r = shared_svc.http.post(route, content=msgspec.json.encode(body), headers={"content-type": "application/json"})
        _refusal(r)
        assert r.status_code != 200, route


@given(
    body=st.recursive(
        st.none() | st.booleans() | HUGE | st.floats() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=30) | st.dictionaries(st.text(max_size=8), inner, max_size=30),
        max_leaves=200,
    ),
    route=st.sampled_from([*BODIES, "/v1/session"]),
)
@settings(max_examples=200, suppress_health_check=list(HealthCheck))
def test_any_json_on_any_route_of_the_hosted_profile_is_never_a_5xx(
    body: Any, route: str, hosted_fuzz: tuple[Hosted, dict[str, str]]
) -> None:
    service, auth = hosted_fuzz
    headers = {"content-type": "application/json", **(auth if route != "/v1/session" else {})}
    raw = msgspec.json.encode(body) if not isinstance(body, float) or body == body else b"NaN"
    _refusal(service.http.post(route, content=raw, headers=headers))


@pytest.fixture(scope="module")
def hosted_fuzz(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Hosted, dict[str, str]]]:
    """One hosted service for the whole property (a fixture a module: hypothesis calls the test many times)."""

    tmp = tmp_path_factory.mktemp("hosted-fuzz")
    clients, keys = write_clients(tmp, requests_per_second=100000)
    with (
        ScriptedServer() as scripted,
        serving(service_settings(tmp, clients=str(clients), base_url=scripted.base_url, **HOSTED)) as running,
    ):
        hosted = Hosted(running, keys)
        yield hosted, Hosted.auth(hosted.open())


@pytest.mark.fast
@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/v1/prompt", {"client_id": "x" * 5000}),
        ("/v1/prompt", {"client_id": ["a", "b"]}),
        ("/v1/manifest", {"client_id": "game-1", "x": "1" * 10_000}),
        ("/v1/health", {"deep": "[" * 10_000}),
        ("/v1/keys", {}),
        ("/metrics", {}),
        ("/openapi.json", {}),
        ("/", {"client_id": "<script>"}),
    ],
)
def test_get_routes_with_odd_queries_are_never_a_5xx(path: str, query: dict[str, Any], shared_svc: Running) -> None:
    r = shared_svc.http.get(path, params=query)
    assert r.status_code < 500, (path, r.status_code, r.text[:300])


def _raw(svc: Running, request: bytes) -> tuple[int, bytes]:
    """The status and body of bytes sent as they are: what httpx refuses to send, a client of bytes can."""
    url = httpx.URL(svc.server.url)
    with socket.create_connection((url.host, url.port or 80), timeout=30) as sock:
        sock.sendall(request)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, response.read()


@pytest.mark.fast
def test_a_nul_in_a_header_is_a_400_of_the_http_parser(shared_svc: Running) -> None:
    """httpx refuses a content type holding \\x00 before sending (LocalProtocolError), so the case returned
    without asserting: sent as bytes, the request never reaches the app."""
    body = msgspec.json.encode(BODIES["/v1/report"])
    head = b"POST /v1/report HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: \x00\r\nconnection: close\r\n"
    status, text = _raw(shared_svc, head + b"content-length: %d\r\n\r\n" % len(body) + body)
    assert status == 400 and b"Invalid HTTP request" in text, (status, text)


@pytest.mark.fast
@pytest.mark.parametrize("path", ["/v1/prompt", "/v1/policy"])
@pytest.mark.parametrize("value", ["%FF", "game-%ED%B3%BF", "%C3"])
def test_a_query_value_that_is_not_utf8_is_a_422_naming_it(path: str, value: str, shared_svc: Running) -> None:
    """The case "\\udcff" (the byte 0xFF as Python holds an undecodable one) is no text httpx encodes, so it
    returned without asserting: the URL carries the bytes percent-encoded, as a client of bytes sends them. They
    were read as U+FFFD: a 404 for a client named '\\ufffd'."""
    r = shared_svc.http.get(f"{path}?client_id={value}")
    _refusal(r)
    error = r.json()["error"]
    assert r.status_code == 422 and error["details"][0]["path"] == "client_id", r.text
    assert "not UTF-8" in error["message"], error
    assert shared_svc.http.get(f"{path}?client_id=game-%C3%A9").status_code == 404  # UTF-8 percent-encoded: read as é
