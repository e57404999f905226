"""Wire types of the NPC process protocol, field for field as the seed's OpenAPI schema names them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from npcmind.protocol.numbers import Count

MemoryType = Literal["observation", "experience", "knowledge", "emotion", "dialogue"]  # dialogue: ForbocAI's SDKs


def _d(text: str) -> Meta:
    """A field's description in the OpenAPI document (what a client generated in the game's language shows)."""
    return Meta(description=text)


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


class PromptConstraints(msgspec.Struct):
    """What the SDK's inference must honour."""

    maxTokens: Annotated[Count | None, _d("The most tokens the local model may generate.")] = None
    temperature: Annotated[float | None, _d("The sampling temperature.")] = None
    stop: Annotated[list[str] | None, _d("Strings that end generation.")] = None


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


class IdentifyActorInstruction(msgspec.Struct, tag_field="type", tag="IdentifyActor"):
    """Ask the SDK who the NPC is."""


class QueryVectorInstruction(msgspec.Struct, tag_field="type", tag="QueryVector"):
    """Ask the SDK to recall memories related to ``query``."""

    query: Annotated[str, _d("The text to recall memories about.")]
    limit: Annotated[int, _d("The most memories to answer with.")]
    threshold: Annotated[float, _d("The least cosine similarity a recalled memory may have.")]


class ExecuteInferenceInstruction(msgspec.Struct, tag_field="type", tag="ExecuteInference"):
    """Ask the SDK to run its model on ``prompt``."""

    prompt: Annotated[str, _d("The whole prompt for the local model.")]
    constraints: Annotated[PromptConstraints, _d("What the generation must honour.")]


class MemoryStoreInstruction(msgspec.Struct):
    """Something the NPC should remember."""

    text: Annotated[str, _d("What to remember.")]
    type: Annotated[MemoryType, _d("observation, experience, knowledge, emotion or dialogue.")]
    importance: Annotated[float, _d("0 to 1: breaks near-ties in recall.")]


class GenericAction(msgspec.Struct):
    """An action the NPC takes, checked against the ruleset."""

    type: Annotated[str, _d("One of the ruleset's allowed action types (ATTACK, MOVE, ...).")]
    reason: Annotated[str | None, _d("Why, in the NPC's words.")] = None
    target: Annotated[str | None, _d("Whom or where: required by the types whose rule says so.")] = None
    confidence: Annotated[float | None, _d("How sure the model said it was, as it wrote it; null when it did not.")] = (
        None
    )


class RuleVerdict(msgspec.Struct):
    """One rule applied in Finalize, and what it found."""

    ruleId: Annotated[str, _d("The rule: format, action_allowed, action_needs, blocked.<id>, not_empty, ...")]
    verdict: Annotated[Literal["pass", "blocked", "repaired"], _d("pass, blocked, or repaired (fixed and let pass).")]
    reason: Annotated[str, _d("What the rule found.")]


class RuleAudit(msgspec.Struct):
    """Every rule Finalize applied, in the shape ForbocAI's SDKs read."""

    preset: Annotated[str, _d("The ruleset that judged the output, by its name on this service (default, rpg).")]
    appliedRules: Annotated[list[RuleVerdict], _d("Each rule applied, in order, and its verdict.")]


class FinalizeInstruction(msgspec.Struct, tag_field="type", tag="Finalize"):
    """The outcome: validated, signed, ready to apply."""

    valid: Annotated[bool, _d("False when a rule blocked the output: then nothing is to be stored.")]
    signature: Annotated[
        str | None,
        _d(
            "<kid>.<base64url Ed25519 signature> (GET /v1/keys) of this ruleset's verdict for this NPC and tape "
            "digest: not of who wrote generatedOutput. Null when not valid."
        ),
    ]
    memoryStore: Annotated[list[MemoryStoreInstruction], _d("What the NPC should remember.")]
    stateTransform: Annotated[dict[str, Any], _d("A JSON merge patch for npcState.")]
    action: Annotated[GenericAction | None, _d("The validated action, or null.")]
    dialogue: Annotated[str, _d("The NPC's line; the ruleset's refusal line when not valid.")]
    ruleAudit: Annotated[RuleAudit, _d("The ruleset applied, and every rule's verdict.")]


NPCInstruction = IdentifyActorInstruction | QueryVectorInstruction | ExecuteInferenceInstruction | FinalizeInstruction


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
