"""`npcmind demo --scripted` as a command, without a browser: the fast tier's run of the demo package (the
browser tests of tests/test_demo.py need Chromium). It serves its page, decides by its scripted rules for a
page of its own origin, and leaves no store behind when stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from conftest import BEE_OBS, bee, decide_body, until
from npcmind.http.server import free_port

pytestmark = pytest.mark.fast  # the whole file is in the fast tier (docs/testing.md)


def test_the_demo_command_serves_its_page_decides_for_its_own_origin_and_leaves_nothing_behind(tmp_path: Path) -> None:
    port = free_port()
    # no provider key from the environment, and the demo's temporary store where this test can see it
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {"TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "npcmind.cli", "demo", "--scripted", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        until(lambda: any("/demo" in line for line in lines) or proc.poll() is not None, "the demo's ready line", 120)
        assert proc.poll() is None, "".join(lines)
        assert [p.name for p in tmp_path.glob("npcmind-demo-*")], "the demo keeps its store in a folder of its own"
        origin = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=origin, timeout=60) as http:
            page = http.get("/demo")
            assert page.status_code == 200 and "<html" in page.text.lower(), page.text[:300]
            r = http.post("/v1/decide", json=decide_body(bee("a")), headers={"origin": origin})
            assert r.status_code == 200, r.text
            assert r.headers.get("access-control-allow-origin") == origin, r.headers  # the page's own origin
            decision = r.json()["decisions"][0]
            assert decision["source"] == "AI" and decision["action"] in bee("a")["legal_actions"], decision
            # the page's control: the model cut, a new situation falls back (the game runs its native AI)
            state = http.get("/demo/state", params={"client_id": "demo-test"}).json()
            assert state["cut"] is False and state["learn_every_s"] == 10.0 and state["static_tokens"] > 0, state
            assert http.put("/demo/model", json={"cut": True}).json()["cut"] is True
            r = http.post("/v1/decide", json=decide_body(bee("b", observation={**BEE_OBS, "hp_fraction": 0.5})))
            fell = r.json()["decisions"][0]
            assert fell["source"] == "FALLBACK" and fell["code"] == "unavailable", fell
            bad = http.put("/demo/model", json={"cut": "yes"})
            assert bad.status_code == 422 and bad.json()["error"]["details"][0]["path"] == "cut", bad.text
            assert http.put("/demo/model", json={"cut": False}).json()["cut"] is False
            r = http.post("/v1/decide", json=decide_body(bee("c", observation={**BEE_OBS, "hp_fraction": 0.6})))
            assert r.json()["decisions"][0]["source"] == "AI", r.text
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    assert not list(tmp_path.glob("npcmind-demo-*")), "the demo left its store behind"
