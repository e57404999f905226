"""Wire types of the NPC process protocol, field for field as the seed's OpenAPI schema names them."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

MemoryType = Literal["observation", "experience", "knowledge", "emotion"]


class NPC(msgspec.Struct):
    """An NPC as the game's registry knows it."""

    npcId: str | None = None
    persona: str | None = None
    data: dict[str, Any] | None = None


class RecalledMemory(msgspec.Struct):
    """A memory the SDK recalled, with its true similarity to the query."""

    text: str | None = None
    type: MemoryType | None = None
    importance: float | None = None
    similarity: float | None = None


class PromptConstraints(msgspec.Struct):
    """What the SDK's inference must honour."""

    maxTokens: int | None = None
    temperature: float | None = None
    stop: list[str] | None = None


class NPCProcessTape(msgspec.Struct):
    """The whole state of one dialogue step; unknown fields are kept and passed back (not listed here)."""

    observation: str
    npcState: dict[str, Any]
    memories: list[RecalledMemory]
    context: dict[str, Any] | None = None
    persona: str | None = None
    actor: NPC | None = None
    prompt: str | None = None
    constraints: PromptConstraints | None = None
    generatedOutput: str | None = None
    rulesetId: str | None = None
    vectorQueried: bool | None = None


class NPCProcessRequest(msgspec.Struct):
    """The body of POST /npcs/{npcId}/process."""

    tape: NPCProcessTape
    lastResult: dict[str, Any] | None = None


class IdentifyActorResult(msgspec.Struct, forbid_unknown_fields=True):
    """lastResult after IdentifyActor."""

    type: Literal["IdentifyActorResult"]
    actor: NPC


class QueryVectorResult(msgspec.Struct, forbid_unknown_fields=True):
    """lastResult after QueryVector."""

    type: Literal["QueryVectorResult"]
    memories: list[RecalledMemory]


class ExecuteInferenceResult(msgspec.Struct, forbid_unknown_fields=True):
    """lastResult after ExecuteInference."""

    type: Literal["ExecuteInferenceResult"]
    generatedOutput: str


class IdentifyActorInstruction(msgspec.Struct, tag_field="type", tag="IdentifyActor"):
    """Ask the SDK who the NPC is."""


class QueryVectorInstruction(msgspec.Struct, tag_field="type", tag="QueryVector"):
    """Ask the SDK to recall memories related to ``query``."""

    query: str
    limit: int
    threshold: float


class ExecuteInferenceInstruction(msgspec.Struct, tag_field="type", tag="ExecuteInference"):
    """Ask the SDK to run its model on ``prompt``."""

    prompt: str
    constraints: PromptConstraints


class MemoryStoreInstruction(msgspec.Struct):
    """Something the NPC should remember."""

    text: str
    type: MemoryType
    importance: float


class GenericAction(msgspec.Struct):
    """An action the NPC takes, checked against the ruleset."""

    type: str
    reason: str | None = None
    target: str | None = None


class RuleCheck(msgspec.Struct):
    """One rule applied in Finalize, and what it found."""

    rule: str
    result: Literal["pass", "blocked", "repaired"]
    detail: str


class FinalizeInstruction(msgspec.Struct, tag_field="type", tag="Finalize"):
    """The outcome: validated, signed, ready to apply."""

    valid: bool
    signature: str | None
    memoryStore: list[MemoryStoreInstruction]
    stateTransform: dict[str, Any]
    action: GenericAction | None
    dialogue: str
    ruleAudit: list[RuleCheck]


NPCInstruction = IdentifyActorInstruction | QueryVectorInstruction | ExecuteInferenceInstruction | FinalizeInstruction


class NPCProcessResponse(msgspec.Struct):
    """The next instruction and the updated tape."""

    instruction: NPCInstruction
    tape: dict[str, Any]


class PublicKey(msgspec.Struct):
    """A key that verifies outcome signatures."""

    kid: str
    alg: Literal["Ed25519"]
    public_key: str


class KeysResponse(msgspec.Struct):
    """GET /v1/keys."""

    keys: list[PublicKey]
