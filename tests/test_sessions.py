"""The hosted profile: sessions, tokens, 401/403/429, and what answers without a token."""

from __future__ import annotations

import contextlib
import string
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FOREST, Hosted, bee, cli, decide_body, logged, write_clients
from npcmind.http.app import ROUTES
from npcmind.sessions.tokens import TokenClaims, TokenError, TokenSigner


def test_a_session_token_decides(hosted: Hosted) -> None:
    s = hosted.open()
    assert s["session_token"].startswith("nms1.") and s["session_id"].startswith("s_") and s["expires_in_s"] == 3600
    r = hosted.http.post("/v1/decide", json=decide_body(bee("a")), headers=hosted.auth(s))
    assert r.status_code == 200 and r.json()["decisions"][0]["source"] == "AI"
    m = hosted.http.get("/v1/manifest", headers=hosted.auth(s)).json()
    assert m["client_id"] == "game-1" and m["version"].startswith("sha256:")


def test_wrong_or_missing_keys_cannot_open_sessions(hosted: Hosted) -> None:
    url = "/v1/session"
    assert hosted.http.post(url, json={"client_id": "game-1"}).status_code == 401
    r = hosted.http.post(url, json={"client_id": "game-1"}, headers={"authorization": "Bearer nmk_nope"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    r = hosted.http.post(
        url, json={"client_id": "game-1"}, headers={"authorization": f"Bearer {hosted.keys['game-2']}"}
    )
    assert r.status_code == 403
    r = hosted.http.post(
        url, json={"client_id": "nobody"}, headers={"authorization": f"Bearer {hosted.keys['game-1']}"}
    )
    assert r.status_code == 403


@pytest.mark.fast
@pytest.mark.parametrize(
    "token",
    ["", "Bearer", "Basic abc", "Bearer nms1.garbage", "Bearer nms1.e30.AAAA", "Bearer something-else"],
)
def test_bad_tokens_are_401(shared_hosted: Hosted, token: str) -> None:
    headers = {"authorization": token} if token else {}
    r = shared_hosted.http.post("/v1/decide", json=decide_body(bee("a")), headers=headers)
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"


def test_a_401_says_how_to_get_a_session_token(hosted: Hosted) -> None:
    """The mistakes of a first hosted integration: the client key sent as the token, a stale or ended token."""
    r = hosted.http.post(
        "/v1/decide", json=decide_body(bee("a")), headers={"authorization": f"Bearer {hosted.keys['game-1']}"}
    )
    assert r.status_code == 401
    assert "client API key" in r.json()["error"]["message"] and "POST /v1/session" in r.json()["error"]["message"]
    s = hosted.open()
    for token in ["nms1.garbage", s["session_token"][:-3] + "AAA"]:
        r = hosted.http.get("/v1/manifest", headers={"authorization": f"Bearer {token}"})
        assert r.status_code == 401 and "open a session" in r.json()["error"]["message"], token
    hosted.http.delete("/v1/session", headers=hosted.auth(s))
    r = hosted.http.get("/v1/manifest", headers=hosted.auth(s))
    assert r.status_code == 401
    assert r.json()["error"]["message"].startswith("session ended or unknown: open a session with the client API key")


def test_tampered_token_is_401(hosted: Hosted) -> None:
    s = hosted.open()
    head, body, mac = s["session_token"].split(".")
    claims = msgspec.json.decode(__import__("base64").urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["cid"] = "game-2"
    forged_body = __import__("base64").urlsafe_b64encode(msgspec.json.encode(claims)).decode().rstrip("=")
    forged = f"{head}.{forged_body}.{mac}"
    r = hosted.http.post(
        "/v1/decide", json=decide_body(bee("a"), client_id="game-2"), headers={"authorization": f"Bearer {forged}"}
    )
    assert r.status_code == 401 and "signature" in r.json()["error"]["message"]
    flipped = s["session_token"][:-2] + ("A" if s["session_token"][-2] != "A" else "B") + s["session_token"][-1]
    assert hosted.http.get("/v1/manifest", headers={"authorization": f"Bearer {flipped}"}).status_code == 401


PRINTABLE = "".join(map(chr, range(0x20, 0x7F)))


@pytest.mark.fast
def test_no_other_spelling_of_a_token_verifies() -> None:
    """Every character of a token, changed to every other printable one: the lenient decoder took another last
    character of each part, `+/` for `-_` and stray characters as the same bytes, so some still verified."""
    signer = TokenSigner(b"k" * 32)
    token = signer.sign(TokenClaims("s_" + "ab" * 12, "game-1", 2_000_000_000))
    assert signer.verify(token, 0).cid == "game-1"
    accepted = []
    for i, was in enumerate(token):
        for c in PRINTABLE.replace(was, ""):
            changed = token[:i] + c + token[i + 1 :]
            with contextlib.suppress(TokenError):
                signer.verify(changed, 0)
                accepted.append(changed)
    head, body, mac = token.split(".")
    for padded in (token + "=", token + "==", f"{head}.{body}==.{mac}"):
        with pytest.raises(TokenError):
            signer.verify(padded, 0)
    assert accepted == []


@given(data=st.data())
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_a_token_with_any_character_changed_is_401(hosted: Hosted, data: st.DataObject) -> None:
    """Any printable character in any place, as a header can carry it: a space is one only inside the value (a
    trailing one is not part of it, and httpx refuses to send it: a space drawn last was a LocalProtocolError)."""
    token = hosted.token
    i = data.draw(st.integers(0, len(token) - 1), label="at")
    could = PRINTABLE if i < len(token) - 1 else PRINTABLE.strip()
    c = data.draw(st.sampled_from(could.replace(token[i], "")), label="c")
    changed = token[:i] + c + token[i + 1 :]
    r = hosted.http.get("/v1/manifest", headers={"authorization": f"Bearer {changed}"})
    assert r.status_code == 401, (changed, r.text)


def test_a_token_spelt_otherwise_is_401(hosted: Hosted) -> None:
    """The spellings the lenient decoder took: another last character, `+/` for `-_`, and padding."""
    token = hosted.token
    head, body, mac = token.split(".")
    alphabet = string.ascii_letters + string.digits + "-_"
    others = [f"{head}.{body}.{mac[:-1]}{c}" for c in alphabet if c != mac[-1]]
    others += [f"{head}.{body[:-1]}{c}.{mac}" for c in alphabet if c != body[-1]]
    others += [token + "==", f"{head}.{body}==.{mac}", token.replace("-", "+").replace("_", "/")]
    others = [t for t in others if t != token]
    status = {t: hosted.http.get("/v1/manifest", headers={"authorization": f"Bearer {t}"}).status_code for t in others}
    assert hosted.http.get("/v1/manifest", headers={"authorization": f"Bearer {token}"}).status_code == 200
    assert {t: s for t, s in status.items() if s != 401} == {}


def test_a_client_key_spelt_otherwise_opens_no_session(hosted: Hosted) -> None:
    """Keys are compared whole (by their SHA-256), not decoded: no other spelling of one is taken."""
    key = hosted.keys["game-1"]
    others = [key[:-1] + c for c in "AQgw" if c != key[-1]] + [key + "=", key.replace("-", "+").replace("_", "/")]
    for other in [o for o in others if o != key]:
        r = hosted.http.post("/v1/session", json={"client_id": "game-1"}, headers={"authorization": f"Bearer {other}"})
        assert r.status_code == 401, other


def test_expired_token_is_401(hosted: Hosted) -> None:
    s = hosted.open()
    signer = hosted.running.service.guard.signer
    old = signer.sign(TokenClaims(s["session_id"], "game-1", int(time.time()) - 1))
    r = hosted.http.post("/v1/decide", json=decide_body(bee("a")), headers={"authorization": f"Bearer {old}"})
    assert r.status_code == 401 and "expired" in r.json()["error"]["message"]


def test_token_of_another_client_is_403(hosted: Hosted) -> None:
    s2 = hosted.open("game-2")
    for path, body in [
        ("/v1/decide", decide_body(bee("a"))),
        ("/v1/telemetry", {"client_id": "game-1", "epoch": 1}),
        ("/v1/report", {"client_id": "game-1", "reports": [{"decision_id": "d_x", "outcome": "done"}]}),
        ("/v1/context", {"client_id": "game-1", "scopes": {"cave": {"text": "A cave."}}}),
    ]:
        r = hosted.http.post(path, json=body, headers=hosted.auth(s2))
        assert r.status_code == 403, (path, r.text)
        assert r.json()["error"]["code"] == "forbidden"


def test_ended_session_is_401(hosted: Hosted) -> None:
    s = hosted.open()
    r = hosted.http.delete("/v1/session", headers=hosted.auth(s))
    assert r.status_code == 200 and r.json() == {"ended": s["session_id"]}
    r = hosted.http.post("/v1/decide", json=decide_body(bee("a")), headers=hosted.auth(s))
    assert r.status_code == 401


def test_only_the_named_routes_answer_without_a_token(shared_hosted: Hosted) -> None:
    public = {("post", "/v1/session"), ("get", "/v1/health"), ("head", "/v1/health"), ("get", "/v1/keys"), ("get", "/")}
    public |= {("get", "/demo"), ("get", "/demo/demo.js")}  # the demo game: a page and its script, no data
    public.add(("get", "/replay"))  # the replay report's page: it shows a file the person opens, no data of ours
    for route in ROUTES:
        r = shared_hosted.http.request(route.method.upper(), route.path.replace("{npcId}", "x"), json={})
        if (route.method, route.path) in public:
            assert r.status_code != 401, route
        else:
            assert r.status_code == 401, (route, r.status_code, r.text)
    assert shared_hosted.http.get("/v1/health").status_code == 200
    head = shared_hosted.http.head("/v1/health")  # uptime monitors ask with HEAD
    assert head.status_code == 200 and head.content == b""


def test_session_limit(start_service: Any, scripted: Any, tmp_path: Path) -> None:
    path, keys = write_clients(tmp_path, max_sessions=2)
    h = Hosted(start_service(manifest=None, profile="hosted", clients=str(path), provider="none"), keys)
    h.open()
    h.open()
    r = h.http.post("/v1/session", json={"client_id": "game-1"}, headers={"authorization": f"Bearer {keys['game-1']}"})
    assert r.status_code == 429 and r.json()["error"]["code"] == "too_many_sessions"
    h.open("game-2")  # another client's limit is its own


@pytest.mark.fast
def test_request_rate_is_429_with_retry_after(start_service: Any, tmp_path: Path) -> None:
    path, keys = write_clients(tmp_path, requests_per_second=2)
    h = Hosted(start_service(manifest=None, profile="hosted", clients=str(path), provider="none"), keys)
    s = h.open()
    statuses = [h.http.get("/v1/manifest", headers=h.auth(s)).status_code for _ in range(8)]
    assert statuses[:4] == [200] * 4 and 429 in statuses
    r = h.http.get("/v1/manifest", headers=h.auth(s))
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1


def test_one_session_flooding_leaves_another_its_share(start_service: Any, scripted: Any, tmp_path: Path) -> None:
    """Session A floods GET /v1/manifest: with one bucket a client, B's decides got 429. Each session may always
    use its share (the rate over max_sessions). The rate is low enough (a token a session every 100 s, one
    for the client every 50 s) that no slow machine refills a bucket while the test runs."""
    path, keys = write_clients(tmp_path, requests_per_second=0.02, max_sessions=2)
    h = Hosted(start_service(manifest=None, profile="hosted", clients=str(path), provider="none"), keys)
    a, b = h.auth(h.open()), h.auth(h.open())
    flood = [h.http.get("/v1/manifest", headers=a).status_code for _ in range(30)]
    assert flood.count(200) <= 2 and 429 in flood, flood  # its share and the client's burst, then refused
    r = h.http.post("/v1/decide", json=decide_body(bee("b1")), headers=b)
    assert r.status_code == 200, r.text  # B's share is B's: A cannot spend it
    again = h.http.post("/v1/decide", json=decide_body(bee("b1")), headers=b)
    assert again.status_code == 429 and again.json()["error"]["code"] == "rate_limited"  # past it, the client's rate


def test_local_profile_needs_no_token_and_has_no_sessions(svc: Any) -> None:
    assert svc.decide(decide_body(bee("a"))).status_code == 200
    assert svc.http.post("/v1/session", json={"client_id": "x"}).status_code == 404


@pytest.mark.parametrize("client_id", ["studio-7", "my game: beta", "123", "yes", "#1"])
def test_keygen_prints_a_key_and_a_line_the_clients_file_takes(client_id: str, tmp_path: Path) -> None:
    r = cli("keygen", client_id, "--manifest", str(FOREST))
    assert r.returncode == 0
    key = next(w for w in r.stdout.split() if w.startswith("nmk_"))
    from npcmind.sessions.clients import hash_key, load_clients

    line = r.stdout.split("Paste", 1)[1].strip().splitlines()[-1]
    assert len(key) >= 40 and hash_key(key) in line
    assert key not in line  # the clients-file line holds only the hash
    (tmp_path / "clients.yaml").write_text(line.strip() + "\n")  # pasted alone, without `clients:` above it
    from npcmind.manifest import ManifestError

    with pytest.raises(ManifestError) as e:
        load_clients(tmp_path / "clients.yaml")
    assert "goes under `clients:`" in e.value.problems[0].message
    (tmp_path / "clients.yaml").write_text("clients:\n" + line + "\n")  # pasted as the output says
    clients = load_clients(tmp_path / "clients.yaml")
    assert list(clients) == [client_id] and clients[client_id].spec.key_sha256 == hash_key(key)


@pytest.mark.fast
def test_a_clients_file_gives_each_client_a_key_of_its_own(tmp_path: Path) -> None:
    """Two clients with one key: the key opened sessions for one of them only, and the other got a 403."""
    from npcmind.manifest import ManifestError
    from npcmind.sessions.clients import hash_key, load_clients

    same = hash_key("nmk_shared")
    (tmp_path / "clients.yaml").write_text(
        f"clients:\n  - {{client_id: a, manifest: {FOREST}, key_sha256: {same}}}\n"
        f"  - {{client_id: b, manifest: {FOREST}, key_sha256: {same}}}\n"
        f"  - {{client_id: c, manifest: {FOREST}, key_sha256: ABC}}\n"
    )
    with pytest.raises(ManifestError) as e:
        load_clients(tmp_path / "clients.yaml")
    said = {p.path: p.message for p in e.value.problems}
    assert said == {"clients[2].key_sha256": "must be 64 lowercase hex digits, as `npcmind keygen` prints it"}
    (tmp_path / "clients.yaml").write_text("\n".join((tmp_path / "clients.yaml").read_text().splitlines()[:3]) + "\n")
    with pytest.raises(ManifestError) as e:
        load_clients(tmp_path / "clients.yaml")
    assert [(p.path, p.message) for p in e.value.problems] == [
        ("clients[1].key_sha256", "the key of client 'a' too: each client needs a key of its own (npcmind keygen)")
    ]


def test_keygen_refuses_an_id_no_request_could_name() -> None:
    for client_id, said in [("", "must not be empty"), ("x" * 129, "has 129 characters, at most 128 allowed")]:
        r = cli("keygen", client_id)
        assert r.returncode == 2 and "nmk_" not in r.stdout
        assert f"npcmind keygen: CLIENT_ID {said}" in r.stderr


def test_sessions_beyond_those_held_in_memory_still_answer_from_the_store(
    start_service: Any, scripted: Any, tmp_path: Path
) -> None:
    path, keys = write_clients(tmp_path, max_sessions=8)
    running = start_service(manifest=None, profile="hosted", clients=str(path), provider="none", max_sessions=2)
    h = Hosted(running, keys)
    first, second, ended = h.open(), h.open(), h.open()
    assert h.http.delete("/v1/session", headers=h.auth(ended)).status_code == 200
    h.open(), h.open()  # push the first three out of the guard's and the hub's memory
    assert len(running.service.guard._sessions) <= 2 and len(running.service.hub.sessions._states) <= 2
    for s in (first, second):
        r = h.http.post("/v1/decide", json=decide_body(bee("a")), headers=h.auth(s))
        assert r.status_code == 200 and r.json()["decisions"][0]["code"] == "unavailable"
    r = h.http.post("/v1/decide", json=decide_body(bee("a")), headers=h.auth(ended))
    assert r.status_code == 401  # ended is ended, held in memory or not


def test_sessions_let_go_past_the_limit_are_counted_not_a_line_each(start_service: Any) -> None:
    """Past NPCMIND_MAX_SESSIONS every request of a new session let one go, and each was a line (30,001 lines):
    now one line at most every 10 s, counting the rest. The line's clock is the test's, so no wait is needed."""
    running = start_service(provider="none", max_sessions=2)
    now = [1000.0]
    running.service.hub.sessions.let_go.clock = lambda: now[0]
    with logged("npcmind.context") as said:
        for i in range(41):
            if i in (30, 40):
                now[0] += 10  # the next line is due
            r = running.http.post("/v1/telemetry", json={"client_id": f"c{i}", "epoch": 1})
            assert r.status_code == 200, r.text
    lines = [m for m in said if "let go of its soft state" in m]
    assert lines == [  # 39 let go: c0 said, 27 counted; c28 said, 9 counted; c38 said
        "session local:c0 let go of its soft state: more than 2 sessions in use",
        "session local:c28 let go of its soft state: more than 2 sessions in use "
        "(27 more sessions let go since the last line)",
        "session local:c38 let go of its soft state: more than 2 sessions in use "
        "(9 more sessions let go since the last line)",
    ]


@pytest.mark.fast
@pytest.mark.parametrize(
    ("host", "warned"),
    [("0.0.0.0", True), ("192.168.1.20", True), ("127.0.0.1", False), ("::1", False), ("localhost", False)],
)
def test_the_local_profile_on_a_reachable_address_warns_that_it_asks_no_token(
    start_service: Any, host: str, warned: bool
) -> None:
    with logged("npcmind") as said:
        start_service(provider="none", host=host)
    assert any(f"listening on {host} with the local profile" in m and "--profile hosted" in m for m in said) == warned


@pytest.mark.fast
def test_the_hosted_profile_on_any_address_does_not_warn(start_service: Any, tmp_path: Path) -> None:
    path, _ = write_clients(tmp_path)
    with logged("npcmind") as said:
        start_service(manifest=None, profile="hosted", clients=str(path), provider="none", host="0.0.0.0")
    assert not any("asks no token" in m for m in said), said
