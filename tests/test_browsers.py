"""Browser games: CORS for the origins in NPCMIND_CORS_ORIGINS, a warning naming the fix for any other, and
the same seen by a real browser (headless Chromium, when installed) on a page served from another port."""

from __future__ import annotations

import http.server
import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, Hosted, Running, bee, decide_body, logged, write_clients
from npcmind.config import Settings, SettingsError
from npcmind.http.server import free_port

PAGE = "http://localhost:{port}"


def preflight(running: Running, origin: str, headers: str = "content-type") -> Any:
    return running.http.options(
        "/v1/decide",
        headers={"origin": origin, "access-control-request-method": "POST", "access-control-request-headers": headers},
    )


def test_an_allowed_origin_may_call_and_read_retry_after(start_service: Any, scripted: Any) -> None:
    running = start_service(
        provider="openai", base_url=scripted.base_url, model="scripted", cors_origins=["http://localhost:5173"]
    )
    r = preflight(running, "http://localhost:5173", "content-type, authorization")
    assert r.status_code == 204
    assert r.headers["access-control-allow-origin"] == "http://localhost:5173"
    allowed = {h.strip().lower() for h in r.headers["access-control-allow-headers"].split(",")}
    assert {"content-type", "authorization"} <= allowed  # a hosted game's token needs `authorization` listed
    assert "POST" in r.headers["access-control-allow-methods"]
    r = running.decide(decide_body(bee("b")), headers={"origin": "http://localhost:5173"})
    assert r.status_code == 200 and r.json()["decisions"][0]["source"] == "AI"
    assert r.headers["access-control-allow-origin"] == "http://localhost:5173"
    assert r.headers["access-control-expose-headers"] == "retry-after"


def test_another_origin_is_refused_and_the_log_says_the_fix(start_service: Any) -> None:
    running = start_service(provider="none", cors_origins=["http://localhost:5173"])
    with logged("npcmind.http") as said:
        for _ in range(3):
            r = preflight(running, "http://127.0.0.1:8000")
            assert r.status_code == 400 and "access-control-allow-origin" not in r.headers
        r = running.decide(decide_body(bee("b")), headers={"origin": "http://127.0.0.1:8000"})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    warned = [m for m in said if "http://127.0.0.1:8000" in m]
    assert len(warned) == 1, said  # once per origin, not once per request
    assert "NPCMIND_CORS_ORIGINS=http://localhost:5173,http://127.0.0.1:8000" in warned[0]


def test_no_origin_is_allowed_by_default(start_service: Any) -> None:
    running = start_service(provider="none")
    with logged("npcmind.http") as said:
        r = preflight(running, "http://localhost:5173")
    assert "access-control-allow-origin" not in r.headers
    assert any("(none set)" in m and "NPCMIND_CORS_ORIGINS=http://localhost:5173 " in m for m in said), said
    assert "access-control-allow-origin" not in running.decide(decide_body(bee("b"))).headers  # no origin, no CORS


def test_any_origin(start_service: Any) -> None:
    running = start_service(provider="none", cors_origins=["*"])
    assert preflight(running, "https://example.itch.io").headers["access-control-allow-origin"] == "*"


@pytest.mark.parametrize(
    ("value", "origins"),
    [
        ("", []),
        ("http://localhost:5173/", ["http://localhost:5173"]),
        (" https://game.example , http://localhost:8000", ["https://game.example", "http://localhost:8000"]),
        ("*", ["*"]),
    ],
)
def test_the_setting(value: str, origins: list[str]) -> None:
    assert Settings.from_env({"NPCMIND_CORS_ORIGINS": value}).cors_origins == origins


@pytest.mark.parametrize("value", ["localhost:5173", "http://localhost:5173/game", "null", "ftp://x"])
def test_a_value_that_is_no_origin_stops_the_start_naming_it(value: str) -> None:
    with pytest.raises(SettingsError, match=f"NPCMIND_CORS_ORIGINS: '{value}' is not an origin.*http://localhost:5173"):
        Settings.from_env({"NPCMIND_CORS_ORIGINS": value})


# --- pages of other sites: DNS rebinding (Host) and bodies sent without asking (content-type) ---------------


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8080", "127.0.0.1.nip.io", "0.0.0.0:8080"])
def test_the_local_profile_refuses_a_host_that_is_not_this_machine(svc: Running, scripted: Any, host: str) -> None:
    """DNS rebinding: a site points its name at 127.0.0.1 and its page reads the service as its own origin. The
    requests still say `Host: <that site>`; answered, the page read GET /v1/prompt and spent the provider key."""
    assert svc.decide(decide_body(bee("a"))).status_code == 200
    asked = len(scripted.requests)
    for r in [
        svc.http.get("/v1/prompt", params={"client_id": "game-1"}, headers={"host": host}),
        svc.http.post("/v1/decide", json=decide_body(bee("b")), headers={"host": host}),
        svc.http.get("/", headers={"host": host}),
    ]:
        assert r.status_code == 421 and r.json()["error"]["code"] == "host_not_allowed", r.text
        said = r.json()["error"]["message"]
        assert repr(host) in said and f"NPCMIND_ALLOWED_HOSTS={host.split(':')[0]}" in said, said
    assert len(scripted.requests) == asked


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST:8080", "localhost.:8080", "[::1]:8080", "127.0.0.2", None])
def test_the_local_profile_answers_this_machine_by_its_loopback_names(svc: Running, host: str | None) -> None:
    headers = {"host": host} if host else {}  # None: the client's own, 127.0.0.1:port
    r = svc.http.get("/v1/prompt", params={"client_id": "game-1"}, headers=headers)
    assert r.status_code == 404 and "no decide request yet" in r.text  # answered: nothing decided yet


@pytest.mark.parametrize(
    ("bound", "allowed", "answered"),
    [
        ("192.168.1.20", [], {"192.168.1.20:8080": 200, "localhost": 200, "mybox.lan": 421}),  # --host names it
        ("0.0.0.0", [], {"192.168.1.20:8080": 421, "0.0.0.0": 421, "[::1]:8080": 200}),  # every interface
        ("0.0.0.0", ["mybox.lan", "192.168.1.20"], {"mybox.lan:8080": 200, "192.168.1.20": 200, "other.lan": 421}),
        ("127.0.0.1", ["*"], {"attacker.example": 200}),
    ],
)
def test_the_bound_address_and_the_setting_add_names(
    start_service: Any, bound: str, allowed: list[str], answered: dict[str, int]
) -> None:
    running = start_service(provider="none", host=bound, allowed_hosts=allowed)
    assert {h: running.http.get("/v1/health", headers={"host": h}).status_code for h in answered} == answered


def test_the_hosted_profile_checks_the_host_only_when_told_to(start_service: Any, tmp_path: Path) -> None:
    """Its tokens keep other sites' pages out; a deployment behind a name can still list the names it serves."""
    path, _ = write_clients(tmp_path)
    hosted = start_service(manifest=None, profile="hosted", clients=str(path), provider="none")
    assert hosted.http.get("/v1/health", headers={"host": "api.mygame.example"}).status_code == 200
    told = start_service(
        manifest=None,
        profile="hosted",
        clients=str(path),
        provider="none",
        store=f"sqlite:///{tmp_path}/told.db",  # a store a process
        allowed_hosts=["api.mygame.example"],
    )
    assert told.http.get("/v1/health", headers={"host": "api.mygame.example"}).status_code == 200
    assert told.http.get("/v1/health", headers={"host": "attacker.example"}).status_code == 421


@pytest.mark.parametrize(
    ("value", "hosts"),
    [("", []), (" mybox.lan , 192.168.1.20:8080", ["mybox.lan", "192.168.1.20:8080"]), ("*", ["*"])],
)
def test_the_hosts_setting(value: str, hosts: list[str]) -> None:
    assert Settings.from_env({"NPCMIND_ALLOWED_HOSTS": value}).allowed_hosts == hosts


@pytest.mark.parametrize("value", ["http://mybox.lan", "mybox.lan/x", "my box"])
def test_a_value_that_is_no_host_stops_the_start_naming_it(value: str) -> None:
    with pytest.raises(SettingsError, match=f"NPCMIND_ALLOWED_HOSTS: '{value}' is not a host name.*mybox.lan"):
        Settings.from_env({"NPCMIND_ALLOWED_HOSTS": value})


# --- a real browser --------------------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="no chromium here (apt-get install chromium)")


def serve_folder(folder: Path) -> http.server.ThreadingHTTPServer:
    """Serves a folder over HTTP on its own port: the game's page, on another origin than the service."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a: Any) -> None:
            super().__init__(*a, directory=str(folder))

        def log_message(self, *a: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture()
def page_server(tmp_path: Path) -> Iterator[int]:
    server = serve_folder(tmp_path)
    yield server.server_address[1]
    server.shutdown()


def dom(url: str, profile: Path) -> str:
    """The page's DOM in headless Chromium once its scripts are done (network waits included)."""
    assert CHROMIUM is not None
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=20000",
        "--dump-dom",
    ]
    return subprocess.run([CHROMIUM, *flags, url], capture_output=True, text=True, timeout=300).stdout


def run_page(tmp_path: Path, url: str, script: str, real_time: bool = False) -> str:
    """Open a page whose script is ``script`` until it is done; what it wrote in the body. ``real_time``: in a
    Chromium on the wall clock (cdp.Browser), for a page that reads a streamed answer: --dump-dom's virtual
    time runs on while a response's body is still coming, so the page's timers would outrun its lines."""
    (tmp_path / "index.html").write_text(
        "<!doctype html><body>waiting<script>(async () => {\n" + script + "\n})().then(out => "
        "{ document.body.textContent = 'DONE ' + JSON.stringify(out); }, e => "
        "{ document.body.textContent = 'FAILED ' + e; });</script></body>"
    )
    if real_time:
        from cdp import Browser

        done = "/^(DONE|FAILED) /.test(document.body.textContent) && document.body.textContent"
        with Browser(tmp_path / "profile") as browser:
            browser.open(url)
            return str(browser.wait_for(done, 120))
    out = dom(url, tmp_path / "profile")
    body = out.split("<body>", 1)[-1].split("</body>", 1)[0]
    assert body.startswith(("DONE ", "FAILED ")), out
    return body


@needs_browser
def test_the_browser_example_decides_from_an_allowed_origin_only(
    start_service: Any, scripted: Any, tmp_path: Path
) -> None:
    pages = serve_folder(ROOT / "examples")
    port = pages.server_address[1]
    try:
        running = start_service(
            provider="openai", base_url=scripted.base_url, model="scripted", cors_origins=[PAGE.format(port=port)]
        )
        scripted.set(choose={"28735": "flee", "30122": "chase"})
        out = dom(f"http://localhost:{port}/browser.html?service={running.server.url}", tmp_path / "p1")
        assert 'data-result="answered"' in out, out
        assert "28735: flee (AI)\n30122: chase (AI)" in out, out
        # the same page from 127.0.0.1 is another origin: the browser refuses it the answer, the log says why
        with logged("npcmind.http") as said:
            out = dom(f"http://127.0.0.1:{port}/browser.html?service={running.server.url}", tmp_path / "p2")
        assert 'data-result="failed"' in out and f"NPCMIND_CORS_ORIGINS=http://127.0.0.1:{port}?" in out, out
        assert any(f"NPCMIND_CORS_ORIGINS=http://localhost:{port},http://127.0.0.1:{port} " in m for m in said), said
    finally:
        pages.shutdown()


@needs_browser
def test_a_page_of_any_site_cannot_spend_the_provider_key(
    svc: Running, scripted: Any, page_server: int, tmp_path: Path
) -> None:
    """A page of another origin (none is allowed) posts a decide body as `text/plain;charset=json`: the browser
    sends such a body without asking the service first, and it was taken for JSON and decided."""
    script = f"""
      const sent = [];
      for (const type of ["text/plain;charset=json", "application/x-www-form-urlencoded"]) {{
        try {{
          await fetch("{svc.server.url}/v1/decide", {{method: "POST", mode: "no-cors", headers: {{"content-type":
            type}}, body: JSON.stringify({json.dumps(decide_body(bee("b")))})}});
          sent.push(type);
        }} catch (e) {{ sent.push("failed: " + e); }}
      }}
      return sent;
    """
    body = run_page(tmp_path, f"{PAGE.format(port=page_server)}/index.html", script)
    assert body == 'DONE ["text/plain;charset=json","application/x-www-form-urlencoded"]', body  # sent, unasked
    assert scripted.requests == []  # and refused: no model was asked
    metrics = svc.http.get("/metrics").text.splitlines()
    decided = [float(m.rsplit(" ", 1)[1]) for m in metrics if m.startswith("npcmind_decisions_total{")]
    assert decided and not any(decided)  # no decision of any kind


@needs_browser
def test_a_hosted_browser_game_sends_its_token_and_reads_retry_after(
    start_service: Any, scripted: Any, page_server: int, tmp_path: Path
) -> None:
    origin = PAGE.format(port=page_server)
    path, keys = write_clients(tmp_path, requests_per_second=2)
    running = start_service(
        manifest=None,
        profile="hosted",
        clients=str(path),
        provider="openai",
        base_url=scripted.base_url,
        cors_origins=[origin],
    )
    Hosted(running, keys)
    script = f"""
      const url = "{running.server.url}";
      const s = await (await fetch(url + "/v1/session", {{method: "POST", headers: {{"content-type":
        "application/json", "authorization": "Bearer {keys["game-1"]}"}}, body: JSON.stringify({{client_id:
        "game-1"}})}})).json();
      const auth = {{"content-type": "application/json", "authorization": "Bearer " + s.session_token}};
      const d = await (await fetch(url + "/v1/decide", {{method: "POST", headers: auth,
        body: JSON.stringify({json.dumps(decide_body(bee("b")))})}})).json();
      for (let i = 0; i < 20; i++) {{
        const r = await fetch(url + "/v1/manifest", {{headers: auth}});
        if (r.status === 429) return {{source: d.decisions[0].source, retry_after: r.headers.get("retry-after")}};
      }}
      return {{source: d.decisions[0].source, retry_after: null}};
    """
    body = run_page(tmp_path, f"{origin}/index.html", script)
    assert body.startswith("DONE "), body
    out = json.loads(body[5:])
    assert out["source"] == "AI"
    assert out["retry_after"] is not None and int(out["retry_after"]) >= 1


@needs_browser
def test_the_service_page_shows_what_the_model_saw(svc: Running, scripted: Any, tmp_path: Path) -> None:
    """GET / in a real browser: the last decide request of a client, each entity with what became of it."""
    scripted.set(choose={"a": "flee"}, default="decline")
    assert svc.decide(decide_body(bee("a"), bee("b"))).status_code == 200
    r = svc.http.get("/")
    assert r.status_code == 200 and r.headers["content-type"] == "text/html; charset=utf-8"
    assert "default-src 'self'" in r.headers["content-security-policy"]  # nothing from elsewhere
    out = dom(f"{svc.server.url}/?client_id=game-1", tmp_path / "p")
    assert 'data-state="shown"' in out, out
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", out.split('id="entities"', 1)[1], re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]
    assert [(c[0], c[1], c[4]) for c in cells] == [("E1", "a", "flee"), ("E2", "b", "fallback: refused")], cells
    assert all(re.fullmatch(r"\d+ ms", c[5]) for c in cells), cells  # when each decision went out
    assert "Q1: Options:" in out and "provider: openai" in out  # the prompt as sent, and the service's health
    # a client with no decide request yet: the page says it will show one when it comes, not an error
    out = dom(f"{svc.server.url}/?client_id=nobody", tmp_path / "p2")
    assert 'data-state="waiting"' in out and "No decide request from nobody yet" in out, out
    assert "(client_ids with one: game-1)" in out, out  # a mistyped client_id is seen at once


@needs_browser
def test_the_service_page_after_a_cached_repeat_shows_the_last_prompt_the_model_saw(
    svc: Running, scripted: Any, tmp_path: Path
) -> None:
    """The page said "no model call" after a request served whole from the cache (issue 40): it shows the prompt
    the model last saw for the client, and says the requests since were served from the cache."""
    scripted.set(choose={"a": "flee"})
    for _ in range(2):
        assert svc.decide(decide_body(bee("a"))).status_code == 200
    assert len(scripted.requests) == 1
    out = dom(f"{svc.server.url}/?client_id=game-1", tmp_path / "p")
    summary = re.search(r'id="summary"[^>]*>([^<]*)<', out)
    assert 'data-state="shown"' in out and summary is not None, out
    assert "; model call " in summary[1] and "no model call (every entity" not in summary[1], summary[1]
    assert "Served from the cache since: the last request, at " in summary[1] and "Q1: Options:" in out, out
