"""The decision scheduler, without I/O: given the clock and the tracked entities, it says what to send and
applies what came back. No sockets, no threads, no clock reads: every method that depends on time is given
``now`` (milliseconds, any origin), so the same conformance cases drive it and the TypeScript port.

It keeps every obligation of the seed: a response for an old epoch is dropped, an action is re-checked
against the legal actions that were sent (and those of now), a decision expires after its ``ttl_ms``, a
fallback or an error gives ``None`` (never an invented action), and a cached decision is used exactly like
a fresh one.

Scheduling (spec section 10): an event is asked at the latest ``event_window_ms`` after it, together with
the events of that window; other entities are re-asked every ``refresh_ms`` of their type; when the number
of tracked entities changes, everyone is re-asked, at least 500 ms apart; at most 16 entities a request and
``workers`` decide requests in flight, so a wave of refreshes is spread over frames. Cascade mode: with a
local policy (the game's, or the service's distilled one it fetches: ``npcmind_client.cascade``), entities
it is sure about (confidence at or above ``threshold``) take the local action and only the rest go to the
service; the request and answer shapes do not change.

One entity the service refuses (a 422 whose problems all lie in named entities: a NaN, an unknown type,
no legal actions) does not cost the others their decisions: it is named once in the log, the rest are
sent again at once, and from then on it goes in a request of its own until the service takes it.

Streamed answers (docs/streaming.md, clients/conformance/README.md): a decide answer may come as NDJSON lines
(``chunk``, then ``end``); each decision line is applied under the same rules as soon as it completes, and a
stream cut before its last line keeps what came while the rest fall back (``unavailable``, ``CUT``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from npcmind_client.cascade import Cascade, LocalPolicy, PolicyFunction
from npcmind_client.limits import MAX_STRAY_LINES
from npcmind_client.limits import is_too_large as _too_large
from npcmind_client.lines import Lines
from npcmind_client.options import DecideOptions
from npcmind_client.outbox import Outbox
from npcmind_client.refusals import NUMBER, Refusals, retry_after_ms
from npcmind_client.roster import Choice, Entity, Roster, Stats
from npcmind_client.say import SayOnce
from npcmind_client.session import RETRY_MS, Session
from npcmind_client.timings import Timings, deadline_timeout
from npcmind_client.wire import (
    FallbackDecision,
    Malformed,
    Outcome,
    StreamEnd,
    read_decide_answer,
    read_stream_line,
)

BATCH = 16  # the protocol's limit of entities a decide request
DEFAULT_DEADLINE_S = 10.0  # the service's default provider deadline, until GET /v1/health tells its own
TIMEOUT_MARGIN_S = 5.0  # past the deadline: the service's own work and the network
CUT = "the decision stream was cut"  # the reason of the fallback of an entity a cut stream did not reach
__all__ = [
    "Choice",
    "DecideOptions",
    "Entity",
    "LocalPolicy",
    "PolicyFunction",
    "Request",
    "Roster",
    "Scheduler",
    "Stats",
]


@dataclass(slots=True)
class Request:
    """One request to send: ``after`` names the requests that must be answered (or have failed) first;
    ``stream``: a decide request whose answer is asked as a stream of lines (``Accept: application/x-ndjson``)."""

    ref: str
    method: str
    path: str
    body: dict[str, Any] | None
    headers: dict[str, str]
    after: list[str]
    stream: bool = False


Kind = Literal["decide", "telemetry", "report", "session", "health", "manifest", "policy"]
FailKind = Literal["timeout", "unreachable"]


class Answered(NamedTuple):
    """What came back for a request: its status, its JSON (a policy's raw bytes), its headers (lowercase)."""

    status: int
    body: Any
    headers: dict[str, str]


@dataclass(slots=True)
class _Sent:
    """A request in flight: its kind, and for a decide request what it carried, to check its answer (its
    entities not answered yet, streamed: ``legal`` loses each as its line comes)."""

    kind: Kind
    body: dict[str, Any] | None
    epoch: int = 0
    legal: dict[str, tuple[str, ...]] = field(default_factory=dict)
    at: float = 0.0  # when it was sent (ms): a line's latency counts from here
    lines: Lines | None = None  # its streamed answer's lines, from the first chunk on
    whole: bool = False  # its stream's last line came
    strays: int = 0  # lines of its stream that answered no entity it asked (past MAX_STRAY_LINES: ended)


# over 15 methods: the whole contract between the game, the transport and the service (TS: Scheduler, the same)
class Scheduler:
    """One game's decisions: feed it the game's calls and the service's answers, send what ``tick`` returns."""

    def __init__(self, client_id: str, *, options: DecideOptions | None = None) -> None:
        """``options``: one ``DecideOptions`` (``Scheduler(id, options=DecideOptions(epoch=7))``)."""
        self.options = o = options if options is not None else DecideOptions()
        self.client_id = client_id
        self.world: dict[str, Any] = dict(o.world or {})
        self.scope, self.scope_state = o.scope, o.scope_state
        self.workers = o.workers
        self.stats = Stats()
        self.say = SayOnce()
        self.timings = Timings(o.refresh_ms, o.manifest)
        self.outbox = Outbox(client_id, o.telemetry_ms, self.say)
        self.session = Session(client_id, o.api_key)
        self.refusals = Refusals(self.say)
        self.timeout_given = o.timeout_ms is not None
        self.timeout_ms = o.timeout_ms if o.timeout_ms is not None else (DEFAULT_DEADLINE_S + TIMEOUT_MARGIN_S) * 1000
        self.cascade = Cascade(
            client_id,
            o.policy,
            o.fetch_policy,
            o.policy_refresh_ms,
            self.say,
            o.manifest_version,
            o.policy_max_bytes,
        )
        self.roster = Roster(o.epoch, o.event_window_ms, self._choose, o.threshold, self.stats, self.say)
        self.entities = self.roster.entities
        self._open: dict[str, _Sent] = {}
        self._refs = 0
        self._telemetry: list[str] = []  # the refs of the newest telemetry: a decide request waits for them
        self._not_before = float("-inf")  # after a 429 or a service that is down

    # --- what the game tells --------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The game's epoch: answers to requests sent under another epoch are dropped."""
        return self.roster.epoch

    def untrack(self, entity_id: str) -> None:
        """The entity left the scene (died, despawned): forget it and tell the service."""
        self.refusals.alone.pop(entity_id, None)
        self.outbox.forget(entity_id, self.entities.pop(entity_id, None) is not None)

    def report(self, entity_id: str, outcome: Outcome, detail: str | None = None) -> bool:
        """What became of the entity's current AI decision; sent with the next tick. False when it has
        none to report (a fallback, a local choice, or an expired decision)."""
        item = self.roster.report(entity_id, outcome, detail)
        if item is not None:
            self.outbox.report(item)
        return item is not None

    def _choose(self, e: Entity) -> tuple[str, float] | None:
        """The cascade's choice, on the world and scope state the service would see with ``e``."""
        return self.cascade.choose(e, self.world, self.scope_state if self.scope is not None else None)

    # --- what the game asks ---------------------------------------------------------------------

    def headers(self) -> dict[str, str]:
        """The headers a request of the game's own (``last_prompt``) carries: the session's token, if held."""
        return self.session.headers() if self.session.token is not None else {}

    # --- what to send -----------------------------------------------------------------------------

    def tick(self, now: float) -> list[Request]:
        """The requests to send now: session, manifest, telemetry, reports, then the decide requests due."""
        self.roster.last_tick = now
        out: list[Request] = []
        if self.session.due(now) and now >= self._not_before:
            body, headers = self.session.request(f"r{self._refs + 1}")
            out.append(self._emit("session", "POST", "/v1/session", body, headers))
        if not self.session.ready():
            return out  # nothing goes without a token, or one asked for
        again = self.cascade.recheck_manifest
        if (not self.timings.known or again) and not self.timings.asked and now >= self._not_before:
            self.timings.asked = True
            if not self.timeout_given and not again:
                out.append(self._emit("health", "GET", "/v1/health", None))
            out.append(self._emit("manifest", "GET", "/v1/manifest", None))
        if self.cascade.due(now) and now >= self._not_before:
            path, extra = self.cascade.request(now)
            out.append(self._emit("policy", "GET", path, None, {**self.session.headers(), **extra}))
        self.roster.population(now)
        if now < self._not_before:  # the service is down or asked us to wait: keep it all for later
            return out
        self._send_telemetry(now, out)
        reports = self.outbox.reports()
        if reports is not None:
            out.append(self._emit("report", "POST", "/v1/report", reports))
            self.stats.reports_sent += len(reports["reports"])
        self._ask(now, out)
        return out

    def flush_reports(self) -> list[Request]:
        """Every report given so far, as requests (for ``wait()`` and before ``close()``)."""
        out = []
        while (body := self.outbox.reports()) is not None:
            out.append(self._emit("report", "POST", "/v1/report", body))
            self.stats.reports_sent += len(body["reports"])
        return out

    def _emit(
        self, kind: Kind, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str] | None = None
    ) -> Request:
        self._refs += 1
        ref = f"r{self._refs}"
        self._open[ref] = _Sent(kind, body)
        after = [] if kind == "session" else self.session.awaited()
        if kind == "decide":  # its prompt shows the scene as the game last told it; the manifest brings timings
            after += [r for r in self._telemetry if r in self._open]
            after += [r for r, s in self._open.items() if s.kind in ("health", "manifest")]
        return Request(ref, method, path, body, headers if headers is not None else self.session.headers(), after)

    def _send_telemetry(self, now: float, out: list[Request]) -> None:
        bodies = self.outbox.telemetry(now, self.roster.epoch, self.entities.values(), self.refusals.alone)
        again, self.outbox.again = self.outbox.again, []
        if bodies:
            self._telemetry = []
        for body in again + bodies:
            out.append(self._emit("telemetry", "POST", "/v1/telemetry", body))
            self._telemetry.append(out[-1].ref)

    def _ask(self, now: float, out: list[Request]) -> None:
        """Send what is due, events first, then the longest waiting; no more requests in flight than
        ``workers``, so a wave of refreshes is spread over frames instead of stalling one."""
        free = self.workers - sum(1 for s in self._open.values() if s.kind == "decide")
        if free <= 0:
            return
        due = [e for e in self.entities.values() if e.due <= now and not e.in_flight]
        if not due:
            return
        due.sort(key=lambda e: (e.trigger is None, e.due))
        asked: list[Entity] = []
        room = free * BATCH  # entities the free workers carry; one sent alone takes a whole request
        alone = self.refusals.alone
        for e in due:
            room -= BATCH if e.id in alone else 1
            if room < 0:
                break  # the rest stay due: next tick
            refresh, ttl = self.timings.of(e.type)
            e.due = now + refresh
            e.asked_at = now
            if not self.roster.local(e, now, ttl):
                asked.append(e)
        together = [e for e in asked if e.id not in alone]
        for i in range(0, len(together), BATCH):
            out.append(self._batch(together[i : i + BATCH], now))
        for e in asked:
            if e.id in alone:  # refused before: in a request of its own, so it cannot sink the others
                out.append(self._batch([e], now))

    def _batch(self, batch: list[Entity], now: float) -> Request:
        body: dict[str, Any] = {
            "client_id": self.client_id,
            "epoch": self.roster.epoch,
            "world": self.world,
            "entities": [_entity_item(e) for e in batch],
        }
        if self.scope is not None:
            body["scope"] = self.scope
            if self.scope_state is not None:
                body["scope_state"] = self.scope_state
        for e in batch:
            e.in_flight = True
            e.trigger = None
        request = self._emit("decide", "POST", "/v1/decide", body)
        request.stream = self.options.stream
        sent = self._open[request.ref]
        sent.epoch, sent.legal = self.roster.epoch, {e.id: tuple(e.legal_actions) for e in batch}
        sent.at = now
        self.stats.requests += 1
        self.stats.asked += len(batch)
        return request

    def left_out(self, ref: str, ids: set[str]) -> None:
        """The transport could not send these entities of request ``ref`` (not JSON): native AI for them,
        and the request goes without them (``Request.body`` was changed by the caller)."""
        sent = self._open.get(ref)
        if sent is None:
            return
        for eid in ids:
            sent.legal.pop(eid, None)
            e = self.entities.get(eid)
            if e is not None:
                e.in_flight = False
        if sent.kind == "decide":
            self.stats.asked -= len(ids)

    def dropped(self, ref: str) -> None:
        """A request the caller will not send (nothing of it could be written as JSON)."""
        sent = self._open.pop(ref, None)
        if sent is not None and sent.kind == "decide":
            self.stats.requests -= 1
            self.roster.release(sent.legal, None)

    # --- what came back ---------------------------------------------------------------------------

    def answer(self, ref: str, status: int, body: Any, headers: dict[str, str], now: float) -> None:
        """Apply the answer to request ``ref`` (headers with lowercase names), by its kind (``ANSWERED``)."""
        sent = self._take(ref)
        if 200 <= status < 300 and sent.kind != "decide" and _too_large(body):  # a decide answer says it itself
            self.say(f"too-large:{sent.kind}", str(body["error"]["message"]))
        ANSWERED[sent.kind](self, sent, Answered(status, body, headers), now)

    def chunk(self, ref: str, data: bytes | str, now: float) -> bool:
        """Bytes of request ``ref``'s streamed answer (a 200 in NDJSON; ``str``: its UTF-8): each line they
        complete is applied at once, so an entity's decision is usable before the stream ends. False when the
        stream ended here: more than MAX_STRAY_LINES of its lines answered no entity it asked (the caller
        reads no more of it)."""
        sent = self._open.get(ref)
        if sent is None or sent.kind != "decide":
            raise KeyError(f"no decide request {ref!r} is waiting for an answer")
        if sent.lines is None:  # the 200: the service took every entity of it
            sent.lines = Lines()
            for eid in sent.legal:
                self.refusals.alone.pop(eid, None)
        for line in sent.lines.feed(data):
            sent.strays += not _stream_line(self, sent, line, now)
            if sent.strays + sent.lines.overlong > MAX_STRAY_LINES:
                break
        if sent.strays + sent.lines.overlong <= MAX_STRAY_LINES:
            return True
        self.say(
            "stray-lines",
            f"a decision stream sent more than {MAX_STRAY_LINES} lines that answer no entity it asked (ids not "
            "asked, repeats, lines that are not decisions): ended there (MAX_STRAY_LINES), the rest fall back",
        )
        self.end(ref, now)
        return False

    def end(self, ref: str, now: float, failed: FailKind | None = None, detail: str = "") -> None:
        """Request ``ref``'s streamed answer ended (a partial line is discarded): cut before its last line, the
        lines received stand and every entity of it without one falls back (``unavailable``, ``CUT``).
        ``failed``: the transport ended it (no line within ``timeout_ms``, the connection lost), said as ``fail``
        says it."""
        sent = self._take(ref)
        if failed is not None:
            _say_failed(self, failed, detail)
        elif detail:  # the transport stopped reading it at its cap
            self.say(f"stream-end:{NUMBER.sub('#', detail)}", detail)
        if sent.whole:
            self.roster.release(sent.legal, None)  # one the stream did not name: asked on its refresh, as today
            return
        self.stats.streams_cut += 1
        self.stats.errors += 1
        for eid, legal in sent.legal.items():
            e = self.entities.get(eid)
            if e is not None and e.in_flight:
                self.roster.use(e, FallbackDecision(eid, "unavailable", CUT, 0), legal, now)
        self.pause(now + 1000, only=True)  # as after a request that failed: the service may be gone

    def fail(self, ref: str, kind: FailKind, now: float, detail: str = "") -> None:
        """Request ``ref`` got no answer (``timeout`` or ``unreachable``): said once, then undone by its kind
        (``FAILED``; a telemetry or report that failed is not sent again)."""
        sent = self._take(ref)
        _say_failed(self, kind, detail)
        failed = FAILED.get(sent.kind)
        if failed is not None:
            failed(self, sent, now)

    def _take(self, ref: str) -> _Sent:
        sent = self._open.pop(ref, None)
        if sent is None:
            raise KeyError(f"no request {ref!r} is waiting for an answer")
        return sent

    def pause(self, until: float, *, only: bool = False) -> None:
        """Send nothing before ``until`` (ms): the service is down, has no session for us, or asked us to wait;
        ``only``: this wait replaces a longer one (a decide request that failed: retried a second later)."""
        self._not_before = until if only else max(self._not_before, until)

    def _other(self, sent: _Sent, answered: Answered, now: float) -> None:
        """A telemetry or report answer: telemetry refused for some of its entities only is sent again
        without them; one too large, in two halves."""
        status, body, headers = answered
        items = sent.body["entities"] if sent.kind == "telemetry" and sent.body is not None else None
        if status == 200 and items is not None:  # an observed entity taken (one that decides: by /v1/decide)
            for item in items:
                if item["id"] not in self.entities:
                    self.refusals.alone.pop(item["id"], None)
        if status == 200:
            return
        if status == 413 and items is not None and sent.body is not None and self.outbox.halve(sent.body):
            return
        bad = self.refusals.entities(status, body, [(i["id"], i["type"]) for i in items or ()])
        if bad and sent.body is not None:
            self.stats.refused += len(bad)
            self.outbox.without(sent.body, bad)
            return
        self.refused(status, body, headers, now)

    def refused(self, status: int, body: Any, headers: dict[str, str], now: float) -> None:
        """A refusal of the whole request: said once, and waited out as it asks (a 429's Retry-After)."""
        self.refusals.said(status, body, self.session.hosted)
        if status == 429 or status >= 500:
            self._not_before = now + retry_after_ms(headers)
        if status == 401 and self.session.hosted:
            self.session.lost()  # a new session with the next request
            self._not_before = max(self._not_before, now + 250)  # not a request a frame if it keeps failing

    def in_flight(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._open)


def _decided(s: Scheduler, sent: _Sent, answered: Answered, now: float) -> None:
    """A decide answer: its decisions checked against what was sent and used, or why there are none."""
    status, body, headers = answered
    if status != 200:
        s.stats.errors += 1
        ids = [(eid, e.type if (e := s.entities.get(eid)) else "entity") for eid in sent.legal]
        bad = s.refusals.entities(status, body, ids)
        if bad:  # the others are asked again at once, without them
            s.stats.refused += len(bad)
            s.roster.release(sent.legal, now, keep=bad)
            return
        s.refused(status, body, headers, now)
        # a session that ended under us: asked again soon, with a new session
        s.roster.release(sent.legal, now if status == 401 and s.session.hosted else None)
        return
    for eid in sent.legal:
        s.refusals.alone.pop(eid, None)  # taken: it may go with the others again
    try:
        answer = read_decide_answer(body, len(sent.legal))
    except Malformed as exc:  # not npcmind, or another protocol version: never into the game
        s.stats.errors += 1
        s.say("malformed", f"the answer to /v1/decide could not be read: {exc}")
        s.roster.release(sent.legal, None)
        return
    if answer.epoch != s.roster.epoch or sent.epoch != s.roster.epoch:
        s.stats.dropped_epoch += 1
        s.roster.release(sent.legal, now)  # asked again at once, for the epoch of now
        return
    for d in answer.decisions:
        e = s.entities.get(d.id)
        if e is not None and d.id in sent.legal:  # else untracked meanwhile, or not asked
            s.roster.use(e, d, sent.legal[d.id], now)
    s.roster.release(sent.legal, None)


def _say_failed(s: Scheduler, kind: FailKind, detail: str) -> None:
    """Why a request got no answer (or its stream no more lines), once, with what the game can change."""
    if kind == "timeout":
        why = (
            "its model may take up to NPCMIND_DEADLINE_MS: leave timeout_ms out to follow it"
            if s.timeout_given
            else f"{TIMEOUT_MARGIN_S:g} s past its own deadline for the model: it is overloaded or stalled"
        )
        s.say("timeout", f"npcmind did not answer within {s.timeout_ms / 1000:g} s ({why})")
    else:
        s.say("transport", f"npcmind is unreachable: {detail or kind}")


def _stream_line(s: Scheduler, sent: _Sent, line: str, now: float) -> bool:
    """One line of a decide request's stream, under the rules of a whole answer: a line for an entity no longer
    tracked (or not asked, or answered already) is dropped, a stream for an older epoch is dropped whole, and a
    decision's action is checked against the legal actions sent (the roster's ``use``). False for a line that
    answers no entity the request asked (a stray: the stream ends past MAX_STRAY_LINES of them)."""
    if sent.whole:
        return False  # nothing counts after the last line
    try:
        got = read_stream_line(line)
    except Malformed as exc:  # that entity is left without a line: it falls back if the stream is cut
        s.stats.errors += 1
        s.say("malformed-line", f"a line of the decision stream could not be read: {exc}")
        return False
    if isinstance(got, StreamEnd):
        sent.whole = True
        return True
    if sent.epoch != s.roster.epoch:  # asked for a state the game has left: every line is stale
        if sent.legal:
            s.stats.dropped_epoch += 1
            s.roster.release(sent.legal, now)  # asked again at once, for the epoch of now
            sent.legal = {}
            return True
        return False
    legal = sent.legal.pop(got.id, None)
    if legal is None:
        return False
    e = s.entities.get(got.id)
    if e is None:
        return True  # untracked meanwhile: asked, and answered
    s.roster.use(e, got, legal, now)
    s.stats.streamed_decisions += 1
    s.stats.streamed_ms_total += now - sent.at
    return True


def _session_answered(s: Scheduler, sent: _Sent, a: Answered, now: float) -> None:
    problem = s.session.answered(a.status, a.body, now)
    if problem is not None:
        s.say(f"session:{NUMBER.sub('#', problem)}", problem)
        if s.session.token is None:
            s.pause(now + RETRY_MS)


def _health_answered(s: Scheduler, sent: _Sent, a: Answered, now: float) -> None:
    deadline = deadline_timeout(a.status, a.body)
    if deadline is not None and not s.timeout_given:
        s.timeout_ms = (deadline + TIMEOUT_MARGIN_S) * 1000


def _manifest_answered(s: Scheduler, sent: _Sent, a: Answered, now: float) -> None:
    if not s.timings.read(a.status, a.body, s.entities.values()):
        s.pause(now + 1000)  # asked again later; the defaults hold meanwhile
    else:
        s.cascade.manifest(version if isinstance(version := a.body.get("version"), str) else None)


def _policy_answered(s: Scheduler, sent: _Sent, a: Answered, now: float) -> None:
    if not s.cascade.answered(a.status, a.body, a.headers):
        s.refused(a.status, a.body, a.headers, now)


def _decide_failed(s: Scheduler, sent: _Sent, now: float) -> None:
    s.stats.errors += 1  # the service is down or timed out: native AI, retried a second later
    s.pause(now + 1000, only=True)
    s.roster.release(sent.legal, None)


def _session_failed(s: Scheduler, sent: _Sent, now: float) -> None:
    s.session.failed(now)
    if s.session.token is None:
        s.pause(now + RETRY_MS)


def _manifest_failed(s: Scheduler, sent: _Sent, now: float) -> None:
    s.timings.asked = False
    s.pause(now + 1000)


# What an answer or a failure does, by the kind of request (TypeScript: the same tables in scheduler.ts).
ANSWERED: dict[Kind, Callable[[Scheduler, _Sent, Answered, float], None]] = {
    "decide": _decided,
    "telemetry": Scheduler._other,
    "report": Scheduler._other,
    "session": _session_answered,
    "health": _health_answered,
    "manifest": _manifest_answered,
    "policy": _policy_answered,
}
FAILED: dict[Kind, Callable[[Scheduler, _Sent, float], None]] = {
    "decide": _decide_failed,
    "session": _session_failed,
    "manifest": _manifest_failed,
    "policy": lambda s, sent, now: s.cascade.failed(),
}


def _entity_item(e: Entity) -> dict[str, Any]:
    """An entity's wire object: its required fields, and the optional ones that are set."""
    item: dict[str, Any] = {"id": e.id, "type": e.type, "observation": e.observation, "legal_actions": e.legal_actions}
    if e.position is not None:
        item["position"] = e.position
    if e.profile is not None:
        item["profile"] = e.profile
    if e.parent is not None:
        item["parent"] = e.parent
    if e.trigger is not None:
        item["trigger"] = e.trigger
    return item
