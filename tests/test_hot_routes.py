"""The hot routes (POST /v1/decide and /npcs/{npcId}/process from a game, served ahead of Litestar's layers) answer
what Litestar answers: each request is sent twice, once as a game sends it (the hot path) and once with an
``Origin`` (a browser's, which Litestar serves with its CORS layer), and the two answers must be the same."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conftest import Running, bee, decide_body, logged
from npcmind.http.hot import HotRoutes

BROWSER = {"origin": "http://127.0.0.1:9"}  # an origin not allowed: CORS adds nothing, the request is still served
JSON = {"content-type": "application/json"}
GOOD = json.dumps(decide_body(bee("b1"), bee("b2"), client_id="hot")).encode()


@pytest.fixture()
def hot(start_service: Any, scripted: Any) -> Iterator[tuple[Running, list[str]]]:
    """A service whose hot routes count what they serve (a small body limit, to reach the 413)."""
    running = start_service(provider="openai", base_url=scripted.base_url, model="scripted", max_body_bytes=4096)
    app = running.server.app
    assert isinstance(app, HotRoutes)
    served: list[str] = []
    serve = app._serve

    async def counted(handler: Any, scope: Any, receive: Any, send: Any) -> None:
        served.append(scope["path"])
        await serve(handler, scope, receive, send)

    app._serve = counted  # type: ignore[method-assign]
    yield running, served


# (path, body, headers): every refusal these routes give, and what is answered whole
CASES: list[tuple[str, bytes, dict[str, str]]] = [
    ("/v1/decide", b"{}", JSON),  # 422, every field named
    ("/v1/decide", b"{", JSON),  # 400
    ("/v1/decide", GOOD, {}),  # 415: no content-type
    ("/v1/decide", GOOD, {"content-type": "text/plain"}),  # 415
    ("/v1/decide", b"[" * 5000, JSON),  # 413 past the limit
    ("/v1/decide", gzip.compress(b" " * 100_000), {**JSON, "content-encoding": "gzip"}),  # 413 unpacked
    ("/v1/decide", gzip.compress(GOOD), {**JSON, "content-encoding": "gzip"}),  # 200 from a gzip body
    ("/v1/decide", b"\xef\xbb\xbf" + GOOD, JSON),  # 200 despite a byte order mark
    ("/v1/decide", GOOD, {**JSON, "accept": "text/event-stream"}),  # 406
    ("/v1/decide", GOOD, {**JSON, "host": "evil.example"}),  # 421: the local profile's host check
    ("/v1/decide", GOOD, {**JSON, "authorization": "Bearer nothing"}),  # the local profile asks no token: 200
    ("/v1/decide", json.dumps(decide_body(bee("b1", type="dragon"))).encode(), JSON),  # 422 by the manifest
    ("/npcs/mara/process", b"{}", JSON),  # 422
    ("/npcs/mara/process", b"{", JSON),  # 400
    ("/npcs/mara/process", b"{}", {}),  # 415
    ("/npcs/" + "m" * 300 + "/process", b"{}", JSON),  # a long npcId
]


def _same(a: httpx.Response, b: httpx.Response) -> None:
    """Status, media type and body the same; a 200's decisions alike but for their new ids and latency."""
    assert (a.status_code, a.headers.get("content-type")) == (b.status_code, b.headers.get("content-type")), (a, b)
    for name in ("retry-after", "www-authenticate", "content-length"):
        if a.status_code != 200 or name != "content-length":
            assert a.headers.get(name) == b.headers.get(name), name
    if a.status_code != 200:
        assert a.content == b.content
        return
    da, db = a.json(), b.json()
    for d in (da, db):
        d.pop("latency_ms")
        for dec in d["decisions"]:
            dec.pop("decision_id", None)
            dec.pop("cached", None)
    assert da == db


@pytest.mark.parametrize("case", range(len(CASES)))
def test_a_hot_route_answers_as_litestar_does(hot: tuple[Running, list[str]], case: int) -> None:
    running, served = hot
    path, body, headers = CASES[case]
    game = running.http.post(path, content=body, headers=headers)
    assert served == [path]  # a game's request took the hot path
    browser = running.http.post(path, content=body, headers={**headers, **BROWSER})
    assert served == [path]  # a browser's did not
    _same(game, browser)


def test_what_is_not_a_hot_route_goes_to_litestar(hot: tuple[Running, list[str]]) -> None:
    running, served = hot
    assert running.http.get("/v1/decide").status_code == 405
    assert running.http.post("/v1/decide/", content=GOOD, headers=JSON).status_code in (200, 404)
    assert running.http.post("/npcs/a%2Fb/process", content=b"{}", headers=JSON).status_code == 404
    assert running.http.post("/npcs//process", content=b"{}", headers=JSON).status_code == 404
    assert running.http.get("/v1/health").status_code == 200
    assert served == []


def test_a_streamed_answer_on_the_hot_path(hot: tuple[Running, list[str]]) -> None:
    running, served = hot
    with running.http.stream(
        "POST", "/v1/decide", content=GOOD, headers={**JSON, "accept": "application/x-ndjson"}
    ) as r:
        lines = [json.loads(line) for line in r.iter_lines() if line]
    assert served == ["/v1/decide"]
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-ndjson"
    assert r.headers["x-accel-buffering"] == "no" and r.headers["cache-control"] == "no-cache"
    assert sorted(d["id"] for d in lines[:-1]) == ["b1", "b2"] and "sent_ms" in lines[-1]


def test_a_bug_on_the_hot_path_is_the_same_500_and_logged_once(hot: tuple[Running, list[str]]) -> None:
    running, served = hot

    async def broken(*_: Any) -> Any:
        raise RuntimeError("planted")

    running.service.pipeline.decide = broken  # type: ignore[method-assign]
    with logged("npcmind.http") as said:
        game = running.http.post("/v1/decide", content=GOOD, headers=JSON)
        browser = running.http.post("/v1/decide", content=GOOD, headers={**JSON, **BROWSER})
    assert served == ["/v1/decide"]
    assert game.status_code == 500 and game.json()["error"]["code"] == "internal"
    _same(game, browser)
    assert sum("planted" in m and "unhandled error" in m for m in said) == 1, said  # once per kind and route


@pytest.mark.parametrize("host", ["[::1]/evil", "localhost:80/x", "127.0.0.1:1 2", "evil.example/x", "loc\xe9lhost"])
def test_a_host_litestar_refuses_goes_to_litestar(hot: tuple[Running, list[str]], host: str) -> None:
    """Litestar's router answers a Host with more than a name, an address and a port with a 400 before any route; the
    local profile's own check reduced "[::1]/evil" to a loopback name and the hot path answered it (a review found)."""
    running, served = hot
    game = running.http.post("/v1/decide", content=GOOD, headers={**JSON, "host": host.encode("latin-1")})
    browser = running.http.post("/v1/decide", content=GOOD, headers={**JSON, "host": host.encode("latin-1"), **BROWSER})
    assert served == [] and game.status_code == 400
    _same(game, browser)


def test_under_a_root_path_litestar_routes(hot: tuple[Running, list[str]]) -> None:
    """uvicorn puts a root path in front of the path and Litestar takes it off before routing: the hot routes leave
    such a request to it (with root_path /v1, POST /decide was the hot path's decide and Litestar's 404)."""
    app = hot[0].server.app
    for path in ("/v1/decide", "/decide", "/v1/npcs/a/process"):
        assert app._route({"path": path, "root_path": "/v1", "headers": []}) is None
    assert app._route({"path": "/v1/decide", "headers": [(b"host", b"[::1]:8080")]}) is not None
