"""Every violation of the seed's field table is a 422 naming its path; other bad input gets its own 4xx."""

from __future__ import annotations

import copy
import gzip
import json
import logging
import math
import sqlite3
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
import pytest
from litestar.routes import HTTPRoute
from msgspec import Meta

from conftest import BOSS_OBS, Running, bee, decide_body, queen
from npcmind.http.app import document

pytestmark = pytest.mark.fast  # the whole file is in the fast tier (docs/testing.md)

JSON_CT = {"content-type": "application/json"}
# the one rule for every number a body holds: what a 64-bit float (JSON's number, every engine's) holds
NUMBER_RULE = "must be a finite number within ±1.8e308"
INTEGER_RULE = "must be a whole number within ±9007199254740991 (2^53-1)"

Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    def apply(body: dict[str, Any]) -> None:
        node: Any = body
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node[k]
        last = keys[-1]
        if value is _DELETE:
            del node[int(last) if last.isdigit() else last]
        else:
            node[int(last) if last.isdigit() else last] = value

    return apply


_DELETE = object()

CASES: list[tuple[str, Mutation, str]] = [
    ("world missing a field", _set("world.repellent", _DELETE), "world.repellent"),
    ("world extra field", _set("world.gold", 3), "world.gold"),
    ("world wrong type", _set("world.repellent", "yes"), "world.repellent"),
    ("world out of range", _set("world.player_hp_fraction", 1.5), "world.player_hp_fraction"),
    ("world missing", _set("world", _DELETE), "world"),
    ("epoch negative", _set("epoch", -1), "epoch"),
    ("epoch not integer", _set("epoch", 1.5), "epoch"),
    ("epoch missing", _set("epoch", _DELETE), "epoch"),
    ("client_id missing", _set("client_id", _DELETE), "client_id"),
    ("unknown top-level field", _set("mode", "x"), "mode"),
    ("no entities", _set("entities", []), "entities"),
    ("17 entities", _set("entities", [bee(str(i)) for i in range(17)]), "entities"),
    ("unknown type", _set("entities.0.type", "wasp"), "entities[0].type"),
    ("observe-only type", _set("entities.0.type", "player"), "entities[0].type"),
    ("type missing", _set("entities.0.type", _DELETE), "entities[0].type"),
    (
        "observation missing field",
        _set("entities.0.observation.sees_player", _DELETE),
        "entities[0].observation.sees_player",
    ),
    ("observation extra field", _set("entities.0.observation.mood", "angry"), "entities[0].observation.mood"),
    ("observation wrong type", _set("entities.0.observation.sees_player", 1), "entities[0].observation.sees_player"),
    (
        "observation out of range",
        _set("entities.0.observation.hp_fraction", -0.1),
        "entities[0].observation.hp_fraction",
    ),
    (
        "observation enum value",
        _set("entities.0.observation.current_action", "dance"),
        "entities[0].observation.current_action",
    ),
    ("observation missing", _set("entities.0.observation", _DELETE), "entities[0].observation"),
    ("legal_actions empty", _set("entities.0.legal_actions", []), "entities[0].legal_actions"),
    (
        "legal_actions not a subset",
        _set("entities.0.legal_actions", ["idle", "surround"]),
        "entities[0].legal_actions[1]",
    ),
    ("legal_actions repeated", _set("entities.0.legal_actions", ["idle", "idle"]), "entities[0].legal_actions[1]"),
    ("legal_actions not strings", _set("entities.0.legal_actions", [1]), "entities[0].legal_actions[0]"),
    ("duplicate ids", _set("entities", [bee("a"), bee("a")]), "entities[1].id"),
    ("position one number", _set("entities.0.position", [1.0]), "entities[0].position"),
    ("position four numbers", _set("entities.0.position", [1, 2, 3, 4]), "entities[0].position"),
    ("position strings", _set("entities.0.position", ["a", 1]), "entities[0].position[0]"),
    ("unknown profile", _set("entities.0.profile", "king"), "entities[0].profile"),
    ("profile of another type", _set("entities.0.profile", "queen_bee"), "entities[0].profile"),
    ("trigger not an event", _set("entities.0.trigger", "sneeze"), "entities[0].trigger"),
    ("unknown entity field", _set("entities.0.hp", 3), "entities[0].hp"),
    ("unknown scope", _set("scope", "desert"), "scope"),
    ("scope_state missing a field", _set("scope_state", {}), "scope_state.boss_phase"),
    ("scope_state extra field", _set("scope_state.weather", "rain"), "scope_state.weather"),
    ("scope_state out of range", _set("scope_state.boss_phase", 9), "scope_state.boss_phase"),
    ("scope_state without its scope", _set("scope", _DELETE), "scope_state"),
    ("scope_state missing for a scope with fields", _set("scope_state", _DELETE), "scope_state"),
]


@pytest.mark.parametrize(("name", "mutate", "path"), CASES, ids=[c[0] for c in CASES])
def test_violation_is_422_naming_the_path(
    shared_svc: Running, shared_scripted: Any, name: str, mutate: Mutation, path: str
) -> None:
    body = decide_body(bee("a"))
    mutate(body)
    r = shared_svc.decide(body)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_request"
    assert path in [d["path"] for d in err["details"]], err
    assert shared_scripted.requests == []  # nothing of a rejected request reaches the provider
    db = sqlite3.connect(shared_svc.service.store.path)  # type: ignore[attr-defined]
    assert db.execute("SELECT COUNT(*) FROM batches").fetchone()[0] == 0


def test_every_problem_is_listed_at_once(shared_svc: Running) -> None:
    body = decide_body(
        bee("a", legal_actions=["idle", "surround"], trigger="sneeze"),
        queen(observation={**BOSS_OBS, "hp_fraction": 7}, legal_actions=["idle"]),
        world={"player_hp_fraction": 0.4},
    )
    paths = {d["path"] for d in shared_svc.decide(body).json()["error"]["details"]}
    assert {
        "world.repellent",
        "entities[0].legal_actions[1]",
        "entities[0].trigger",
        "entities[1].observation.hp_fraction",
    } <= paths


def test_a_position_beyond_floating_point_is_rejected(shared_svc: Running) -> None:
    raw = (
        b'{"client_id":"c","epoch":1,"world":{"player_hp_fraction":0.4,"repellent":false},"entities":['
        b'{"id":"a","type":"bee","observation":{"hp_fraction":0.3,"distance_to_player":9,"sees_player":true,'
        b'"current_action":"idle"},"legal_actions":["idle"],"position":[1e999,0]}]}'
    )
    r = shared_svc.http.post("/v1/decide", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["details"][0]["path"] == "entities[0].position[0]", r.text


def test_a_number_beyond_floating_point_is_named_by_its_full_path(shared_svc: Running) -> None:
    """msgspec's own error stops at a free-form object (`observation[...]`); a game developer needs the field."""
    body = json.dumps(decide_body(bee("a"), bee("b")))
    raw = body.replace('"distance_to_player": 96.4', '"distance_to_player": 1e999', 1).replace(
        '"epoch": 7', '"epoch": 1e999'
    )
    assert raw.count("1e999") == 2, raw
    r = shared_svc.http.post("/v1/decide", content=raw.encode(), headers=JSON_CT)
    assert r.status_code == 422, r.text
    found = {d["path"]: d["message"] for d in r.json()["error"]["details"]}
    assert found == {
        "entities[0].observation.distance_to_player": NUMBER_RULE,
        "epoch": NUMBER_RULE,
    }, found
    # the manifest's problems of the same body come in the same answer, not in a second one once it is fixed
    raw = raw.replace('"sees_player": true', '"sees_player": 1', 1).replace('"repellent": false', '"repellent": 0')
    r = shared_svc.http.post("/v1/decide", content=raw.encode(), headers=JSON_CT)
    found = {d["path"]: d["message"] for d in r.json()["error"]["details"]}
    assert found == {
        "entities[0].observation.distance_to_player": NUMBER_RULE,
        "epoch": NUMBER_RULE,
        "entities[0].observation.sees_player": "must be a boolean, not integer",
        "world.repellent": "must be a boolean, not integer",
    }, found
    huge = json.dumps({**decide_body(bee("a")), "epoch": 2**70, "entities": []})
    r = shared_svc.http.post("/v1/decide", content=huge.encode(), headers=JSON_CT)
    found = {d["path"]: d["message"] for d in r.json()["error"]["details"]}
    assert found == {"epoch": INTEGER_RULE, "entities": "must not be empty"}, found


def test_a_value_of_the_wrong_kind_says_what_it_is(shared_svc: Running) -> None:
    body = decide_body(bee("a"))
    body["entities"][0]["observation"].update(distance_to_player="far", sees_player="yes", current_action=3)
    body["world"]["player_hp_fraction"] = None
    found = {d["path"]: d["message"] for d in shared_svc.decide(body).json()["error"]["details"]}
    assert found == {
        "world.player_hp_fraction": "must be a number, not null",
        "entities[0].observation.distance_to_player": "must be a number, not string",
        "entities[0].observation.sees_player": "must be a boolean, not string",
        "entities[0].observation.current_action": "must be one of idle, wander, chase, flee",
    }, found


def test_a_whole_number_with_a_decimal_point_is_told_the_fix(shared_svc: Running) -> None:
    """Engines that keep every number a float write 2.0 for an integer: strict, but the message says what to send."""
    body = decide_body(queen(), epoch=7.0, scope="forest_boss", scope_state={"boss_phase": 2.0})
    found = {d["path"]: d["message"] for d in shared_svc.decide(body).json()["error"]["details"]}
    fix = "2.0: send a whole number without a decimal point (an int, not a float)"
    assert found == {"epoch": found.get("epoch"), "scope_state.boss_phase": f"must be an integer, not {fix}"}, found
    assert found["epoch"].endswith("not 7.0: send a whole number without a decimal point (an int, not a float)")
    body = decide_body(queen(), scope="forest_boss", scope_state={"boss_phase": 2.5})  # a fraction: just the kind
    assert shared_svc.decide(body).json()["error"]["details"] == [
        {"path": "scope_state.boss_phase", "message": "must be an integer, not number"}
    ]


def test_a_position_sent_as_an_object_is_told_the_form(shared_svc: Running) -> None:
    """Unity and Unreal write a vector as {"x": .., "y": .., "z": ..}: the 422 shows what to send instead."""
    body = decide_body(bee("a", position={"x": 1.0, "y": 2.0, "z": 0.5}))
    said = {p["path"]: p["message"] for p in shared_svc.decide(body).json()["error"]["details"]}
    assert said == {"entities[0].position": "must be an array [x, y] or [x, y, z] or null, not object"}, said


def test_thousands_of_problems_are_counted_not_all_listed(shared_svc: Running) -> None:
    """An 86 KB body of 6,000 unknown fields got a 943 KB 422 back; the first 200 say what to fix."""
    body = decide_body(bee("a"), bee("b"))
    for e in body["entities"]:
        e["observation"].update({f"f{i}": i for i in range(3000)})
    r = shared_svc.decide(body)
    assert r.status_code == 422 and len(r.content) < 50_000, len(r.content)
    error = r.json()["error"]
    assert error["message"].endswith("(and 5999 more)"), error["message"]
    details = error["details"]
    assert len(details) == 201 and details[0]["path"] == "entities[0].observation.f0"
    assert details[-1] == {"path": "", "message": "and 5800 more problems, not listed: fix these first"}


def test_malformed_json_is_400(shared_svc: Running) -> None:
    r = shared_svc.http.post("/v1/decide", content=b'{"client_id": ', headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "malformed_json"


def test_a_byte_order_mark_before_the_json_is_ignored(svc: Running) -> None:
    """.NET's default UTF-8 encoder writes one; a game must not fail on it, nor lose the 422's detail."""
    bom = b"\xef\xbb\xbf"
    r = svc.http.post("/v1/decide", content=bom + json.dumps(decide_body()).encode(), headers=JSON_CT)
    assert r.status_code == 200 and r.json()["decisions"][0]["source"] == "AI", r.text
    bad = decide_body(bee("b", type="be"))
    r = svc.http.post("/v1/decide", content=bom + json.dumps(bad).encode(), headers=JSON_CT)
    assert r.status_code == 422 and "did you mean 'bee'" in r.text, r.text


def test_not_json_is_415(shared_svc: Running) -> None:
    r = shared_svc.http.post("/v1/decide", content=b"client_id=x", headers={"content-type": "text/plain"})
    assert r.status_code == 415 and "application/json" in r.json()["error"]["message"]


BODY_ROUTES = ["/v1/decide", "/v1/telemetry", "/v1/context", "/v1/report", "/v1/session", "/npcs/mara/process"]


@pytest.mark.parametrize(
    "ctype",
    [
        "text/plain;charset=json",  # a page on any site sends it without asking: it passed for JSON
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "application/json-seq",
        "text/json",
        "application/json, text/plain",
        None,  # none at all, with a body
    ],
)
def test_a_body_not_sent_as_json_is_415_naming_what_came_and_what_to_send(
    shared_svc: Running, shared_scripted: Any, ctype: str | None
) -> None:
    headers = {"content-type": ctype} if ctype is not None else {}
    for path in BODY_ROUTES:
        r = shared_svc.http.post(path, content=json.dumps(decide_body()).encode(), headers=headers)
        assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type", (path, r.text)
        said = r.json()["error"]["message"]
        assert "send content-type: application/json" in said, said
        assert (repr(ctype) if ctype else "content-type is missing") in said, said
    assert shared_scripted.requests == []  # nothing was decided, nothing spent


@pytest.mark.parametrize(
    "ctype", ["application/json", "application/json; charset=utf-8", "Application/JSON", "application/vnd.foo+json"]
)
def test_json_and_its_named_kinds_are_read(svc: Running, ctype: str) -> None:
    r = svc.http.post("/v1/decide", content=json.dumps(decide_body()).encode(), headers={"content-type": ctype})
    assert r.status_code == 200 and r.json()["decisions"][0]["source"] == "AI", r.text
    r = svc.http.post("/v1/telemetry", content=b'{"client_id": "game-1", "epoch": 1}', headers={"content-type": ctype})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    ("headers", "encode", "says"),
    [
        ({"content-encoding": "br"}, gzip.compress, "content-encoding 'br' is not accepted: send the body gzip"),
        ({"content-type": "application/json; charset=utf-16"}, lambda b: b.decode().encode("utf-16"), "charset=utf-16"),
        ({}, lambda b: b.decode().encode("utf-16"), "the body is UTF-16"),  # a byte order mark, no charset
    ],
)
def test_a_compressed_or_utf16_body_is_415_saying_so(
    headers: dict[str, str], encode: Callable[[bytes], bytes], says: str, svc: Running
) -> None:
    """Not the decoder's 'invalid character (byte 0)', which sends a game developer looking in the wrong place."""
    r = svc.http.post("/v1/decide", content=encode(json.dumps(decide_body()).encode()), headers={**JSON_CT, **headers})
    assert r.status_code == 415 and says in r.json()["error"]["message"], r.text
    ok = {**JSON_CT, "content-type": "application/json; charset=UTF-8", "content-encoding": "identity"}
    assert svc.http.post("/v1/decide", content=json.dumps(decide_body()).encode(), headers=ok).status_code == 200
    # a body that decodes is taken as it is, whatever the headers claim (some HTTP clients label ASCII
    # JSON as ISO-8859-1): the encoding is looked at only to explain a body that did not decode
    latin = {**JSON_CT, "content-type": "application/json; charset=ISO-8859-1"}
    assert svc.http.post("/v1/decide", content=json.dumps(decide_body()).encode(), headers=latin).status_code == 200


def test_a_gzip_body_is_read_within_the_body_limit_once_unpacked(svc: Running) -> None:
    """A large scene's telemetry is about a tenth of its size in gzip; a body that unpacks past the limit (a
    small bomb) is refused as a large body would be, and a body that is not gzip says so."""
    zipped = {**JSON_CT, "content-encoding": "gzip"}
    r = svc.http.post("/v1/decide", content=gzip.compress(json.dumps(decide_body(bee("a"))).encode()), headers=zipped)
    assert r.status_code == 200 and r.json()["decisions"][0]["source"] == "AI", r.text
    scene = {"client_id": "game-1", "epoch": 1, "entities": [{"id": f"t{i}", "type": "bee"} for i in range(9000)]}
    raw = json.dumps(scene).encode()
    assert len(raw) > 256 * 1024  # over the body limit as it is
    r = svc.http.post("/v1/telemetry", content=gzip.compress(raw), headers=zipped)
    assert r.status_code == 413 and "unpacked" in r.json()["error"]["message"], r.text
    scene["entities"] = scene["entities"][:2000]
    r = svc.http.post("/v1/telemetry", content=gzip.compress(json.dumps(scene).encode()), headers=zipped)
    assert r.json() == {"accepted": 2000}, r.text
    bomb = gzip.compress(b" " * (50 * 1024 * 1024))  # 50 MB of spaces in about 50 KB
    r = svc.http.post("/v1/decide", content=bomb, headers=zipped)
    assert r.status_code == 413 and "NPCMIND_MAX_BODY_BYTES" in r.json()["error"]["message"]
    r = svc.http.post("/v1/decide", content=json.dumps(decide_body()).encode(), headers=zipped)
    assert r.status_code == 400 and "the body is not gzip" in r.json()["error"]["message"]
    cut = gzip.compress(json.dumps(decide_body()).encode())[:-12]
    r = svc.http.post("/v1/decide", content=cut, headers=zipped)
    assert r.status_code == 400 and "cut short" in r.json()["error"]["message"]
    two = gzip.compress(json.dumps(decide_body(bee("a"))).encode()) + gzip.compress(b" ")  # a second member
    r = svc.http.post("/v1/decide", content=two, headers=zipped)
    assert r.status_code == 400 and "bytes follow the end of the gzip body" in r.json()["error"]["message"], r.text


def test_body_over_the_limit_is_413(shared_svc: Running) -> None:
    r = shared_svc.http.post("/v1/decide", content=b" " * (300 * 1024), headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
    assert "262144 bytes (NPCMIND_MAX_BODY_BYTES)" in r.json()["error"]["message"]


def test_unknown_route_and_method_are_json_and_say_what_there_is(shared_svc: Running) -> None:
    r = shared_svc.http.get("/v1/nothing")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = shared_svc.http.post("/v1/decisions", json={})
    message = r.json()["error"]["message"]
    assert r.status_code == 404 and message.startswith(
        "no route POST /v1/decisions; did you mean '/v1/decide'? (routes: "
    )
    assert "/v1/telemetry" in message and "in all" not in message  # every API route, the pages left to the hint
    r = shared_svc.http.get("/replya")
    assert r.status_code == 404 and "did you mean '/replay'?" in r.json()["error"]["message"]
    r = shared_svc.http.get("/v1/decide")
    assert r.status_code == 405 and r.json()["error"] == {
        "code": "method_not_allowed",
        "message": "/v1/decide takes POST, not GET",
        "details": [],
    }
    r = shared_svc.http.get("/npcs/mara/process")
    assert r.status_code == 405 and r.json()["error"]["message"] == "/npcs/mara/process takes POST, not GET"


@pytest.mark.parametrize("body", [b"[]", b"null", b"3", b'"x"', b"{}"])
def test_non_object_bodies_are_422(shared_svc: Running, body: bytes) -> None:
    r = shared_svc.http.post("/v1/decide", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422


def test_shape_and_manifest_problems_in_one_answer(shared_svc: Running) -> None:
    body = decide_body(bee("a", position=[1]), bee("b", trigger="sneeze"), world={"player_hp_fraction": 0.4})
    paths = {d["path"] for d in shared_svc.decide(body).json()["error"]["details"]}
    assert {"entities[0].position", "entities[1].trigger", "world.repellent"} <= paths
    # the mis-shaped entity's own observation and type too: not a second 422 once its position is fixed
    wrong = bee("c", position=[1])
    wrong["observation"]["hp_fraction"] = 2
    odd = {**bee("d"), "type": "wasp", "legal_actions": "fly"}
    details = shared_svc.decide(decide_body(wrong, odd)).json()["error"]["details"]
    said = {d["path"]: d["message"] for d in details}
    assert {"entities[0].position", "entities[0].observation.hp_fraction", "entities[1].type"} <= set(said), said
    assert "unknown type 'wasp'" in said["entities[1].type"] and "entities[1].legal_actions" in said
    assert len(details) == len(said)  # each path once


def test_a_misspelt_name_gets_its_likely_fix_and_the_names_there_are(shared_svc: Running) -> None:
    body = decide_body(bee("a"), queen("q"))
    body["world"]["repelent"] = body["world"].pop("repellent")
    body["scope"] = "forest_bos"
    body["entities"][0]["trigger"] = "hitt"
    body["entities"][1]["legal_actions"] = ["idle", "dance"]
    body["entities"][1]["profile"] = "queen"
    r = shared_svc.decide(body)
    assert r.status_code == 422
    said = {p["path"]: p["message"] for p in r.json()["error"]["details"]}
    assert said["world.repelent"] == (
        "is not a field of the world; did you mean 'repellent'? (its fields: player_hp_fraction, repellent)"
    )
    assert said["scope"] == "unknown scope 'forest_bos'; did you mean 'forest_boss'? (scopes: forest, forest_boss)"
    assert said["entities[0].trigger"] == (
        "'hitt' is not an event of type bee; did you mean 'hit'? (its events: ally_died, hit)"
    )
    assert said["entities[1].legal_actions[1]"] == (
        "'dance' is not an action of type boss (its actions: chase, flee, idle)"  # nothing close: no guess
    )
    assert said["entities[1].profile"].startswith("unknown profile 'queen'; did you mean 'queen_bee'?")
    body = decide_body(bee("a"))
    body["entities"][0]["type"] = "bees"
    said = {p["path"]: p["message"] for p in shared_svc.decide(body).json()["error"]["details"]}
    assert said["entities[0].type"] == ("unknown type 'bees'; did you mean 'bee'? (types: bee, boss, player, swarm)")
    body["entities"][0]["type"] = "Bee"  # C# naming: too short a name for a guess by spelling, yet plainly meant
    said = {p["path"]: p["message"] for p in shared_svc.decide(body).json()["error"]["details"]}
    assert said["entities[0].type"] == ("unknown type 'Bee'; did you mean 'bee'? (types: bee, boss, player, swarm)")


def test_a_misspelt_protocol_field_gets_its_likely_fix(shared_svc: Running) -> None:
    body = decide_body(bee("a"))
    body["entities"][0]["legal_action"] = body["entities"][0].pop("legal_actions")
    said = {p["path"]: p["message"] for p in shared_svc.decide(body).json()["error"]["details"]}
    assert said["entities[0].legal_actions"] == "is required"
    assert said["entities[0].legal_action"].startswith(
        "is not a known field; did you mean 'legal_actions'? (fields: id, legal_actions, observation,"
    )


class _Patterned(msgspec.Struct):
    described: Annotated[str, Meta(pattern="^x$", description="documented, with no words for its rule")]
    shaped: Annotated[str, Meta(pattern="^y$", extra={"shape": "the letter y"})]
    bare: Annotated[str, Meta(pattern="^z$")]


def test_a_pattern_is_told_in_its_own_words_or_as_the_pattern_never_as_a_wrong_kind() -> None:
    from npcmind.protocol.validate import problems

    said = {p.path: p.message for p in problems({"described": "q", "shaped": "q", "bare": "q"}, _Patterned)}
    assert said == {"described": "must match ^x$", "shaped": "must be the letter y", "bare": "must match ^z$"}


def test_every_field_of_every_route_is_described_in_the_openapi_document() -> None:
    """A client generated in the game's language carries these descriptions as its documentation."""
    doc = msgspec.json.decode(document())
    undescribed = [
        f"{name}.{prop}"
        for name, component in doc["components"]["schemas"].items()
        for prop, schema in component.get("properties", {}).items()
        if not schema.get("description")
    ]
    assert undescribed == []
    assert len(doc["components"]["schemas"]) >= 30  # the routes' types are all in it, not a few


def test_every_route_method_and_parameter_of_the_app_is_in_its_openapi_document(shared_svc: Running) -> None:
    """Walk what the running app routes (Litestar's routes, the query parameters each handler reads) against
    GET /openapi.json: the document kept by hand lacked /v1/prompt's client_id; OPTIONS lacked DELETE and HEAD."""
    doc = shared_svc.http.get("/openapi.json").json()["paths"]
    missing, allow = [], {}
    for route in shared_svc.server.app.app.routes:  # the Litestar app behind the hot routes
        assert isinstance(route, HTTPRoute)
        concrete = route.path_format.replace("{npcId}", "mara")
        allow[route.path_format] = shared_svc.http.options(concrete).headers.get("allow", "")
        for method, (_, kwargs) in route.route_handler_map.items():
            if method == "OPTIONS":
                continue
            op = doc.get(route.path_format, {}).get(method.lower())
            if op is None:
                missing.append(f"{method} {route.path_format}")
                continue
            documented = {(p["in"], p["name"]) for p in op.get("parameters", [])}
            read = {("query", q.field_alias) for q in kwargs.expected_query_params}
            read |= {("path", name) for name in route.path_parameters}
            missing += [f"{method} {route.path_format} {where} {name}" for where, name in sorted(read - documented)]
        methods = {m.strip() for m in allow[route.path_format].split(",")}
        assert methods == set(route.methods), (route.path_format, allow[route.path_format])
    assert missing == []
    assert {(p["in"], p["name"]) for p in doc["/v1/prompt"]["get"]["parameters"]} == {("query", "client_id")}
    assert allow["/v1/session"] == "DELETE, OPTIONS, POST" and allow["/v1/health"] == "GET, HEAD, OPTIONS"
    assert set(doc) == set(allow)  # no path documented that the app does not route


def test_a_bug_gives_a_json_500_and_its_traceback_once_not_once_a_request(
    svc: Running, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No input should reach this; if a bug does, the game gets the protocol's JSON error and the log one
    traceback, then a line at most every 10 s, not a traceback a request."""

    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(svc.service.pipeline, "decide", broken)
    with caplog.at_level(logging.WARNING, "npcmind.http"):
        answers = [svc.decide(decide_body(bee("a"))) for _ in range(20)]
    assert {r.status_code for r in answers} == {500}
    assert answers[0].json()["error"]["code"] == "internal"
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1 and "POST /v1/decide" in tracebacks[0].getMessage()
    again = [r.getMessage() for r in caplog.records if "again" in r.getMessage()]
    assert len(again) == 1 and "RuntimeError: a bug" in again[0]


HUGE = 10**400  # an integer no float holds: 1 and 400 zeros
TAPE = {"observation": "Hello.", "npcState": {}, "memories": []}
SCOPE = {"client_id": "game-1", "scopes": {"cave": {"text": "A cave.", "fields": {"d": {"type": "number"}}}}}


def swarm(size: int) -> dict[str, Any]:
    """A swarm of the forest example: its `size` is an integer field without bounds of its own."""
    return {"id": "s", "type": "swarm", "observation": {"size": size}, "legal_actions": ["surround"]}


def _at(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    body = copy.deepcopy(body)
    _set(path, value)(body)
    return body


HUGE_NUMBERS: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "/v1/decide",
        _at(decide_body(bee("a")), "world.player_hp_fraction", HUGE),
        "world.player_hp_fraction",
        NUMBER_RULE,
    ),
    (
        "/v1/decide",
        _at(decide_body(bee("a")), "entities.0.observation.distance_to_player", -HUGE),
        "entities[0].observation.distance_to_player",
        NUMBER_RULE,
    ),
    ("/v1/decide", _at(decide_body(bee("a")), "scope_state.boss_phase", HUGE), "scope_state.boss_phase", INTEGER_RULE),
    ("/v1/decide", decide_body(bee("a", position=[HUGE, 0])), "entities[0].position[0]", NUMBER_RULE),
    ("/v1/decide", decide_body(bee("a"), epoch=HUGE), "epoch", INTEGER_RULE),
    (
        "/v1/telemetry",
        {
            "client_id": "game-1",
            "epoch": 1,
            "entities": [{"id": "p", "type": "player", "fields": {"hp_fraction": HUGE}}],
        },
        "entities[0].fields.hp_fraction",
        NUMBER_RULE,
    ),
    ("/v1/telemetry", {"client_id": "game-1", "epoch": HUGE}, "epoch", INTEGER_RULE),
    *[
        ("/v1/context", _at(SCOPE, f"scopes.cave.fields.d.{key}", HUGE), f"scopes.cave.fields.d.{key}", NUMBER_RULE)
        for key in ("min", "max", "quantum")
    ],
    ("/npcs/mara/process", {"tape": {**TAPE, "npcState": {"gold": HUGE}}}, "tape.npcState.gold", NUMBER_RULE),
    (
        "/npcs/mara/process",
        {"tape": {**TAPE, "memories": [{"text": "x", "importance": HUGE}]}},
        "tape.memories[0].importance",
        NUMBER_RULE,
    ),
    (
        "/npcs/mara/process",
        {"tape": {**TAPE, "constraints": {"temperature": -HUGE}}},
        "tape.constraints.temperature",
        NUMBER_RULE,
    ),
    (
        "/npcs/mara/process",
        {"tape": {**TAPE, "constraints": {"maxTokens": HUGE}}},
        "tape.constraints.maxTokens",
        INTEGER_RULE,
    ),
]


@pytest.mark.parametrize(
    ("route", "body", "path", "message"), HUGE_NUMBERS, ids=[f"{c[0]} {c[2]}" for c in HUGE_NUMBERS]
)
def test_an_integer_no_float_holds_is_a_422_naming_its_field(
    shared_svc: Running, route: str, body: dict[str, Any], path: str, message: str
) -> None:
    """`"player_hp_fraction": 1` and 400 zeros was a 500: the float conversion of the check overflowed."""
    r = shared_svc.http.post(route, content=json.dumps(body).encode(), headers=JSON_CT)
    assert r.status_code == 422, r.text
    found = {d["path"]: d["message"] for d in r.json()["error"]["details"]}
    assert found.get(path) == message, found


@pytest.mark.parametrize(
    ("route", "body", "path"),
    [
        ("/v1/decide", decide_body(bee("a"), epoch=2**53), "epoch"),
        ("/v1/telemetry", {"client_id": "game-1", "epoch": 2**53}, "epoch"),
        ("/v1/decide", decide_body(swarm(-(2**53))), "entities[0].observation.size"),
        ("/npcs/mara/process", {"tape": {**TAPE, "constraints": {"maxTokens": 2**53}}}, "tape.constraints.maxTokens"),
    ],
)
def test_an_integer_past_what_a_float_holds_exactly_is_refused(
    shared_svc: Running, route: str, body: dict[str, Any], path: str
) -> None:
    """An epoch of 4,000 digits was echoed back; a client that reads it as a 64-bit integer (or any engine,
    whose numbers are doubles) breaks on it, and an integer field past 2^53 printed another number."""
    r = shared_svc.http.post(route, content=json.dumps(body).encode(), headers=JSON_CT)
    assert r.status_code == 422, r.text
    assert {d["path"]: d["message"] for d in r.json()["error"]["details"]} == {path: INTEGER_RULE}


def test_the_largest_integers_a_float_holds_exactly_are_taken_and_echoed_as_sent(svc: Running, scripted: Any) -> None:
    top = 2**53 - 1
    r = svc.decide(decide_body(swarm(top), epoch=top))
    assert r.status_code == 200 and r.json()["epoch"] == top, r.text
    assert f"size={top}" in scripted.requests[-1]["messages"][1]["content"]


def test_every_integer_of_every_body_is_bounded_to_what_a_float_holds_exactly() -> None:
    """The rule is one: a wire type that adds an integer field without the bound fails here, not in a game. The
    manifest too: its integers (`ttl_ms`) are echoed in every decision."""
    from msgspec import inspect as mi

    from npcmind.manifest.model import Fields, ManifestFile
    from npcmind.protocol import a2g, npc
    from npcmind.protocol.numbers import MAX_INTEGER

    unbounded: list[str] = []

    def walk(t: mi.Type, path: str, seen: set[type]) -> None:
        t = t.type if isinstance(t, mi.Metadata) else t
        if isinstance(t, mi.IntType):
            low = t.ge if t.ge is not None else t.gt
            if low is None or low < -MAX_INTEGER or t.le is None or t.le > MAX_INTEGER:
                unbounded.append(path)
        elif isinstance(t, mi.UnionType):
            for member in t.types:
                walk(member, path, seen)
        elif isinstance(t, mi.ListType):
            walk(t.item_type, path + "[]", seen)
        elif isinstance(t, mi.DictType):
            walk(t.value_type, path + "{}", seen)
        elif isinstance(t, mi.StructType) and t.cls not in seen:
            for f in t.fields:
                walk(f.type, f"{path}.{f.name}", seen | {t.cls})

    bodies = [
        a2g.DecideRequest,
        a2g.TelemetryRequest,
        a2g.ContextRequest,
        a2g.ReportRequest,
        a2g.SessionRequest,
        Fields,
        ManifestFile,
        npc.NPCProcessRequest,
        npc.IdentifyActorResult,
        npc.QueryVectorResult,
        npc.ExecuteInferenceResult,
    ]
    for body in bodies:
        walk(mi.type_info(body), getattr(body, "__name__", "Fields"), set())
    assert unbounded == []


def test_a_quantized_number_near_the_float_limit_renders_and_is_decided(svc: Running, scripted: Any) -> None:
    """quantum 0.001 and 1.7e308: value / quantum overflowed to inf, and rounding inf was a 500."""
    fields = {"fine": {"type": "number", "quantum": 0.001}, "coarse": {"type": "number", "quantum": 1e308}}
    r = svc.http.post("/v1/context", json={"client_id": "game-1", "scopes": {"cave": {"text": "c", "fields": fields}}})
    assert r.status_code == 200, r.text
    for value in (1.7e308, -1.7e308, 1.79e308):
        state = {"fine": value, "coarse": value}
        r = svc.decide(decide_body(bee("a"), scope="cave", scope_state=state))
        assert r.status_code == 200 and r.json()["decisions"][0]["source"] == "AI", r.text
        line = next(x for x in scripted.requests[-1]["messages"][1]["content"].splitlines() if "SCOPE STATE" in x)
        fine, coarse = (float(part.split("=")[1]) for part in line.removeprefix("SCOPE STATE: ").split(" "))
        assert math.isclose(fine, value) and math.isclose(coarse, value, rel_tol=0.2), line
