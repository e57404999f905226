"""The sessions one process holds in memory, each rebuilt from the store on first use, within bounds.

Each session's state is its own: every read and write is keyed by the session id, so one session's telemetry,
population, memory and scopes never reach another session's prompt. Past the bounds the least recently used
sessions are let go: their memory and scopes are in the store, only the scene (which telemetry rebuilds) is lost.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import msgspec

from npcmind.context.memory import REBUILD_ROWS, Memory
from npcmind.context.scene import Scene
from npcmind.decide.pipeline import SessionContext
from npcmind.failures import EventLog
from npcmind.manifest import Manifest
from npcmind.manifest.model import ScopeSpec
from npcmind.storage.base import Store

log = logging.getLogger("npcmind.context")

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
    ended: bool = False  # DELETE /v1/session (here, or learnt from another process): a stream under way stops

    def is_ended(self) -> bool:
        """Whether the session ended while a request of it was under way (SessionContext.ended asks this)."""
        return self.ended


class SessionRegistry:
    """The sessions this process holds, least recently used first, within the per-session and total bounds."""

    def __init__(
        self,
        store: Store,
        max_entities: int = 20_000,
        max_sessions: int = 10_000,
        max_held: int = 100_000,
    ) -> None:
        self.store = store
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

    def held_now(self, session_id: str) -> SessionState | None:
        """The session's state if this process holds it now, without rebuilding it (a decision of a session let
        go meanwhile enters its memory from the store when it is used again)."""
        return self._states.get(session_id)

    async def session(self, session_id: str, client_id: str, manifest: Manifest) -> SessionContext:
        """The SessionContext the pipeline needs, with the session's own scopes; the session is now the most
        recently used."""
        st = await self.state(session_id)
        self._states[session_id] = self._states.pop(session_id, st)
        return SessionContext(session_id, client_id, manifest, st.scopes, st.is_ended)

    def forget(self, session_id: str) -> None:
        """Drop a session's soft state (ended, or served by another process since)."""
        self._states.pop(session_id, None)

    def end(self, session_id: str) -> None:
        """Drop an ended session's soft state, and tell the requests of it under way that it ended."""
        st = self._states.pop(session_id, None)
        if st is not None:
            st.ended = True

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
