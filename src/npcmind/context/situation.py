"""The pipeline's Situation over the sessions' scenes: what a decide request tells is recorded, and who is near
whom, whose member and whose parent is found here; the words for it are the prompt's (decide/scene_text.py).

A scene's lines are rendered once per scene version and reused by every request until the scene changes.
"""

from __future__ import annotations

import logging

from npcmind.context.memory import seconds_ago
from npcmind.context.registry import SessionRegistry
from npcmind.context.scene import Scene
from npcmind.decide import scene_text
from npcmind.decide.pipeline import SessionContext
from npcmind.decide.prompt import EntityContext
from npcmind.manifest import Manifest
from npcmind.protocol.a2g import DecideRequest
from npcmind.storage.base import IssuedDecision

log = logging.getLogger("npcmind.context")

NEARBY = 5
MEMBERS = 8
OBSERVED = 32


def log_dropped(session_id: str, scene: Scene, before: int) -> None:
    """Say that a scene passed its bound, so a game that never sends `removed` learns why entities vanish."""
    log.warning(
        "session %s: its scene passed %d entities, so the %d updated least recently were dropped; "
        "send `removed` in telemetry for entities that leave (%d dropped in this scene so far)",
        session_id,
        scene.limit,
        scene.dropped - before,
        scene.dropped,
    )


def shared_lines(scene: Scene, m: Manifest) -> list[str]:
    """Part 5: population and observed entities."""
    pop = scene.population()
    shared = [scene_text.population_line(pop)] if pop else []
    return shared + observed_lines(scene, m)


def observed_lines(scene: Scene, m: Manifest) -> list[str]:
    """Part 5: the first observe-only entities by id, each with what it perceives around it."""
    ids = [eid for t in m.types.values() if t.observe_only for eid in scene.alive.get(t.name, ())]
    out: list[str] = []
    for eid in sorted(ids)[:OBSERVED]:  # by type: no scan of the scene
        e = scene.entities[eid]
        pos = scene.grid.position(e.id)
        counts: dict[str, int] | None = None
        if pos is not None:
            counts = {}
            for _, other_id in scene.grid.within(pos, m.types[e.type].perception_radius):
                other = scene.entities.get(other_id)
                if other_id != e.id and other is not None:
                    counts[other.type] = counts.get(other.type, 0) + 1
        out.append(scene_text.observed_line(e, m, counts))
    return out


def entity_lines(scene: Scene, m: Manifest, eid: str, type_: str) -> tuple[list[str], str | None]:
    """An entity's untimed context lines (nearby, parent's choice, members) and its parent's id."""
    lines: list[str] = []
    pos = scene.grid.position(eid)
    if pos is not None:
        near = [
            (d, scene.entities[other])
            for d, other in scene.grid.nearest(pos, m.types[type_].perception_radius, NEARBY, exclude=eid)
            if other in scene.entities
        ]
        if near:
            lines.append(scene_text.nearby_line(near, m))
    me = scene.entities.get(eid)
    parent_id = me.parent if me else None
    if parent_id is not None:
        lines.append(scene_text.parent_line(parent_id, scene.entities.get(parent_id)))
    members = scene.members(eid, MEMBERS)
    if members:
        lines.append(scene_text.members_line(members, m))
    return lines, parent_id


class SceneSituation:
    """The Situation the pipeline calls: observe, view, decided, each on the asking session's own state."""

    def __init__(self, sessions: SessionRegistry) -> None:
        self.sessions = sessions

    async def observe(self, session: SessionContext, req: DecideRequest, now: float) -> None:
        """Step 1: record what the request tells of its entities, as telemetry would."""
        scene = (await self.sessions.state(session.session_id)).scene
        dropped = scene.dropped
        for e in req.entities:
            scene.upsert(e.id, e.type, e.position, parent=e.parent, fields=e.observation)
        if scene.dropped != dropped:
            log_dropped(session.session_id, scene, dropped)

    async def view(
        self, session: SessionContext, req: DecideRequest, now: float
    ) -> tuple[list[str], dict[str, EntityContext]]:
        """Part 5 lines for the batch, and part 6 context for each entity that has any."""
        st = await self.sessions.state(session.session_id)
        m = session.manifest
        scene = st.scene
        if st.seen_version != scene.version:  # the scene changed: render it anew
            st.seen_version = scene.version
            st.lines.clear()
            st.shared = shared_lines(scene, m)
        contexts: dict[str, EntityContext] = {}
        for e in req.entities:
            found = st.lines.get(e.id)
            if found is None:
                found = st.lines[e.id] = entity_lines(scene, m, e.id, e.type)
            lines, parent_id = found
            ctx = EntityContext(lines)  # the scene version's cached list, shared: nothing appends to it
            if parent_id is not None:
                p = scene.entities.get(parent_id)
                if p is not None and p.decided is not None:
                    ctx.timed_lines.append(scene_text.parent_decided_line(seconds_ago(p.decided[2], now)))
            mem = st.memory.line(e.id, now)
            if mem is not None:  # the session's own reports: its decisions are the session's alone
                ctx.timed_lines.append((mem, None))
            if ctx.lines or ctx.timed_lines:
                contexts[e.id] = ctx
        return st.shared, contexts

    def decided(self, session: SessionContext, issued: list[IssuedDecision]) -> None:
        """Learn the chosen actions: memory, a parent's latest decision, a neighbour's action."""
        st = self.sessions.held_now(session.session_id)
        if st is None:
            return
        for d in issued:
            st.memory.add(d)
            st.scene.chose(d.entity_id, d.action, d.label, d.created_at)
