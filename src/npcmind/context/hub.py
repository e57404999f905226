"""What a game tells the service about a session outside a decide request: telemetry, its own scopes, the
outcomes of the decisions it was issued. Each is checked whole before anything of it is applied.

Each session's state is its own (context/registry.py): every write here is keyed by the asking session's id.
"""

from __future__ import annotations

import time
from typing import Literal

import msgspec

from npcmind.context.checks import scope_problems, telemetry_problems
from npcmind.context.registry import SessionRegistry, SessionState, scope_bytes
from npcmind.context.situation import log_dropped
from npcmind.decide.ids import DecisionIds
from npcmind.decide.pipeline import SessionContext
from npcmind.manifest.model import ScopeSpec
from npcmind.protocol.a2g import ContextRequest, ReportRequest, ReportResult, TelemetryRequest
from npcmind.protocol.errors import MAX_LISTED, ApiError, Problem
from npcmind.storage.base import Store

MAX_SESSION_SCOPES = 1024  # scopes a session may add: each is kept in the store and in memory
MAX_SESSION_SCOPE_BYTES = 8 * 2**20  # what a session's scopes may hold in memory together, about


class ContextHub:
    """The session writes of /v1/telemetry, /v1/context and /v1/report, on the sessions the registry holds."""

    def __init__(self, store: Store, ids: DecisionIds, sessions: SessionRegistry) -> None:
        self.store = store
        self.ids = ids
        self.sessions = sessions

    async def telemetry(self, session: SessionContext, req: TelemetryRequest) -> int:
        """Apply a telemetry update (422 listing every problem; nothing applied then)."""
        problems = telemetry_problems(list(enumerate(req.entities)), session.manifest)
        if problems:
            raise ApiError.invalid(problems)
        scene = (await self.sessions.state(session.session_id)).scene
        scene.change(req.scene)
        dropped = scene.dropped
        for e in req.entities:
            scene.upsert(e.id, e.type, e.position, e.state, e.action, e.parent, e.fields)
        for eid in req.removed:
            scene.remove(eid)
        if scene.dropped != dropped:
            log_dropped(session.session_id, scene, dropped)
        return len(req.entities) + len(req.removed)

    async def add_scopes(self, session: SessionContext, req: ContextRequest) -> list[str]:
        """Add or replace session scopes; a manifest scope's name is a 409."""
        m = session.manifest
        st = await self.sessions.state(session.session_id)
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
        problems, specs = scope_problems(req.scopes, m, st.scopes)
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
        st = await self.sessions.state(session.session_id)
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
