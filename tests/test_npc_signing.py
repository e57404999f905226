"""Signatures are over RFC 8785 (JCS) canonical JSON: the shipped vectors, which a verifier in any language checks.

A verifier that parses a tape with its standard JSON and canonicalises it by RFC 8785 must rebuild the bytes the
service signed: `1e16` is 10000000000000000 and `1e-7` is 1e-7 there, not Python's or msgspec's forms.
"""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any

import pytest

from conftest import ROOT
from npcmind.npc.signing import NotCanonical, Signer, StepTokens, canonical, digest, signed_payload, verify
from npcmind.protocol.validate import decode_json

pytestmark = pytest.mark.fast  # the whole file is in the fast tier (docs/testing.md)

VECTORS: dict[str, Any] = json.loads((ROOT / "docs" / "signature-vectors.json").read_text("utf-8"))


@pytest.mark.parametrize("case", VECTORS["canonical"], ids=lambda c: c["name"])
def test_canonical_json_is_rfc_8785_as_the_vectors_say(case: dict[str, str]) -> None:
    for read in (json.loads(case["json"]), decode_json(case["json"].encode())):  # as the SDK and the service read
        out = canonical(read)
        assert out.decode() == case["canonical"]
        assert hashlib.sha256(out).hexdigest() == case["sha256"]


@pytest.mark.parametrize("case", VECTORS["numbers"], ids=lambda c: c["ieee754"])
def test_numbers_are_written_as_rfc_8785_appendix_b_says(case: dict[str, str]) -> None:
    value = struct.unpack(">d", bytes.fromhex(case["ieee754"]))[0]
    assert canonical(value).decode() == case["canonical"]
    assert canonical([value, {"n": value}]).decode() == f'[{case["canonical"]},{{"n":{case["canonical"]}}}]'


@pytest.mark.parametrize("case", VECTORS["refused"], ids=lambda c: c["name"])
def test_a_number_no_double_holds_has_no_canonical_form(case: dict[str, str]) -> None:
    with pytest.raises(NotCanonical) as e:
        canonical(json.loads(case["json"]))
    assert e.value.path == case["path"]
    for odd in (float("nan"), float("inf"), {1: "a key that is not text"}, object()):
        with pytest.raises(NotCanonical):
            canonical(odd)


@pytest.mark.parametrize("case", VECTORS["signatures"], ids=lambda c: c["name"])
def test_the_signature_vector_verifies_and_is_what_the_signer_writes(case: dict[str, Any]) -> None:
    signer = Signer(bytes.fromhex(case["seedHex"]))
    assert (signer.kid, signer.public_key) == (case["kid"], case["publicKey"])
    tape = json.loads(case["tapeJson"])
    assert digest(tape) == case["tapeDigest"]
    fin = case["finalize"]
    payload = signed_payload(case["npcId"], fin, tape)
    assert canonical(payload).decode() == case["payloadCanonical"]
    assert payload["tapeDigest"] == case["tapeDigest"] and payload["rulesetId"] == fin["ruleAudit"]["preset"]
    assert verify(fin["signature"], payload, {case["kid"]: case["publicKey"]})
    assert signer.sign(payload) == fin["signature"]  # Ed25519 is deterministic: the same bytes, the same signature
    for changed in ({**tape, "npcState": {**tape["npcState"], "gold": 1e17}}, {**tape, "observation": "Hi."}):
        assert not verify(
            fin["signature"], signed_payload(case["npcId"], fin, changed), {case["kid"]: case["publicKey"]}
        )


def test_a_step_token_binds_the_npc_the_step_and_every_field_of_the_tape() -> None:
    tokens = StepTokens(b"k" * 32)
    tape: dict[str, Any] = {"observation": "Hi.", "npcState": {"gold": 1e16}, "memories": []}
    token = tokens.issue("mara", "QueryVector", tape)
    assert tokens.valid(token, "mara", "QueryVector", json.loads(json.dumps(tape)))  # survives a JSON round trip
    assert not tokens.valid(token, "bob", "QueryVector", tape)
    assert not tokens.valid(token, "mara", "ExecuteInference", tape)
    assert not tokens.valid(token, "mara", "QueryVector", {**tape, "npcState": {"gold": 1e17}})
    assert not StepTokens(b"j" * 32).valid(token, "mara", "QueryVector", tape)
    for odd in (None, 12, "", "é" * 43, token[:-1]):  # never a TypeError from compare_digest
        assert not tokens.valid(odd, "mara", "QueryVector", tape)
