"""The decide pipeline's parts that need no service: what a model's answer becomes for each entity, the words of
the scene's prompt lines, and the per-process state (provider slots, each session's last batch)."""

from __future__ import annotations

import asyncio

import pytest

from conftest import FOREST
from npcmind.context.scene import Scene
from npcmind.context.situation import entity_lines, shared_lines
from npcmind.decide.pipeline import Fell, map_choices
from npcmind.decide.prompt import EntityPrompt
from npcmind.local.pipeline import PipelineState
from npcmind.manifest import load
from npcmind.protocol.a2g import DecideEntity
from npcmind.providers.base import Choice, ProviderAnswer
from npcmind.shared.base import CachedChoice

pytestmark = pytest.mark.fast  # the whole file is in the fast tier (docs/testing.md): no service, no model


def asked(*options: list[str]) -> list[EntityPrompt]:
    """Entities 1, 2, ... each offering its options."""
    return [
        EntityPrompt(n, DecideEntity(id=f"b{n}", type="bee", observation={}, legal_actions=o), o, "", "")
        for n, o in enumerate(options, 1)
    ]


def test_each_entity_gets_its_legal_choice_or_the_reason_it_falls_back() -> None:
    answer = ProviderAnswer(
        choices={
            1: Choice("flee", confidence=0.75),
            2: Choice(None, refused=True),
            3: Choice("dance"),
            # 4: no choice at all
        }
    )
    out = map_choices(answer, asked(["chase", "flee"], ["chase"], ["chase", "flee"], ["idle"]), 64)
    assert out == [
        CachedChoice("flee", 0.75),
        Fell("refused", "the model declined to choose"),
        Fell("invalid_choice", "the model chose 'dance', not a legal action"),
        Fell("invalid_choice", "the model gave no choice for this entity"),
    ]


def test_a_choice_legal_for_the_type_but_not_offered_to_this_entity_falls_back() -> None:
    out = map_choices(ProviderAnswer(choices={1: Choice("flee")}), asked(["chase"]), 64)
    assert out == [Fell("invalid_choice", "the model chose 'flee', not a legal action")]


def test_a_refused_batch_refuses_every_entity_with_the_models_words_cut_at_200() -> None:
    words = "no " * 100
    out = map_choices(ProviderAnswer(choices={1: Choice("chase")}, refusal=words), asked(["chase"], ["flee"]), 64)
    reason = f"the model refused: {words}"[:200]
    assert len(reason) == 200 and out == [Fell("refused", reason), Fell("refused", reason)]


def test_an_answer_with_nothing_readable_says_the_format_was_broken() -> None:
    out = map_choices(ProviderAnswer(raw="I think the bee should flee"), asked(["flee"]), 64)
    assert out == [
        Fell("invalid_choice", "the model's answer held no choice in the answer format (its text: GET /v1/prompt)")
    ]


def test_an_answer_cut_at_its_output_limit_names_the_limit_and_the_setting() -> None:
    answer = ProviderAnswer(choices={1: Choice("flee")}, truncated=True)
    out = map_choices(answer, asked(["flee"], ["chase"]), 48)
    assert out[0] == CachedChoice("flee", None)
    assert isinstance(out[1], Fell) and out[1].code == "invalid_choice"
    assert "output limit of 48 tokens" in out[1].reason and "NPCMIND_MAX_OUTPUT_TOKENS" in out[1].reason


def test_an_illegal_action_is_cut_at_200_characters() -> None:
    out = map_choices(ProviderAnswer(choices={1: Choice("x" * 500)}), asked(["flee"]), 64)
    assert isinstance(out[0], Fell) and len(out[0].reason) == 200 and out[0].reason.startswith("the model chose 'xxx")


def test_the_scene_lines_say_population_parent_members_and_neighbours() -> None:
    m = load(FOREST)
    scene = Scene()
    scene.upsert("q", "bee", [0, 0])
    scene.upsert("w", "bee", [3, 4], parent="q")
    scene.upsert("gone", "bee", [500, 500])
    scene.remove("gone")
    assert shared_lines(scene, m)[0] == "POPULATION: bee alive=2 seen=3 gone=1"
    lines, parent = entity_lines(scene, m, "w", "bee")
    assert parent == "q"
    assert lines[0].startswith('nearby: bee "q" d=5 state="active"'), lines
    assert lines[1] == 'parent: bee "q" has not decided yet'
    scene.chose("q", "chase", "Fly at the player", 1.0)
    assert entity_lines(scene, m, "w", "bee")[0][1] == 'parent: bee "q" chose chase (Fly at the player)'
    assert entity_lines(scene, m, "q", "bee")[0][1].startswith('members: bee "w" d=5 state="active"')


def test_the_last_batch_is_kept_for_the_sessions_used_last() -> None:
    state: PipelineState[int] = PipelineState(1, 0.0, kept=2)
    state.remember("a", 1)
    state.remember("b", 2)
    state.remember("a", 3)  # used again: now the most recent
    state.remember("c", 4)  # past two: b, used least recently, goes
    assert state.sessions() == ["c", "a"]
    assert (state.last("a"), state.last("b"), state.last("c")) == (3, None, 4)


def test_a_call_past_the_slots_is_refused_after_the_admission_wait_and_admitted_once_one_frees() -> None:
    async def run() -> tuple[bool, bool, bool]:
        state: PipelineState[int] = PipelineState(1, 0.0)
        first = await state.acquire()
        refused = await state.acquire()  # the one slot is held: no wait (admission 0 s), no slot
        state.release()
        again = await state.acquire()
        return first, refused, again

    assert asyncio.run(run()) == (True, False, True)
    assert PipelineState(1, 0.0).answered is False


@pytest.mark.parametrize("n", [0, 3])
def test_every_entity_of_a_refusal_falls_back_however_many_were_asked(n: int) -> None:
    out = map_choices(ProviderAnswer(refusal="no"), asked(*[["chase"]] * n), 64)
    assert out == [Fell("refused", "the model refused: no")] * n
