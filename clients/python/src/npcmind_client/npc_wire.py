"""The NPC process protocol's instructions as the SDK reads them (the service sends the same types): one
definition, so an instruction the SDK accepts is one the service can send."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

MAX_INTEGER = 2**53 - 1  # 9007199254740991: every integer up to it is exact in a double
# a count of the protocol's own (epoch, a token limit): never negative, exact in every engine
Count = Annotated[int, Meta(ge=0, le=MAX_INTEGER)]
MemoryType = Literal["observation", "experience", "knowledge", "emotion", "dialogue"]  # dialogue: ForbocAI's SDKs


def _d(text: str) -> Meta:
    """A field's description in the OpenAPI document (what a client generated in the game's language shows)."""
    return Meta(description=text)


class PromptConstraints(msgspec.Struct):
    """What the SDK's inference must honour."""

    maxTokens: Annotated[Count | None, _d("The most tokens the local model may generate.")] = None
    temperature: Annotated[float | None, _d("The sampling temperature.")] = None
    stop: Annotated[list[str] | None, _d("Strings that end generation.")] = None


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
