"""The decision SDK a game uses: asks /v1/decide for its entities and keeps the seed's game obligations.

A game loop calls ``tick()`` once a frame and ``action(id, legal_now)`` for each entity; ``None`` means
"run your native AI". The network never blocks the loop and never raises into it: requests run on worker
threads (the transport), and their answers are applied inside ``tick()`` on the game's own thread by the
scheduler, which holds every rule (``npcmind_client.scheduler``; telemetry and reports: the outbox).
Decide answers are streamed by default (``stream=False``: one JSON answer): each entity's decision is
applied at the first ``tick()`` after its line arrived (docs/streaming.md).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import httpx

from npcmind_client.limits import MAX_PROMPT_BYTES, MIN_CHUNK_BYTES, TICK_STREAM_BYTES
from npcmind_client.limits import is_too_large as too_large
from npcmind_client.options import DecideOptions
from npcmind_client.policy import Policy, PolicyError
from npcmind_client.say import log
from npcmind_client.scheduler import Choice, Entity, LocalPolicy, PolicyFunction, Request, Scheduler, Stats
from npcmind_client.transport import Chunk, End, Transport, encode
from npcmind_client.transport import Outcome as Came
from npcmind_client.urls import http_url
from npcmind_client.wire import Outcome

__all__ = [
    "Choice",
    "DecideClient",
    "DecideOptions",
    "Entity",
    "LocalPolicy",
    "Policy",
    "PolicyError",
    "PolicyFunction",
    "Stats",
]


# over 15 methods: the game-facing API, one method or property per thing a game does (TS: DecideClient, the same)
class DecideClient:
    """One game's client of an npcmind service: call ``tick()`` every frame, ``action()`` per entity."""

    def __init__(
        self,
        service_url: str,
        client_id: str,
        *,
        options: DecideOptions | None = None,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """``options``: one ``DecideOptions`` (``npcmind_client.options``: every field, what it does, its default):
        ``DecideClient(url, "game-1", options=DecideOptions(world={...}, epoch=7))``. ``clock``: the game's, in
        seconds. ``transport``: httpx's transport the requests go through (a proxy's, ``httpx.MockTransport`` in a
        test; the network otherwise), as TypeScript's ``fetch``."""
        base = http_url(service_url, "service_url", "http://127.0.0.1:8080")
        self.client_id = client_id
        self._scheduler = Scheduler(client_id, options=options)
        self.options = o = self._scheduler.options
        timeout_s = o.timeout_ms / 1000 if o.timeout_ms is not None else None
        self._transport = Transport(base, timeout_s, o.workers, o.policy_max_bytes, transport)
        self._clock = clock
        self._closed = False
        self._backlog: deque[Came] = deque()  # what came and waits for a tick with room (TICK_STREAM_BYTES)
        self._stopped: set[str] = set()  # streams the scheduler ended: what still comes of them is dropped

    @property
    def world(self) -> dict[str, Any]:
        """The world the service sees beside the entities: change its fields, or set a new one, as the game goes."""
        return self._scheduler.world

    @world.setter
    def world(self, value: dict[str, Any]) -> None:
        if not isinstance(value, dict):
            raise TypeError(f"world: must be a dict, not {type(value).__name__}")
        self._scheduler.world = value

    @property
    def scope(self) -> str | None:
        """The manifest's scope the game is in (a boss fight), or None; it may change as the game goes: the next
        decide request carries it, and the local policy sees its state from then on."""
        return self._scheduler.scope

    @scope.setter
    def scope(self, value: str | None) -> None:
        if value is not None and not isinstance(value, str):
            raise TypeError(f"scope: must be a scope's name or None, not {type(value).__name__}")
        self._scheduler.scope = value

    @property
    def scope_state(self) -> dict[str, Any] | None:
        """The scope's state, sent with the scope (and given to the local policy while a scope is set)."""
        return self._scheduler.scope_state

    @scope_state.setter
    def scope_state(self, value: dict[str, Any] | None) -> None:
        if value is not None and not isinstance(value, dict):
            raise TypeError(f"scope_state: must be a dict or None, not {type(value).__name__}")
        self._scheduler.scope_state = value

    @property
    def threshold(self) -> float:
        """How sure the local policy must be to decide an entity here (the cascade); the next choice uses it."""
        return self._scheduler.roster.threshold

    @threshold.setter
    def threshold(self, value: float) -> None:
        try:
            finite = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
        except OverflowError:  # an int past the float range
            finite = False
        if not finite:
            shown = repr(value) if isinstance(value, float) else type(value).__name__
            raise TypeError(f"threshold: must be a finite number, not {shown}")
        self._scheduler.roster.threshold = value

    @property
    def stats(self) -> Stats:
        """Counters a game can show in a debug overlay."""
        return self._scheduler.stats

    @property
    def epoch(self) -> int:
        """The game's epoch: answers to requests sent under another epoch are dropped."""
        return self._scheduler.epoch

    @epoch.setter
    def epoch(self, value: int) -> None:
        """A new epoch: every entity's decision is forgotten and everyone is asked again at once."""
        self._scheduler.roster.set_epoch(value, self._now())

    @property
    def policy(self) -> LocalPolicy | None:
        """The game's own local policy (a ``Policy`` or a function); it may be changed as the game goes."""
        return self._scheduler.cascade.own

    @policy.setter
    def policy(self, value: LocalPolicy | None) -> None:
        """A new local policy of the game's own (fetching the service's stays as it was set up)."""
        self._scheduler.cascade.own = value

    @property
    def service_policy(self) -> Policy | None:
        """The service's distilled policy in use (fetched from GET /v1/policy), or None: none yet, fetching
        off, or the service's is for another manifest version."""
        return self._scheduler.cascade.fetched

    @property
    def timeout_ms(self) -> float:
        """How long a request may take before its entities use their native AI, in ms: the ``timeout_ms``
        given, else the service's provider deadline (``NPCMIND_DEADLINE_MS``) plus 5 s once the service told it."""
        return self._transport.timeout_s * 1000

    def _now(self) -> float:
        return self._clock() * 1000

    # --- what the game tells --------------------------------------------------------------------

    def set_scene(self, scene: str) -> None:
        """A new scene (level, map): the service resets its population with the next telemetry."""
        self._scheduler.outbox.set_scene(scene)

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
        self._scheduler.roster.track(entity_id, type, observation, legal_actions, position, profile, parent, state)

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
        self._scheduler.outbox.observe(entity_id, item)

    def untrack(self, entity_id: str) -> None:
        """The entity left the scene (died, despawned): forget it and tell the service."""
        self._scheduler.untrack(entity_id)

    def event(self, entity_id: str, trigger: str) -> bool:
        """Something happened to the entity (one of its type's events): ask for it at once. False, said
        once in the log, for an entity not tracked: a game loop must not crash on the order of two calls."""
        return self._scheduler.roster.event(entity_id, trigger, self._now())

    def report(self, entity_id: str, outcome: Outcome, detail: str | None = None) -> bool:
        """What became of the entity's current AI decision; sent with the next tick. False when it has
        none to report (a fallback, a local choice, or an expired decision)."""
        return self._scheduler.report(entity_id, outcome, detail)

    # --- what the game asks ---------------------------------------------------------------------

    def action(self, entity_id: str, legal_now: list[str] | None = None) -> Choice | None:
        """The entity's live decision, or None: run the game's native AI. The action is checked against
        ``legal_now``, else against the legal actions last given to ``track()``."""
        return self._scheduler.roster.action(entity_id, legal_now, self._now())

    def tick(self, now: float | None = None) -> None:
        """Apply the answers that came in, then send what is due. Never blocks, never raises for the network."""
        if self._closed:  # a frame after close() (a scene change, quitting): nothing to send, nothing to raise
            return
        now_ms = self._now() if now is None else now * 1000
        self._apply(now_ms)
        for request in self._scheduler.tick(now_ms):
            self._send(request)

    def wait(self, *, timeout_ms: float = 10_000) -> bool:
        """Send the reports given since the last tick, block until every request sent so far has answered,
        then apply the answers (for turn-based games, tests, and before ``close()``). True if nothing is
        still in flight."""
        if not self._closed:
            for request in self._scheduler.flush_reports():
                self._send(request)
        self._transport.wait(timeout_ms / 1000)
        self._apply(self._now())
        while self._backlog:  # a blocking call: what came is applied whole, past a tick's room
            self._apply(self._now())
        return self._scheduler.in_flight() == 0

    def last_prompt(self) -> dict[str, Any] | None:
        """What the model saw in this session's last decide request and what it answered (GET /v1/prompt),
        for a debug overlay or a bug report. It blocks for one HTTP round trip: call it on demand, not every
        frame. None when there is nothing yet or the service cannot say; it never raises."""
        path = f"/v1/prompt?{urlencode({'client_id': self.client_id})}"
        try:
            status, payload, _ = self._transport.call(
                "GET", path, self._scheduler.headers(), MAX_PROMPT_BYTES, "MAX_PROMPT_BYTES"
            )
        except Exception as e:  # the service is down: a debug view must not break the game
            log.debug("last_prompt: %s", e)
            return None
        if status != 200 or not isinstance(payload, dict) or too_large(payload):
            log.debug("last_prompt: %s %s", status, str(payload)[:300])  # past MAX_PROMPT_BYTES, or none yet
            return None
        return payload

    def close(self) -> None:
        """Stop the workers and close the connection, without waiting for answers (a game that quits must
        not hang on a slow service; call ``wait()`` first to keep them)."""
        self._closed = True
        self._transport.close()

    def __enter__(self) -> DecideClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- between the scheduler and the transport ----------------------------------------------------

    def _apply(self, now_ms: float) -> None:
        """Apply what came, in order, up to TICK_STREAM_BYTES of streamed bytes a tick (the rest waits for the
        next frame, so a flood of lines never holds one); what comes of a stream the scheduler ended is dropped."""
        self._backlog.extend(self._transport.outcomes())
        room = TICK_STREAM_BYTES
        while self._backlog and room > 0:
            done = self._backlog.popleft()
            if isinstance(done, Chunk | End) and done.ref in self._stopped:
                if isinstance(done, End):
                    self._stopped.discard(done.ref)
                continue
            if isinstance(done, Chunk):  # a streamed answer's bytes: each line they complete is applied now
                room -= max(len(done.data), MIN_CHUNK_BYTES)
                if not self._scheduler.chunk(done.ref, done.data, now_ms):
                    self._stopped.add(done.ref)
                    self._transport.stop(done.ref)
            elif isinstance(done, End):
                self._scheduler.end(done.ref, now_ms, done.failed, done.why)
            elif done.answer is not None:
                status, body, headers = done.answer
                self._scheduler.answer(done.ref, status, body, headers, now_ms)
            else:
                self._scheduler.fail(done.ref, done.failed, now_ms, done.why)

    def _send(self, r: Request) -> None:
        raw = None if r.body is None else self._encode(r, r.body)
        if r.body is not None and raw is None:
            self._scheduler.dropped(r.ref)
            return
        self._transport.send(r.ref, r.method, r.path, raw, r.headers, r.after, r.stream)

    def _encode(self, r: Request, body: dict[str, Any]) -> bytes | None:
        """The request's body as JSON; an entity that is not JSON is left out and named once; None when
        nothing is left to send."""
        try:
            return encode(body)
        except (TypeError, ValueError):
            pass
        say = self._scheduler.say
        kept, bad = [], set()
        for item in body.get("entities", []):
            try:
                encode(item)
                kept.append(item)
            except (TypeError, ValueError) as exc:
                bad.add(item["id"])
                say(f"encode:{item['id']}", f"{item['type']} {item['id']!r} cannot be sent as JSON ({exc}): left out")
        body["entities"] = kept
        self._scheduler.left_out(r.ref, bad)
        if not (kept or body.get("removed") or body.get("scene")):
            return None
        try:
            return encode(body)
        except (TypeError, ValueError) as exc:
            say(f"encode:{exc}", f"a request cannot be sent as JSON ({exc}): skipped")
            return None
