"""A kept call's prompt rendered again, by the pipeline's own builder: with the manifest it was rendered with it
is the prompt the model read (in the answer form it read); with another, what that manifest would have shown."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from npcmind.answer import AnswerMode
from npcmind.decide.prompt import EntityContext, EntityPrompt, Prompt, PromptBuilder, type_line
from npcmind.decide.read import ReadCall
from npcmind.manifest import Manifest
from npcmind.manifest.model import ScopeSpec
from npcmind.protocol.a2g import DecideRequest

KEPT_CHAINS = 64  # sessions' scope chains a replay shares across its calls


@dataclass(slots=True)
class Rendered:
    """A call's prompt, and the numbers of the entities the manifest cannot show (a type or action it lacks)."""

    prompt: Prompt
    left_out: list[int]


class Renderer:
    """Prompt builders by manifest version and answer form, each made once (part 1 is rendered once)."""

    def __init__(self) -> None:
        self._builders: dict[tuple[str, str], PromptBuilder] = {}
        self._scopes: dict[bytes, dict[str, ScopeSpec]] = {}

    def scopes(self, extra: dict[str, ScopeSpec]) -> dict[str, ScopeSpec]:
        """A session's scopes as the first call that read the same ones decoded them: every kept call decodes its
        own, and the manifest keeps what it works out of a chain by the chain's scopes themselves (up to 1,024
        chains: 1,024 copies of one session's chain had held 130 MB), so the calls of one chain share one."""
        key = msgspec.json.encode(extra)
        found = self._scopes.get(key)
        if found is None:
            if len(self._scopes) >= KEPT_CHAINS:
                self._scopes.clear()
            found = self._scopes[key] = extra
        return found

    def builder(self, manifest: Manifest, mode: AnswerMode) -> PromptBuilder:
        """The builder of this manifest in this answer form."""
        key = (manifest.version, mode)
        b = self._builders.get(key)
        if b is None:
            b = self._builders[key] = PromptBuilder(manifest, mode)
        return b

    def render(self, read: ReadCall, manifest: Manifest, mode: AnswerMode) -> Rendered:
        """The call's prompt from its kept situation, its entities numbered as they were."""
        b = self.builder(manifest, mode)
        chain = manifest.scope_chain(read.scope, self.scopes(read.extra)) if read.scope else []
        shown = [e for e in read.entities if _shows(manifest, e.entity.type, e.entity.legal_actions)]
        entities = [e.entity for e in read.entities]  # parts 4-5 read the world and scope state alone
        req = DecideRequest("replay", 0, read.world, entities, read.scope, read.scope_state)
        prompt = Prompt(
            static=b.static(chain, [p for p in read.profiles if p in manifest.profiles]),
            shared=b.shared(req, chain, read.situation),
            entities=[
                b.entity(e.number, e.entity, EntityContext(e.lines, [(t, None) for t in e.timed])) for e in shown
            ],
            mode=mode,
            situation=read.situation,
        )
        kept = {e.number for e in shown}
        return Rendered(prompt, [e.number for e in read.entities if e.number not in kept])

    def situation(self, manifest: Manifest, mode: AnswerMode, ep: EntityPrompt) -> str:
        """What groups decisions into one situation: the entity's own lines and question, without its id, number
        or context lines (neighbours and memory differ from one decision to the next)."""
        return f"{ep.entity.type}\x00" + self.builder(manifest, mode).entity(0, ep.entity, None).key_text


def view(manifest: Manifest, prompt: Prompt, ep: EntityPrompt) -> str:
    """What the model read that bears on one entity: the whole prompt but the other types' lines of part 1 and the
    other entities' parts. Two renderings differ for an entity only where its own reading changed."""
    static = prompt.static
    for name in manifest.types:
        if name != ep.entity.type:
            static = static.replace(type_line(manifest, name) + "\n", "", 1)
    return static + prompt.shared + ep.text


def _shows(manifest: Manifest, type_name: str, legal: list[str]) -> bool:
    """Whether the manifest can ask about this entity: its type, with one of its legal actions."""
    t = manifest.types.get(type_name)
    return t is not None and any(a in t.actions for a in legal)
