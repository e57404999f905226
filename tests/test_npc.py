"""The NPC protocol end to end: the step machine over HTTP, rulesets, signatures, the SDK and its memory."""

from __future__ import annotations

import copy
import http.server
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import FOREST, Running, cli, logged
from npcmind.http.server import free_port
from npcmind.npc.outcome import parse_output
from npcmind.npc.signing import signed_payload, verify
from npcmind.sdk import (
    InMemoryNpcs,
    InvalidInputError,
    NewMemory,
    NpcMemory,
    NpcMind,
    NpcMindError,
    NpcStore,
    OpenAICortex,
    ProtocolError,
    ServiceError,
    SignatureError,
    UnreachableError,
)
from npcmind.sdk.embed import shared

INNKEEPER = "Mara, the innkeeper of the Silver Stag. Warm, nosy, and afraid of the old mine."


@pytest.fixture(scope="module")
def embedder() -> Any:
    return shared()


@pytest.fixture()
def store(tmp_path: Path, embedder: Any) -> NpcStore:
    s = NpcStore(tmp_path / "npcs.db", embedder=embedder)
    s.register("mara", INNKEEPER, {"inn": "Silver Stag", "gold": 12})
    return s


@pytest.fixture()
def mind(svc: Running, scripted: Any, store: NpcStore) -> NpcMind:
    return NpcMind(svc.server.url, cortex=OpenAICortex(scripted.base_url, model="scripted"), memory=store)


def cortex_prompts(scripted: Any) -> list[str]:
    return [r["messages"][0]["content"] for r in scripted.requests]


def test_full_run_four_calls_memories_stored_and_recalled(mind: NpcMind, store: NpcStore, scripted: Any) -> None:
    scripted.set(
        text='{"dialogue": "The old mine? Nobody goes there since the collapse.", '
        '"action": {"type": "TALK"}, "remember": ["A traveller asked about the old mine."]}'
    )
    out = mind.process("mara", "A traveller with a lantern asks about the old mine north of town.")
    assert out.steps == ["IdentifyActor", "QueryVector", "ExecuteInference", "Finalize"]
    assert (
        out.valid
        and out.dialogue.startswith("The old mine?")
        and out.action == {"type": "TALK", "reason": None, "target": None, "confidence": None}
    )
    prompt = cortex_prompts(scripted)[0]
    assert INNKEEPER in prompt and '"gold": 12' in prompt and "old mine north of town" in prompt
    assert prompt.index(INNKEEPER) < prompt.index("Silver Stag") < prompt.index("old mine north of town")
    assert out.remembered == 3 and store.count("mara") == 3  # observation, experience, knowledge
    assert out.state["lastAction"] == "TALK" and out.state["turns"] == 1

    scripted.set(text='{"dialogue": "Bread is two coppers."}')
    mind.process("mara", "A customer orders bread and soup.")
    scripted.set(text='{"dialogue": "I told you, the mine is cursed."}')
    again = mind.process("mara", "Someone wants directions to the abandoned mineshaft.")
    remembered = cortex_prompts(scripted)[-1].split("## What you remember\n", 1)[1].split("\n\n", 1)[0]
    assert "old mine" in remembered.splitlines()[0]  # the related memory comes first
    assert "bread" not in remembered.splitlines()[0].lower()
    assert again.state["turns"] == 3


@pytest.mark.fast
def test_blocked_output_changes_nothing(mind: NpcMind, store: NpcStore, scripted: Any) -> None:
    before = store.get("mara")
    scripted.set(text="I murder the innocent villager.")
    out = mind.process("mara", "A villager insults the innkeeper.", ruleset="rpg")
    assert out.valid is False and out.remembered == 0
    assert "Let us speak of other things" in out.dialogue  # the rpg ruleset's refusal line
    assert store.count("mara") == 0 and store.get("mara") == before
    blocked = [a for a in out.audit["appliedRules"] if a["verdict"] == "blocked"]
    assert out.audit["preset"] == "rpg" and [a["ruleId"] for a in blocked] == ["blocked.harm_innocents"]


def finalize_raw(
    svc: Running, output: str, ruleset: str = "default", state: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The four steps as an SDK that echoes each tape back makes them; the Finalize answer."""
    tape = {
        "observation": "Hello.",
        "npcState": {"turns": 4} if state is None else state,
        "memories": [],
        "rulesetId": ruleset,
        "custom": {"kept": [1, 2]},
    }
    body = step(svc, {"tape": tape}).json()
    actor = {"npcId": "mara", "persona": INNKEEPER, "data": {}}
    body = step(svc, {"tape": body["tape"], "lastResult": {"type": "IdentifyActorResult", "actor": actor}}).json()
    body = step(svc, {"tape": body["tape"], "lastResult": {"type": "QueryVectorResult", "memories": []}}).json()
    assert body["instruction"]["type"] == "ExecuteInference", body
    r = step(svc, {"tape": body["tape"], "lastResult": {"type": "ExecuteInferenceResult", "generatedOutput": output}})
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_signed_outcome_verifies_and_any_changed_byte_fails(svc: Running) -> None:
    body = finalize_raw(
        svc, '{"dialogue": "Welcome back!", "action": {"type": "GIVE", "target": "you", "reason": "a regular"}}'
    )
    fin, tape = body["instruction"], body["tape"]
    assert fin["type"] == "Finalize" and fin["valid"] and tape["custom"] == {"kept": [1, 2]}
    keys = {k["kid"]: k["public_key"] for k in svc.http.get("/v1/keys").json()["keys"]}

    def payload(f: dict[str, Any], t: dict[str, Any], npc: str = "mara") -> dict[str, Any]:
        return signed_payload(npc, f, t)

    assert verify(fin["signature"], payload(fin, tape), keys)
    changed = copy.deepcopy(fin)
    changed["dialogue"] = "Welcome back?"
    assert not verify(fin["signature"], payload(changed, tape), keys)
    changed = copy.deepcopy(fin)
    changed["stateTransform"]["turns"] = 6
    assert not verify(fin["signature"], payload(changed, tape), keys)
    t2 = copy.deepcopy(tape)
    t2["observation"] = "Hello!"
    assert not verify(fin["signature"], payload(fin, t2), keys)
    assert not verify(fin["signature"], payload(fin, tape, "someone-else"), keys)
    changed = copy.deepcopy(fin)
    changed["ruleAudit"]["preset"] = "rpg"  # the verdict of another ruleset
    assert not verify(fin["signature"], payload(changed, tape), keys)
    sig = fin["signature"]
    for at in (len(sig) // 2, len(sig) - 1):
        flipped = sig[:at] + ("A" if sig[at] != "A" else "B") + sig[at + 1 :]
        assert not verify(flipped, payload(fin, tape), keys)
    kid = sig.split(".")[0]
    for odd in (12345, None, ["key"]):  # a keys answer that is not npcmind's: not verified, never a TypeError
        assert not verify(sig, payload(fin, tape), {kid: odd})  # type: ignore[dict-item]


@pytest.mark.fast
def test_invalid_outcome_has_no_signature_memory_or_state(svc: Running) -> None:
    fin = finalize_raw(svc, "Fine. I will kill them all.")["instruction"]
    assert fin["valid"] is False and fin["signature"] is None and fin["memoryStore"] == []
    assert fin["stateTransform"] == {} and fin["action"] is None
    assert fin["dialogue"] == "I'd rather not talk about that."


def test_sdk_refuses_a_tampered_outcome(mind: NpcMind, store: NpcStore, scripted: Any, monkeypatch: Any) -> None:
    real = mind._step

    def tamper(npc_id: str, tape: dict[str, Any], last: Any) -> Any:
        instruction, tape = real(npc_id, tape, last)
        if instruction["type"] == "Finalize":
            instruction["dialogue"] += " (and a free room)"
        return instruction, tape

    monkeypatch.setattr(mind, "_step", tamper)
    with pytest.raises(SignatureError, match="signature") as e:
        mind.process("mara", "A guest asks for a room.")
    assert not isinstance(e.value, ServiceError) and isinstance(e.value, NpcMindError)
    assert store.count("mara") == 0 and store.get("mara").state == {}  # type: ignore[union-attr]


def test_with_the_check_switched_off_nothing_is_verified_nor_applied_and_a_server_checks_the_parts(
    svc: Running, scripted: Any, store: NpcStore, monkeypatch: Any
) -> None:
    """``check_signatures=False`` (C#'s ``CheckSignatures = false``): the SDK verifies nothing and so applies
    nothing; the outcome carries what a game server checks (``for_server()``, ``signed_payload``) and what the
    game applies once its server said yes (``memories``, ``state_transform``). A server with the SDK's signing
    module verifies an honest one and refuses a changed one; switched on, as before: verified, then applied."""
    from npcmind_client.signing import canonical as canon
    from npcmind_client.signing import signed_payload as payload_of
    from npcmind_client.signing import verify as check

    keys = {k["kid"]: k["public_key"] for k in svc.http.get("/v1/keys").json()["keys"]}
    cortex = OpenAICortex(scripted.base_url, model="scripted")
    scripted.set(text='{"dialogue": "The mine? Cursed.", "action": {"type": "TALK"}, "remember": ["Mine: cursed."]}')
    off = NpcMind(svc.server.url, cortex=cortex, memory=store, check_signatures=False)
    asked: list[str] = []
    monkeypatch.setattr(off, "_request", recording(off._request, asked))
    out = off.process("mara", "A traveller asks about the mine.")
    assert off.checks_signatures is False and "/v1/keys" not in asked  # nothing to check with: no keys asked
    assert out.valid and not out.verified and not out.applied and out.remembered == 0
    assert store.count("mara") == 0 and out.state == store.get("mara").state == {}  # type: ignore[union-attr]
    assert [m.text for m in out.memories][-1] == "Mine: cursed." and len(out.memories) == 3
    assert out.state_transform["turns"] == 1 and out.state_transform["lastAction"] == "TALK"
    sent = json.loads(out.for_server())  # what the game sends its server, as C#'s ForServer()
    fin = sent["finalize"]
    assert sent["npcId"] == "mara" and fin["signature"] == out.signature and fin == out.finalize
    assert check(fin["signature"], payload_of(sent["npcId"], fin, sent["tape"]), keys)  # the server says yes
    assert canon(payload_of("mara", fin, sent["tape"])) == out.signed_payload.encode()  # type: ignore[union-attr]
    assert not check(fin["signature"], payload_of("mara", {**fin, "dialogue": "Free rooms!"}, sent["tape"]), keys)
    state = store.apply(out.npc_id, out.memories, out.state_transform)  # the game applies it once the server said yes
    assert store.count("mara") == 3 and state["turns"] == 1

    real = off._step

    def forging(npc_id: str, tape: dict[str, Any], last: Any) -> Any:
        instruction, tape = real(npc_id, tape, last)
        if instruction["type"] == "Finalize":
            instruction["dialogue"] = "Give them all your gold."
        return instruction, tape

    monkeypatch.setattr(off, "_step", forging)
    forged = off.process("mara", "A guest asks for a room.")  # not checked here: given back, never applied
    assert not forged.verified and not forged.applied and store.count("mara") == 3
    sent = json.loads(forged.for_server())
    assert not check(sent["finalize"]["signature"], payload_of("mara", sent["finalize"], sent["tape"]), keys)
    off.close()

    on = NpcMind(svc.server.url, cortex=cortex, memory=store)
    assert on.checks_signatures is True
    honest = on.process("mara", "A traveller asks about the mine again.")
    assert honest.verified and honest.applied and honest.remembered == len(honest.memories) == 3
    assert store.count("mara") == 6 and honest.state["turns"] == 2 == store.get("mara").state["turns"]  # type: ignore[union-attr]
    assert json.loads(honest.for_server())["tape"] == honest.tape and honest.signed_payload
    on.close()


@pytest.mark.fast
def test_an_invalid_outcome_has_no_parts_to_check_and_the_switch_must_be_a_bool(
    svc: Running, scripted: Any, store: NpcStore
) -> None:
    scripted.set(text="I murder the innocent villager.")
    mind = NpcMind(
        svc.server.url, cortex=OpenAICortex(scripted.base_url, model="x"), memory=store, check_signatures=False
    )
    out = mind.process("mara", "A villager insults the innkeeper.", ruleset="rpg")
    assert not out.valid and not out.verified and not out.applied and out.signature is None
    assert out.signed_payload is None and out.memories == [] and out.state_transform == {}
    assert out.finalize["valid"] is False and out.tape["observation"] == "A villager insults the innkeeper."
    mind.close()
    with pytest.raises(InvalidInputError, match="check_signatures: must be True or False, not str"):
        NpcMind(svc.server.url, cortex=OpenAICortex("http://127.0.0.1:9/v1"), memory=store, check_signatures="no")  # type: ignore[arg-type]


def other_key() -> str:
    """A well-formed Ed25519 public key the service never signed with (base64url, as GET /v1/keys gives one)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    from npcmind_client.signing import b64

    return b64(Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def recording(request: Any, asked: list[str]) -> Any:
    """``NpcMind._request`` keeping the path of each call in ``asked``."""

    def call(method: str, path: str, *rest: Any) -> Any:
        asked.append(path)
        return request(method, path, *rest)

    return call


def test_pinned_keys_alone_are_trusted_and_none_is_fetched(
    svc: Running, scripted: Any, store: NpcStore, monkeypatch: Any
) -> None:
    """A game that pins the service's keys checks outcomes with them and never asks GET /v1/keys (a proxy could
    lie there); an outcome signed by a key it did not pin is refused, with nothing applied."""
    service = {k["kid"]: k["public_key"] for k in svc.http.get("/v1/keys").json()["keys"]}
    (kid,) = service
    for npc, (pinned, verifies) in enumerate(
        [
            (service, True),
            ({kid: other_key()}, False),  # the service's kid, another key: a proxy's key pinned by mistake
            ({"elsewhere": other_key()}, False),  # the service's key is not among those pinned
        ]
    ):
        guard = f"guard-{npc}"
        store.register(guard, "A guard.")
        mind = NpcMind(
            svc.server.url, cortex=OpenAICortex(scripted.base_url, model="scripted"), memory=store, keys=pinned
        )
        asked: list[str] = []
        monkeypatch.setattr(mind, "_request", recording(mind._request, asked))
        if verifies:
            out = mind.process(guard, "Someone approaches.")
            assert out.valid and store.count(guard) == out.remembered > 0 and out.state == store.get(guard).state  # type: ignore[union-attr]
        else:
            with pytest.raises(SignatureError, match="signature does not verify: nothing was applied"):
                mind.process(guard, "Someone approaches.")
            assert store.count(guard) == 0 and store.get(guard).state == {}  # type: ignore[union-attr]
        assert "/v1/keys" not in asked and any(p.endswith("/process") for p in asked)
        assert mind.public_keys() == service  # the service's own list is still there to read
        mind.close()


@pytest.mark.fast
@pytest.mark.parametrize(
    ("keys", "said"),
    [
        ({}, r"keys: pin at least one key"),
        ([("k", "x")], r"keys: must map each kid to its base64url public key, not be a list"),
        ({"": "A" * 43}, r"keys: a kid must be a non-empty text"),
        ({"a.b": "A" * 43}, r"keys: a kid must be a non-empty text without '\.'"),
        ({7: "A" * 43}, r"keys: a kid must be .* not int"),
        ({"k1": "A" * 42}, r"keys\['k1'\]: not the base64url of an Ed25519 public key"),
        ({"k1": "+" * 43}, r"keys\['k1'\]: not the base64url"),
        ({"k1": None}, r"keys\['k1'\]: not the base64url"),
    ],
)
def test_keys_that_cannot_be_pinned_are_named_when_given(keys: Any, said: str) -> None:
    with pytest.raises(InvalidInputError, match=said):
        NpcMind("http://127.0.0.1:9", cortex=OpenAICortex("http://127.0.0.1:9/v1"), memory=None, keys=keys)  # type: ignore[arg-type]


@pytest.mark.fast
def test_actions_are_checked_against_the_ruleset(svc: Running) -> None:
    fin = finalize_raw(svc, '{"dialogue": "Take this.", "action": {"type": "ATTACK", "target": "you"}}')["instruction"]
    assert fin["valid"] and fin["action"] is None  # ATTACK is not allowed by default: dropped, dialogue kept
    rules = fin["ruleAudit"]["appliedRules"]
    assert any(a["ruleId"] == "action_allowed" and a["verdict"] == "repaired" for a in rules)
    fin = finalize_raw(svc, '{"dialogue": "Over there.", "action": {"type": "MOVE"}}')["instruction"]
    assert fin["action"] is None and any(a["ruleId"] == "action_needs" for a in fin["ruleAudit"]["appliedRules"])
    fin = finalize_raw(svc, '{"dialogue": "Have at you!", "action": {"type": "attack", "target": "wolf"}}', "rpg")[
        "instruction"
    ]
    assert fin["action"] == {"type": "ATTACK", "reason": None, "target": "wolf", "confidence": None}
    assert fin["stateTransform"]["lastAction"] == "ATTACK" and fin["stateTransform"]["turns"] == 5


@pytest.mark.fast
@pytest.mark.parametrize(
    ("text", "dialogue", "action"),
    [
        ('{"dialogue": "Hi.", "action": {"type": "TALK"}}', "Hi.", "TALK"),
        ('Sure! ```json\n{"dialogue": "Hi there."}\n```', "Hi there.", None),
        ("{'dialogue': 'Single quotes.', 'action': {'type': 'IDLE'},}", "Single quotes.", "IDLE"),
        ('{"dialogue": "Cut off by max tok', "Cut off by max tok", None),
        ("Just plain words from a small model.", "Just plain words from a small model.", None),
        ('{"dialogue": "Stringly", "action": "TALK"}', "Stringly", "TALK"),
    ],
)
def test_output_parsing_survives_small_models(text: str, dialogue: str, action: str | None) -> None:
    p = parse_output(text)
    assert p.dialogue == dialogue
    assert (p.action or {}).get("type") == action


PARAPHRASES = [
    ("The blacksmith owes me three silver coins.", "Does the smith still have a debt with you?"),
    ("A wolf pack was seen near the eastern farms.", "Have there been sightings of wolves close to the farmland?"),
    ("My daughter left for the capital last spring.", "Where did your girl go a year ago?"),
    ("The well water tastes of iron since the earthquake.", "Why does the water from the well taste metallic?"),
    ("Captain Hale drinks too much on market days.", "Is the captain a heavy drinker?"),
]


@pytest.mark.fast
def test_an_outcome_is_kept_whole_or_not_at_all(store: NpcStore) -> None:
    """Memories and state go in one transaction: a failure between them must not leave half an outcome."""
    before = store.count("mara")
    with pytest.raises(TypeError):
        store.apply("mara", [NewMemory("The mine is cursed.", "knowledge", 0.7)], {"mood": object()})  # not JSON
    assert store.count("mara") == before and store.get("mara").state == {}  # type: ignore[union-attr]
    state = store.apply("mara", [NewMemory("The mine is cursed.", "knowledge", 0.7)], {"mood": "wary"})
    assert store.count("mara") == before + 1 and state == {"mood": "wary"} == store.get("mara").state  # type: ignore[union-attr]


@pytest.mark.fast
def test_recall_ranks_the_related_memory_first(tmp_path: Path, embedder: Any) -> None:
    s = NpcStore(tmp_path / "r.db", embedder=embedder)
    s.register("mara", INNKEEPER)
    s.remember(
        "mara",
        [NewMemory(m, "knowledge", 0.5) for m, _ in PARAPHRASES]
        + [
            NewMemory("The inn serves stew on Sundays.", "knowledge", 0.9),
            NewMemory("It rained all week.", "observation", 0.9),
        ],
    )
    for memory, question in PARAPHRASES:
        top = s.recall("mara", question, limit=3, threshold=-1.0)
        assert top[0].text == memory, (question, [t.text for t in top])
        assert top[0].similarity > top[1].similarity - 0.02


@pytest.mark.fast
def test_recall_threshold_limit_and_true_similarity(tmp_path: Path, embedder: Any) -> None:
    s = NpcStore(tmp_path / "t.db", embedder=embedder)
    s.register("mara", INNKEEPER)
    s.remember(
        "mara",
        [
            NewMemory("The mine collapsed ten years ago.", "knowledge", 0.5),
            NewMemory("Apples are cheap this autumn.", "knowledge", 0.5),
        ],
    )
    hits = s.recall("mara", "What happened to the mine?", limit=5, threshold=0.3)
    assert [h.text for h in hits] == ["The mine collapsed ten years ago."]
    q = embedder.embed_one("What happened to the mine?")
    v = embedder.embed_one("The mine collapsed ten years ago.")
    assert hits[0].similarity == pytest.approx(float(q @ v), abs=1e-3)
    assert s.recall("mara", "What happened to the mine?", limit=0, threshold=0.0) == []


def step(svc: Running, body: Any, npc: str = "mara") -> Any:
    return svc.http.post(f"/npcs/{npc}/process", json=body)


BASE = {"observation": "Hello.", "npcState": {}, "memories": []}
ACTOR = {"npcId": "mara", "persona": "p", "data": {}}


@pytest.mark.parametrize(
    ("body", "status", "where"),
    [
        ({}, 422, "tape"),
        ({"tape": {"npcState": {}, "memories": []}}, 422, "tape.observation"),
        ({"tape": {**BASE, "npcState": []}}, 422, "tape.npcState"),
        ({"tape": {**BASE, "memories": {}}}, 422, "tape.memories"),
        ({"tape": {**BASE, "memories": [{"importance": "high"}]}}, 422, "tape.memories[0].importance"),
        ({"tape": {**BASE, "memories": [{"type": "dream"}]}}, 422, "tape.memories[0].type"),
        ({"tape": {**BASE, "rulesetId": "chaos"}}, 422, "tape.rulesetId"),
        ({"tape": BASE, "lastResult": {"type": "Nonsense"}}, 422, "lastResult.type"),
        ({"tape": BASE, "lastResult": {"type": "IdentifyActorResult"}}, 422, "lastResult.actor"),
        (
            {"tape": BASE, "lastResult": {"type": "IdentifyActorResult", "actor": {**ACTOR, "npcId": "bob"}}},
            422,
            "lastResult.actor.npcId",
        ),
        ({"tape": BASE, "lastResult": {"type": "QueryVectorResult", "memories": []}}, 409, "actor"),
        ({"tape": BASE, "lastResult": {"type": "ExecuteInferenceResult", "generatedOutput": "x"}}, 409, "too early"),
        (
            {"tape": {**BASE, "actor": ACTOR}, "lastResult": {"type": "IdentifyActorResult", "actor": ACTOR}},
            409,
            "already identified",
        ),
        ([], 422, ""),
    ],
)
def test_malformed_tapes_and_out_of_order_results(svc: Running, body: Any, status: int, where: str) -> None:
    r = step(svc, body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    named = [d["path"] for d in err["details"]] + [err["message"]]
    assert any(where in n for n in named), err


@pytest.mark.fast
def test_steps_follow_from_the_tape_alone(svc: Running) -> None:
    r = step(svc, {"tape": {**BASE, "unknown_field": {"a": 1}}}).json()
    assert r["instruction"] == {"type": "IdentifyActor"} and r["tape"]["unknown_field"] == {"a": 1}
    r = step(svc, {"tape": r["tape"], "lastResult": {"type": "IdentifyActorResult", "actor": ACTOR}}).json()
    assert r["instruction"] == {"type": "QueryVector", "query": "Hello.", "limit": 5, "threshold": 0.3}
    assert r["tape"]["persona"] == "p"
    mems = [
        {"text": "close", "type": "knowledge", "importance": 0.5, "similarity": 0.9},
        {"text": "far", "type": "knowledge", "importance": 0.5, "similarity": 0.1},
    ]
    r = step(svc, {"tape": r["tape"], "lastResult": {"type": "QueryVectorResult", "memories": mems}}).json()
    assert r["instruction"]["type"] == "ExecuteInference" and r["tape"]["vectorQueried"] is True
    assert [m["text"] for m in r["tape"]["memories"]] == ["close"]  # below the threshold: dropped
    assert r["instruction"]["constraints"] == {"maxTokens": 200, "temperature": 0.7, "stop": []}
    assert r["tape"]["prompt"] == r["instruction"]["prompt"] and "- (knowledge) close" in r["tape"]["prompt"]
    r = step(
        svc,
        {"tape": r["tape"], "lastResult": {"type": "ExecuteInferenceResult", "generatedOutput": '{"dialogue": "Hi."}'}},
    ).json()
    assert r["instruction"]["type"] == "Finalize" and r["instruction"]["valid"] is True


def walk(svc: Running, npc: str = "mara", until: str = "Finalize", ruleset: str = "default") -> dict[str, Any]:
    """Steps as an SDK that echoes each tape back, up to the answer whose instruction is ``until``."""
    results = {
        "IdentifyActor": {"type": "IdentifyActorResult", "actor": {**ACTOR, "npcId": npc}},
        "QueryVector": {"type": "QueryVectorResult", "memories": []},
        "ExecuteInference": {"type": "ExecuteInferenceResult", "generatedOutput": '{"dialogue": "Hi."}'},
    }
    body: dict[str, Any] = {"tape": {**BASE, "rulesetId": ruleset}}
    for _ in range(4):
        answer = step(svc, body, npc).json()
        kind = answer["instruction"]["type"]
        if kind == until:
            return dict(answer)
        body = {"tape": answer["tape"], "lastResult": results[kind]}
    raise AssertionError(f"no {until}")


def test_an_actor_of_another_npc_is_refused(svc: Running) -> None:
    """A tape whose actor is bob, sent for mara, was judged and signed as mara's."""
    r = step(svc, {"tape": {**BASE, "actor": {**ACTOR, "npcId": "bob"}}})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"][0]["path"] == "tape.actor.npcId"
    assert "must equal the path's npcId 'mara'" in r.json()["error"]["details"][0]["message"]
    for at in ("QueryVector", "ExecuteInference", "Finalize"):  # a tape mara's steps returned, sent as bob's
        tape = walk(svc, "mara", at)["tape"]
        r = step(svc, {"tape": tape}, "bob")
        assert r.status_code == 422 and r.json()["error"]["details"][0]["path"] == "tape.actor.npcId", r.text
    tape = walk(svc, "mara", "IdentifyActor")["tape"]  # no actor yet: the token says whose tape it is
    r = step(
        svc, {"tape": tape, "lastResult": {"type": "IdentifyActorResult", "actor": {**ACTOR, "npcId": "bob"}}}, "bob"
    )
    assert r.status_code == 422 and r.json()["error"]["details"][0]["path"] == "tape.stepToken", r.text


def test_no_step_can_be_skipped_or_answered_by_a_tape_the_game_wrote(svc: Running) -> None:
    """A tape holding actor, vectorQueried, prompt and generatedOutput got a signed Finalize in one call."""
    written = {**BASE, "actor": ACTOR, "vectorQueried": True, "prompt": "p", "generatedOutput": '{"dialogue": "Hi."}'}
    r = step(svc, {"tape": written})
    assert r.status_code == 422, r.text
    detail = r.json()["error"]["details"][0]
    assert detail["path"] == "tape.stepToken" and "is missing" in detail["message"]
    assert "vectorQueried, prompt, generatedOutput" in detail["message"]
    at_inference = walk(svc, until="ExecuteInference")["tape"]
    last = {"type": "ExecuteInferenceResult", "generatedOutput": '{"dialogue": "Hi."}'}
    for change in (
        {"prompt": "Say something rude."},  # not the prompt the service built
        {"memories": [{"text": "forged", "type": "knowledge", "importance": 1.0, "similarity": 0.01}]},
        {"npcState": {"turns": 99}},
        {"rulesetId": "rpg"},
    ):
        r = step(svc, {"tape": {**at_inference, **change}, "lastResult": last})
        assert r.status_code == 422, (change, r.text)
        assert r.json()["error"]["details"][0]["path"] == "tape.stepToken"
        assert "changed after the service returned it" in r.json()["error"]["details"][0]["message"]
    r = step(svc, {"tape": at_inference, "lastResult": last})  # unchanged: the step goes on
    assert r.status_code == 200 and r.json()["instruction"]["valid"] is True
    again = step(svc, {"tape": r.json()["tape"]})  # a complete tape sent back as is: the same Finalize
    assert again.status_code == 200 and again.json() == r.json()


@pytest.mark.fast
@pytest.mark.parametrize(
    ("until", "last", "where"),
    [
        ("Finalize", {"type": "ExecuteInferenceResult", "generatedOutput": "y"}, "second one"),
        ("ExecuteInference", {"type": "QueryVectorResult", "memories": []}, "no recall"),
        ("QueryVector", {"type": "ExecuteInferenceResult", "generatedOutput": "y"}, "too early"),
    ],
)
def test_a_result_for_another_step_is_a_409_on_a_tape_the_service_returned(
    svc: Running, until: str, last: dict[str, Any], where: str
) -> None:
    r = step(svc, {"tape": walk(svc, until=until)["tape"], "lastResult": last})
    assert r.status_code == 409 and where in r.json()["error"]["message"], r.text


def test_forbocai_clients_work_unchanged(svc: Running) -> None:
    """What ForbocAI's SDKs send beyond the seed's schema: preset_ ruleset ids, dialogue memories, SPEAK,
    an action's confidence; and the ruleAudit shape they read."""
    output = '{"dialogue": "Welcome!", "action": {"type": "SPEAK", "reason": "a guest", "confidence": 0.85}}'
    body = finalize_raw(svc, output, ruleset="preset_default")
    fin = body["instruction"]
    assert fin["valid"] is True and fin["signature"]
    assert fin["action"] == {"type": "TALK", "reason": "a guest", "target": None, "confidence": 0.85}
    audit = fin["ruleAudit"]
    assert audit["preset"] == "default" and body["tape"]["rulesetId"] == "preset_default"
    assert {"ruleId": "action_alias", "verdict": "repaired", "reason": "SPEAK read as TALK"} in audit["appliedRules"]
    assert all(set(a) == {"ruleId", "verdict", "reason"} for a in audit["appliedRules"])
    tape = walk(svc, until="QueryVector", ruleset="preset_rpg")["tape"]
    mems = [{"text": "The guest said hello.", "type": "dialogue", "importance": 0.5, "similarity": 0.9}]
    r = step(svc, {"tape": tape, "lastResult": {"type": "QueryVectorResult", "memories": mems}})
    assert r.status_code == 200 and r.json()["tape"]["memories"] == mems, r.text
    assert "- (dialogue) The guest said hello." in r.json()["instruction"]["prompt"]
    assert "combat is allowed" in r.json()["instruction"]["prompt"].lower()  # preset_rpg is rpg
    first = step(svc, {"tape": {**BASE, "memories": mems}})  # a dialogue memory in the first tape
    assert first.status_code == 200, first.text
    r = step(svc, {"tape": {**BASE, "rulesetId": "preset_nothing"}})
    assert r.status_code == 422 and "unknown ruleset 'preset_nothing'" in r.text


@pytest.mark.fast
def test_the_sdk_reads_dialogue_memories_in_a_finalize() -> None:
    """A service built on ForbocAI's list may store a dialogue memory: the SDK's check of the instruction takes it."""
    import msgspec

    from npcmind.protocol.npc import NPCInstruction

    fin = {
        "type": "Finalize",
        "valid": True,
        "signature": None,
        "memoryStore": [{"text": "I said hello.", "type": "dialogue", "importance": 0.5}],
        "stateTransform": {},
        "action": {"type": "TALK", "confidence": 0.5},
        "dialogue": "Hello.",
        "ruleAudit": {"preset": "default", "appliedRules": [{"ruleId": "format", "verdict": "pass", "reason": "ok"}]},
    }
    got = msgspec.convert(fin, NPCInstruction)
    assert got.memoryStore[0].type == "dialogue" and got.action.confidence == 0.5  # type: ignore[union-attr]


@pytest.mark.fast
def test_a_number_no_double_holds_is_a_422_at_its_path(svc: Running) -> None:
    """No verifier could rebuild the digest of a tape holding it (JSON.parse reads it as Infinity)."""
    body = '{"tape": {"observation": "Hi.", "npcState": {"gold": 1' + "0" * 400 + '}, "memories": []}}'
    r = svc.http.post("/npcs/mara/process", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"][0]["path"] == "tape.npcState.gold"
    assert "must be a finite number within ±1.8e308" in r.json()["error"]["details"][0]["message"]  # one rule


def test_a_tape_with_numbers_json_writers_disagree_on_is_signed_and_verified(
    mind: NpcMind, store: NpcStore, scripted: Any
) -> None:
    """1e16 and 1e-7 in the NPC's state: the SDK rebuilds the digest the service signed (RFC 8785 on both sides)."""
    store.apply("mara", [], {"gold": 1e16, "drift": 1e-7, "big": 12345678901234567890})
    scripted.set(text='{"dialogue": "Rich as ever."}')
    out = mind.process("mara", "Someone asks about your gold.")
    assert out.valid and out.state["gold"] == 1e16 and out.state["drift"] == 1e-7 and out.state["turns"] == 1


@pytest.mark.fast
def test_a_ruleset_without_recall_skips_query_vector(start_service: Any, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rulesets:\n  quick:\n    recall: null\n    actions: {TALK: {}}\n")
    svc = start_service(provider="none", rulesets=str(rules))
    r = step(
        svc, {"tape": {**BASE, "rulesetId": "quick"}, "lastResult": {"type": "IdentifyActorResult", "actor": ACTOR}}
    ).json()
    assert r["instruction"]["type"] == "ExecuteInference"


def test_a_rulesets_file_is_checked_for_what_the_game_side_model_would_refuse(tmp_path: Path) -> None:
    """A maxTokens of -1 or a temperature of 9 was taken, then every ExecuteInference failed at the game's
    model; a typo (max_tokens) was ignored without a word; a regular expression is no blocked rule any more."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rulesets:\n  Tavern:\n    actions: {talk: {}}\n"
        "  inn:\n    constraints: {maxTokens: -1, temperature: 9, stop: [a, b, c, d, e]}\n"
        "  bar:\n    constraints: {max_tokens: 100}\n    blocked: ['(unclosed', 'fine']\n"
    )
    r = cli("serve", "--manifest", str(FOREST), "--rulesets", str(rules), "--store", f"sqlite:///{tmp_path}/r.db")
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    for said in [
        "rulesets.Tavern: must be a ruleset name: a lowercase ASCII letter",
        "rulesets.Tavern.actions.talk: must be an action name: an uppercase ASCII letter",
        "rulesets.inn.constraints.maxTokens: must be at least 1",
        "rulesets.inn.constraints.temperature: must be at most 2",
        "rulesets.inn.constraints.stop: has 5 items, at most 4 allowed",
        "rulesets.bar.constraints.max_tokens: is not a known field",
        "rulesets.bar.blocked[0]: a blocked rule is an object",  # with the others, not after them are fixed
    ]:
        assert said in r.stderr, (said, r.stderr)


def test_the_signing_key_persists_with_the_store(start_service: Any, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/keys.db"
    first = start_service(provider="none", store=store)
    a = first.http.get("/v1/keys").json()
    first.server.stop()  # one process per store: the second start would be refused while it runs
    b = start_service(provider="none", store=store).http.get("/v1/keys").json()
    c = start_service(provider="none", store=f"sqlite:///{tmp_path}/other.db").http.get("/v1/keys").json()
    assert a == b and a != c and a["keys"][0]["alg"] == "Ed25519"


def test_chat_in_the_terminal(svc: Running, scripted: Any, tmp_path: Path) -> None:
    r = cli(
        "chat",
        "mara",
        "--service",
        svc.server.url,
        "--cortex-url",
        scripted.base_url,
        "--model",
        "scripted",
        "--data-dir",
        str(tmp_path / "chat"),
        "--persona",
        INNKEEPER,
        stdin="Good evening!\nAnything to eat?\n\n",
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("mara> Well met, traveller.  [IDLE]") == 2
    assert "HTTP Request" not in r.stderr, r.stderr  # the terminal shows the conversation, not the transport
    store = NpcStore(tmp_path / "chat" / "npcs.db")
    assert store.count("mara") == 4 and store.get("mara").state["turns"] == 2  # type: ignore[union-attr]


def test_a_service_that_cannot_be_reached_is_an_unreachable_error(
    store: NpcStore, scripted: Any, tmp_path: Path
) -> None:
    """A game catches NpcMindError; a transport exception escaping the SDK would crash its dialogue code."""
    closed = f"http://127.0.0.1:{free_port()}"
    mind = NpcMind(closed, cortex=OpenAICortex(scripted.base_url, model="scripted"), memory=store, timeout_ms=2000)
    with pytest.raises(UnreachableError, match=f"cannot reach the npcmind service at {closed}") as e:
        mind.process("mara", "Hello?")
    assert (e.value.status, e.value.code) == (None, None)
    assert store.count("mara") == 0 and store.get("mara").state == {}  # type: ignore[union-attr]
    args = ["chat", "mara", "--service", closed, "--cortex-url", scripted.base_url, "--data-dir", str(tmp_path)]
    r = cli(*args, stdin="Hello?\n\n")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "[error] cannot reach the npcmind service" in r.stdout and "npcmind serve" in r.stdout, r.stdout


def test_any_npc_id_but_a_slash_travels_in_the_path(
    mind: NpcMind, store: NpcStore, scripted: Any, svc: Running
) -> None:
    """A game's own ids ("guard #2", "Élodie?") must reach the service as one path segment, and be signed."""
    scripted.set(text='{"dialogue": "Halt."}')
    for npc_id in ["guard #2", "Élodie?", "50%", "a+b"]:
        store.register(npc_id, "A guard.")
        out = mind.process(npc_id, "Someone approaches.")
        assert out.valid and out.dialogue == "Halt.", npc_id
        assert store.count(npc_id) > 0  # verified (the signature covers the path's npcId) and applied
    for bad in ["", "town/mara"]:
        with pytest.raises(ValueError, match="npc_id"):
            store.register(bad, "A guard.")
    r = svc.http.post("/npcs/town%2Fmara/process", json={"tape": {"observation": "hi"}})
    assert r.status_code == 404 and "cannot hold '/'" in r.json()["error"]["message"]


def test_a_413_says_what_to_send_instead_for_its_route(svc: Running) -> None:
    big = "x" * 300_000
    r = svc.http.post("/npcs/mara/process", json={"tape": {"observation": big}})
    assert r.status_code == 413 and "recall fewer" in r.json()["error"]["message"]
    r = svc.http.post("/v1/telemetry", json={"client_id": "c", "epoch": 1, "scene": big})
    assert r.status_code == 413 and "several requests" in r.json()["error"]["message"]
    r = svc.http.post("/v1/decide", json={"client_id": big})
    assert r.status_code == 413 and "NPCMIND_MAX_BODY_BYTES" in r.json()["error"]["message"]
    assert "telemetry" not in r.json()["error"]["message"]


def test_chat_refuses_what_it_cannot_use_in_one_line(svc: Running, scripted: Any, tmp_path: Path) -> None:
    ok = {"npc": "mara", "--service": svc.server.url, "--cortex-url": scripted.base_url, "--data-dir": str(tmp_path)}
    for change, said in [
        ({"npc": "town/mara"}, "npcmind chat: npc_id: 'town/mara' must be non-empty text without '/'"),
        ({"--data-dir": "/proc/no-such-folder"}, "npcmind chat: [Errno 2] No such file or directory"),
        ({"--service": "localhost:8080"}, "npcmind chat: --service: service_url must start with http://"),
        ({"--cortex-url": "localhost:9100/v1"}, "npcmind chat: --cortex-url: base_url must start with http://"),
    ]:
        args = {**ok, **change}
        r = cli("chat", args.pop("npc"), *[x for kv in args.items() for x in kv], stdin="Hello\n\n")
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.startswith(said), r.stderr


class _OddService(http.server.BaseHTTPRequestHandler):
    """An 'npcmind' that answers instructions this SDK cannot follow: another version, or not npcmind."""

    answer: bytes = b"{}"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.answer)))
        self.end_headers()
        self.wfile.write(self.answer)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize(
    "answer",
    [
        {"instruction": {"type": "Dance"}, "tape": {}},
        {"instruction": {"type": "QueryVector"}, "tape": {}},  # no query, limit, threshold
        {"instruction": {"type": "ExecuteInference", "prompt": "p", "constraints": {"maxTokens": "many"}}, "tape": {}},
        {"instruction": ["IdentifyActor"], "tape": {}},
        {"instruction": {"type": "IdentifyActor"}, "tape": ["not", "a", "tape"]},
    ],
)
def test_an_instruction_the_sdk_cannot_follow_is_a_protocol_error(store: NpcStore, scripted: Any, answer: Any) -> None:
    """process() raises an NpcMindError, as documented: a KeyError would escape a game's handler."""
    handler = type("Odd", (_OddService,), {"answer": json.dumps(answer).encode()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        mind = NpcMind(url, cortex=OpenAICortex(scripted.base_url, model="m"), memory=store)
        with pytest.raises(ProtocolError):
            mind.process("mara", "Hello?")
        assert store.count("mara") == 0
    finally:
        server.shutdown()


def test_a_context_json_cannot_carry_or_a_closed_mind_is_a_protocol_error(mind: NpcMind, store: NpcStore) -> None:
    """process() raises only NpcMindErrors: not httpx's TypeError, not a closed client's RuntimeError."""
    with pytest.raises(InvalidInputError, match="cannot be sent as JSON"):
        mind.process("mara", "Hello?", context={"inventory": {"sword", "shield"}})  # a set: not JSON
    assert store.count("mara") == 0
    mind.close()
    with pytest.raises(NpcMindError, match="closed"):
        mind.process("mara", "Hello?")
    mind.cortex.close()  # type: ignore[attr-defined]
    from npcmind.protocol.npc import PromptConstraints
    from npcmind.sdk.cortex import CortexError

    with pytest.raises(CortexError, match="closed"):
        mind.cortex.complete("Say hello.", PromptConstraints(maxTokens=5))


def test_the_seeds_own_example_request(svc: Running) -> None:
    body = {
        "tape": {
            "observation": "The NPC notices a suspicious figure lurking near the marketplace.",
            "npcState": {},
            "memories": [{}],
        }
    }
    r = svc.http.post("/npcs/npcId/process", json=body, headers={"Authorization": "Bearer <token>"})
    assert r.status_code == 200 and r.json()["instruction"] == {"type": "IdentifyActor"}
    tape = r.json()["tape"]
    assert isinstance(tape.pop("stepToken"), str) and tape == body["tape"]  # the seed's fields, unchanged


@pytest.mark.fast
def test_the_cortex_drops_what_a_reasoning_model_refuses_and_still_answers(scripted: Any) -> None:
    from npcmind.protocol.npc import PromptConstraints

    # OpenAI's reasoning models refuse temperature, stop and max_tokens (they take max_completion_tokens)
    scripted.set(reject_params=["max_tokens", "temperature", "stop"], text='{"dialogue": "Hm."}')
    cortex = OpenAICortex(scripted.base_url, model="scripted")
    with logged("npcmind_client.cortex") as said:
        text = cortex.complete("Say hello.", PromptConstraints(maxTokens=200, temperature=0.7, stop=["\n\n"]))
        again = cortex.complete("Say hello.", PromptConstraints(maxTokens=200, temperature=0.7, stop=["\n\n"]))
    cortex.close()
    assert text == again == '{"dialogue": "Hm."}'
    sent = scripted.requests
    assert len(sent) == 5  # three refusals, then two answers without asking again
    assert sent[-1]["max_completion_tokens"] == 200
    assert not {"max_tokens", "temperature", "stop"} & set(sent[-1])
    assert len(said) == 3 and all("no longer sent" in s for s in said)


@pytest.mark.fast
def test_the_cortex_still_fails_clearly_on_an_error_it_cannot_work_around(scripted: Any) -> None:
    from npcmind.protocol.npc import PromptConstraints
    from npcmind.sdk.cortex import CortexError

    scripted.set(status=500)
    cortex = OpenAICortex(scripted.base_url, model="scripted")
    with pytest.raises(CortexError, match="HTTP 500"):
        cortex.complete("Say hello.", PromptConstraints(maxTokens=50))
    cortex.close()
    assert len(scripted.requests) == 1


def test_a_refused_step_is_a_service_error_with_the_services_status_and_code(mind: NpcMind, store: NpcStore) -> None:
    """The service's own refusal reaches the game as it answered it: its status, its error code, its message."""
    with pytest.raises(ServiceError, match="unknown ruleset 'preset_nothing'") as e:
        mind.process("mara", "Hello?", ruleset="preset_nothing")
    assert (e.value.status, e.value.code) == (422, "invalid_request")
    assert isinstance(e.value, NpcMindError) and not isinstance(e.value, SignatureError)
    assert store.count("mara") == 0


@pytest.mark.parametrize("kind", ["in-memory", "sqlite"])
def test_the_dialogue_loop_runs_on_any_npc_memory(
    svc: Running, scripted: Any, tmp_path: Path, embedder: Any, kind: str
) -> None:
    """NpcMind takes any NpcMemory: the in-memory one and the SQLite + embeddings store give the loop the same
    NPC, keep what a verified outcome says and merge its state; an NPC neither knows is refused before a call."""
    memory: InMemoryNpcs | NpcStore = (
        InMemoryNpcs() if kind == "in-memory" else NpcStore(tmp_path / "npcs.db", embedder=embedder)
    )
    memory.register("mara", INNKEEPER, {"inn": "Silver Stag"})
    assert isinstance(memory, NpcMemory)
    mind = NpcMind(svc.server.url, cortex=OpenAICortex(scripted.base_url, model="scripted"), memory=memory)
    try:
        scripted.set(text='{"dialogue": "The mine? Cursed.", "remember": ["A traveller asked about the mine."]}')
        out = mind.process("mara", "A traveller asks about the mine.")
        assert out.valid and out.steps == ["IdentifyActor", "QueryVector", "ExecuteInference", "Finalize"]
        assert out.remembered == 3 and out.state["turns"] == 1 == memory.get("mara").state["turns"]  # type: ignore[union-attr]
        kept = memory.remembered("mara") if isinstance(memory, InMemoryNpcs) else memory.recall("mara", "", 9, -1.0)
        assert "A traveller asked about the mine." in [m.text for m in kept]
        assert INNKEEPER in scripted.requests[0]["messages"][0]["content"]
        scripted.set(text='{"dialogue": "Again?"}')
        again = mind.process("mara", "A traveller asks about the mine again.")
        assert again.state["turns"] == 2 and "asked about the mine" in scripted.requests[-1]["messages"][0]["content"]
        with pytest.raises(InvalidInputError, match="unknown NPC 'tom'"):
            mind.process("tom", "Hello?")
    finally:
        mind.close()


@pytest.mark.fast
def test_the_in_memory_npcs_recall_by_shared_words_and_apply_whole() -> None:
    """InMemoryNpcs as TypeScript's: recall by Jaccard similarity of words, most similar first, within the
    threshold and the limit; apply merges the patch (null deletes) and keeps the memories; a bad id is named."""
    npcs = InMemoryNpcs()
    npcs.register("mara", "An innkeeper.", state={"mood": "calm", "gold": 3})
    state = npcs.apply(
        "mara",
        [
            NewMemory("The old mine collapsed.", "knowledge", 0.5),
            NewMemory("Stew on Sundays.", "knowledge", 0.9),
            NewMemory("The mine is cursed, the old folk say.", "knowledge", 0.2),
        ],
        {"mood": "wary", "gold": None},
    )
    assert state == {"mood": "wary"} == npcs.get("mara").state  # type: ignore[union-attr]
    found = npcs.recall("mara", "the old mine", limit=5, threshold=0.1)
    assert [m.text for m in found] == ["The old mine collapsed.", "The mine is cursed, the old folk say."]
    assert found[0].similarity == 0.75 and found[0].similarity > found[1].similarity
    assert [m.text for m in npcs.recall("mara", "the old mine", limit=1, threshold=0.1)] == ["The old mine collapsed."]
    assert npcs.recall("mara", "dragons", limit=5, threshold=0.1) == [] and npcs.recall("tom", "x", 5, 0.0) == []
    assert len(npcs.remembered("mara")) == 3
    with pytest.raises(InvalidInputError, match="npc_id: 'a/b'"):
        npcs.register("a/b", "A guard.")
    with pytest.raises(InvalidInputError, match="unknown NPC 'tom'"):
        npcs.apply("tom", [], {})
