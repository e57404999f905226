"""The step machine of POST /npcs/{npcId}/process: the next instruction follows from the tape and lastResult alone.

The service keeps nothing between steps. The tape is handled as the JSON object the SDK sent, so fields
this service does not know are passed back unchanged; the known ones are checked against the seed's
schema first, and every problem is named by path.
"""

from __future__ import annotations

from typing import Any

import msgspec

from npcmind.npc.outcome import action_builtins, build_prompt, finalize
from npcmind.npc.rulesets import Ruleset
from npcmind.npc.signing import Signer, signed_payload
from npcmind.protocol.errors import ApiError, Problem
from npcmind.protocol.npc import (
    ExecuteInferenceInstruction,
    ExecuteInferenceResult,
    FinalizeInstruction,
    IdentifyActorInstruction,
    IdentifyActorResult,
    NPCProcessRequest,
    NPCProcessResponse,
    QueryVectorInstruction,
    QueryVectorResult,
)
from npcmind.protocol.validate import convert, decode_json

RESULTS: dict[str, type] = {
    "IdentifyActorResult": IdentifyActorResult,
    "QueryVectorResult": QueryVectorResult,
    "ExecuteInferenceResult": ExecuteInferenceResult,
}


def _conflict(message: str) -> ApiError:
    return ApiError(409, "conflict", message)


class NpcProcessor:
    """Answers one atomic step; shared by every request, stateless."""

    def __init__(self, rulesets: dict[str, Ruleset], signer: Signer) -> None:
        self.rulesets = rulesets
        self.signer = signer

    def ruleset(self, tape: dict[str, Any]) -> Ruleset:
        """The tape's ruleset (`default` when none is named)."""
        name = tape.get("rulesetId") or "default"
        found = self.rulesets.get(name)
        if found is None:
            raise ApiError.invalid(
                [Problem("tape.rulesetId", f"unknown ruleset {name!r}; known: " + ", ".join(sorted(self.rulesets)))]
            )
        return found

    def process(self, npc_id: str, body: bytes) -> NPCProcessResponse:
        """Merge lastResult into the tape, then choose and build the next instruction."""
        raw = decode_json(body)
        convert(raw, NPCProcessRequest)  # every shape problem of the tape and lastResult, by path
        tape: dict[str, Any] = dict(raw["tape"])
        ruleset = self.ruleset(tape)
        recall = ruleset.spec.recall
        last = raw.get("lastResult")
        if last is not None:
            self._merge(npc_id, tape, last, recall is not None)

        if not tape.get("actor"):
            return NPCProcessResponse(IdentifyActorInstruction(), tape)
        if recall is not None and tape.get("vectorQueried") is not True:
            query = str(tape.get("observation") or "")
            return NPCProcessResponse(QueryVectorInstruction(query, recall.limit, recall.threshold), tape)
        if tape.get("generatedOutput") is None:
            tape["prompt"] = build_prompt(tape, ruleset)
            tape["constraints"] = msgspec.to_builtins(ruleset.constraints)
            return NPCProcessResponse(ExecuteInferenceInstruction(tape["prompt"], ruleset.constraints), tape)
        return NPCProcessResponse(self._finalize(npc_id, tape, ruleset), tape)

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
        if not tape.get("actor"):
            return "IdentifyActorResult"
        if recalls and tape.get("vectorQueried") is not True:
            return "QueryVectorResult"
        if tape.get("generatedOutput") is None:
            return "ExecuteInferenceResult"
        return "no result (the tape is complete: send it without lastResult to get Finalize)"

    def _finalize(self, npc_id: str, tape: dict[str, Any], ruleset: Ruleset) -> FinalizeInstruction:
        out = finalize(tape, ruleset)
        memory = [msgspec.to_builtins(m) for m in out.memory]
        signature = None
        if out.valid:
            payload = signed_payload(npc_id, True, out.dialogue, action_builtins(out.action), out.state, memory, tape)
            signature = self.signer.sign(payload)
        return FinalizeInstruction(
            valid=out.valid,
            signature=signature,
            memoryStore=out.memory,
            stateTransform=out.state,
            action=out.action,
            dialogue=out.dialogue,
            ruleAudit=out.audit,
        )
