"""Attacks on the streamed decide answer (issue 31, docs/streaming.md): odd Accept headers, odd urgencies, clients
that leave mid-stream by the dozen, two sessions streaming at once, the same request streamed twice. Real HTTP
against the service and the scripted provider; no test reads a clock."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import httpx
import msgspec
import pytest

from conftest import Hosted, Running, bee, decide_body, logged, until

NDJSON = {"accept": "application/x-ndjson"}


def obs(hp: float) -> dict[str, Any]:
    """A bee's observation; a different hp_fraction is a different situation (no cache hit)."""
    return {"hp_fraction": hp, "distance_to_player": 96.4, "sees_player": True, "current_action": "chase"}


def fresh_body(prefix: str, n: int, client_id: str = "game-1", **over: Any) -> dict[str, Any]:
    """A decide request of ``n`` bees no earlier request decided (no cache hit)."""
    return decide_body(
        *[bee(f"{prefix}{j}", observation=obs(random.random())) for j in range(n)], client_id=client_id, **over
    )


def answer_kind(r: httpx.Response) -> str:
    """What the service chose: the stream, the JSON answer, or a refusal by its status (never a 5xx)."""
    assert r.status_code < 500, r.text
    if r.status_code != 200:
        assert r.headers["content-type"] == "application/json" and "error" in r.json()
        return str(r.status_code)
    if r.headers["content-type"] == "application/x-ndjson":
        *decided, end = [msgspec.json.decode(line) for line in r.content.splitlines()]
        assert all("source" in d for d in decided) and "a2g" in end
        return "stream"
    assert r.headers["content-type"] == "application/json" and "decisions" in r.json()
    return "json"


def test_repeated_accept_headers_are_read_as_one_list(svc: Running) -> None:
    """RFC 9110 5.3: an Accept sent as two header lines is the comma-joined list of both. Only the first line was
    read, so a client (or a proxy) that adds its own Accept line got JSON or even a 406 instead of the stream."""
    cases = [
        ([("accept", "application/json"), ("accept", NDJSON["accept"])], "stream"),
        ([("accept", "text/event-stream"), ("accept", NDJSON["accept"])], "stream"),  # not a 406: ndjson is taken
        ([("accept", "text/event-stream"), ("accept", "text/event-stream")], "406"),
        ([("accept", "application/json"), ("accept", "text/plain")], "json"),
    ]
    for k, (headers, want) in enumerate(cases):
        r = svc.decide(fresh_body(f"r{k}_", 1), headers=httpx.Headers(headers))
        assert answer_kind(r) == want, (headers, r.text[:200])


ACCEPTS = [
    ("application/x-ndjson;q=0", "json"),
    ("Application/X-Ndjson; Q=0", "json"),
    ("application/x-ndjson;q=0.000", "json"),
    ("*/*;q=0.1, application/x-ndjson", "stream"),
    ("APPLICATION/X-NDJSON", "stream"),
    ("application/x-ndjson; charset=utf-8", "stream"),
    ("application/json, text/event-stream", "json"),
    ("text/event-stream", "406"),
    ("text/event-stream;q=0", "json"),
    ("text/event-stream, application/x-ndjson;q=0", "406"),
    ("application/x-ndjson;q=abc", "stream"),  # a q that is no number: the type is still named
    (",,,;;;", "json"),
    ("\u00e9/\u00e8", "json"),
    ("application/json," * 63 + "application/x-ndjson", "stream"),  # the 64th media range is read
    ("application/json," * 64 + "application/x-ndjson", "json"),  # the 65th is not
    # an Accept of 100,000 ranges held the event loop (every request) for a tenth of a second, 8 MB for a second
    ("a/b;q=0.5," * 100_000 + "application/x-ndjson", "json"),
    ("x" * 60_000, "json"),
]


def test_odd_accept_headers_choose_as_the_docs_say_and_never_fail(svc: Running) -> None:
    for k, (accept, want) in enumerate(ACCEPTS):
        r = svc.decide(fresh_body(f"o{k}_", 1), headers={"accept": accept.encode("latin-1")})
        assert answer_kind(r) == want, (accept[:80], r.text[:200])
        if want == "406":
            assert "application/x-ndjson" in r.json()["error"]["message"]


@pytest.mark.parametrize("urgency", [-1, 101, 1.5, 1.0, "5", True, False, None, 2**53, 2**64, -(10**30), [], {}])
def test_every_odd_urgency_is_a_422_naming_the_entitys_urgency(shared_svc: Running, urgency: Any) -> None:
    for headers in (NDJSON, {}):
        r = shared_svc.decide(decide_body(bee("a"), bee("b", urgency=urgency)), headers=headers)
        assert r.status_code == 422 and r.headers["content-type"] == "application/json", r.text
        assert [p["path"] for p in r.json()["error"]["details"]] == ["entities[1].urgency"], r.text


async def _drop_after_first_line(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """Open a streamed request, read its first line, and leave."""
    async with (
        httpx.AsyncClient(base_url=url, timeout=60) as c,
        c.stream("POST", "/v1/decide", json=body, headers=NDJSON) as r,
    ):
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line:
                return dict(msgspec.json.decode(line))
    raise AssertionError("no line came")


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_fifty_clients_that_leave_after_the_first_line_free_their_slots_and_lose_nothing(
    start_service: Any, scripted: Any, protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_stream import provider_service

    svc = provider_service(start_service, scripted, protocol, monkeypatch, max_concurrent_calls=64)
    scripted.set(stream_tokens_per_s=20)  # each answer takes seconds: every client leaves while its call runs
    bodies = [fresh_body(f"c{k}_", 8, client_id=f"game-{k % 3}") for k in range(50)]

    async def all_of_them() -> list[dict[str, Any]]:
        return await asyncio.gather(*[_drop_after_first_line(svc.server.url, b) for b in bodies])

    with logged("npcmind") as said:
        first = asyncio.run(all_of_them())
        slots = svc.service.pipeline.local._slots
        until(lambda: slots._value == 64, "every provider slot freed")
    assert not [m for m in said if "bug" in m or "Traceback" in m], said
    for k in range(3):  # every decision line received is known to the store
        ids = [d["decision_id"] for b, d in zip(bodies, first, strict=True) if b["client_id"] == f"game-{k}"]
        assert len(ids) == len([b for b in bodies if b["client_id"] == f"game-{k}"])
        r = svc.http.post(
            "/v1/report",
            json={"client_id": f"game-{k}", "reports": [{"decision_id": i, "outcome": "done"} for i in ids]},
        )
        assert [x["status"] for x in r.json()["results"]] == ["accepted"] * len(ids), r.text
    scripted.set()
    again = svc.decide(fresh_body("after", 4), headers=NDJSON)
    assert answer_kind(again) == "stream" and b'"busy"' not in again.content and b'"unavailable"' not in again.content


def test_two_sessions_streaming_at_once_each_see_only_their_own_batch(hosted: Hosted, scripted: Any) -> None:
    scripted.set(stream_tokens_per_s=40)
    one, two = hosted.open("game-1"), hosted.open("game-2")
    bodies = {
        "game-1": fresh_body("a", 5, "game-1", epoch=3),
        "game-2": fresh_body("b", 3, "game-2", epoch=11),
    }
    auth = {"game-1": hosted.auth(one), "game-2": hosted.auth(two)}

    async def both() -> dict[str, httpx.Response]:
        async with httpx.AsyncClient(base_url=hosted.running.server.url, timeout=60) as c:
            rs = await asyncio.gather(
                *[c.post("/v1/decide", json=bodies[cid], headers={**NDJSON, **auth[cid]}) for cid in bodies]
            )
        return dict(zip(bodies, rs, strict=True))

    got = asyncio.run(both())
    for cid, r in got.items():
        *decided, end = [msgspec.json.decode(line) for line in r.content.splitlines()]
        assert end["epoch"] == bodies[cid]["epoch"]
        assert sorted(d["id"] for d in decided) == sorted(e["id"] for e in bodies[cid]["entities"])
        assert sorted(end["sent_ms"]) == sorted(e["id"] for e in bodies[cid]["entities"])
        seen = hosted.http.get("/v1/prompt", headers=auth[cid]).json()["entities"]
        assert {e["id"]: e["sent_ms"] for e in seen} == end["sent_ms"]  # its own batch, its own times


def test_the_same_request_streamed_twice_at_once_is_two_whole_answers(svc: Running, scripted: Any) -> None:
    scripted.set(stream_tokens_per_s=40)
    body = fresh_body("s", 5)

    async def twice() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=svc.server.url, timeout=60) as c:
            return list(await asyncio.gather(*[c.post("/v1/decide", json=body, headers=NDJSON) for _ in range(2)]))

    ids: list[str] = []
    for r in asyncio.run(twice()):
        assert answer_kind(r) == "stream"
        *decided, end = [msgspec.json.decode(line) for line in r.content.splitlines()]
        assert end["epoch"] == body["epoch"] and len(decided) == 5
        ids += [d["decision_id"] for d in decided if d["source"] == "AI"]
    assert len(ids) == len(set(ids)) == 10  # no decision id given twice
    reports = [{"decision_id": i, "outcome": "done"} for i in ids]
    r = svc.http.post("/v1/report", json={"client_id": "game-1", "reports": reports})
    assert [x["status"] for x in r.json()["results"]] == ["accepted"] * 10


def test_a_request_without_a_token_is_a_401_whatever_it_accepts(shared_hosted: Hosted) -> None:
    """Who is asking comes first: without a token, an Accept of text/event-stream was answered 406, and the Accept
    (however long) was read before any token was checked."""
    for accept in ("text/event-stream", NDJSON["accept"], "application/json"):
        r = shared_hosted.http.post("/v1/decide", json=decide_body(bee("a")), headers={"accept": accept})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", (accept, r.text)


def test_every_line_is_one_line_for_every_line_reader_the_docs_name(svc: Running) -> None:
    """An entity id may hold U+2028, U+2029 or U+0085, which JSON writes raw but Python's splitlines (and so httpx's
    iter_lines, which docs/streaming.md names) takes for line ends: the line of that entity and the last line came
    apart in two broken halves."""
    ids = ["a\u2028b", "c\u2029d", "e\u0085f", "plain"]
    body = decide_body(*[bee(i) for i in ids])
    with svc.http.stream("POST", "/v1/decide", json=body, headers=NDJSON) as r:
        lines = [msgspec.json.decode(line) for line in r.iter_lines() if line]
    *decided, end = lines
    assert sorted(d["id"] for d in decided) == sorted(ids) and sorted(end["sent_ms"]) == sorted(ids)
    assert "a\u2028b".encode() not in svc.decide(body, headers=NDJSON).content  # written as \u2028, still the id


def test_a_session_ended_mid_stream_gets_no_decision_after_its_end(hosted: Hosted, scripted: Any) -> None:
    """DELETE /v1/session while its answer streams: every entity whose part the model writes after the end
    falls back (issued to no one, kept nowhere), the stream still ends with its last line, and every decision it
    gave before is in the store. The attack found the rest of the AI lines still given to the ended session."""
    scripted.set(stream_hold_after=10)  # the answer stops after 10 tokens: two bees' parts at most
    session = hosted.open("game-1")
    auth = hosted.auth(session)
    body = fresh_body("x", 8)
    lines: list[dict[str, Any]] = []
    with hosted.http.stream("POST", "/v1/decide", json=body, headers={**NDJSON, **auth}) as r:
        assert r.status_code == 200
        reading = r.iter_lines()
        lines.append(msgspec.json.decode(next(line for line in reading if line)))  # under way: a bee decided
        assert hosted.http.delete("/v1/session", headers=auth).status_code == 200
        scripted.set()  # the model writes the rest of the answer, after the session's end
        lines += [msgspec.json.decode(line) for line in reading if line]
    *decided, end = lines
    assert end["epoch"] == body["epoch"] and sorted(end["sent_ms"]) == sorted(e["id"] for e in body["entities"])
    ended = [d for d in decided if d["source"] == "FALLBACK" and "session ended" in d["reason"]]
    ai = [d for d in decided if d["source"] == "AI"]
    assert len(decided) == 8 and len(ai) + len(ended) == 8
    assert 1 <= len(ai) <= 2 and len(ended) >= 6  # nothing the model wrote after the end was issued
    assert all(d["code"] == "unavailable" for d in ended)
    kept = asyncio.run(hosted.running.service.store.decisions.of_session(session["session_id"], 100))
    assert sorted(k.decision_id for k in kept) == sorted(d["decision_id"] for d in ai)  # given, kept; no more
