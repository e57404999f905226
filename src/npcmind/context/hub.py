"""Everything a session builds up — scene, memory, added scopes — and the situation context the prompt gets.

Each session's state is its own: every read and write here is keyed by the session id, so one session's
telemetry, population, memory and scopes never reach another session's prompt.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from npcmind.context.memory import REBUILD_ROWS, Memory, seconds_ago
from npcmind.context.scene import EntityState, Scene
from npcmind.decide.ids import DecisionIds
from npcmind.decide.pipeline import SessionContext
from npcmind.decide.prompt import EntityContext, quote
from npcmind.decide.validate import check_position, unknown_type
from npcmind.failures import EventLog
from npcmind.manifest import Manifest
from npcmind.manifest.load import check as check_manifest_refs
from npcmind.manifest.load import fields_that_convert, untold
from npcmind.manifest.model import Fields, FieldSpec, ScopeSpec
from npcmind.protocol.a2g import (
    ContextRequest,
    DecideRequest,
    ReportRequest,
    ReportResult,
    ScopeDefinition,
    TelemetryEntity,
    TelemetryRequest,
)
from npcmind.protocol.errors import MAX_LISTED, ApiError, Problem, choices
from npcmind.protocol.validate import problems as shape_problems
from npcmind.storage.base import IssuedDecision, Store

log = logging.getLogger("npcmind.context")

NEARBY = 5
MEMBERS = 8
OBSERVED = 32
MAX_SESSION_SCOPES = 1024  # scopes a session may add: each is kept in the store and in memory
MAX_SESSION_SCOPE_BYTES = 8 * 2**20  # what a session's scopes may hold in memory together, about
ENTITY_BYTES = 10_000  # what an entity the service has seen holds, about (bench/memory_bench.py)
LEFT_BYTES = 256  # what an id that left holds while the scene keeps it (to count it once if it comes back)


def scope_bytes(spec: ScopeSpec) -> int:
    """About what a session scope holds in memory: its JSON, and 64 bytes more for each string and 200 for each
    field. Counted by what it holds, not by its JSON: many short enum values hold ten times their JSON."""
    strings = 1 + sum(2 + len(f.values or ()) for f in spec.fields.values())
    return 600 + len(msgspec.json.encode(spec)) + 64 * strings + 200 * len(spec.fields)


@dataclass
class SessionState:
    """One session's soft scene, its memory (rebuilt from the store) and its added scopes (durable)."""

    scene: Scene = field(default_factory=Scene)
    memory: Memory = field(default_factory=Memory)
    scopes: dict[str, ScopeSpec] = field(default_factory=dict)
    scope_bytes: int = 0  # what its scopes hold together, about (scope_bytes())
    # what view() rendered of the scene at `seen_version`: part 5, and each entity's untimed lines
    seen_version: int = -1
    shared: list[str] = field(default_factory=list)
    lines: dict[str, tuple[list[str], str | None]] = field(default_factory=dict)


class ContextHub:
    """Per-session state and the pipeline's Situation: observe, view, decided."""

    def __init__(
        self,
        store: Store,
        ids: DecisionIds,
        max_entities: int = 20_000,
        max_sessions: int = 10_000,
        max_held: int = 100_000,
    ) -> None:
        self.store = store
        self.ids = ids
        self.max_entities = max_entities  # per session: in its scene, and remembered
        self.max_sessions = max_sessions  # held in memory; the least recently used beyond it are let go
        self.max_held = max_held  # entities of all sessions held in memory together (about 10 KB each)
        self._states: dict[str, SessionState] = {}  # least recently used first
        self.let_go = EventLog(log, "sessions let go")  # past max_sessions one a request: a line every 10 s

    async def state(self, session_id: str) -> SessionState:
        """The session's state; after a restart (or after it was let go), rebuilt from the store on first use."""
        st = self._states.get(session_id)
        if st is None:
            rows = await self.store.decisions.of_session(session_id, REBUILD_ROWS)
            scopes = {
                name: msgspec.json.decode(raw, type=ScopeSpec)
                for name, raw in (await self.store.sessions.scopes(session_id)).items()
            }
            fresh = SessionState(
                scene=Scene(limit=self.max_entities),
                memory=Memory.rebuilt(rows, self.max_entities),
                scopes=scopes,
                scope_bytes=sum(scope_bytes(s) for s in scopes.values()),
            )
            st = self._states.setdefault(session_id, fresh)
            while len(self._states) > self.max_sessions:
                # its memory and scopes are in the store; only the scene, which telemetry rebuilds, is lost
                gone = next(iter(self._states))
                del self._states[gone]
                said = f"session {gone} let go of its soft state: more than {self.max_sessions} sessions in use"
                self.let_go.happened(said)
        return st

    @staticmethod
    def held(st: SessionState) -> int:
        """What a session holds, in entities of ``ENTITY_BYTES``: its entities (in its scene or remembered), and
        what its scopes and the ids that left its scene hold (a session of scopes alone is not free)."""
        extra = st.scope_bytes + len(st.scene.left) * LEFT_BYTES
        return max(len(st.scene.entities), len(st.memory)) + -(-extra // ENTITY_BYTES)

    def trim(self) -> None:
        """Let go of the least recently used sessions while all sessions together hold more than ``max_held``
        entities: the per-session bounds alone (20,000 entities, 10,000 sessions) would allow more than any
        machine's memory. Run every second by the service, off the request path (it visits every session); it
        goes down to 90% of the bound, so that a stream of new sessions lets go of old ones in rounds."""
        sizes = [(sid, self.held(st)) for sid, st in self._states.items()]
        held = sum(n for _, n in sizes)
        if held <= self.max_held:
            return
        before, gone, goal = held, 0, self.max_held * 9 // 10
        for sid, n in sizes[:-1]:  # never the session used last: it is the one asking now
            if held <= goal:
                break
            del self._states[sid]
            held -= n
            gone += 1
        if not gone:  # the one session left is over the bound alone: it goes once another is used
            return
        log.warning(
            "let go of the soft state of the %d sessions used least recently: all sessions held %d entities (with "
            "their scopes and the ids that left their scenes, at 10 KB an entity), over NPCMIND_MAX_ENTITIES=%d; "
            "their memory and scopes come back from the store when they are used again",
            gone,
            before,
            self.max_held,
        )

    def forget(self, session_id: str) -> None:
        """Drop an ended session's soft state."""
        self._states.pop(session_id, None)

    async def session(self, session_id: str, client_id: str, manifest: Manifest) -> SessionContext:
        """The SessionContext the pipeline needs, with the session's own scopes."""
        st = await self.state(session_id)
        self._states[session_id] = self._states.pop(session_id, st)  # now the most recently used
        return SessionContext(session_id, client_id, manifest, st.scopes)

    # --- the pipeline's Situation -------------------------------------------------------------

    async def observe(self, session: SessionContext, req: DecideRequest, now: float) -> None:
        scene = (await self.state(session.session_id)).scene
        dropped = scene.dropped
        for e in req.entities:
            scene.upsert(e.id, e.type, e.position, parent=e.parent, fields=e.observation)
        if scene.dropped != dropped:
            self._dropped(session.session_id, scene, dropped)

    @staticmethod
    def _dropped(session_id: str, scene: Scene, before: int) -> None:
        log.warning(
            "session %s: its scene passed %d entities, so the %d updated least recently were dropped; "
            "send `removed` in telemetry for entities that leave (%d dropped in this scene so far)",
            session_id,
            scene.limit,
            scene.dropped - before,
            scene.dropped,
        )

    async def view(
        self, session: SessionContext, req: DecideRequest, now: float
    ) -> tuple[list[str], dict[str, EntityContext]]:
        st = await self.state(session.session_id)
        m = session.manifest
        scene = st.scene
        if st.seen_version != scene.version:  # the scene changed: render it anew
            st.seen_version = scene.version
            st.lines.clear()
            st.shared = self._shared(scene, m)
        contexts: dict[str, EntityContext] = {}
        for e in req.entities:
            found = st.lines.get(e.id)
            if found is None:
                found = st.lines[e.id] = self._lines(scene, m, e.id, e.type)
            lines, parent_id = found
            ctx = EntityContext(lines)  # the scene version's cached list, shared: nothing appends to it
            if parent_id is not None:
                p = scene.entities.get(parent_id)
                if p is not None and p.decided is not None:
                    ago = seconds_ago(p.decided[2], now)
                    ctx.timed_lines.append((f"parent decided {ago} s ago", "parent decided ? s ago"))
            mem = st.memory.line(e.id, now)
            if mem is not None:  # the session's own reports: its decisions are the session's alone
                ctx.timed_lines.append((mem, None))
            if ctx.lines or ctx.timed_lines:
                contexts[e.id] = ctx
        return st.shared, contexts

    def _shared(self, scene: Scene, m: Manifest) -> list[str]:
        """Part 5: population and observed entities."""
        shared: list[str] = []
        pop = scene.population()
        if pop:
            shared.append(
                "POPULATION: " + "; ".join(f"{t} alive={p.alive} seen={p.seen} gone={p.gone}" for t, p in pop.items())
            )
        return shared + self._observed(scene, m)

    def _lines(self, scene: Scene, m: Manifest, eid: str, type_: str) -> tuple[list[str], str | None]:
        """An entity's untimed context lines (nearby, parent's choice, members) and its parent's id."""
        lines: list[str] = []
        pos = scene.grid.position(eid)
        if pos is not None:
            near = [
                self._describe(scene.entities[other], m, d)
                for d, other in scene.grid.nearest(pos, m.types[type_].perception_radius, NEARBY, exclude=eid)
                if other in scene.entities
            ]
            if near:
                lines.append("nearby: " + "; ".join(near))
        me = scene.entities.get(eid)
        parent_id = me.parent if me else None
        if parent_id is not None:
            p = scene.entities.get(parent_id)
            if p is None:
                lines.append(f"parent: {quote(parent_id)}")
            elif p.decided is None:
                lines.append(f"parent: {p.type} {quote(p.id)} has not decided yet")
            else:
                action, label, _ = p.decided
                lines.append(f"parent: {p.type} {quote(p.id)} chose {action} ({label})")
        members = scene.members(eid, MEMBERS)
        if members:
            lines.append("members: " + "; ".join(self._describe(c, m, d) for d, c in members))
        return lines, parent_id

    def decided(self, session: SessionContext, issued: list[IssuedDecision]) -> None:
        st = self._states.get(session.session_id)
        if st is None:
            return
        for d in issued:
            st.memory.add(d)
            st.scene.chose(d.entity_id, d.action, d.label, d.created_at)

    # --- rendering ------------------------------------------------------------------------------

    @staticmethod
    def _describe(e: EntityState, m: Manifest, distance: float | None) -> str:
        """One entity as others see it; its text is built once per change, only the distance is new."""
        found = e.summary
        if found is None:
            parts = [f"state={quote(e.state)}"]
            if e.action:
                parts.append(f"action={e.action}")
            t = m.types.get(e.type)
            if e.fields and t is not None:
                parts.append(t.fields.render(e.fields))
            found = e.summary = (f"{e.type} {quote(e.id)}", " " + " ".join(parts))
        head, text = found
        if distance is None or distance == math.inf:  # positions ±1.7e308 apart: a distance no float holds
            return head + text
        return f"{head} d={round(distance)}{text}"

    @staticmethod
    def _observed(scene: Scene, m: Manifest) -> list[str]:
        out: list[str] = []
        ids = [eid for t in m.types.values() if t.observe_only for eid in scene.alive.get(t.name, ())]
        watchers = [scene.entities[eid] for eid in sorted(ids)[:OBSERVED]]  # by type: no scan of the scene
        for e in watchers:
            line = "OBSERVED: " + ContextHub._describe(e, m, None)
            pos = scene.grid.position(e.id)
            if pos is not None:
                counts: dict[str, int] = {}
                for _, eid in scene.grid.within(pos, m.types[e.type].perception_radius):
                    other = scene.entities.get(eid)
                    if eid != e.id and other is not None:
                        counts[other.type] = counts.get(other.type, 0) + 1
                line += " near: " + (", ".join(f"{t}={n}" for t, n in sorted(counts.items())) or "nobody")
            out.append(line)
        return out

    # --- telemetry, context, report -------------------------------------------------------------

    @staticmethod
    def telemetry_problems(entities: list[tuple[int, TelemetryEntity]], m: Manifest) -> list[Problem]:
        """Telemetry entities against the manifest: known type, exactly its fields, its actions, a finite position."""
        problems: list[Problem] = []
        for i, e in entities:
            p = f"entities[{i}]"
            t = m.types.get(e.type)
            if t is None:
                problems.append(unknown_type(p, e.type, m))
                continue
            if e.fields is not None:
                problems += t.fields.problems(e.fields, f"{p}.fields")
            if e.action is not None and e.action not in t.actions:
                known = choices(e.action, t.actions, "its actions")
                problems.append(Problem(f"{p}.action", f"{e.action!r} is not an action of type {e.type}{known}"))
            check_position(e.position, f"{p}.position", problems)
        return problems

    @staticmethod
    def misshaped_telemetry_problems(entities: Any, shaped: set[int], m: Manifest) -> list[Problem]:
        """What the manifest says of telemetry entities mis-shaped elsewhere (a position of one number): their
        type and fields, so that they are not a second 422 once the shape is fixed."""
        problems: list[Problem] = []
        for i, item in enumerate(entities[:MAX_LISTED] if isinstance(entities, list) else []):
            if i in shaped or not isinstance(item, dict) or not isinstance(item.get("type"), str):
                continue
            t = m.types.get(item["type"])
            if t is None:
                problems.append(unknown_type(f"entities[{i}]", item["type"], m))
            elif isinstance(item.get("fields"), dict):
                problems += t.fields.problems(item["fields"], f"entities[{i}].fields")
        return problems

    async def telemetry(self, session: SessionContext, req: TelemetryRequest) -> int:
        """Apply a telemetry update (422 listing every problem; nothing applied then)."""
        problems = self.telemetry_problems(list(enumerate(req.entities)), session.manifest)
        if problems:
            raise ApiError.invalid(problems)
        scene = (await self.state(session.session_id)).scene
        scene.change(req.scene)
        dropped = scene.dropped
        for e in req.entities:
            scene.upsert(e.id, e.type, e.position, e.state, e.action, e.parent, e.fields)
        for eid in req.removed:
            scene.remove(eid)
        if scene.dropped != dropped:
            self._dropped(session.session_id, scene, dropped)
        return len(req.entities) + len(req.removed)

    @staticmethod
    def scope_problems(
        defs: Mapping[str, ScopeDefinition], m: Manifest, session_scopes: Mapping[str, ScopeSpec]
    ) -> tuple[list[Problem], dict[str, ScopeSpec]]:
        """Every problem of scopes a session posts, by path, and the scopes that have none to add. A scope whose
        fields have shape problems still has its parent and its fields' rules checked, in the same 422."""
        problems: list[Problem] = []
        specs: dict[str, ScopeSpec] = {}
        stand_ins: dict[str, ScopeSpec] = {}
        for name, d in defs.items():
            found = shape_problems(d.fields, Fields)  # names as in a manifest: they enter the prompt
            problems += [Problem(f"scopes.{name}.fields{('.' + p.path) if p.path else ''}", p.message) for p in found]
            if found:
                stand_ins[name] = ScopeSpec(text=d.text, parent=d.parent, fields=fields_that_convert(d.fields))
            else:
                fields = msgspec.convert(d.fields, dict[str, FieldSpec])
                specs[name] = ScopeSpec(text=d.text, parent=d.parent, fields=fields)
        file = msgspec.structs.replace(m.file, scopes={**m.file.scopes, **session_scopes, **specs, **stand_ins})
        rules = [p for p in check_manifest_refs(file) if any(p.path.startswith(f"scopes.{n}.") for n in defs)]
        problems += untold(rules, {p.path for p in problems})
        return problems, specs

    async def add_scopes(self, session: SessionContext, req: ContextRequest) -> list[str]:
        """Add or replace session scopes; a manifest scope's name is a 409."""
        m = session.manifest
        st = await self.state(session.session_id)
        clash = sorted(n for n in req.scopes if n in m.file.scopes)
        if clash:
            raise ApiError(
                409,
                "conflict",
                f"scope {clash[0]!r} is defined by the manifest; choose another name",
                [Problem(f"scopes.{n}", "is a manifest scope") for n in clash],
            )
        new = sorted(n for n in req.scopes if n not in st.scopes)
        if len(st.scopes) + len(new) > MAX_SESSION_SCOPES:
            room = MAX_SESSION_SCOPES - len(st.scopes)
            raise ApiError(
                409,
                "conflict",
                f"this session has {len(st.scopes)} scopes of its own and may hold {MAX_SESSION_SCOPES}: "
                f"{len(new)} new ones do not fit ({room} would); post a scope again under a name the session has "
                "to replace it: a level left behind can lend its name to the next",
                [Problem(f"scopes.{n}", "a new scope past the session's limit") for n in new[room:]],
            )
        problems, specs = self.scope_problems(req.scopes, m, st.scopes)
        if problems:
            raise ApiError.invalid(problems)
        sizes = self._scopes_fit(st, specs)
        for name, spec in specs.items():
            await self.store.sessions.put_scope(session.session_id, name, msgspec.json.encode(spec))
            old = st.scopes.get(name)
            st.scope_bytes += sizes[name] - (scope_bytes(old) if old is not None else 0)
            st.scopes[name] = spec
        return sorted(st.scopes)

    @staticmethod
    def _scopes_fit(st: SessionState, specs: dict[str, ScopeSpec]) -> dict[str, int]:
        """What each posted scope holds in memory, or a 409 when the session's scopes would pass their bound."""
        sizes = {name: scope_bytes(spec) for name, spec in specs.items()}
        grown = sum(sizes.values()) - sum(scope_bytes(st.scopes[n]) for n in specs if n in st.scopes)
        if st.scope_bytes + grown <= MAX_SESSION_SCOPE_BYTES:
            return sizes
        mb = 2**20
        largest = sorted(sizes, key=lambda n: (-sizes[n], n))
        raise ApiError(
            409,
            "conflict",
            f"this session's scopes would hold {(st.scope_bytes + grown) / mb:.1f} MiB in memory, and may hold "
            f"{MAX_SESSION_SCOPE_BYTES // mb} MiB: post smaller scopes (shorter texts, fewer enum values), or "
            "replace a scope the session has under its name",
            [Problem(f"scopes.{n}", f"holds about {sizes[n] // 1024} KiB") for n in largest[:MAX_LISTED]],
        )

    async def report(self, session: SessionContext, req: ReportRequest) -> list[ReportResult]:
        """Accept each report once, only for a decision issued to this session; accepted ones enter memory."""
        st = await self.state(session.session_id)
        now = time.time()
        out: list[ReportResult] = []
        for r in req.reports:
            seq = self.ids.verify(r.decision_id, session.session_id)  # a forged id never reaches the store
            rec = await self.store.decisions.get(seq) if seq is not None else None
            status: Literal["accepted", "unknown", "duplicate"]
            if rec is None or rec.session_id != session.session_id or rec.decision_id != r.decision_id:
                status = "unknown"
            elif not await self.store.decisions.set_outcome(rec.seq, r.outcome, r.detail, now):
                status = "duplicate"
            else:
                status = "accepted"
                st.memory.outcome(rec.seq, r.outcome, r.detail)
            out.append(ReportResult(r.decision_id, status))
        return out
