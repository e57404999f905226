"""Provider adapters: each protocol over real HTTP, the answer forms, and confidence from log-probabilities."""

from __future__ import annotations

import math
import time
from typing import Any

import httpx
import pytest

from conftest import FOREST, bee, decide_body
from npcmind.config import Settings
from npcmind.http.server import ServiceProcess
from npcmind.providers import answer
from npcmind.providers.anthropic import AnthropicProvider
from npcmind.providers.base import NoProvider
from npcmind.providers.openai import OpenAIProvider
from npcmind.providers.select import make_provider


def test_anthropic_round_trip(start_service: Any, scripted: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("GAME_CLAUDE_KEY", "sk-ant-test")
    svc = start_service(provider="anthropic", base_url=scripted.base_url, api_key_env="GAME_CLAUDE_KEY")
    scripted.set(choose={"b": "chase"}, decline=["c"], cached_tokens=900)
    r = svc.decide(decide_body(bee("a"), bee("b"), bee("c")))
    d = {x["id"]: x for x in r.json()["decisions"]}
    assert d["a"]["action"] == "idle" and d["b"]["action"] == "chase" and d["c"]["code"] == "refused"
    assert d["a"]["confidence"] is None  # Anthropic gives no log-probabilities
    sent = scripted.requests[-1]
    assert sent["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert sent["tool_choice"] == {"type": "tool", "name": "decide"}
    assert sent["tools"][0]["input_schema"] == answer.NUMBERED_SCHEMA
    assert "npcmind_cached_input_tokens_total 900.0" in svc.http.get("/metrics").text


def test_anthropic_refusal(start_service: Any, scripted: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    svc = start_service(provider="anthropic", base_url=scripted.base_url)
    scripted.set(refusal="no")
    r = svc.decide(decide_body(bee("a")))
    assert r.json()["decisions"][0]["code"] == "refused"


def test_auto_selection() -> None:
    s = Settings(manifest=str(FOREST))
    assert isinstance(make_provider(s, {"OPENAI_API_KEY": "k"}), OpenAIProvider)
    assert isinstance(make_provider(s, {"ANTHROPIC_API_KEY": "k"}), AnthropicProvider)
    assert isinstance(make_provider(s, {}), NoProvider)
    local = make_provider(Settings(manifest=str(FOREST), base_url="http://127.0.0.1:11434/v1"), {})
    assert isinstance(local, OpenAIProvider) and local.mode == "enum" and local.ready
    hosted = make_provider(s, {"OPENAI_API_KEY": "k"})
    assert hosted.mode == "numbered"


def test_confidence_is_the_probability_at_the_deciding_token() -> None:
    text = '{"decisions":[{"entity":1,"choice":3},{"entity":2,"choice":1}]}'
    toks = [
        ('{"decisions":[{"entity":1,"choice":', 0.0),
        ("3", -0.5),
        ('},{"entity":2,"choice":', 0.0),
        ("1", -2.0),
        ("}]}", 0.0),
    ]
    c = answer.confidences(text, toks, "numbered", [1, 2])
    assert c[1] == pytest.approx(math.exp(-0.5), abs=1e-4) and c[2] == pytest.approx(math.exp(-2.0), abs=1e-4)


def test_enum_parse_and_decline() -> None:
    got = answer.parse('{"E1":"flee","E2":"(decline)"}', "enum", [(1, ["idle", "flee"]), (2, ["idle"])])
    assert got[1].action == "flee" and got[2].refused


def test_numbered_out_of_range_is_kept_as_invalid() -> None:
    got = answer.parse(
        '{"decisions":[{"entity":1,"choice":9},{"entity":1,"choice":1}]}', "numbered", [(1, ["idle", "flee"])]
    )
    assert got[1].action == "#9"  # the first answer for an entity counts; the pipeline makes it invalid_choice


def test_serve_prints_one_ready_line_and_answers(tmp_path: Any) -> None:
    svc = ServiceProcess(["--manifest", str(FOREST), "--store", f"sqlite:///{tmp_path}/s.db"])
    try:
        assert svc.ready_line.startswith(f"npcmind 0.1.0 ready on {svc.url} ")
        assert "no provider configured" in svc.ready_line
        t0 = time.monotonic()
        r = httpx.post(f"{svc.url}/v1/decide", json=decide_body(bee("a")))
        assert r.status_code == 200 and r.json()["decisions"][0]["code"] == "unavailable"
        assert time.monotonic() - t0 < 5
        assert httpx.get(f"{svc.url}/openapi.json").json()["openapi"] == "3.1.0"
    finally:
        svc.stop()


def test_the_scripted_server_keeps_only_its_newest_requests(monkeypatch: Any) -> None:
    from npcmind.providers import scripted as scripted_module

    monkeypatch.setattr(scripted_module, "KEEP_REQUESTS", 3)
    with scripted_module.ScriptedServer() as server:
        ids = [
            httpx.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": [], "n": i}).json()["id"]
            for i in range(5)
        ]
        kept = httpx.get(f"{server.url}/_requests").json()
    assert [r["n"] for r in kept] == [2, 3, 4]  # a long bench or game session does not grow it without end
    assert len(set(ids)) == 5
