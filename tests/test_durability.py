"""What the service acknowledged survives kill -9: sessions, scopes, issued decisions, accepted reports."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import FOREST, bee, decide_body, logged, until, write_clients
from npcmind.decide.ids import DecisionIds
from npcmind.failures import FailureLog
from npcmind.http.server import ServiceProcess


class Proc(ServiceProcess):
    """`npcmind serve` as a real process, with an HTTP client."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        super().__init__(args, env)
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def kill9(self) -> None:
        self.http.close()
        super().kill9()


def test_hosted_state_survives_kill_9(tmp_path: Path, scripted: Any) -> None:
    clients, keys = write_clients(tmp_path)
    args = [
        "--profile",
        "hosted",
        "--clients",
        str(clients),
        "--store",
        f"sqlite:///{tmp_path}/state.db",
        "--provider",
        "openai",
        "--base-url",
        scripted.base_url,
    ]
    a = Proc(args)
    s = a.http.post(
        "/v1/session", json={"client_id": "game-1"}, headers={"authorization": f"Bearer {keys['game-1']}"}
    ).json()
    auth = {"authorization": f"Bearer {s['session_token']}"}
    assert (
        a.http.post(
            "/v1/context",
            json={
                "client_id": "game-1",
                "scopes": {"cave_7": {"parent": "forest", "text": "A cave that must survive."}},
            },
            headers=auth,
        ).status_code
        == 200
    )
    scripted.set(choose={"x": "chase"})
    first = a.http.post("/v1/decide", json=decide_body(bee("x")), headers=auth).json()["decisions"][0]
    second = a.http.post(
        "/v1/decide",
        json=decide_body(bee("x", observation={**bee("x")["observation"], "hp_fraction": 0.9})),
        headers=auth,
    ).json()["decisions"][0]
    r = a.http.post(
        "/v1/report",
        json={
            "client_id": "game-1",
            "reports": [{"decision_id": first["decision_id"], "outcome": "failed", "detail": "before the crash"}],
        },
        headers=auth,
    )
    assert r.json()["results"][0]["status"] == "accepted"
    a.kill9()

    b = Proc(args)
    try:
        # the token still works, and the added scope is still there
        r = b.http.post("/v1/decide", json=decide_body(bee("x"), scope="cave_7", scope_state=None), headers=auth)
        assert r.status_code == 200, r.text
        assert "A cave that must survive." in scripted.requests[-1]["messages"][0]["content"]
        # a decision issued before the crash can be reported now; the one reported before is a duplicate
        r = b.http.post(
            "/v1/report",
            json={
                "client_id": "game-1",
                "reports": [
                    {"decision_id": second["decision_id"], "outcome": "done", "detail": "after the restart"},
                    {"decision_id": first["decision_id"], "outcome": "done"},
                ],
            },
            headers=auth,
        )
        assert [x["status"] for x in r.json()["results"]] == ["accepted", "duplicate"]
        b.http.post(
            "/v1/decide",
            json=decide_body(bee("x", observation={**bee("x")["observation"], "hp_fraction": 0.1})),
            headers=auth,
        )
        memory = next(x for x in scripted.requests[-1]["messages"][1]["content"].splitlines() if "memory:" in x)
        assert '-> done "after the restart"' in memory and '-> failed "before the crash"' in memory
        # a session ended before a crash stays ended
        assert b.http.delete("/v1/session", headers=auth).status_code == 200
    finally:
        b.kill9()
    c = Proc(args)
    try:
        assert c.http.post("/v1/decide", json=decide_body(bee("x")), headers=auth).status_code == 401
    finally:
        c.kill9()


def test_local_decisions_survive_kill_9(tmp_path: Path, scripted: Any) -> None:
    args = [
        "--manifest",
        str(FOREST),
        "--store",
        f"sqlite:///{tmp_path}/local.db",
        "--provider",
        "openai",
        "--base-url",
        scripted.base_url,
    ]
    a = Proc(args)
    ids = [
        d["decision_id"]
        for d in a.http.post("/v1/decide", json=decide_body(*[bee(f"e{i}") for i in range(16)])).json()["decisions"]
    ]
    a.kill9()
    b = Proc(args)
    try:
        r = b.http.post(
            "/v1/report", json={"client_id": "game-1", "reports": [{"decision_id": d, "outcome": "done"} for d in ids]}
        )
        assert [x["status"] for x in r.json()["results"]] == ["accepted"] * 16
        again = b.http.post("/v1/decide", json=decide_body(bee("e0"))).json()["decisions"][0]["decision_id"]
        seqs = [DecisionIds.seq_of(d) for d in ids]
        assert DecisionIds.seq_of(again) == max(s for s in seqs if s is not None) + 1  # numbering continues
    finally:
        b.kill9()


def test_decisions_past_the_retention_are_forgotten_and_numbers_never_repeat(tmp_path: Path, scripted: Any) -> None:
    """NPCMIND_RETENTION_H bounds the store: a long-running game must not fill its disk with old decisions."""
    import sqlite3

    db = tmp_path / "kept.db"
    args = ["--manifest", str(FOREST), "--store", f"sqlite:///{db}", "--provider", "openai", "--base-url"]
    args.append(scripted.base_url)
    a = Proc(args, env={"NPCMIND_RETENTION_H": "0.0005"})  # 1.8 s, pruned every 0.45 s
    rows = lambda: sqlite3.connect(db).execute("SELECT COUNT(*) FROM batches").fetchone()[0]  # noqa: E731
    try:
        old = [
            d["decision_id"]
            for d in a.http.post("/v1/decide", json=decide_body(bee("e0"), bee("e1"))).json()["decisions"]
        ]
        assert rows() == 1
        until(lambda: rows() == 0, "the old decisions were never forgotten")
        r = a.http.post(
            "/v1/report", json={"client_id": "game-1", "reports": [{"decision_id": d, "outcome": "done"} for d in old]}
        )
        assert [x["status"] for x in r.json()["results"]] == ["unknown", "unknown"]
    finally:
        a.kill9()
    b = Proc(args)  # the default retention, after a crash with no batch left in the file
    try:
        new = b.http.post("/v1/decide", json=decide_body(bee("e0"))).json()["decisions"][0]["decision_id"]
        assert DecisionIds.seq_of(new) == max(DecisionIds.seq_of(d) or 0 for d in old) + 1
        assert rows() == 1  # 24 hours by default: a fresh decision is kept
    finally:
        b.kill9()


def test_a_second_process_on_the_same_store_is_refused(tmp_path: Path) -> None:
    import pytest

    args = [
        "--manifest",
        str(FOREST),
        "--store",
        f"sqlite:///{tmp_path}/one.db",
        "--provider",
        "none",
    ]
    a = Proc(args)
    try:
        with pytest.raises(RuntimeError, match="did not start"):
            ServiceProcess(args)
    finally:
        a.kill9()
    b = Proc(args)  # the lock went with the killed process
    b.kill9()


@pytest.mark.fast
def test_the_first_failure_is_said_whatever_window_is_set_after() -> None:
    """The window was counted from ``-every`` as made (10 s): widened afterwards (the full-disk test's 3600 s), a
    machine up for less than the new window (a fresh CI runner: the monotonic clock is the uptime) kept the first
    failure unsaid, and the first line was "succeed again (384 more failed ...)"."""
    with logged("npcmind.test.failures") as said:
        failures = FailureLog(logging.getLogger("npcmind.test.failures"), "store write")
        failures.every = 1e12  # longer than any machine is up
        failures.failed("database or disk is full")
        failures.failed("database or disk is full")
        failures.succeeded()
        failures.failed("disk I/O error")  # failing again after a success is said at once too
    assert said == [
        "store write failed: database or disk is full",
        "store writes succeed again (1 more failed store writes since the last line)",
        "store write failed: disk I/O error",
    ]


def test_a_full_disk_is_a_503_that_acknowledges_nothing_and_the_service_recovers(svc: Any) -> None:
    """SQLite's own size limit (max_page_count) fails a write as a full disk does: SQLITE_FULL."""
    svc.service.store.failures.every = 3600.0  # one line per window: 400 decides on a slow machine pass 10 s
    assert svc.decide(decide_body(bee("a"))).status_code == 200
    db = svc.service.store.db.conn
    rows = lambda: db.execute("SELECT COUNT(*) FROM batches").fetchone()[0]  # noqa: E731
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")
    with logged("npcmind.storage") as said:
        kept, failed = rows(), []
        for i in range(400):  # the last page fills up, then no write finds room
            before = rows()
            r = svc.decide(decide_body(bee(f"b{i}", position=[i * 50.0, 0.0])))
            if r.status_code == 503:
                assert rows() == before  # nothing of a refused request is kept
                failed.append(r)
        assert failed, "the store never filled up"
        err = failed[0].json()["error"]
        assert err["code"] == "store_unavailable" and "database or disk is full" in err["message"], err
        assert failed[0].headers["retry-after"] == "5"
        assert rows() > kept  # the requests before the limit were kept
        db.execute("PRAGMA max_page_count = 1073741823")  # room again
        r = svc.decide(decide_body(bee("z")))
        assert r.status_code == 200 and r.json()["decisions"][0]["source"] == "AI"
    assert said[0].startswith("store write failed: database or disk is full"), said
    assert len(said) == 2 and said[1].startswith("store writes succeed again"), said  # not one line a request
    if len(failed) > 1:
        assert f"({len(failed) - 1} more failed store writes since the last line)" in said[1]
