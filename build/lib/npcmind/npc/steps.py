"""The step machine of POST /npcs/{npcId}/process: the next instruction follows from the tape and lastResult alone.

The service keeps nothing between steps. The tape is handled as the JSON object the SDK sent, so fields
this service does not know are passed back unchanged; the known ones are checked against the seed's
schema first, and every problem is named by path. Each returned tape carries a `stepToken`, a MAC over
the NPC, the step and the tape: a tape past its first step is taken back only with it, so no step can
be skipped or answered by a tape the game wrote itself (its own prompt, its own recall).
"""

from __future__ import annotations

from typing import Any

import msgspec

from npcmind.npc.outcome import build_prompt, finalize
from npcmind.npc.rulesets import Ruleset
from npcmind.npc.signing import NotCanonical, Signer, StepTokens, signed_payload
from npcmind.protocol.errors import ApiError, Problem
from npcmind.protocol.npc import (
    ExecuteInferenceInstruction,
    ExecuteInferenceResult,
    FinalizeInstruction,
    IdentifyActorInstruction,
    IdentifyActorResult,
    NPCInstruction,
    NPCProcessRequest,
    NPCProcessResponse,
    QueryVectorInstruction,
    QueryVectorResult,
    RuleAudit,
)
from npcmind.protocol.validate import convert, decode_json

RESULTS: dict[str, type] = {
    "IdentifyActorResult": IdentifyActorResult,
    "QueryVectorResult": QueryVectorResult,
    "ExecuteInferenceResult": ExecuteInferenceResult,
}


PRESET = "preset_"  # ForbocAI's SDKs name the built-in rulesets preset_<name>
ISSUED = ("vectorQueried", "prompt", "generatedOutput")  # what only a step the service issued puts in a tape


def _conflict(message: str) -> ApiError:
    return ApiError(409, "conflict", message)


def step_of(tape: dict[str, Any], recalls: bool) -> str:
    """The instruction a tape is at: the one the service returns it with, and the one it is taken back for."""
    if not tape.get("actor"):
        return "IdentifyActor"
    if recalls and tape.get("vectorQueried") is not True:
        return "QueryVector"
    if tape.get("generatedOutput") is None:
        return "ExecuteInference"
    return "Finalize"


class NpcProcessor:
    """Answers one atomic step; shared by every request, stateless."""

    def __init__(self, rulesets: dict[str, Ruleset], signer: Signer, tokens: StepTokens) -> None:
        self.rulesets = rulesets
        self.signer = signer
        self.tokens = tokens

    def ruleset(self, tape: dict[str, Any]) -> Ruleset:
        """The tape's ruleset (`default` when none is named; `preset_<name>` is `<name>` unless one is so named)."""
        name = tape.get("rulesetId") or "default"
        found = self.rulesets.get(name)
        if found is None and name.startswith(PRESET):
            found = self.rulesets.get(name[len(PRESET) :])
        if found is None:
            raise ApiError.invalid(
                [Problem("tape.rulesetId", f"unknown ruleset {name!r}; known: " + ", ".join(sorted(self.rulesets)))]
            )
        return found

    def process(self, npc_id: str, body: bytes) -> NPCProcessResponse:
        """Check the tape is the one returned last, merge lastResult into it, then build the next instruction."""
        raw = decode_json(body)
        convert(raw, NPCProcessRequest)  # every shape problem of the tape and lastResult, by path
        tape: dict[str, Any] = dict(raw["tape"])
        ruleset = self.ruleset(tape)
        recalls = ruleset.spec.recall is not None
        actor = tape.get("actor")
        if actor and actor.get("npcId") != npc_id:
            raise ApiError.invalid([Problem("tape.actor.npcId", f"must equal the path's npcId {npc_id!r}")])
        try:
            self._check_token(npc_id, tape, recalls)
            last = raw.get("lastResult")
            if last is not None:
                self._merge(npc_id, tape, last, recalls)
            step = step_of(tape, recalls)
            instruction = self._instruction(step, tape, ruleset)
            tape["stepToken"] = self.tokens.issue(npc_id, step, tape)
            if isinstance(instruction, FinalizeInstruction) and instruction.valid:
                payload = signed_payload(npc_id, msgspec.to_builtins(instruction), tape)
                instruction.signature = self.signer.sign(payload)
        except NotCanonical as e:  # a number no double holds: no verifier could rebuild the digest
            raise ApiError.invalid([Problem(f"tape.{e.path}", e.message)]) from None
        return NPCProcessResponse(instruction, tape)

    def _check_token(self, npc_id: str, tape: dict[str, Any], recalls: bool) -> None:
        """A tape past its first step must carry the token the service returned it with, for this NPC."""
        token = tape.pop("stepToken", None)
        if token is None:
            held = [f for f in ISSUED if tape.get(f) is not None and tape.get(f) is not False]
            if held:
                raise ApiError.invalid(
                    [
                        Problem(
                            "tape.stepToken",
                            f"is missing, and the tape holds {', '.join(held)}: a tape past its first step must "
                            "come back exactly as the service returned it, stepToken included (no step is skipped)",
                        )
                    ]
                )
            return
        if not self.tokens.valid(token, npc_id, step_of(tape, recalls), tape):
            raise ApiError.invalid(
                [
                    Problem(
                        "tape.stepToken",
                        f"does not match this tape for npcId {npc_id!r}: the tape was changed after the service "
                        "returned it, or was returned for another NPC; send it back unchanged",
                    )
                ]
            )

    def _instruction(self, step: str, tape: dict[str, Any], ruleset: Ruleset) -> NPCInstruction:
        if step == "IdentifyActor":
            return IdentifyActorInstruction()
        if step == "QueryVector":
            assert ruleset.spec.recall is not None
            recall = ruleset.spec.recall
            return QueryVectorInstruction(str(tape.get("observation") or ""), recall.limit, recall.threshold)
        if step == "ExecuteInference":
            tape["prompt"] = build_prompt(tape, ruleset)
            tape["constraints"] = msgspec.to_builtins(ruleset.constraints)
            return ExecuteInferenceInstruction(tape["prompt"], ruleset.constraints)
        out = finalize(tape, ruleset)
        return FinalizeInstruction(
            valid=out.valid,
            signature=None,  # signed once the tape holds its token
            memoryStore=out.memory,
            stateTransform=out.state,
            action=out.action,
            dialogue=out.dialogue,
            ruleAudit=RuleAudit(ruleset.name, out.audit),
        )

    def _merge(self, npc_id: str, tape: dict[str, Any], last: dict[str, Any], recalls: bool) -> None:
        kind = last.get("type")
        typ = RESULTS.get(kind) if isinstance(kind, str) else None
        if typ is None:
            raise ApiError.invalid([Problem("lastResult.type", "must be one of " + ", ".join(RESULTS))])
        result: Any = convert(last, typ, at="lastResult")
        problems_prefix = "lastResult"
        if isinstance(result, IdentifyActorResult):
            if tape.get("actor"):
                raise _conflict("the actor is already identified: this step expects " + self._expected(tape, recalls))
            if result.actor.npcId != npc_id:
                raise ApiError.invalid(
                    [Problem(f"{problems_prefix}.actor.npcId", f"must equal the path's npcId {npc_id!r}")]
                )
            tape["actor"] = msgspec.to_builtins(result.actor)
            if not tape.get("persona") and result.actor.persona:
                tape["persona"] = result.actor.persona
        elif isinstance(result, QueryVectorResult):
            if not tape.get("actor"):
                raise _conflict("a recall result came before the actor is known: this step expects IdentifyActorResult")
            if not recalls or tape.get("vectorQueried") is True or tape.get("generatedOutput") is not None:
                raise _conflict(
                    "no recall was asked for at this step: this step expects " + self._expected(tape, recalls)
                )
            ruleset = self.ruleset(tape)
            assert ruleset.spec.recall is not None
            lim, thr = ruleset.spec.recall.limit, ruleset.spec.recall.threshold
            kept = [m for m in result.memories if m.similarity is not None and m.similarity >= thr]
            kept.sort(key=lambda m: -(m.similarity or 0.0))
            tape["memories"] = msgspec.to_builtins(kept[:lim])
            tape["vectorQueried"] = True
        else:
            if not tape.get("actor") or (recalls and tape.get("vectorQueried") is not True):
                raise _conflict(
                    "an inference result came too early: this step expects " + self._expected(tape, recalls)
                )
            if tape.get("generatedOutput") is not None:
                raise _conflict("the tape already holds an inference result; a second one is not accepted")
            if not tape.get("prompt"):
                raise _conflict("no inference was asked for (the tape has no prompt)")
            tape["generatedOutput"] = result.generatedOutput

    @staticmethod
    def _expected(tape: dict[str, Any], recalls: bool) -> str:
        step = step_of(tape, recalls)
        if step == "Finalize":
            return "no result (the tape is complete: send it without lastResult to get Finalize)"
        return step + "Result"
