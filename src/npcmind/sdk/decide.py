"""The reference decision SDK: asks /v1/decide for a game's entities and keeps the seed's game obligations.

A game loop calls ``tick()`` once a frame and ``action(id, legal_now)`` for each entity; ``None`` means
"run your native AI". The network never blocks the loop and never raises into it: requests run on worker
threads, and their answers are applied inside ``tick()`` on the game's own thread. It keeps every
obligation of the seed: a response for an old epoch is dropped, an action is re-checked against the legal
actions that were sent (and those of now), a decision expires after its ``ttl_ms``, a fallback or an error
gives ``None`` (never an invented action), and a cached decision is used exactly like a fresh one.

Scheduling (spec section 10): an event is asked at once, together with the events of the next
``event_window_ms``; other entities are re-asked every ``refresh_ms`` of their type; when the number of
tracked entities changes, everyone is re-asked, at least 500 ms apart; at most 16 entities a request.
Cascade mode: with a ``policy``, entities it is sure about (confidence at or above ``threshold``) take the
local action and only the rest go to the service; the request and answer shapes do not change.

One entity the service refuses (a 422 whose problems all lie in named entities: a NaN, an unknown type,
no legal actions) does not cost the others their decisions: it is named once in the log, the rest are
sent again at once, and from then on it goes in a request of its own until the service takes it.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args
from urllib.parse import urlencode

import httpx
import msgspec

from npcmind.config import http_url
from npcmind.protocol.a2g import AIDecision, DecideResponse, Outcome
from npcmind.protocol.errors import error_line, read_error

log = logging.getLogger("npcmind.sdk.decide")

BATCH = 16  # the protocol's limit of entities a decide request
TELEMETRY_BATCH = 1000
GZIP_FROM = 16 * 1024  # bodies from this size are sent gzip-compressed (on a worker thread)
MAX_QUEUED_REPORTS = 10_000  # held while the service is unreachable; beyond it the oldest tenth goes
RENEW_RETRY_S = 30.0  # a session renewal the service refused is tried again after this, with the old token
REASK_GAP_S = 0.5  # a change of population re-asks everyone, at most this often
DEFAULT_REFRESH_MS = 4000
DEFAULT_TTL_MS = 12000
DEFAULT_DEADLINE_S = 10.0  # the service's default provider deadline, until GET /v1/health tells its own
TIMEOUT_MARGIN_S = 5.0  # past the deadline: the service's own work and the network
OUTCOMES: tuple[str, ...] = get_args(Outcome)
Policy = Callable[["Entity"], tuple[str, float]]
_ENTITY_PATH = re.compile(r"entities\[(\d+)\]\.?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")  # the figures in a reason (seconds left, sizes): not a new kind of reason


class SessionRefused(Exception):
    """The hosted service would not open a session for this client's key."""


def _payload(r: httpx.Response) -> Any:
    """An answer's JSON, or its text as an error message when it has none (a proxy's page)."""
    try:
        return r.json()
    except (ValueError, RecursionError):
        return {"error": {"message": r.text[:200]}}


@dataclass(frozen=True, slots=True)
class Choice:
    """A usable decision for one entity: from the model (``AI``, fresh or cached) or the local policy."""

    action: str
    source: Literal["AI", "local"]
    confidence: float | None
    expires_at: float  # on the client's clock
    decision_id: str | None = None
    cached: bool = False
    label: str | None = None


@dataclass(slots=True)
class Entity:
    """What the game tells about one entity; the SDK's own bookkeeping sits beside it."""

    id: str
    type: str
    observation: dict[str, Any]
    legal_actions: list[str]
    position: list[float] | tuple[float, ...] | None = None
    profile: str | None = None
    parent: str | None = None
    state: str | None = None
    # bookkeeping
    trigger: str | None = None
    due: float = 0.0
    asked_at: float = float("-inf")
    in_flight: bool = False
    choice: Choice | None = None
    changed: bool = True  # since the last telemetry


@dataclass(slots=True)
class Stats:
    """Counters a game can show in a debug overlay; the tests read them too."""

    requests: int = 0
    asked: int = 0
    ai: int = 0
    cached: int = 0
    local: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)
    dropped_epoch: int = 0
    illegal: int = 0
    errors: int = 0
    reports_sent: int = 0
    refused: int = 0  # times the service refused an entity as malformed (it then goes alone until taken)


@dataclass(slots=True)
class _Sent:
    """One decide request in flight: what it carried, so its answer can be checked against it."""

    epoch: int
    legal: dict[str, tuple[str, ...]]
    future: Future[tuple[int, Any, dict[str, str]]]


class DecideClient:
    """One game's client of an npcmind service: call ``tick()`` every frame, ``action()`` per entity."""

    def __init__(
        self,
        service_url: str,
        client_id: str,
        *,
        world: dict[str, Any] | None = None,
        scope: str | None = None,
        scope_state: dict[str, Any] | None = None,
        epoch: int = 0,
        api_key: str | None = None,
        refresh_ms: int | None = None,
        event_window_ms: int = 50,
        telemetry_ms: int = 500,
        policy: Policy | None = None,
        threshold: float = 0.8,
        timeout_s: float | None = None,
        workers: int = 4,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client_id = client_id
        self.world: dict[str, Any] = dict(world or {})
        self.scope = scope
        self.scope_state = scope_state
        self.policy = policy
        self.threshold = threshold
        self.stats = Stats()
        self._epoch = epoch
        self._api_key = api_key
        self._token: str | None = None
        self._renew_at = float("inf")  # on the client's clock: a new session at 90% of the token's life
        self._token_lock = threading.Lock()
        self._refresh_ms = refresh_ms
        self._window = event_window_ms / 1000
        self._telemetry_every = telemetry_ms / 1000
        self._clock = clock
        self._http = httpx.Client(base_url=http_url(service_url, "service_url", "http://127.0.0.1:8080"))
        # given: kept; else the service's provider deadline plus a margin, once GET /v1/health told it
        self._timeout_given = timeout_s is not None
        self._timeout = timeout_s if timeout_s is not None else DEFAULT_DEADLINE_S + TIMEOUT_MARGIN_S
        self._telemetry: list[Future[tuple[int, Any, dict[str, str]]]] = []  # of the newest telemetry tick
        self._telemetry_bodies: dict[Future[Any], dict[str, Any]] = {}  # to send again without a refused entity
        self._alone: dict[str, str] = {}  # entity id -> why the service refused it: sent alone until taken
        self._telemetry_batch = TELEMETRY_BATCH  # halved on a 413 (observations too rich for the body limit)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="npcmind-decide")
        self._workers = workers
        self._entities: dict[str, Entity] = {}
        self._observed: dict[str, dict[str, Any]] = {}
        self._removed: list[str] = []
        self._scene: str | None = None
        self._sent: list[_Sent] = []
        self._other: list[Future[Any]] = []
        self._reports: list[dict[str, Any]] = []
        self._types: dict[str, tuple[int, int]] = {}  # type -> (refresh_ms, ttl_ms), from GET /v1/manifest
        self._manifest: Future[tuple[int, Any, dict[str, str]]] | None = None
        self._count = 0
        self._last_reask = float("-inf")
        self._reask_pending = False
        self._last_telemetry = float("-inf")
        self._not_before = float("-inf")  # after a 429 or a service that is down
        self._warned: set[str] = set()
        self._closed = False

    # --- what the game tells --------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The game's epoch: answers to requests sent under another epoch are dropped."""
        return self._epoch

    @epoch.setter
    def epoch(self, value: int) -> None:
        if value != self._epoch:
            self._epoch = value
            for e in self._entities.values():  # what was decided for the old state no longer holds
                e.choice = None
                e.due = min(e.due, self._clock())

    def set_scene(self, scene: str) -> None:
        """A new scene (level, map): the service resets its population with the next telemetry."""
        self._scene = scene

    def track(
        self,
        entity_id: str,
        type: str,
        observation: dict[str, Any],
        legal_actions: list[str],
        *,
        position: list[float] | tuple[float, ...] | None = None,
        profile: str | None = None,
        parent: str | None = None,
        state: str | None = None,
    ) -> None:
        """Add an entity that decides, or update what it sees and may do now (it is not asked again for
        that alone: it is asked on its refresh, on an event, or when the population changes)."""
        e = self._entities.get(entity_id)
        if e is None:
            now = self._clock()
            self._entities[entity_id] = Entity(
                entity_id, type, observation, legal_actions, position, profile, parent, state, due=now
            )
            return
        if e.type != type:
            e.choice = None
            e.due = self._clock()
        # kept by reference (this runs for every entity of every frame); copied when a request is built
        e.type, e.observation, e.legal_actions = type, observation, legal_actions
        e.position, e.profile, e.parent, e.state = position, profile, parent, state
        e.changed = True

    def observe(
        self,
        entity_id: str,
        type: str,
        fields: dict[str, Any],
        *,
        position: list[float] | tuple[float, ...] | None = None,
    ) -> None:
        """An observe-only entity (the player): sent as telemetry, never asked."""
        item: dict[str, Any] = {"id": entity_id, "type": type, "fields": fields}
        if position is not None:
            item["position"] = position
        self._observed[entity_id] = item

    def untrack(self, entity_id: str) -> None:
        """The entity left the scene (died, despawned): forget it and tell the service."""
        self._alone.pop(entity_id, None)
        if self._entities.pop(entity_id, None) is not None or self._observed.pop(entity_id, None) is not None:
            self._removed.append(entity_id)

    def event(self, entity_id: str, trigger: str) -> bool:
        """Something happened to the entity (one of its type's events): ask for it at once. False, and said
        once in the log, for an entity not tracked (one untracked as it died from the hit, say): a game loop
        must not crash on the order of two calls."""
        e = self._entities.get(entity_id)
        if e is None:
            self._warn(
                f"event:{trigger}",
                f"event({entity_id!r}, {trigger!r}) for an entity not tracked: ignored",
                native=False,
            )
            return False
        e.trigger = trigger
        e.due = min(e.due, self._clock() + self._window)
        return True

    def report(self, entity_id: str, outcome: Outcome, detail: str | None = None) -> bool:
        """What became of the entity's current AI decision; sent with the next tick. False when it has
        none to report (a fallback, a local choice, or an expired decision)."""
        if outcome not in OUTCOMES:  # one wrong outcome would get the whole batch of reports refused
            self._warn(
                f"outcome:{outcome}",
                f"report({entity_id!r}, {outcome!r}): the outcome must be one of {', '.join(OUTCOMES)}; not sent",
                native=False,
            )
            return False
        e = self._entities.get(entity_id)
        if e is None or e.choice is None or e.choice.decision_id is None:
            return False
        item: dict[str, Any] = {"decision_id": e.choice.decision_id, "outcome": outcome}
        if detail:
            item["detail"] = detail[:200]
        if len(self._reports) >= MAX_QUEUED_REPORTS:  # the service has been down a long while: keep the newest
            del self._reports[: MAX_QUEUED_REPORTS // 10]
            self._warn(
                "reports-dropped",
                f"more than {MAX_QUEUED_REPORTS} reports wait for npcmind: the oldest are dropped",
                native=False,
            )
        self._reports.append(item)
        return True

    # --- what the game asks ---------------------------------------------------------------------

    def action(self, entity_id: str, legal_now: list[str] | None = None) -> Choice | None:
        """The entity's live decision, or None: run the game's native AI. The action is checked against
        ``legal_now``, else against the legal actions last given to ``track()``."""
        e = self._entities.get(entity_id)
        if e is None or e.choice is None:
            return None
        c = e.choice
        if self._clock() >= c.expires_at:
            e.choice = None
            return None
        if c.action not in (legal_now if legal_now is not None else e.legal_actions):
            return None
        return c

    def tick(self, now: float | None = None) -> None:
        """Apply the answers that came in, then send what is due. Never blocks, never raises for the network."""
        if self._closed:  # a frame after close() (a scene change, quitting): nothing to send, nothing to raise
            return
        now = self._clock() if now is None else now
        self._collect(now)
        if self._manifest is None and now >= self._not_before:
            self._manifest = self._pool.submit(self._fetch_manifest)
        if len(self._entities) != self._count:
            self._count = len(self._entities)
            self._reask_pending = True
        if self._reask_pending and now - self._last_reask >= REASK_GAP_S:
            self._reask_pending = False
            self._last_reask = now
            for e in self._entities.values():
                e.due = min(e.due, now)
        if now < self._not_before:  # the service is down or asked us to wait: keep it all for later
            return
        if now - self._last_telemetry >= self._telemetry_every:
            self._send_telemetry(now)
        self._send_reports()
        self._ask(now)

    def _send_reports(self) -> None:
        if self._reports:
            reports, self._reports = self._reports[:256], self._reports[256:]
            raw = msgspec.json.encode(self._body(reports=reports))
            self._other.append(self._pool.submit(self._call, "POST", "/v1/report", raw))
            self.stats.reports_sent += len(reports)

    def wait(self, timeout_s: float = 10.0) -> bool:
        """Send the reports given since the last tick, block until every request sent so far has answered,
        then apply the answers (for turn-based games, tests, and before ``close()``). True if nothing is
        still in flight."""
        while self._reports and not self._closed:
            self._send_reports()
        pending = [s.future for s in self._sent] + self._other
        deadline = time.monotonic() + timeout_s
        for f in pending:
            with contextlib.suppress(Exception):  # a failure is applied (as a fallback) by _collect
                f.result(timeout=max(0.0, deadline - time.monotonic()))
        self._collect(self._clock())
        return not self._sent and not self._other

    def last_prompt(self) -> dict[str, Any] | None:
        """What the model saw in this session's last decide request and what it answered (GET /v1/prompt),
        for a debug overlay or a bug report. It blocks for one HTTP round trip: call it on demand, not every
        frame. None when there is nothing yet or the service cannot say; it never raises."""
        try:
            status, payload, _ = self._call("GET", f"/v1/prompt?{urlencode({'client_id': self.client_id})}", None)
        except Exception as e:  # the service is down or refused the session: a debug view must not break the game
            log.debug("last_prompt: %s", e)
            return None
        return payload if status == 200 and isinstance(payload, dict) else None

    def close(self) -> None:
        """Stop the workers and close the connection, without waiting for answers (a game that quits must
        not hang on a slow service; call ``wait()`` first to keep them)."""
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()

    def __enter__(self) -> DecideClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- scheduling -----------------------------------------------------------------------------

    def _timing(self, type_: str) -> tuple[float, int]:
        refresh, ttl = self._types.get(type_, (DEFAULT_REFRESH_MS, DEFAULT_TTL_MS))
        return (self._refresh_ms or refresh) / 1000, ttl

    def _ask(self, now: float) -> None:
        """Send what is due, events first, then the longest waiting; no more requests than there are
        workers, so a wave of refreshes is spread over frames instead of stalling one."""
        free = self._workers - len(self._sent)
        if free <= 0:
            return
        due = [e for e in self._entities.values() if e.due <= now and not e.in_flight]
        if not due:
            return
        due.sort(key=lambda e: (e.trigger is None, e.due))
        asked: list[Entity] = []
        room = free * BATCH  # entities the free workers carry; one sent alone takes a whole request
        for e in due:
            room -= BATCH if e.id in self._alone else 1
            if room < 0:
                break  # the rest stay due: next tick
            refresh, ttl = self._timing(e.type)
            e.due = now + refresh
            e.asked_at = now
            if self.policy is not None:
                try:
                    action, confidence = self.policy(e)
                except Exception as exc:  # a broken policy must not stop the game: ask the service instead
                    key = f"policy:{type(exc).__name__}"
                    if key not in self._warned:  # its traceback once, not once an entity a refresh
                        self._warned.add(key)
                        log.exception("the local policy failed for %r (said once; the service decides instead)", e.id)
                    action, confidence = "", 0.0
                if confidence >= self.threshold and action in e.legal_actions:
                    e.choice = Choice(action, "local", confidence, now + ttl / 1000)
                    e.trigger = None
                    self.stats.local += 1
                    continue
            asked.append(e)
        together = [e for e in asked if e.id not in self._alone]
        for i in range(0, len(together), BATCH):
            self._send_batch(together[i : i + BATCH])
        for e in asked:
            if e.id in self._alone:  # refused before: in a request of its own, so it cannot sink the others
                self._send_batch([e])

    def _send_batch(self, batch: list[Entity]) -> None:
        body = self._body(epoch=self._epoch, world=self.world, entities=[self._entity_item(e) for e in batch])
        if self.scope is not None:
            body["scope"] = self.scope
            if self.scope_state is not None:
                body["scope_state"] = self.scope_state
        raw = self._encode(body)
        if raw is None:
            return
        kept = {item["id"] for item in body["entities"]}
        batch = [e for e in batch if e.id in kept]
        for e in batch:
            e.in_flight = True
            e.trigger = None
        legal = {e.id: tuple(e.legal_actions) for e in batch}
        after = [f for f in self._telemetry if not f.done()]
        if self._manifest is not None and not self._manifest.done():  # it brings the timeout to use
            after.append(self._manifest)
        future = self._pool.submit(self._call, "POST", "/v1/decide", raw, after)
        self._sent.append(_Sent(self._epoch, legal, future))
        self.stats.requests += 1
        self.stats.asked += len(batch)

    @staticmethod
    def _item(e: Entity, item: dict[str, Any], optional: tuple[str, ...]) -> dict[str, Any]:
        """An entity's wire object: the given fields, and those of ``optional`` that are set."""
        for k in optional:
            v = getattr(e, k)
            if v is not None:
                item[k] = v
        return item

    def _entity_item(self, e: Entity) -> dict[str, Any]:
        base = {"id": e.id, "type": e.type, "observation": e.observation, "legal_actions": e.legal_actions}
        return self._item(e, base, ("position", "profile", "parent", "trigger"))

    def _encode(self, body: dict[str, Any]) -> bytes | None:
        """The body as JSON, made now (a snapshot: the game may change its dicts from the next frame on).
        An entity that is not JSON is left out and named once; None when nothing is left to send."""
        try:
            return msgspec.json.encode(body)
        except (TypeError, msgspec.EncodeError):
            pass
        kept = []
        for item in body["entities"]:
            try:
                msgspec.json.encode(item)
                kept.append(item)
            except (TypeError, msgspec.EncodeError) as exc:
                eid, typ = item["id"], item["type"]
                self._warn(f"encode:{eid}", f"{typ} {eid!r} cannot be sent as JSON ({exc}): left out")
        body["entities"] = kept
        try:
            return msgspec.json.encode(body) if kept or body.get("removed") or body.get("scene") else None
        except (TypeError, msgspec.EncodeError) as exc:
            self._warn(f"encode:{exc}", f"a request cannot be sent as JSON ({exc}): skipped")
            return None

    def _send_telemetry(self, now: float) -> None:
        items: list[dict[str, Any]] = []
        for e in self._entities.values():
            if e.changed:
                e.changed = False
                base = {"id": e.id, "type": e.type, "fields": e.observation}
                items.append(self._item(e, base, ("position", "state", "parent")))
        items += self._observed.values()
        if not items and not self._removed and self._scene is None:
            return
        self._last_telemetry = now
        self._telemetry = []
        alone = [item for item in items if item["id"] in self._alone]
        if alone:
            items = [item for item in items if item["id"] not in self._alone]
        first: dict[str, Any] = {"scene": self._scene} if self._scene is not None else {}
        step = self._telemetry_batch
        for i in range(0, max(len(items), 1), step):  # the scene and removals go with the first
            body = self._body(epoch=self._epoch, entities=items[i : i + step], **first)
            if i == 0:
                body["removed"] = self._removed
            self._post_telemetry(body)
            first = {}
        if alone:  # refused before: their own request, so they cannot sink the others'
            self._post_telemetry(self._body(epoch=self._epoch, entities=alone))
        self._observed.clear()
        self._removed = []
        self._scene = None

    def _post_telemetry(self, body: dict[str, Any]) -> None:
        raw = self._encode(body)
        if raw is not None:
            self._telemetry.append(self._pool.submit(self._call, "POST", "/v1/telemetry", raw))
            self._telemetry_bodies[self._telemetry[-1]] = body
            self._other.append(self._telemetry[-1])

    # --- answers ----------------------------------------------------------------------------------

    def _collect(self, now: float) -> None:
        if self._manifest is not None and self._manifest.done() and not self._types:
            self._read_manifest(self._manifest)
        pending = []
        for f in self._other:
            if f.done():
                self._check_other(f, now)
            else:
                pending.append(f)
        self._other = pending
        still: list[_Sent] = []
        for s in self._sent:
            if s.future.done():
                self._apply(s, now)
            else:
                still.append(s)
        self._sent = still

    def _fetch_manifest(self) -> tuple[int, Any, dict[str, str]]:
        """On a worker: the service's deadline (for the timeout, unless the game set one), then the manifest."""
        if not self._timeout_given:
            with contextlib.suppress(Exception):  # an older service, or none yet: the default stays
                status, body, _ = self._call("GET", "/v1/health", None)
                deadline = body.get("deadline_ms") if status == 200 and isinstance(body, dict) else None
                if isinstance(deadline, int) and deadline > 0:
                    self._timeout = deadline / 1000 + TIMEOUT_MARGIN_S
        return self._call("GET", "/v1/manifest", None)

    @property
    def timeout_s(self) -> float:
        """How long a request may take before its entities use their native AI: the ``timeout_s`` given,
        else the service's provider deadline (``NPCMIND_DEADLINE_MS``) plus 5 s once the service told it."""
        return self._timeout

    def _read_manifest(self, f: Future[tuple[int, Any, dict[str, str]]]) -> None:
        try:
            status, body, _ = f.result()
            data = body["manifest"] if status == 200 else None
        except Exception:
            data = None
        if not isinstance(data, dict):
            self._manifest = None  # ask again on a later tick; the defaults hold meanwhile
            self._not_before = max(self._not_before, self._clock() + 1.0)
            return
        defaults = data.get("defaults") or {}
        for name, t in (data.get("types") or {}).items():
            self._types[name] = (
                int(t.get("refresh_ms") or defaults.get("refresh_ms") or DEFAULT_REFRESH_MS),
                int(t.get("ttl_ms") or defaults.get("ttl_ms") or DEFAULT_TTL_MS),
            )
        for e in self._entities.values():  # asked before the manifest came: on the default refresh
            e.due = min(e.due, e.asked_at + self._timing(e.type)[0])

    def _check_other(self, f: Future[tuple[int, Any, dict[str, str]]], now: float) -> None:
        """Log what went wrong with a telemetry or report request; telemetry refused for some of its
        entities only is sent again without them."""
        sent = self._telemetry_bodies.pop(f, None)
        try:
            status, body, headers = f.result()
        except Exception as exc:
            self._failed(exc)
            return
        if status == 200 and sent is not None:  # an observed entity taken (one that decides: by /v1/decide)
            for item in sent["entities"]:
                if item["id"] not in self._entities:
                    self._alone.pop(item["id"], None)
        if status == 413 and sent is not None and len(sent["entities"]) > 1:
            # rich observations: fewer entities a request, from now on too, and this one again in two
            half = len(sent["entities"]) // 2
            self._telemetry_batch = max(1, min(self._telemetry_batch, half))
            entities = sent["entities"]
            self._post_telemetry({**sent, "entities": entities[:half]})
            rest = {k: v for k, v in sent.items() if k not in ("scene", "removed")}  # those went with the first
            self._post_telemetry({**rest, "entities": entities[half:]})
            return
        if status != 200:
            items = sent["entities"] if sent is not None else []
            bad = self._refused_entities(status, body, [(item["id"], item["type"]) for item in items])
            if bad:
                sent = cast(dict[str, Any], sent)
                sent["entities"] = [item for item in items if item["id"] not in bad]
                if sent["entities"] or sent.get("removed") or sent.get("scene"):
                    self._post_telemetry(sent)
                return
            self._refused(status, body, headers, now)

    def _apply(self, s: _Sent, now: float) -> None:
        try:
            status, body, headers = s.future.result()
        except Exception as exc:  # the service is down or timed out: native AI, retry later
            self.stats.errors += 1
            self._failed(exc)
            self._not_before = now + 1.0
            self._release(s, None)
            return
        if status != 200:
            self.stats.errors += 1
            sent = [(eid, e.type if (e := self._entities.get(eid)) else "entity") for eid in s.legal]
            bad = self._refused_entities(status, body, sent)
            if bad:  # the others are asked again at once, without them
                self._release(s, now, keep=bad)
                return
            self._refused(status, body, headers, now)
            # a session that ended under us: asked again soon, with a new session
            self._release(s, now if status == 401 and self._api_key else None)
            return
        for eid in s.legal:
            self._alone.pop(eid, None)  # taken: it may go with the others again
        try:
            answer = msgspec.convert(body, DecideResponse)
        except msgspec.ValidationError as exc:  # not npcmind, or another protocol version: never into the game
            self.stats.errors += 1
            self._warn("malformed", f"the answer to /v1/decide could not be read: {exc}")
            self._release(s, None)
            return
        if answer.epoch != self._epoch or s.epoch != self._epoch:
            self.stats.dropped_epoch += 1
            self._release(s, now)  # asked again at once, for the epoch of now
            return
        for d in answer.decisions:
            e = self._entities.get(d.id)
            if e is None or d.id not in s.legal:
                continue  # untracked meanwhile, or not asked
            e.in_flight = False
            if isinstance(d, AIDecision):
                if d.action not in s.legal[e.id]:
                    self.stats.illegal += 1
                    e.choice = None
                    continue
                self.stats.ai += 1
                self.stats.cached += d.cached
                expires = now + d.ttl_ms / 1000
                e.choice = Choice(d.action, "AI", d.confidence, expires, d.decision_id, d.cached, d.label)
            else:
                self.stats.fallbacks[d.code] = self.stats.fallbacks.get(d.code, 0) + 1
                e.choice = None
                if d.code == "budget":
                    self._warn(f"budget:{e.type}", f"{e.type} {e.id!r} is over its token budget: {d.reason}")
                elif d.code in ("unavailable", "busy"):  # the service's state, not the entity's: say it once
                    kind = _NUMBER.sub("#", d.reason)  # "asked to wait: 0.9 s more" is not new at every ask
                    self._warn(f"{d.code}:{kind}", f"npcmind fell back with {d.code!r}: {d.reason}")
        self._release(s, None)

    def _release(self, s: _Sent, due: float | None, keep: set[str] | frozenset[str] = frozenset()) -> None:
        """The entities of an answered or failed request may be asked again: at ``due``, or else on their
        next refresh (the seed's reaction to `unavailable` and `busy`); those in ``keep`` on their refresh."""
        for eid in s.legal:
            e = self._entities.get(eid)
            if e is not None and e.in_flight:
                e.in_flight = False
                if due is not None and eid not in keep:
                    e.due = min(e.due, due)

    def _refused_entities(self, status: int, body: Any, sent: list[tuple[str, str]]) -> set[str]:
        """The ids of a 422 whose every problem lies in one of the request's entities (``sent``: id and type,
        in the request's order), each named once in the log and sent alone from now on; else none."""
        details = read_error(body)[2] if status == 422 else []
        if not details:
            return set()
        why: dict[str, list[str]] = {}
        for d in details:
            m = _ENTITY_PATH.match(str(d.get("path", "")))
            if m is None or int(m.group(1)) >= len(sent):
                return set()  # a problem of the whole request (world, scope, a field of the body)
            eid = sent[int(m.group(1))][0]
            why.setdefault(eid, []).append(f"{d['path'][m.end() :] or 'entity'}: {d.get('message')}")
        types = dict(sent)
        for eid, problems in why.items():
            self.stats.refused += 1
            self._alone[eid] = "; ".join(problems)
            self._warn(
                f"refused:{eid}:{self._alone[eid]}",
                f"npcmind refused {types[eid]} {eid!r} ({self._alone[eid]}): the others go on without it, and it "
                "is sent alone until the service takes it",
            )
        return set(why)

    def _refused(self, status: int, body: Any, headers: dict[str, str], now: float) -> None:
        msg = f"npcmind answered {status} {read_error(body)[0]}: {error_line(body, '')}"
        if status == 401 and not self._api_key:
            msg += " (the service runs the hosted profile: give DecideClient its api_key=)"
        if status == 429 or status >= 500:
            retry = headers.get("retry-after")
            self._not_before = now + (float(retry) if retry and retry.replace(".", "", 1).isdigit() else 1.0)
        if status == 401 and self._api_key:
            with self._token_lock:
                self._token = None  # a new session with the next request
            self._not_before = max(self._not_before, now + 0.25)  # not a request a frame if it keeps failing
        self._warn(f"{status}:{_NUMBER.sub('#', msg)}", msg)  # "retry in 0.02 s" is not new at every request

    def _failed(self, exc: Exception) -> None:
        """A request that got no answer: the service is down, or it refused to open a session."""
        if isinstance(exc, httpx.TimeoutException):
            why = (
                "its model may take up to NPCMIND_DEADLINE_MS: leave timeout_s out to follow it"
                if self._timeout_given
                else f"{TIMEOUT_MARGIN_S:g} s past its own deadline for the model: it is overloaded or stalled"
            )
            self._warn("timeout", f"npcmind did not answer within {self._timeout:g} s ({why})")
        elif isinstance(exc, httpx.TransportError):
            self._warn("transport", f"npcmind is unreachable: {exc}")
        elif isinstance(exc, SessionRefused):
            self._warn(f"session:{exc}", str(exc))
        else:
            self._warn(f"failed:{exc}", f"a request to npcmind failed: {exc}")

    def _warn(self, key: str, message: str, native: bool = True) -> None:
        """Say a problem once (a game loop would repeat it every frame); ``native``: it leaves entities to the
        game's own AI, and the line says so."""
        if key not in self._warned:
            if len(self._warned) >= 1000:
                self._warned.clear()
            self._warned.add(key)
            log.warning("%s (the entities concerned use their native AI)" if native else "%s", message)

    # --- HTTP (worker threads) --------------------------------------------------------------------

    def _body(self, **parts: Any) -> dict[str, Any]:
        return {"client_id": self.client_id, **parts}

    def _headers(self) -> dict[str, str]:
        if self._api_key is None:
            return {}
        with self._token_lock:
            renew = self._token is not None and self._clock() >= self._renew_at
            if self._token is None or renew:  # near its expiry: a new session now, not a 401 and a lost request
                try:
                    self._token, self._renew_at = self._open_session()
                except SessionRefused:
                    if not renew:
                        raise
                    # the old token has a tenth of its life left (a client at its max_sessions cannot open
                    # another while it lives): go on with it, and try again a little later
                    self._renew_at = self._clock() + RENEW_RETRY_S
            return {"authorization": f"Bearer {self._token}"}

    def _open_session(self) -> tuple[str, float]:
        """A new session token, and when to renew it (90% of its life, on the client's clock)."""
        r = self._http.post(
            "/v1/session", json={"client_id": self.client_id}, headers={"authorization": f"Bearer {self._api_key}"}
        )
        payload = _payload(r)
        token = payload.get("session_token") if r.status_code == 200 and isinstance(payload, dict) else None
        if not isinstance(token, str):
            why = error_line(payload, "(no session_token)")
            raise SessionRefused(f"npcmind did not open a session (POST /v1/session answered {r.status_code}: {why})")
        ttl = payload.get("expires_in_s")
        return token, self._clock() + (0.9 * ttl if isinstance(ttl, (int, float)) else float("inf"))

    def _call(
        self, method: str, path: str, body: bytes | None, after: list[Future[Any]] | None = None
    ) -> tuple[int, Any, dict[str, str]]:
        """One request, on a worker thread; a decide request first waits for the telemetry sent before it,
        so that its prompt shows the scene as the game last told it (a removal, a new scene)."""
        for f in after or ():
            with contextlib.suppress(Exception):
                f.result(timeout=self._timeout)
        headers = self._headers()
        if body is not None:
            headers["content-type"] = "application/json"
            if len(body) >= GZIP_FROM:  # a large scene's telemetry: about a tenth of the bytes, for about 1 ms
                body = gzip.compress(body, compresslevel=1)
                headers["content-encoding"] = "gzip"
        r = self._http.request(method, path, content=body, headers=headers, timeout=self._timeout)
        return r.status_code, _payload(r), dict(r.headers)
