"""Provider adapters: each protocol over real HTTP, the answer forms, and confidence from log-probabilities."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import math
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import httpx
import pytest

from conftest import BEE_OBS, FOREST, bee, cli, decide_body, logged, until
from npcmind import answer
from npcmind.config import Settings, SettingsError
from npcmind.http.server import ServiceProcess, free_port
from npcmind.providers.anthropic import AnthropicProvider
from npcmind.providers.base import NoProvider, ProviderCall, ProviderError, usage_count
from npcmind.providers.http import JsonClient
from npcmind.providers.openai import OpenAIProvider
from npcmind.providers.select import make_provider
from npcmind.sdk import NpcMind, NpcStore, OpenAICortex, ProtocolError
from npcmind.testing.scripted import ScriptedServer


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
    reply = svc.http.get("/v1/prompt", params={"client_id": "game-1"}).json()["reply"]
    assert json.loads(reply["text"])["decisions"][1] == {"entity": 2, "choice": 3}  # the tool input, as JSON
    assert reply["cached_tokens"] == 900


def test_a_prefix_too_short_for_the_providers_cache_is_said_at_start(
    start_service: Any, scripted: Any, monkeypatch: Any, tmp_path: Any
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with logged("npcmind") as said:
        start_service(provider="anthropic", base_url=scripted.base_url, model="claude-haiku-4-5-20251001")
    assert any("static prompt prefix is" in m and "from 4096 tokens" in m for m in said), said
    with logged("npcmind") as said:  # a self-hosted server reuses any prefix: nothing to say
        start_service(
            provider="openai", base_url=scripted.base_url, model="scripted", store=f"sqlite:///{tmp_path}/2.db"
        )
    assert not any("static prompt prefix" in m for m in said), said


@pytest.mark.fast
def test_cache_minimums() -> None:
    assert AnthropicProvider("k", model="claude-sonnet-4-5").cache_minimum == 1024
    assert AnthropicProvider("k", model="claude-3-5-haiku-latest").cache_minimum == 2048
    assert AnthropicProvider("k").cache_minimum == 4096  # the default, claude-haiku-4-5
    assert OpenAIProvider("k").cache_minimum == 1024
    assert OpenAIProvider(None, base_url="http://127.0.0.1:11434/v1").cache_minimum is None
    assert NoProvider().cache_minimum is None


@pytest.mark.fast
def test_anthropic_refusal(start_service: Any, scripted: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    svc = start_service(provider="anthropic", base_url=scripted.base_url)
    scripted.set(refusal="no")
    r = svc.decide(decide_body(bee("a")))
    assert r.json()["decisions"][0]["code"] == "refused"
    scripted.set(body={"content": [{"type": "text", "text": "I can't help with that."}], "stop_reason": "refusal"})
    d = svc.decide(decide_body(bee("a", observation={**BEE_OBS, "hp_fraction": 0.11}))).json()["decisions"][0]
    assert d["code"] == "refused" and d["reason"] == "the model refused: I can't help with that."  # its words, once


@pytest.mark.fast
def test_auto_selection() -> None:
    s = Settings(manifest=str(FOREST))
    assert isinstance(make_provider(s, {"OPENAI_API_KEY": "k"}), OpenAIProvider)
    assert isinstance(make_provider(s, {"ANTHROPIC_API_KEY": "k"}), AnthropicProvider)
    assert isinstance(make_provider(s, {}), NoProvider)
    local = make_provider(Settings(manifest=str(FOREST), base_url="http://127.0.0.1:11434/v1"), {})
    assert isinstance(local, OpenAIProvider) and local.mode == "enum" and local.ready
    hosted = make_provider(s, {"OPENAI_API_KEY": "k"})
    assert hosted.mode == "numbered"


@pytest.mark.fast
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


@pytest.mark.fast
def test_a_reasoning_models_thinking_before_the_answer_is_skipped() -> None:
    text = '<think>\nThe bee is hurt. {"E1": "chase"} would be brave, but {no}.\n</think>\n\n{"E1": "flee"}'
    assert answer.parse(text, "enum", [(1, ["idle", "chase", "flee"])])[1].action == "flee"
    fenced = '<think>numbers: {1} or {2}</think>```json\n{"decisions": [{"entity": 1, "choice": 2}]}\n```'
    assert answer.parse(fenced, "numbered", [(1, ["idle", "chase", "flee"])])[1].action == "chase"
    no_opening = 'It is hurt, so {"E1": "chase"} is out.</think>\n{"E1": "flee"}'  # a template ate <think>
    assert answer.parse(no_opening, "enum", [(1, ["idle", "chase", "flee"])])[1].action == "flee"
    unclosed = '<think>It is hurt, so {"E1": "chase"} perhaps'  # never answered
    assert answer.parse(unclosed, "enum", [(1, ["idle", "chase", "flee"])]) == {}


@pytest.mark.fast
def test_an_anthropic_usage_block_is_read_as_far_as_it_makes_sense() -> None:
    provider = AnthropicProvider(api_key="k", model="m")
    call = type("Call", (), {"mode": "enum", "entities": [(1, ["idle", "flee"])]})()
    usage = {
        "input_tokens": 10,
        "cache_read_input_tokens": -3,
        "cache_creation_input_tokens": "x",
        "output_tokens": 2.0,
    }
    data = {"content": [{"type": "text", "text": '{"E1": "flee"}'}], "usage": usage}
    out = provider.read_answer(data, call)  # type: ignore[arg-type]
    assert (out.input_tokens, out.cached_tokens, out.output_tokens) == (10, 0, 2)
    assert out.choices[1].action == "flee"
    assert [usage_count(v, "n") for v in ({"n": True}, {"n": 10**12}, {"n": 7}, None, [1])] == [0, 0, 7, 0, 0]


def test_the_options_a_question_shows_are_the_choices_an_answer_names() -> None:
    options = ["idle", "chase", "flee"]
    assert answer.offered("numbered", options) == "1 idle, 2 chase, 3 flee"
    assert answer.offered("enum", options) == "idle, chase, flee"
    for k, name in enumerate(options, 1):  # choice k of a numbered answer is the k-th option shown
        got = answer.parse(f'{{"decisions":[{{"entity":1,"choice":{k}}}]}}', "numbered", [(1, options)])
        assert got[1].action == name


@pytest.mark.fast
def test_enum_parse_and_decline() -> None:
    got = answer.parse('{"E1":"flee","E2":"(decline)"}', "enum", [(1, ["idle", "flee"]), (2, ["idle"])])
    assert got[1].action == "flee" and got[2].refused


@pytest.mark.fast
def test_numbered_out_of_range_is_kept_as_invalid() -> None:
    got = answer.parse(
        '{"decisions":[{"entity":1,"choice":9},{"entity":1,"choice":1}]}', "numbered", [(1, ["idle", "flee"])]
    )
    assert got[1].action == "#9"  # the first answer for an entity counts; the pipeline makes it invalid_choice


def test_the_scripted_server_refuses_a_script_it_could_not_play(scripted: Any) -> None:
    """status 99 was taken, then every call answered a 500 of the test tool's own."""
    root = scripted.base_url.removesuffix("/v1")
    for script, where in [
        ({"status": 99}, "status"),
        ({"delay_ms": -5}, "delay_ms"),
        ({"logprob": 0.5}, "logprob"),
    ]:
        r = httpx.put(root + "/_script", json=script)
        assert r.status_code == 422 and [d["path"] for d in r.json()["error"]["details"]] == [where], r.text
    # every mistake at once, by path, in the service's own error form; a mistyped name gets its likely fix
    r = httpx.put(root + "/_script", json={"chose": {"a": "flee"}, "default": "middle", "delay_ms": "1s"})
    said = {d["path"]: d["message"] for d in r.json()["error"]["details"]}
    assert r.status_code == 422 and set(said) == {"chose", "default", "delay_ms"}, r.text
    assert "did you mean 'choose'?" in said["chose"] and "'first'" in said["default"], said
    assert httpx.get(root + "/_script").json()["choose"] == {}  # a refused script changes nothing
    httpx.put(root + "/_script", json={"choose": {"a": "flee"}, "delay_ms": 5})
    got = httpx.get(root + "/_script").json()  # what it plays now, defaults included
    assert got["choose"] == {"a": "flee"} and got["delay_ms"] == 5 and got["default"] == "first", got
    scripted.set(status=503)
    r = httpx.post(scripted.base_url + "/chat/completions", json={"model": "m", "messages": []})
    assert r.status_code == 503


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.fast)], ids=["ctrl-c", "sigterm"]
)
def test_serve_stops_on_a_signal_with_one_line_and_no_traceback(sig: signal.Signals, tmp_path: Any) -> None:
    """Ctrl-C ended `npcmind serve` with a KeyboardInterrupt traceback after its clean stop: it looked like a crash.
    After SIGTERM, the stop line was sometimes lost: the process died by the signal before the log queue wrote it."""
    port = free_port()
    args = ["serve", "--manifest", str(FOREST), "--port", str(port), "--store", f"sqlite:///{tmp_path}/s.db"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "npcmind.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and "ready on" in proc.stdout.readline()
    r = httpx.post(f"http://127.0.0.1:{port}/v1/decide", json=decide_body(bee("a")), timeout=60)
    assert r.status_code == 200
    proc.send_signal(sig)
    err = proc.communicate(timeout=120)[1]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "stopped (this run of" in err and "1 fallback (unavailable 1)" in err, err
    assert proc.returncode == 128 + sig, proc.returncode  # as a shell reports a command ended by the signal


def test_serve_prints_one_ready_line_and_answers(tmp_path: Any) -> None:
    svc = ServiceProcess(["--manifest", str(FOREST), "--store", f"sqlite:///{tmp_path}/s.db"])
    try:
        assert svc.ready_line.startswith(f"npcmind 0.1.0 ready on {svc.url} ")
        assert "no provider configured" in svc.ready_line
        r = httpx.post(f"{svc.url}/v1/decide", json=decide_body(bee("a")), timeout=60)
        assert r.status_code == 200 and r.json()["decisions"][0]["code"] == "unavailable"
        assert httpx.get(f"{svc.url}/openapi.json", timeout=60).json()["openapi"] == "3.1.0"
    finally:
        svc.stop()


def test_the_scripted_server_keeps_only_its_newest_requests(monkeypatch: Any) -> None:
    from npcmind.testing import scripted as scripted_module

    monkeypatch.setattr(scripted_module, "KEEP_REQUESTS", 3)
    with scripted_module.ScriptedServer() as server:
        ids = [
            httpx.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": [], "n": i}).json()["id"]
            for i in range(5)
        ]
        kept = httpx.get(f"{server.url}/_requests").json()
    assert [r["n"] for r in kept] == [2, 3, 4]  # a long bench or game session does not grow it without end
    assert len(set(ids)) == 5


def test_as_many_provider_calls_are_in_flight_as_npcmind_max_concurrent_calls(
    start_service: Any, scripted: Any
) -> None:
    """The HTTP client's own pool held 64 connections, so calls past 64 waited for one unseen, against their
    deadline, whatever NPCMIND_MAX_CONCURRENT_CALLS said. The scripted provider holds every call until told, and
    counts them: all the slots set are in flight at once."""
    n = 100
    svc = start_service(
        provider="openai", base_url=scripted.base_url, model="scripted", max_concurrent_calls=n, deadline_ms=600_000
    )
    scripted.set(hold=True)
    answers: list[httpx.Response] = []

    def one(i: int) -> None:
        with httpx.Client(base_url=svc.server.url, timeout=600) as client:
            answers.append(client.post("/v1/decide", json=decide_body(bee(f"b{i}"))))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60  # only bounds a hang: the count stops at the pool's size if it is smaller
    while scripted.model.in_flight < n and time.monotonic() < deadline:
        time.sleep(0.05)
    held = httpx.get(f"{scripted.url}/_calls").json()
    scripted.set()  # lets them all go
    for t in threads:
        t.join(60)
    assert held["in_flight"] == n, f"{held['in_flight']} of {n} calls reached the provider at once"
    assert len(answers) == n and all(r.status_code == 200 for r in answers)
    assert {d["source"] for r in answers for d in r.json()["decisions"]} == {"AI"}


@pytest.mark.fast
def test_serve_lifts_its_open_files_limit_for_the_calls_it_may_make() -> None:
    """1,024 calls in flight hold 2,048 sockets; a program started with the common soft limit of 1,024 open files
    lifts it as far as the hard limit allows (a subprocess: the test's own limit stays as it is)."""
    code = (
        "import resource; from npcmind.cli import more_open_files; R = resource.RLIMIT_NOFILE; "
        "hard = resource.getrlimit(R)[1]; resource.setrlimit(R, (256, hard)); "
        "print(more_open_files(2304), resource.getrlimit(R)[0], hard)"
    )
    got, soft, hard = map(
        int, subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.split()
    )
    want = 2304 if hard == -1 else min(2304, hard)  # -1: unlimited
    assert (got, soft) == (want, want)
    assert Settings().max_concurrent_calls == 1024  # the default: hundreds of calls, as hosted providers take


def test_a_parameter_the_model_refuses_is_dropped_and_the_batch_still_decided(
    start_service: Any, scripted: Any
) -> None:
    # OpenAI's reasoning models answer 400 to logprobs and to temperature 0: a first request must not fall back
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted")
    scripted.set(reject_params=["logprobs", "temperature"], choose={"a": "flee"})
    with logged("npcmind.providers") as warned:
        r = svc.decide(decide_body(bee("a"), bee("b")))
    d = {x["id"]: x for x in r.json()["decisions"]}
    assert d["a"]["source"] == "AI" and d["a"]["action"] == "flee" and d["a"]["confidence"] is None
    assert d["b"]["source"] == "AI"
    sent = scripted.requests
    assert len(sent) == 3  # refused with logprobs, refused with temperature, then answered
    assert "logprobs" in sent[0] and "temperature" in sent[1] and "logprobs" not in sent[1]
    assert not {"logprobs", "top_logprobs", "temperature"} & set(sent[2])
    assert any("'logprobs'" in w and "confidence is null" in w for w in warned), warned
    assert any("'temperature'" in w for w in warned), warned
    # remembered: the next batch is one call, and health says what is not sent
    svc.decide(decide_body(bee("a", observation={**bee("a")["observation"], "hp_fraction": 0.1})))
    assert len(scripted.requests) == 4
    note = svc.http.get("/v1/health").json()["note"]
    assert "not sent because the model refused them: logprobs, temperature, top_logprobs" in note


def test_a_server_without_structured_output_is_asked_for_plain_json_then_for_no_format(
    start_service: Any, scripted: Any
) -> None:
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted")
    scripted.set(reject_params=["response_format"], choose={"a": "flee"})
    with logged("npcmind.providers") as warned:
        d = svc.decide(decide_body(bee("a"))).json()["decisions"][0]
    assert d["source"] == "AI" and d["action"] == "flee"  # the prompt says how to answer; legality is checked here
    first, second, third, fourth = scripted.requests
    assert first["response_format"]["type"] == "json_schema"
    schema = first["response_format"]["json_schema"]["schema"]
    assert second["response_format"] == {"type": "json_object", "schema": schema}
    assert third["response_format"] == {"type": "json_object"}
    assert "response_format" not in fourth
    assert len(warned) == 3 and "illegal choice gives invalid_choice" in warned[1]
    note = svc.http.get("/v1/health").json()["note"]  # every form refused: health says how answers are asked for
    assert "(sent as the prompt alone: the server took no response_format), ready" in note, note
    scripted.set(reject_params=["response_format"], choose={"a": "dance"})  # what a server without a grammar allows
    d = svc.decide(decide_body(bee("a", observation={**bee("a")["observation"], "hp_fraction": 0.1}))).json()
    assert d["decisions"][0]["code"] == "invalid_choice" and len(scripted.requests) == 5


def test_llama_cpp_pythons_server_gets_the_schema_in_its_own_form(start_service: Any, scripted: Any) -> None:
    # llama-cpp-python's server takes only "text" and "json_object" (with a "schema", which it enforces as
    # a grammar) and answers json_schema with a 500 carrying a validation error, not a 400
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted")
    scripted.set(response_formats=["text", "json_object"], choose={"a": "flee"})
    with logged("npcmind.providers") as warned:
        ds = svc.decide(decide_body(bee("a"), bee("b"))).json()["decisions"]
    assert [d["source"] for d in ds] == ["AI", "AI"] and ds[0]["action"] == "flee"
    first, second = scripted.requests
    assert first["response_format"]["type"] == "json_schema"
    schema = first["response_format"]["json_schema"]["schema"]
    assert second["response_format"] == {"type": "json_object", "schema": schema}  # still held to the legal actions
    assert schema["properties"]["E1"]["enum"][:4] == ["idle", "wander", "chase", "flee"]
    assert len(warned) == 1 and "json_object with a schema" in warned[0], warned
    svc.decide(decide_body(bee("a", observation={**bee("a")["observation"], "hp_fraction": 0.1})))
    assert len(scripted.requests) == 3 and scripted.requests[2]["response_format"]["type"] == "json_object"
    note = svc.http.get("/v1/health").json()["note"]
    assert "answer format enum (sent as json_object with a schema), ready" in note, note


@pytest.mark.fast
def test_a_refused_parameter_npcmind_cannot_do_without_is_unavailable(start_service: Any, scripted: Any) -> None:
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted")
    scripted.set(reject_params=["messages"])
    d = svc.decide(decide_body(bee("a"))).json()["decisions"][0]
    assert d["code"] == "unavailable" and "'messages' is not supported" in d["reason"]
    assert len(scripted.requests) == 1


@pytest.mark.fast
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"error": {"message": "Unsupported parameter: 'logprobs'", "param": "logprobs"}}, "logprobs"),
        ({"error": {"message": "x", "param": "messages"}}, None),  # named, but not optional
        ({"error": {"message": "This model does not support the 'top_logprobs' parameter."}}, "top_logprobs"),
        ({"message": "Unrecognized request argument supplied: max_tokens"}, "max_tokens"),  # a proxy's form
        (  # vLLM's validation error names the field in a list
            {"object": "error", "message": "[{'type': 'extra_forbidden', 'loc': ('body', 'prompt_cache_key')}]"},
            "prompt_cache_key",
        ),
        ({"error": {"message": "context length exceeded: max_tokens too large for 8192"}}, None),  # not a refusal
        ({"error": {"message": "temperature is not supported"}}, None),  # not sent: nothing to drop
    ],
)
def test_which_refused_parameter_an_error_names(body: dict[str, Any], expected: str | None) -> None:
    from npcmind.providers.openai import OPTIONAL
    from npcmind_client.params import refused_parameter

    sent = {"model", "messages", "response_format", "logprobs", "top_logprobs", "max_tokens", "prompt_cache_key"}
    assert refused_parameter(400, body, sent, OPTIONAL) == expected
    assert refused_parameter(422, body, sent, OPTIONAL) == expected
    assert refused_parameter(500, body, sent, OPTIONAL) is None  # a server's own failure, not a refusal


@pytest.mark.fast
def test_a_validation_error_answered_as_a_500_names_the_refused_parameter() -> None:
    from npcmind.providers.openai import OPTIONAL
    from npcmind.testing.scripted import _validation_error
    from npcmind_client.params import refused_parameter

    sent = {"model", "messages", "response_format", "logprobs", "max_tokens"}
    body = _validation_error(("body", "response_format", "type"), "json_schema", ["text", "json_object"])
    assert refused_parameter(500, body, sent, OPTIONAL) == "response_format"  # named first, though json_schema follows
    crash = {"error": {"message": "llama_decode returned -1 while sampling max_tokens", "param": None}}
    assert refused_parameter(500, crash, sent, OPTIONAL) is None


def test_a_refused_token_limit_is_sent_under_its_other_name(start_service: Any, scripted: Any) -> None:
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted")
    scripted.set(reject_params=["max_tokens"])
    assert svc.decide(decide_body(bee("a"))).json()["decisions"][0]["source"] == "AI"
    first, second = scripted.requests
    assert first["max_tokens"] == 48 and "max_completion_tokens" not in first
    assert second["max_completion_tokens"] == 48 and "max_tokens" not in second


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_answer_cut_at_the_output_limit_says_so_and_the_limit_can_be_raised(
    start_service: Any, scripted: Any, monkeypatch: Any, provider: str, tmp_path: Any
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    limit_name = "max_tokens"  # Anthropic's name, and the self-hosted OpenAI form's
    svc = start_service(provider=provider, base_url=scripted.base_url, model="scripted")
    scripted.set(truncated=True)  # a reasoning model that spent the whole limit thinking
    ds = svc.decide(decide_body(bee("a"), bee("b"))).json()["decisions"]
    assert scripted.requests[-1][limit_name] == 64  # 32 + 16 an entity
    for d in ds:
        assert d["code"] == "invalid_choice"
        assert "output limit of 64 tokens" in d["reason"] and "NPCMIND_MAX_OUTPUT_TOKENS" in d["reason"]
    raised = start_service(
        provider=provider,
        base_url=scripted.base_url,
        model="scripted",
        store=f"sqlite:///{tmp_path}/raised.db",
        max_output_tokens=2000,
    )
    scripted.set()
    assert raised.decide(decide_body(bee("a"))).json()["decisions"][0]["source"] == "AI"
    assert scripted.requests[-1][limit_name] == 2000


# SmolLM2-135M under llama-server's grammar: pretty-printed, and going on past the batch's entities
PRETTY_CUT = '{\n  "decisions":[\n    {\n      "entity":1,\n      "choice":4\n    },\n    {\n  "entity":2,'


@pytest.mark.parametrize(
    ("provider", "answer_format", "cut"),
    [
        ("openai", "enum", '{"E1":"flee","E2":"wan'),
        ("openai", "numbered", PRETTY_CUT),
        ("anthropic", "numbered", PRETTY_CUT),  # written as text instead of the tool call, then cut
    ],
)
def test_the_entities_an_answer_finished_before_the_output_limit_are_decided(
    start_service: Any, scripted: Any, monkeypatch: Any, provider: str, answer_format: str, cut: str
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    svc = start_service(provider=provider, base_url=scripted.base_url, model="scripted", answer_format=answer_format)
    scripted.set(truncated=True, text=cut)  # the answer as the limit cut it, mid-way through the second entity
    a, b = svc.decide(decide_body(bee("a"), bee("b"))).json()["decisions"]
    assert a["source"] == "AI" and a["action"] == "flee", a  # complete before the cut: one entity's failure
    assert b["code"] == "invalid_choice" and "output limit of 64 tokens" in b["reason"]  # touches no other


@pytest.mark.fast
def test_a_cut_answer_still_thinking_decides_nothing(start_service: Any, scripted: Any) -> None:
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted")
    scripted.set(truncated=True, text='<think>Maybe {"E1":"chase","E2":"flee"} would do, but')  # never answered
    ds = svc.decide(decide_body(bee("a"), bee("b"))).json()["decisions"]
    assert [d["code"] for d in ds] == ["invalid_choice", "invalid_choice"], ds


def _checked(svc: Any, timeout: float = 120) -> str:
    """/v1/health's note once the start-up check is done (it runs in the background)."""
    until(lambda: svc.service.provider_checked, "the start-up check did not finish", timeout)
    return str(svc.http.get("/v1/health").json()["note"])


@pytest.mark.fast
def test_the_start_up_check_says_when_the_base_url_lacks_its_v1(start_service: Any, scripted: Any) -> None:
    svc = start_service(provider="openai", base_url=scripted.url, model="scripted")  # http://host:port, no /v1
    note = _checked(svc)
    assert f"until the service is started with --base-url {scripted.url}/v1" in note, note
    d = svc.decide(decide_body(bee("a"))).json()["decisions"][0]
    assert d["code"] == "unavailable" and "404" in d["reason"]  # what the check warned of


@pytest.mark.fast
def test_the_start_up_check_says_anthropic_refused_the_key(start_service: Any, scripted: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-wrong")
    scripted.set(status=401)
    svc = start_service(provider="anthropic", base_url=scripted.base_url)
    assert f"at start: {scripted.base_url} refused the API key (HTTP 401)" in _checked(svc)
    assert scripted.model.models_asked == 1


def test_the_start_up_check_says_a_provider_is_not_running(start_service: Any) -> None:
    with logged("npcmind") as said:
        svc = start_service(provider="openai", base_url="http://127.0.0.1:9/v1")  # nothing listens on port 9
        note = _checked(svc)
    assert "at start: cannot reach provider" in note and "127.0.0.1:9" in note
    assert 'every decision will fall back with "unavailable" until it answers' in note
    assert any(s.startswith("provider check at start: cannot reach provider") for s in said), said


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ({"status": 401}, "refused the API key (HTTP 401)"),
        (
            {"models": ["llama3.1:8b", "qwen3:4b"]},
            "does not list the model 'scripted' (it lists llama3.1:8b, qwen3:4b)",
        ),
        ({"models": ["qwen3:4b", "scripted"]}, None),  # listed: nothing to say
        ({"models": ["qwen3:4b", "scripted:latest"]}, None),  # Ollama: a bare name is its :latest
        ({"models": ["/models/qwen3-4b.gguf"]}, None),  # llama.cpp lists its one model and answers any name
        ({"status": 404}, None),  # no model list on this server: the first call will tell
    ],
)
def test_the_start_up_check_reads_the_model_list(
    start_service: Any, scripted: Any, script: dict[str, Any], expected: str | None
) -> None:
    scripted.set(**script)
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted")
    note = _checked(svc)
    assert scripted.model.models_asked == 1
    if expected is None:
        assert "at start" not in note, note
    else:
        assert f"at start: {scripted.base_url} {expected}" in note, note


@pytest.mark.fast
def test_retention_setting() -> None:
    assert Settings().retention_h == 24.0 and Settings.from_env({}).retention_h == 24.0
    assert Settings.from_env({"NPCMIND_RETENTION_H": " 0.5 "}).retention_h == 0.5


@pytest.mark.fast
@pytest.mark.parametrize(
    ("value", "on"), [("", True), ("1", True), ("true", True), ("0", False), ("false", False), ("off", False)]
)
def test_logprobs_setting(value: str, on: bool) -> None:
    assert Settings.from_env({"NPCMIND_LOGPROBS": value}).logprobs is on


@pytest.mark.fast
@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("NPCMIND_LOGPROBS", "nope", "NPCMIND_LOGPROBS must be 1 or 0 (true/false, yes/no, on/off), not 'nope'"),
        ("NPCMIND_ANSWER_FORMAT", "json", "NPCMIND_ANSWER_FORMAT must be auto, numbered or enum, not 'json'"),
        ("NPCMIND_RETENTION_H", "1d", "NPCMIND_RETENTION_H must be a number, not '1d'"),
        ("NPCMIND_RETENTION_H", "-1", "NPCMIND_RETENTION_H must be a finite number of at least 0, not -1"),
        ("NPCMIND_RETENTION_H", "nan", "NPCMIND_RETENTION_H must be a finite number of at least 0, not nan"),
    ],
)
def test_a_setting_that_is_none_of_its_values_stops_the_start(name: str, value: str, says: str) -> None:
    """`NPCMIND_ANSWER_FORMAT=json` used to mean auto, and `NPCMIND_LOGPROBS=false` meant on."""
    with pytest.raises(SettingsError) as e:
        Settings.from_env({name: value})
    assert str(e.value) == says


def test_a_base_url_without_its_scheme_stops_serve(tmp_path: Any) -> None:
    r = cli(
        "serve", "--manifest", str(FOREST), "--base-url", "localhost:11434/v1", "--store", f"sqlite:///{tmp_path}/s.db"
    )
    assert r.returncode == 2, r.stderr
    assert "--base-url must start with http:// or https://, as in http://127.0.0.1:11434/v1" in r.stderr


HUGE = 9 * 1024 * 1024  # past what the service reads of an answer (providers/http.py: MAX_ANSWER_BYTES, 8 MiB)


class _Pages(http.server.BaseHTTPRequestHandler):
    """A web server that is not an API: an HTML 404 page (or, on /json and /text, other error bodies; under
    /ok, the same page with a 200; under /deep, a 200 of JSON nested 100,000 deep). Under /huge a 200 of 9 MiB
    that says its length, under /unsized one that does not (read to the close), under /sse 9 MiB of server-sent
    events, and /huge404 a 404 of 9 MiB."""

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))  # unread, it resets the connection
        if self.path.startswith(("/huge", "/unsized", "/sse")):
            self._huge()
            return
        page = b"<!DOCTYPE HTML>\n<html>\n  <body><h1>Not Found</h1></body>\n</html>\n"
        if self.path == "/json":
            page = b'{"error": {"message": "The model `gpt-9` does not exist", "type": "invalid_request_error"}}'
        elif self.path == "/text":
            page = b"upstream\n   connect error\n"
        elif self.path.startswith("/deep"):
            page = b"[" * 100_000 + b"]" * 100_000
        self.send_response(200 if self.path.startswith(("/ok", "/deep")) else 404)
        self.send_header("content-length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def _huge(self) -> None:
        event = b"data: " + b'{"choices":[{"delta":{"content":"  "}}]}' + b"\n\n"
        body = event * (HUGE // len(event) + 1) if self.path.startswith("/sse") else b" " * HUGE
        self.send_response(404 if self.path.startswith("/huge404") else 200)
        self.send_header("content-type", "text/event-stream" if self.path.startswith("/sse") else "application/json")
        if self.path.startswith("/huge"):
            self.send_header("content-length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the service stopped reading: the point
            self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def web_site() -> Any:
    """The base URL of a plain web server on a free local port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.fast
def test_an_html_error_page_is_named_as_such_not_pasted(web_site: str) -> None:
    """A base URL that points at a web server, not the API: the reason says so in one line."""

    async def reasons() -> list[str]:
        client, out = JsonClient(), []
        for path in ("/chat/completions", "/json", "/text"):
            with pytest.raises(ProviderError) as e:
                await client.post(web_site + path, {"model": "m"}, {})
            out.append(str(e.value))
        await client.close()
        return out

    html, api, text = asyncio.run(reasons())
    assert html == (
        "provider answered HTTP 404: an HTML page, not an API's answer: the base URL is likely not the API's "
        "(it usually ends in /v1)"
    )
    assert api == "provider answered HTTP 404: The model `gpt-9` does not exist"
    assert text == "provider answered HTTP 404: upstream connect error"


@pytest.mark.fast
def test_an_answer_past_eight_mib_is_not_read_further_and_says_so(web_site: str) -> None:
    """A provider gone wrong (or a shadow model's) must not fill the service's memory: an answer past 8 MiB,
    whether it says its length, does not, or streams, is a ProviderError naming the bound; an error answer
    that long is read only as far as is needed to say what it was."""
    from npcmind.providers.http import MAX_ANSWER_BYTES

    async def reasons() -> list[str]:
        client, out = JsonClient(), []
        for path in ("/huge/chat/completions", "/unsized/chat/completions", "/huge404/chat/completions"):
            with pytest.raises(ProviderError) as e:
                await client.post(web_site + path, {"model": "m"}, {})
            out.append(str(e.value))
        with pytest.raises(ProviderError) as e:
            async with client.stream(web_site + "/sse/chat/completions", {"model": "m"}, {}) as streamed:
                assert streamed.whole is None
                async for _ in streamed.reads():
                    pass
        out.append(str(e.value))
        await client.close()
        return out

    sized, unsized, error, stream = asyncio.run(reasons())
    assert MAX_ANSWER_BYTES < HUGE
    assert sized == unsized == "the provider's answer passed 8,388,608 bytes: not read further"
    assert error.startswith("provider answered HTTP 404"), error
    assert stream == "the provider's stream passed 8,388,608 bytes: not read further"


@pytest.mark.fast
def test_an_answer_with_a_long_run_of_spaces_is_read_in_one_pass() -> None:
    """A regular expression that stripped a code fence rescanned a run of spaces from each of its spaces: 40 KB
    held the event loop 2.8 s, and these 4 MB would hold it for hours (the suite's timeout would end this test)."""
    entities = [(1, ["idle", "flee"]), (2, ["idle", "chase"])]
    for gap in (" ", "\n", "\t "):
        text = '{"E1": "flee",' + gap * 2_000_000 + '"E2": "chase"}'
        got = answer.parse(text, "enum", entities)
        assert (got[1].action, got[2].action) == ("flee", "chase"), gap
        fenced = answer.parse("```json" + gap * 2_000_000 + text + gap * 2_000_000 + "```", "enum", entities)
        assert (fenced[1].action, fenced[2].action) == ("flee", "chase"), gap
    cut = answer.parse('{"E1": "flee",' + " " * 2_000_000, "enum", entities, cut=True)  # salvaged, one pass
    assert cut[1].action == "flee" and 2 not in cut


def test_a_200_that_is_a_page_or_json_nested_too_deep_is_one_clear_reason(web_site: str, tmp_path: Any) -> None:
    """Valid JSON nested 100,000 deep raised RecursionError: a traceback in the service's log, and one
    escaping the SDK's cortex into the game's dialogue code."""
    from npcmind.protocol.npc import PromptConstraints
    from npcmind.sdk.cortex import CortexError

    async def reasons() -> list[str]:
        client, out = JsonClient(), []
        for path in ("/ok/chat/completions", "/deep/chat/completions"):
            with pytest.raises(ProviderError) as e:
                await client.post(web_site + path, {"model": "m"}, {})
            out.append(str(e.value))
        await client.close()
        return out

    page, deep = asyncio.run(reasons())
    assert page == "provider answered with a body that is an HTML page: the base URL is likely not the API's"
    assert deep == "provider answered with JSON nested too deep to be an answer"
    cortex = OpenAICortex(web_site + "/deep", model="m")
    with pytest.raises(CortexError, match="without choices"):
        cortex.complete("Say hello.", PromptConstraints(maxTokens=5))
    cortex.close()
    store = NpcStore(tmp_path / "npcs.db", embedder=object())  # type: ignore[arg-type]  # never asked to embed
    store.register("mara", "An innkeeper.")
    with pytest.raises(ProtocolError, match="without an instruction and tape"):
        NpcMind(web_site + "/deep", cortex=cortex, memory=store).process("mara", "Hello?")


def test_the_start_up_check_says_when_the_base_url_is_a_web_page(start_service: Any, web_site: str) -> None:
    svc = start_service(provider="openai", base_url=web_site + "/v1")
    note = _checked(svc)
    assert f"{web_site}/v1/models answered HTTP 404 with an HTML page, not an API's answer" in note, note
    d = svc.decide(decide_body(bee("a"))).json()["decisions"][0]
    assert d["code"] == "unavailable" and "an HTML page, not an API's answer" in d["reason"], d


def test_what_the_start_up_check_found_is_dropped_once_the_provider_answers(start_service: Any) -> None:
    """A model server started after the service (the usual order on a developer's machine): /v1/health must
    not go on saying it cannot be reached once decisions come from it."""
    port = free_port()
    svc = start_service(provider="openai", base_url=f"http://127.0.0.1:{port}/v1", model="scripted")
    assert "at start: cannot reach provider" in _checked(svc)
    with ScriptedServer(port=port):
        assert svc.decide(decide_body(bee("a"))).json()["decisions"][0]["source"] == "AI"
        note = svc.http.get("/v1/health").json()["note"]
    assert "at start" not in note and "ready" in note, note


def _outcome(out: Any) -> tuple[Any, ...]:
    return (
        out.input_tokens, out.cached_tokens, out.output_tokens, out.truncated, out.refusal, out.raw,
        {n: (c.action, c.refused, c.confidence) for n, c in out.choices.items()},
    )  # fmt: skip


@pytest.mark.fast
def test_a_chat_completion_decoded_into_structs_reads_as_the_tolerant_reading_does() -> None:
    """issue 43: an unstreamed answer of the usual shape is decoded straight into structs that skip each token's
    bytes and top alternatives; every answer, usual or not, must come out as the field-by-field reading says."""
    from npcmind.providers.openai import _ANSWER, _Answer

    provider = OpenAIProvider(api_key="k", model="m")
    call = type("Call", (), {"mode": "enum", "entities": [(1, ["idle", "flee"]), (2, ["idle", "chase"])]})()
    text = '{"E1": "flee", "E2": "chase"}'
    toks = [{"token": '{"E1": "', "logprob": 0.0, "bytes": [1, 2], "top_logprobs": [{"token": "x", "logprob": -1}]},
            {"token": 'flee", "E2": "', "logprob": -0.5}, {"token": 'chase"}', "logprob": -1}]  # fmt: skip
    usage = {"prompt_tokens": 90, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 64}}

    def answer_of(**choice: Any) -> dict[str, Any]:
        base = {"message": {"content": text, "role": "assistant"}, "finish_reason": "stop",
                "logprobs": {"content": toks}}  # fmt: skip
        return {"id": "x", "choices": [{**base, **choice}], "usage": usage}

    answers = [
        answer_of(),
        answer_of(finish_reason="length"),
        answer_of(finish_reason="content_filter"),
        answer_of(message={"content": None, "refusal": "no"}),
        answer_of(message={"content": text, "refusal": ""}),
        answer_of(message={"content": ""}),
        answer_of(logprobs=None),
        answer_of(logprobs={"content": None}),
        answer_of(logprobs={"content": [*toks[:2], {"token": 'chase"}', "logprob": 0.25}]}),  # past probability 1
        answer_of(logprobs={"content": [*toks[:2], {"token": 'chase"}', "logprob": "-1"}]}),  # not a number
        answer_of(logprobs={"content": [*toks[:2], {"token": 'chase"}', "logprob": True}]}),
        answer_of(logprobs={"content": [*toks[:2], {"token": 7, "logprob": -1}]}),
        answer_of(message={"content": [text]}),  # not a string
        answer_of(message={"content": text, "refusal": {"why": "x"}}),
        {**answer_of(), "usage": {"prompt_tokens": -1, "completion_tokens": "9"}},
        {**answer_of(), "usage": None},
    ]
    typed = 0
    for data in answers:
        raw = json.dumps(data).encode()
        try:
            decoded = _ANSWER.decode(raw)
        except (ValueError, TypeError):  # msgspec's errors: read loosely, as the service does
            continue
        typed += 1
        assert isinstance(decoded, _Answer)
        got = _outcome(provider.read_answer(decoded, call))  # type: ignore[arg-type]
        assert got == _outcome(provider.read_answer(json.loads(raw), call)), data  # type: ignore[arg-type]
    assert typed >= 10  # most shapes take the typed path; the odd ones the tolerant reading alone
    for data in ({"choices": []}, {"choices": [{"message": None}]}, {"choices": [{}]}, {"choices": "x"}, []):
        raw = json.dumps(data).encode()
        with pytest.raises(ProviderError) as loose:
            provider.read_answer(json.loads(raw), call)  # type: ignore[arg-type]
        try:
            decoded = _ANSWER.decode(raw)
        except (ValueError, TypeError):
            continue
        with pytest.raises(ProviderError) as strict:
            provider.read_answer(decoded, call)  # type: ignore[arg-type]
        assert str(strict.value) == str(loose.value)


def _answer_with(top: bytes = b"[]", extra: bytes = b"", logprob: bytes = b"-0.1") -> bytes:
    """A chat completion of one entity, its text one token, with ``extra`` fields and ``top`` alternatives."""
    return (
        b'{"id": "x"' + extra + b', "choices": [{"message": {"content": "{\\"E1\\": \\"flee\\"}"}, "finish_reason": '
        b'"stop", "logprobs": {"content": [{"token": "{\\"E1\\": \\"flee\\"}", "logprob": ' + logprob + b', '
        b'"top_logprobs": ' + top + b"}]}}]}"
    )  # fmt: skip


@pytest.mark.fast
@pytest.mark.parametrize(
    "raw",
    [
        _answer_with(b'[{"token": "x", "logprob": -1e999}]'),  # a number past a float's range, in an unread field
        _answer_with(extra=b', "created": 1' + b"0" * 5000),
        _answer_with(extra=b', "created": 1e999'),
        _answer_with(b'[{"token": "\xe2\x80", "logprob": -3}]'),  # bytes that are not UTF-8, in an unread field
        _answer_with(extra=b', "system_fingerprint": "fp_\xff"'),
    ],
    ids=["top 1e999", "created 5000 digits", "created 1e999", "top not utf-8", "fingerprint not utf-8"],
)
def test_an_answer_whose_unread_fields_are_odd_still_gives_its_decisions(raw: bytes) -> None:
    """The typed decode skips what it does not read, unchecked: an odd value there no longer costs the batch its
    decisions (a decode of the whole document refused such an answer as not JSON: said here, so it is a choice)."""
    from npcmind.providers.http import _decoded

    with pytest.raises(ProviderError, match="not JSON"):
        _decoded(raw)

    class One(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), One)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    call = ProviderCall("system", "user", [(1, ["idle", "flee"])], "enum", "key", 50)

    async def decide() -> Any:
        provider = OpenAIProvider("k", base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", model="m")
        try:
            return await provider.decide(call)
        finally:
            await provider.close()

    try:
        out = asyncio.run(decide())
    finally:
        server.shutdown()
    assert out.choices[1].action == "flee" and out.choices[1].confidence == pytest.approx(math.exp(-0.1), abs=1e-3)


@pytest.mark.fast
def test_a_logprob_a_whole_number_past_a_floats_range_is_malformed_not_a_crash() -> None:
    """-1 followed by 400 zeros passed the range check, then float() of it raised OverflowError: the call failed
    as unavailable. It is a malformed log-probability: confidence null, the answer kept (a review's finding)."""
    provider = OpenAIProvider(api_key="k", model="m")
    call = type("Call", (), {"mode": "enum", "entities": [(1, ["idle", "flee"])]})()
    data = json.loads(_answer_with(logprob=b"-1" + b"0" * 400))
    out = provider.read_answer(data, call)  # type: ignore[arg-type]
    assert out.choices[1].action == "flee" and out.choices[1].confidence is None
