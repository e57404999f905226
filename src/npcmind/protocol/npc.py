"""Wire types of the NPC process protocol, field for field as the seed's OpenAPI schema names them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from npcmind_client.npc_wire import (
    ExecuteInferenceInstruction,
    FinalizeInstruction,
    GenericAction,
    IdentifyActorInstruction,
    MemoryStoreInstruction,
    MemoryType,
    NPCInstruction,
    PromptConstraints,
    QueryVectorInstruction,
    RuleAudit,
    RuleVerdict,
    _d,
)

__all__ = [
    "NPC",
    "ExecuteInferenceInstruction",
    "FinalizeInstruction",
    "GenericAction",
    "IdentifyActorInstruction",
    "KeysResponse",
    "MemoryStoreInstruction",
    "MemoryType",
    "NPCInstruction",
    "NPCProcessRequest",
    "NPCProcessResponse",
    "NPCProcessTape",
    "PromptConstraints",
    "PublicKey",
    "QueryVectorInstruction",
    "RecalledMemory",
    "RuleAudit",
    "RuleVerdict",
]


class NPC(msgspec.Struct):
    """An NPC as the game's registry knows it."""

    npcId: Annotated[str | None, _d("The NPC's id; must equal the path's npcId.")] = None
    persona: Annotated[str | None, _d("Who the NPC is, in a few sentences: the prompt's first part.")] = None
    data: Annotated[dict[str, Any] | None, _d("What else the game knows of the NPC (role, faction), as JSON.")] = None


class RecalledMemory(msgspec.Struct):
    """A memory the SDK recalled, with its true similarity to the query."""

    text: Annotated[str | None, _d("What the NPC remembers.")] = None
    type: Annotated[MemoryType | None, _d("observation, experience, knowledge, emotion or dialogue.")] = None
    importance: Annotated[float | None, _d("0 to 1, as Finalize gave it when the memory was stored.")] = None
    similarity: Annotated[float | None, _d("Cosine similarity to the recall query, at or above its threshold.")] = None


class NPCProcessTape(msgspec.Struct):
    """The whole state of one dialogue step; unknown fields are kept and passed back (not listed here)."""

    observation: Annotated[str, _d("What just happened to the NPC, or what was said to it.")]
    npcState: Annotated[dict[str, Any], _d("The NPC's state as the SDK holds it (mood, lastAction, ...).")]
    memories: Annotated[list[RecalledMemory], _d("Recalled memories, most relevant first (empty before recall).")]
    context: Annotated[dict[str, Any] | None, _d("What the game adds about the scene, as JSON.")] = None
    persona: Annotated[str | None, _d("The persona; from the actor when not given.")] = None
    actor: Annotated[NPC | None, _d("The NPC, once IdentifyActor answered.")] = None
    prompt: Annotated[str | None, _d("The prompt the service built for ExecuteInference.")] = None
    constraints: Annotated[PromptConstraints | None, _d("The constraints of that prompt.")] = None
    generatedOutput: Annotated[str | None, _d("What the local model answered, once ExecuteInference ran.")] = None
    rulesetId: Annotated[str | None, _d("The ruleset Finalize judges by; `default` when omitted.")] = None
    vectorQueried: Annotated[bool | None, _d("True once QueryVector was answered.")] = None
    stepToken: Annotated[
        str | None,
        _d("The service's MAC over this tape, the NPC and the step it was returned with: send the tape back as is."),
    ] = None


class NPCProcessRequest(msgspec.Struct):
    """The body of POST /npcs/{npcId}/process."""

    tape: Annotated[NPCProcessTape, _d("The step's whole state: the service keeps nothing between steps.")]
    lastResult: Annotated[
        dict[str, Any] | None,
        _d("The answer to the last instruction: IdentifyActorResult, QueryVectorResult or ExecuteInferenceResult."),
    ] = None


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


class NPCProcessResponse(msgspec.Struct):
    """The next instruction and the updated tape."""

    instruction: Annotated[NPCInstruction, _d("What the SDK does next; Finalize ends the dialogue step.")]
    tape: Annotated[dict[str, Any], _d("The updated tape: send it back with the next step.")]


class PublicKey(msgspec.Struct):
    """A key that verifies outcome signatures."""

    kid: Annotated[str, _d("The key's id.")]
    alg: Annotated[Literal["Ed25519"], _d("Ed25519.")]
    public_key: Annotated[str, _d("The raw 32-byte public key, base64url without padding.")]


class KeysResponse(msgspec.Struct):
    """GET /v1/keys."""

    keys: Annotated[list[PublicKey], _d("Keys that verify outcome signatures.")]
