"""The README shows what the service really does: its decide answers are the real ones, and its code runs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT

README = (ROOT / "README.md").read_text()
EXAMPLE = json.loads((ROOT / "examples" / "decide.json").read_text())


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, re.S)


def same_but_ids_and_time(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without what differs on every call: the latency and the decision ids."""
    out = {k: v for k, v in answer.items() if k != "latency_ms"}
    out["decisions"] = [{k: v for k, v in d.items() if k != "decision_id"} for d in answer["decisions"]]
    assert all(d["decision_id"].startswith("d_") for d in answer["decisions"] if d["source"] == "AI")
    return out


def test_the_decide_answers_in_the_readme_are_the_real_ones(start_service: Any, scripted: Any, tmp_path: Path) -> None:
    shown = [json.loads(b) for b in blocks("json")]
    assert len(shown) == 3, "the no-provider answer, the scripted one, the small real model's"
    model = shown[2]["decisions"]  # a model's choice: test_real_model.py decides with it when it is installed
    legal = {e["id"]: e["legal_actions"] for e in EXAMPLE["entities"]}
    assert [d["source"] for d in model] == ["AI", "AI"] and all(d["action"] in legal[d["id"]] for d in model)
    without = start_service(provider="none")
    assert same_but_ids_and_time(without.decide(EXAMPLE).json()) == same_but_ids_and_time(shown[0])
    script = re.search(r"curl -s -X PUT localhost:9100/_script -d '(.*?)'", README)
    assert script is not None
    scripted.set(**json.loads(script.group(1)))
    scripted_svc = start_service(provider="openai", base_url=scripted.base_url, store=f"sqlite:///{tmp_path}/d.db")
    assert same_but_ids_and_time(scripted_svc.decide(EXAMPLE).json()) == same_but_ids_and_time(shown[1])
    again = scripted_svc.decide(EXAMPLE).json()["decisions"]
    assert all(d["cached"] for d in again)  # "The same request again is served from the decision cache"


def test_the_decide_client_example_runs(start_service: Any, scripted: Any) -> None:
    code = next(b for b in blocks("python") if "DecideClient(" in b)
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted")
    namespace: dict[str, Any] = {}  # the example defines all it uses: pasted as it is, it runs
    exec(code.replace("http://127.0.0.1:8081", svc.server.url), namespace)  # the README's own code
    npc = namespace["npc"]
    try:
        assert namespace["action"] in ("idle", "wander", "chase", "flee")
        assert npc.stats.errors == 0
    finally:
        npc.close()


def test_the_npc_example_runs(svc: Any, scripted: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = next(b for b in blocks("python") if "NpcMind(" in b)
    scripted.set(text='{"dialogue": "Nobody goes to the old mine.", "action": {"type": "TALK"}}')
    code = (
        code.replace("http://127.0.0.1:8080", svc.server.url)
        .replace('"http://127.0.0.1:11434/v1", "qwen3:4b"', f'"{scripted.base_url}", "scripted"')
        .replace(".npcmind/npcs.db", str(tmp_path / "npcs.db"))
    )
    exec(code, {})  # the README's own code
    assert "Nobody goes to the old mine." in capsys.readouterr().out
