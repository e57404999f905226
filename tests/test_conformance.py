"""The decision scheduler against the shared conformance cases (clients/conformance/*.json): the same files
run in the TypeScript SDK's tests, so the two cannot drift. The format is clients/conformance/README.md."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from npcmind_client.decide import DecideClient
from npcmind_client.errors import NpcMindError, service_error
from npcmind_client.options import DecideOptions
from npcmind_client.policy import Policy
from npcmind_client.scheduler import ANSWERED, FAILED, Kind, LocalPolicy, Request, Scheduler

pytestmark = pytest.mark.fast  # the whole file is in the fast tier (docs/testing.md)

CASES = Path(__file__).resolve().parents[1] / "clients" / "conformance"
DEFAULTS: dict[str, Any] = {
    "client_id": "c1",
    "epoch": 0,
    "world": {},
    "scope": None,
    "scope_state": None,
    "refresh_ms": None,
    "event_window_ms": 50,
    "telemetry_ms": 500,
    "threshold": 0.8,
    "api_key": None,
    "workers": 4,
    "timeout_s": None,
    "fetch_policy": None,
    "policy_refresh_ms": 60000,
    "stream": True,
}


def load_cases() -> list[Any]:
    """Every case of every file, with a test id made of the file and the case's name."""
    found = []
    for path in sorted(CASES.glob("*.json")):
        data = json.loads(path.read_text())
        for case in data if isinstance(data, list) else [data]:
            found.append(pytest.param(case, id=f"{path.stem}: {case['name']}"))
    return found


def mismatch(expected: Any, actual: Any, where: str = "") -> str | None:
    """Where ``actual`` differs from ``expected`` under the format's subset rule, or None."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{where or '$'}: expected an object, got {actual!r}"
        for k, v in expected.items():
            if v is None and actual.get(k) is None:
                continue
            if k not in actual:
                return f"{where}.{k}: missing (expected {v!r})"
            if (problem := mismatch(v, actual[k], f"{where}.{k}")) is not None:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            return f"{where or '$'}: expected {len(expected)} items {expected!r}, got {actual!r}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            if (problem := mismatch(e, a, f"{where}[{i}]")) is not None:
                return problem
        return None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return None if expected is actual else f"{where}: expected {expected!r}, got {actual!r}"
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return None if abs(expected - actual) < 1e-6 else f"{where}: expected {expected!r}, got {actual!r}"
    return None if expected == actual else f"{where}: expected {expected!r}, got {actual!r}"


def as_json(r: Request) -> dict[str, Any]:
    """A request as the case files write it."""
    return {
        "ref": r.ref,
        "method": r.method,
        "path": r.path,
        "headers": r.headers,
        "body": r.body,
        "after": r.after,
        "stream": r.stream,
    }


def scheduler(case: dict[str, Any]) -> Scheduler:
    """The scheduler a case describes."""
    o = {**DEFAULTS, **case.get("options", {})}
    unknown = set(o) - set(DEFAULTS)
    assert not unknown, f"options the format does not know: {unknown}"
    client_id = o.pop("client_id")
    timeout_s = o.pop("timeout_s")  # the format says seconds (as the other ports' drivers read it); Python ms
    given = DecideOptions(
        **o,
        timeout_ms=None if timeout_s is None else timeout_s * 1000,
        policy=local_policy(case),
        manifest=case.get("manifest"),
        manifest_version=case.get("manifest_version"),
    )  # the format's options are DecideOptions' fields
    return Scheduler(client_id, options=given)


def local_policy(case: dict[str, Any]) -> LocalPolicy | None:
    """The game's own policy a case gives: a function of the entity's id (``policy``), or a distilled policy
    file (``policy_file``, loaded as a ``Policy``)."""
    if "policy_file" in case:
        return Policy.load(case["policy_file"])
    table = case.get("policy")
    if table is None:
        return None
    return lambda e: (str(table.get(e.id, ["", 0])[0]), float(table.get(e.id, ["", 0])[1]))


def choice_json(s: Scheduler, args: dict[str, Any], now: float) -> dict[str, Any] | None:
    """The entity's choice as the case files write it (``expires_at_ms`` on the case's clock), or None."""
    c = s.roster.action(args["id"], args.get("legal_now"), now)
    if c is None:
        return None
    return {**dataclasses.asdict(c), "expires_at_ms": c.expires_at * 1000}


def live_setting(s: Scheduler, do: str, args: dict[str, Any]) -> None:
    """A ``set_scope`` or ``set_threshold`` step, through the game's own setters (``DecideClient.scope``,
    ``.scope_state``, ``.threshold``) on the case's scheduler: a setter that did nothing fails the case."""
    client = SimpleNamespace(_scheduler=s)  # what the setters reach: the client's scheduler
    if do == "set_scope":
        typing.cast(Any, DecideClient.scope).fset(client, args["scope"])
        typing.cast(Any, DecideClient.scope_state).fset(client, args.get("scope_state"))
    else:
        typing.cast(Any, DecideClient.threshold).fset(client, args["threshold"])


def run_step(s: Scheduler, step: dict[str, Any]) -> str | None:
    """Do one step; what went wrong, or None."""
    now, do, args = float(step["at_ms"]), step["do"], step.get("args", {})
    got: Any = None
    if do == "track":
        fields = ("position", "profile", "parent", "state")
        extra = {k: args[k] for k in fields if k in args}
        s.roster.track(args["id"], args["type"], args["observation"], args["legal_actions"], now=now, **extra)
        return None
    if do == "observe":
        item = {"id": args["id"], "type": args["type"], "fields": args["fields"]}
        if "position" in args:
            item["position"] = args["position"]
        s.outbox.observe(args["id"], item)
        return None
    if do == "untrack":
        s.untrack(args["id"])
        return None
    if do == "set_epoch":
        s.roster.set_epoch(args["epoch"], now)
        return None
    if do == "set_scene":
        s.outbox.set_scene(args["scene"])
        return None
    if do in ("set_scope", "set_threshold"):
        live_setting(s, do, args)
        return None
    if do == "answer":
        s.answer(step["ref"], step["status"], step.get("body"), step.get("headers", {}), now)
        return None
    if do == "chunk":
        s.chunk(step["ref"], step["text"].encode(), now)  # bytes, as the transport gives them
        return None
    if do == "end":
        s.end(step["ref"], now)
        return None
    if do == "fail":
        s.fail(step["ref"], step["kind"], now)
        return None
    if do == "event":
        got = s.roster.event(args["id"], args["trigger"], now)
    elif do == "report":
        got = s.report(args["id"], args["outcome"], args.get("detail"))
    elif do == "tick":
        sent = [as_json(r) for r in s.tick(now)]
        if "sent" not in step:
            return None
        return mismatch(step["sent"], sent, "sent")
    elif do == "action":
        got = choice_json(s, args, now)
    elif do == "stats":
        got = dataclasses.asdict(s.stats)
    elif do == "timeout_s":
        got = s.timeout_ms / 1000
    else:
        return f"unknown step {do!r}"
    if "expect" not in step:
        return None
    if step["expect"] is None or got is None:
        return None if step["expect"] is got is None else f"expected {step['expect']!r}, got {got!r}"
    return mismatch(step["expect"], got)


@pytest.mark.parametrize("case", load_cases())
def test_case(case: dict[str, Any]) -> None:
    s = scheduler(case)
    for i, step in enumerate(case["steps"]):
        problem = run_step(s, step)
        assert problem is None, f"step {i} ({step['do']} at {step['at_ms']} ms): {problem}"


def test_there_are_enough_cases_and_each_names_a_behaviour() -> None:
    cases = [p.values[0] for p in load_cases()]
    assert len(cases) >= 30
    names = [c["name"] for c in cases]
    assert len(set(names)) == len(names)


def test_every_kind_of_request_has_an_answer_handler() -> None:
    """The scheduler's handler tables cover the kinds it sends: a new kind without a handler fails here (the
    TypeScript tables are checked by its compiler)."""
    kinds = set(typing.get_args(Kind))
    assert set(ANSWERED) == kinds
    assert set(FAILED) <= kinds and {"decide", "session", "manifest", "policy"} <= set(FAILED)


LIVE = {c.values[0]["name"]: c.values[0] for c in load_cases() if c.id and c.id.startswith("live-settings: ")}


@pytest.mark.parametrize(
    "setter,case",
    [
        ("scope", "live scope: "),
        ("scope_state", "live scope: "),
        ("threshold", "live threshold: "),
    ],
)
def test_the_live_setting_cases_fail_when_a_setter_is_ignored(
    setter: str, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runner that passed whatever the setters did would prove nothing: with one of ``DecideClient``'s setters
    doing nothing, the case that pins it fails."""
    kept = getattr(DecideClient, setter)
    monkeypatch.setattr(DecideClient, setter, property(kept.fget, lambda self, value: None))
    (found,) = [c for name, c in LIVE.items() if name.startswith(case)]
    s = scheduler(found)
    problems = [run_step(s, step) for step in found["steps"]]
    assert any(p is not None for p in problems), "every step passed with the setter ignored"


ERRORS = json.loads((CASES / "errors" / "error-answers.json").read_text())


@pytest.mark.parametrize("vector", ERRORS["vectors"], ids=[v["name"] for v in ERRORS["vectors"]])
def test_every_error_answer_vector(vector: dict[str, Any]) -> None:
    """An error answer gives the error every SDK makes of it: kind, status, code and message (the shared vectors
    of clients/conformance/errors/, run by the TypeScript and C# runners too)."""
    e = service_error(vector["status"], vector["body"], "", ERRORS["what"])
    assert isinstance(e, NpcMindError) and type(e).__name__ == vector["kind"]
    assert (e.status, e.code, str(e)) == (vector["status"], vector["code"], vector["message"])
