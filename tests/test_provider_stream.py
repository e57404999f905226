"""Providers stream (issue 31): the scripted server speaks both protocols' streaming forms over real HTTP, and
each adapter turns a streamed answer into one Picked per entity as soon as its part is complete, then the
whole answer. No test here reads a clock for more than a lower bound."""

from __future__ import annotations

import time
from typing import Any

import httpx
import msgspec
import pytest

from npcmind.providers.tokens import count
from npcmind.testing.scripted import ScriptedServer

USER = (
    "ENTITIES:\n"
    'E1 "a" bee\nQ1: do? Options: idle, flee\n'
    'E2 "b" bee\nQ2: do? Options: chase, flee\n'
    'E3 "c" bee\nQ3: do? Options: idle, wander, chase\n'
)


def chat_body(**extra: Any) -> dict[str, Any]:
    """A chat-completions body as OpenAIProvider sends one (enum form: no schema, the prompt says)."""
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": USER}]
    return {"model": "scripted", "messages": messages, "logprobs": True, **extra}


def messages_body(**extra: Any) -> dict[str, Any]:
    """A Messages body as AnthropicProvider sends one."""
    return {"model": "c", "system": [{"type": "text", "text": "sys"}], "messages": [{"role": "user", "content": USER}]}


def sse_data(url: str, body: dict[str, Any]) -> tuple[list[Any], str | None]:
    """Every event's data of a streamed answer, decoded ("[DONE]" as is), and the error that ended it, if any."""
    out: list[Any] = []
    try:
        with httpx.stream("POST", url, json=body, timeout=30) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), r.read()
            for line in r.iter_lines():
                if line.startswith("data: "):
                    data = line[len("data: ") :]
                    out.append(data if data == "[DONE]" else msgspec.json.decode(data))
    except httpx.RemoteProtocolError as e:
        return out, str(e)
    return out, None


@pytest.fixture(scope="module")
def server() -> Any:
    with ScriptedServer() as s:
        yield s


def test_the_scripted_server_streams_a_chat_completion_token_by_token(server: ScriptedServer) -> None:
    server.set(choose={"b": "flee"})
    whole = httpx.post(f"{server.base_url}/chat/completions", json=chat_body()).json()
    chunks, cut = sse_data(
        f"{server.base_url}/chat/completions", chat_body(stream=True, stream_options={"include_usage": True})
    )
    assert cut is None and chunks[-1] == "[DONE]"
    tokens = [
        c["choices"][0]["delta"]["content"]
        for c in chunks[1:]
        if c != "[DONE]" and c["choices"] and c["choices"][0]["delta"].get("content")
    ]
    text = whole["choices"][0]["message"]["content"]
    assert "".join(tokens) == text == '{"E1":"idle","E2":"flee","E3":"idle"}'
    usage = chunks[-2]["usage"]
    assert usage["completion_tokens"] == len(tokens) == count("o200k_base", text) == whole["usage"]["completion_tokens"]
    assert chunks[-3]["choices"][0]["finish_reason"] == "stop"
    # the token that holds a chosen value carries the script's log-probability, as the unstreamed answer's does
    probs = [c["choices"][0]["logprobs"]["content"][0] for c in chunks[1:-3]]
    assert [p["token"] for p in probs] == tokens
    # (o200k cuts "flee" after a quote as "f" "lee": the first token of a value decides it)
    assert [(p["token"], p["logprob"]) for p in probs if p["logprob"]] == [
        ("idle", -0.105),
        ("f", -0.105),
        ("idle", -0.105),
    ]


def test_the_scripted_server_streams_a_message_as_anthropic_does(server: ScriptedServer) -> None:
    server.set(choose={"c": "chase"})
    whole = httpx.post(f"{server.url}/v1/messages", json=messages_body()).json()
    events, cut = sse_data(f"{server.url}/v1/messages", {**messages_body(), "stream": True})
    assert cut is None
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["message_start", "content_block_start"] and kinds[-3:] == [
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[1]["content_block"]["type"] == "tool_use"
    partial = "".join(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta")
    assert msgspec.json.decode(partial) == whole["content"][0]["input"]
    assert whole["content"][0]["input"]["decisions"][2] == {"entity": 3, "choice": 3}
    said = events[-2]["usage"]["output_tokens"]
    assert (
        said == kinds.count("content_block_delta") == count("cl100k_base", partial) == whole["usage"]["output_tokens"]
    )
    assert events[-2]["delta"]["stop_reason"] == "tool_use"


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_the_scripted_server_cuts_a_stream_where_told(server: ScriptedServer, protocol: str) -> None:
    server.set(stream_cut_after=4)
    if protocol == "openai":
        chunks, cut = sse_data(f"{server.base_url}/chat/completions", chat_body(stream=True))
        written = [c for c in chunks if c != "[DONE]" and c["choices"] and c["choices"][0]["delta"].get("content")]
    else:
        chunks, cut = sse_data(f"{server.url}/v1/messages", {**messages_body(), "stream": True})
        written = [e for e in chunks if e["type"] == "content_block_delta"]
    assert cut is not None and len(written) == 4  # closed without a terminator
    assert "[DONE]" not in chunks and not any(isinstance(c, dict) and c.get("type") == "message_stop" for c in chunks)
    server.set(stream_cut_after=0)
    assert sse_data(f"{server.base_url}/chat/completions", chat_body(stream=True))[1] is not None


def test_a_server_that_cannot_stream_refuses_the_parameter_by_name(server: ScriptedServer) -> None:
    server.set(reject_params=["stream"])
    r = httpx.post(f"{server.base_url}/chat/completions", json=chat_body(stream=True))
    assert r.status_code == 400 and r.json()["error"]["param"] == "stream"
    ok = httpx.post(f"{server.base_url}/chat/completions", json=chat_body())  # unstreamed: answered
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"].startswith('{"E1"')


def test_the_scripted_model_writes_no_faster_than_its_pace(server: ScriptedServer) -> None:
    # lower bounds only: a loaded machine can make the answer later, never earlier
    server.set(stream_ttft_ms=200, stream_tokens_per_s=50)
    began = time.monotonic()
    whole = httpx.post(f"{server.base_url}/chat/completions", json=chat_body()).json()
    tokens = whole["usage"]["completion_tokens"]
    assert time.monotonic() - began >= 0.2 + (tokens - 1) / 50
    began = time.monotonic()
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json=chat_body(stream=True)) as r:
        seen = []
        for line in r.iter_lines():
            if '"content":"' in line and '"content":""' not in line:
                seen.append(time.monotonic() - began)
    assert len(seen) == tokens and seen[0] >= 0.2 and seen[-1] >= 0.2 + (tokens - 1) / 50
