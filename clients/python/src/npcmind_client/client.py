"""The SDK's process loop: answer each instruction locally until Finalize, verify it, apply it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import msgspec

from npcmind_client.cortex import Cortex
from npcmind_client.errors import (
    InvalidInputError,
    NpcMindError,
    ProtocolError,
    SignatureError,
    TooLargeError,
    UnreachableError,
    service_error,
)
from npcmind_client.limits import IDENTITY, MAX_ERROR_BYTES, MAX_KEYS_BYTES, MAX_STEP_BYTES, body_bytes
from npcmind_client.memory import NewMemory, NpcMemory, check_npc_id
from npcmind_client.npc_wire import NPCInstruction, PromptConstraints
from npcmind_client.signing import NotCanonical, canonical, signed_payload, verify
from npcmind_client.urls import http_url

MAX_CALLS = 8
_KEY = re.compile(r"[A-Za-z0-9_-]{43}")  # an Ed25519 public key (32 bytes) in base64url, unpadded


def _text(data: bytes) -> str:
    """The start of a body, as text for a message."""
    return data[:200].decode("utf-8", "replace")


def _json(data: bytes) -> Any:
    """An answer's JSON, None for a body that is none (a proxy's page)."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


@dataclass
class NpcOutcome:
    """What the game gets back: the line, the action, whether the signature was checked here (``verified``) and
    the outcome applied (``applied``), and what a game server checks when the check is left to it."""

    valid: bool
    dialogue: str
    action: dict[str, Any] | None
    state: dict[str, Any]  # the merged state when applied, the NPC's state as it was otherwise
    remembered: int  # how many memories were kept (0 when nothing was applied)
    audit: dict[str, Any] = field(default_factory=dict)  # {"preset", "appliedRules": [{ruleId, verdict, reason}]}
    steps: list[str] = field(default_factory=list)
    npc_id: str = ""
    verified: bool = False  # the service's signature was checked here (NpcMind.checks_signatures)
    applied: bool = False  # verified here, then kept in the NpcMemory (memories kept, state merged)
    memories: list[NewMemory] = field(default_factory=list)  # what a valid outcome asks the game to keep
    state_transform: dict[str, Any] = field(default_factory=dict)  # its JSON merge patch of the NPC's state
    signature: str | None = None  # ``kid.base64url``; None for an invalid outcome
    signed_payload: str | None = None  # the canonical JSON (RFC 8785) the signature covers, as text
    finalize: dict[str, Any] = field(default_factory=dict)  # the Finalize instruction as the service sent it
    tape: dict[str, Any] = field(default_factory=dict)  # the tape as the service returned it

    def for_server(self) -> str:
        """The JSON a game server checks (``{"npcId", "finalize", "tape"}``, as C#'s ``ForServer()``), for
        ``verify(finalize["signature"], signed_payload(npcId, finalize, tape), keys)``."""
        return json.dumps({"npcId": self.npc_id, "finalize": self.finalize, "tape": self.tape}, ensure_ascii=False)


class NpcMind:
    """Talks to an npcmind service for the NPCs of one game."""

    def __init__(
        self,
        service_url: str,
        *,
        cortex: Cortex,
        memory: NpcMemory,
        token: str | None = None,
        timeout_ms: float = 30_000,
        keys: Mapping[str, str] | None = None,
        check_signatures: bool = True,
    ) -> None:
        """``memory``: any NpcMemory (``InMemoryNpcs``, the SQLite ``NpcStore``, the game's own); ``token``: a
        hosted service's session token; ``timeout_ms``: how long one step may take. ``keys``: the service's
        public keys (kid → base64url, as GET /v1/keys lists them), pinned: outcomes are then checked with these
        alone and GET /v1/keys is never asked for them. None (the default): the keys the service lists, worth
        what the connection to it is (https). ``check_signatures``: check each valid outcome's signature here and
        apply it (the default); False leaves the check to a game server: nothing is verified here, so nothing is
        applied, and the outcome carries what the server checks (``for_server()``) and what the game applies
        once it said yes (``memories``, ``state_transform``)."""
        if not isinstance(check_signatures, bool):
            raise InvalidInputError(f"check_signatures: must be True or False, not {type(check_signatures).__name__}")
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=http_url(service_url, "service_url", "http://127.0.0.1:8080"),
            headers=headers,
            timeout=timeout_ms / 1000,
        )
        self.cortex = cortex
        self.memory = memory
        self._keys: dict[str, str] = {}
        self._pinned = pinned_keys(keys)
        self.checks_signatures = check_signatures

    def public_keys(self, refresh: bool = False) -> dict[str, str]:
        """The service's signing keys (kid → base64url), fetched once from GET /v1/keys."""
        if refresh or not self._keys:
            status, data = self._request("GET", "/v1/keys", None, MAX_KEYS_BYTES, "MAX_KEYS_BYTES")
            if status != 200:
                raise service_error(status, _json(data), _text(data), "GET /v1/keys")
            try:
                self._keys = {k["kid"]: k["public_key"] for k in json.loads(data)["keys"]}
            except (ValueError, KeyError, TypeError, RecursionError):
                raise ProtocolError(f"GET /v1/keys answered without keys: {_text(data)}", status=status) from None
        return self._keys

    def _request(self, method: str, path: str, body: Any, cap: int, name: str) -> tuple[int, bytes]:
        """One call to the service: its status and body, read no further than ``cap`` (an error's than
        MAX_ERROR_BYTES); a service that cannot be reached is an UnreachableError, a body past its cap a
        TooLargeError, each saying where."""
        if self._http.is_closed:
            raise NpcMindError("this NpcMind was closed: make a new one")
        status: int | None = None
        try:
            with self._http.stream(method, path, json=body, headers=IDENTITY) as r:
                status = r.status_code
                limit, label = (cap, name) if r.status_code == 200 else (MAX_ERROR_BYTES, "MAX_ERROR_BYTES")
                return r.status_code, body_bytes(r, limit, f"{method} {path}", label)
        except TooLargeError as e:
            raise TooLargeError(str(e), status=status) from None
        except httpx.HTTPError as e:
            raise UnreachableError(
                f"cannot reach the npcmind service at {self._http.base_url}: {e or e.__class__.__name__} "
                "(is `npcmind serve` running there?)"
            ) from None
        except (TypeError, ValueError) as e:  # the game's context or state holds something JSON cannot carry
            raise InvalidInputError(f"the tape cannot be sent as JSON: {e}") from None

    def _step(
        self, npc_id: str, tape: dict[str, Any], last: dict[str, Any] | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        path = f"/npcs/{quote(npc_id, safe='')}/process"
        status, data = self._request("POST", path, {"tape": tape, "lastResult": last}, MAX_STEP_BYTES, "MAX_STEP_BYTES")
        if status != 200:
            raise service_error(status, _json(data), _text(data), f"POST {path}")
        try:
            body = json.loads(data)
            instruction, tape = body["instruction"], body["tape"]
        except (ValueError, KeyError, TypeError, RecursionError):
            raise ProtocolError(
                f"the service answered 200 without an instruction and tape: {_text(data)}", status=200
            ) from None
        try:  # checked against the protocol, used as sent (a Finalize is verified over its own bytes' values)
            msgspec.convert(instruction, NPCInstruction)
        except msgspec.ValidationError as e:
            raise ProtocolError(
                f"the service's instruction is not one this SDK knows ({e}): {_text(data)}", status=200
            ) from None
        if not isinstance(tape, dict):
            raise ProtocolError(f"the service's tape is not an object: {_text(data)}", status=200)
        return instruction, tape

    def process(
        self, npc_id: str, observation: str, context: dict[str, Any] | None = None, ruleset: str | None = None
    ) -> NpcOutcome:
        """Run the loop for one observation; a valid outcome whose signature verifies is applied to the memory
        (its memories kept and its state merged, both or neither); one that does not verify is a SignatureError,
        nothing applied. With ``check_signatures`` False nothing is verified, so nothing is applied."""
        check_npc_id(npc_id)
        rec = self.memory.get(npc_id)
        if rec is None:
            raise InvalidInputError(f"npc_id: unknown NPC {npc_id!r}: register it in the game's memory first")
        tape: dict[str, Any] = {
            "observation": observation,
            "npcState": rec.state,
            "memories": [],
            "context": context or {},
        }
        if ruleset:
            tape["rulesetId"] = ruleset
        last: dict[str, Any] | None = None
        steps: list[str] = []
        for _ in range(MAX_CALLS):
            instruction, tape = self._step(npc_id, tape, last)
            kind = instruction["type"]
            steps.append(kind)
            if kind == "IdentifyActor":
                last = {
                    "type": "IdentifyActorResult",
                    "actor": {"npcId": rec.npc_id, "persona": rec.persona, "data": rec.data},
                }
            elif kind == "QueryVector":
                found = self.memory.recall(npc_id, instruction["query"], instruction["limit"], instruction["threshold"])
                last = {
                    "type": "QueryVectorResult",
                    "memories": [
                        {"text": m.text, "type": m.type, "importance": m.importance, "similarity": m.similarity}
                        for m in found
                    ],
                }
            elif kind == "ExecuteInference":
                constraints = msgspec.convert(instruction.get("constraints") or {}, PromptConstraints)
                last = {
                    "type": "ExecuteInferenceResult",
                    "generatedOutput": self.cortex.complete(instruction["prompt"], constraints),
                }
            elif kind == "Finalize":
                out, payload = self._outcome(npc_id, instruction, tape, steps)
                return self._apply(self._checked(out, payload))
            else:
                raise ProtocolError(f"unknown instruction {kind!r}")
        raise ProtocolError(f"no Finalize after {MAX_CALLS} calls")

    def _outcome(
        self, npc_id: str, fin: dict[str, Any], tape: dict[str, Any], steps: list[str]
    ) -> tuple[NpcOutcome, dict[str, Any] | None]:
        """The outcome as the service gave it, nothing verified nor applied yet, and for a valid one what its
        signature covers (its canonical text is ``signed_payload``)."""
        rec = self.memory.get(npc_id)
        out = NpcOutcome(
            valid=fin["valid"] is True,
            dialogue=fin["dialogue"],
            action=None,
            state=rec.state if rec is not None else {},
            remembered=0,
            audit=fin.get("ruleAudit") or {},
            steps=steps,
            npc_id=npc_id,
            finalize=fin,
            tape=tape,
        )
        if not out.valid:
            return out, None
        out.action = fin.get("action")
        out.memories = [NewMemory(m["text"], m["type"], m["importance"]) for m in fin["memoryStore"]]
        out.state_transform = fin["stateTransform"]
        out.signature = fin.get("signature")
        if not out.signature:
            raise SignatureError("the service sent a valid outcome without a signature: nothing can check it")
        try:
            payload = signed_payload(npc_id, fin, tape)
            out.signed_payload = canonical(payload).decode("utf-8")
        except NotCanonical as e:
            raise SignatureError(f"the outcome cannot be verified: its tape has no canonical form ({e})") from None
        return out, payload

    def _checked(self, out: NpcOutcome, payload: dict[str, Any] | None) -> NpcOutcome:
        """A valid outcome's signature checked here (unless ``check_signatures`` is False); one that does not
        verify is refused, nothing applied."""
        if payload is None or not self.checks_signatures:
            return out
        if not self._verifies(out.signature or "", payload):
            raise SignatureError("the outcome's signature does not verify: nothing was applied")
        out.verified = True
        return out

    def _apply(self, out: NpcOutcome) -> NpcOutcome:
        """A valid outcome verified here, applied to the memory (both or neither: the memory's contract); any
        other as it is."""
        if not out.valid or not out.verified:
            return out
        out.state = self.memory.apply(out.npc_id, out.memories, out.state_transform)  # both, or neither on a crash
        out.applied = True
        out.remembered = len(out.memories)
        return out

    def _verifies(self, signature: str, payload: dict[str, Any]) -> bool:
        """Whether the outcome's signature verifies: with the pinned keys alone, else with the service's (asked
        again once, for a key rotated since they were fetched)."""
        if self._pinned is not None:
            return verify(signature, payload, self._pinned)
        return verify(signature, payload, self.public_keys()) or verify(
            signature, payload, self.public_keys(refresh=True)
        )

    def close(self) -> None:
        """Close connections."""
        self._http.close()


def pinned_keys(keys: Mapping[str, str] | None) -> dict[str, str] | None:
    """The keys a game pins, checked when it gives them (an InvalidInputError, a ValueError, naming ``keys``):
    each kid a non-empty text, each key the base64url of 32 bytes (an Ed25519 public key); at least one, or every
    outcome would be refused."""
    if keys is None:
        return None
    if not isinstance(keys, Mapping):
        raise InvalidInputError(f"keys: must map each kid to its base64url public key, not be a {type(keys).__name__}")
    if not keys:
        raise InvalidInputError("keys: pin at least one key (kid -> base64url public key), or give None")
    pinned: dict[str, str] = {}
    for kid, key in keys.items():
        if not isinstance(kid, str) or not kid or "." in kid:
            shown = repr(kid[:80]) if isinstance(kid, str) else type(kid).__name__
            raise InvalidInputError(f"keys: a kid must be a non-empty text without '.', not {shown}")
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise InvalidInputError(f"keys[{kid[:80]!r}]: not the base64url of an Ed25519 public key (43 characters)")
        pinned[kid] = key
    return pinned
