"""What the learned cascade saves: a simulated forest game, four phases, per 1,000 entity decisions.

Two swarms of bees and the queen fight a moving player; hits and deaths are events, dead bees come back, the
player's repellent comes and goes, and every AI decision is reported (`done`). The game runs on its own clock
(0.1 s a tick) for --minutes game minutes a phase, driven through `DecideClient`. The model is the scripted
provider as a *teacher* (its `rules`, set for every request): a fixed rule of the observation and the world in
most situations, a coin toss in the others (where a model would be unsure):

  bee    repellent on, or health < 0.3: flee; player not seen: wander; player within 60 px: chase;
         else a coin toss between chase and idle
  swarm  size 10: surround; size <= 7: retreat; else (8, 9) a coin toss
  boss   health < 0.5: flee; player seen: chase; else idle

Phases: (1) one call an entity, no decision cache (a naive client: the SDK with a batch of 1, the service
with NPCMIND_CACHE_ENTRIES=0), (2) npcmind's batches with the cache, (3) `distill` on phase 2's store,
(4) the learned cascade: phase 3's policy given to DecideClient as it is (`policy=Policy`, threshold 0.8),
the service for the rest. Agreement is measured against the teacher's rule on the situation as the entity was
asked, where the teacher does not toss a coin. The service runs in this process; its decision cache's clock
is the game's (else a game running faster than real time would keep cache entries for more game time than
their ttl_ms).

Run: python bench/cost_bench.py [--minutes 10] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "clients" / "python" / "src")]
import npcmind.shared.memory as shared_memory  # noqa: E402
import npcmind_client.scheduler as sdk_scheduler  # noqa: E402
from npcmind.config import Settings  # noqa: E402
from npcmind.distill.run import distill, read_rows, write  # noqa: E402
from npcmind.http.app import create_app  # noqa: E402
from npcmind.http.server import BackgroundServer  # noqa: E402
from npcmind.manifest import Manifest, load  # noqa: E402
from npcmind.sdk import DecideClient, DecideOptions  # noqa: E402
from npcmind.sdk.decide import Entity  # noqa: E402
from npcmind.service import Service  # noqa: E402
from npcmind.testing.scripted import ScriptedServer  # noqa: E402
from npcmind_client.policy import Policy  # noqa: E402

FOREST = ROOT / "examples" / "forest.yaml"
BEES = ["idle", "wander", "chase", "flee"]
DT = 0.1
THRESHOLD = 0.8
CLIENT = "forest-game"
RULES: list[dict[str, Any]] = [
    {"type": "bee", "when": {"world.repellent": True}, "choose": "flee"},
    {"type": "bee", "when": {"hp_fraction": {"lt": 0.3}}, "choose": "flee"},
    {"type": "bee", "when": {"sees_player": False}, "choose": "wander"},
    {"type": "bee", "when": {"distance_to_player": {"le": 60}}, "choose": "chase"},
    {"type": "bee", "toss": ["chase", "idle"]},
    {"type": "swarm", "when": {"size": {"ge": 10}}, "choose": "surround"},
    {"type": "swarm", "when": {"size": {"le": 7}}, "choose": "retreat"},
    {"type": "swarm", "toss": ["surround", "retreat"]},
    {"type": "boss", "when": {"hp_fraction": {"lt": 0.5}}, "choose": "flee"},
    {"type": "boss", "when": {"sees_player": True}, "choose": "chase"},
    {"type": "boss", "choose": "idle"},
]


def teacher(manifest: Manifest, e: Entity, world: dict[str, Any]) -> tuple[str | None, bool]:
    """The rule the scripted teacher follows, on the values as its prompt shows them: (action, coin toss?)."""
    o = manifest.types[e.type].fields.quantize(e.observation)
    w = manifest.world.quantize(world)
    if e.type == "bee":
        if w["repellent"] or o["hp_fraction"] < 0.3:
            return "flee", False
        if not o["sees_player"]:
            return "wander", False
        return ("chase", False) if o["distance_to_player"] <= 60 else (None, True)
    if e.type == "swarm":
        return ("surround", False) if o["size"] >= 10 else ("retreat", False) if o["size"] <= 7 else (None, True)
    return ("flee" if o["hp_fraction"] < 0.5 else "chase" if o["sees_player"] else "idle"), False


@dataclass
class Bee:
    """One bee of the simulation."""

    id: str
    swarm: int
    x: float
    y: float
    hp: float = 1.0
    action: str = "idle"


@dataclass
class Game:
    """The forest: the player walks a loop around the hive, bees act on their decisions."""

    rng: random.Random
    t: float = 0.0
    px: float = 0.0
    py: float = 0.0
    player_hp: float = 1.0
    queen_hp: float = 1.0
    queen_action: str = "idle"
    bees: dict[str, Bee] = field(default_factory=dict)
    dead: list[tuple[float, int]] = field(default_factory=list)  # respawn time, swarm
    born: int = 0
    events: list[tuple[str, str]] = field(default_factory=list)
    died: list[str] = field(default_factory=list)

    def spawn(self, swarm: int) -> None:
        """A new bee at its swarm's home."""
        hx = -120.0 if swarm == 0 else 120.0
        b = Bee(f"bee{self.born}", swarm, hx + self.rng.uniform(-20, 20), self.rng.uniform(-20, 20))
        self.born += 1
        self.bees[b.id] = b

    def repellent(self) -> bool:
        """On for 8 s of every 45."""
        return self.t % 45 < 8

    def world(self) -> dict[str, Any]:
        """What every request carries of the world."""
        return {"player_hp_fraction": round(self.player_hp, 3), "repellent": self.repellent()}

    def step(self) -> None:
        """One tick: the player moves, bees act, stings, hits, deaths and respawns."""
        self.t += DT
        angle = self.t / 8
        radius = 150 + 120 * math.sin(self.t / 7)
        self.px, self.py = radius * math.cos(angle), radius * math.sin(angle)
        self.player_hp = min(1.0, self.player_hp + 0.004 * DT)
        for b in list(self.bees.values()):
            self._move(b)
            b.hp = min(1.0, b.hp + 0.01 * DT)
            if b.action == "chase" and self._distance(b) < 30:
                self.player_hp = max(0.05, self.player_hp - 0.02 * DT)
                if self.rng.random() < 0.5 * DT:  # the player swats it
                    b.hp -= 0.35
                    if b.hp <= 0:
                        self._die(b)
                    else:
                        self.events.append((b.id, "hit"))
        self.queen_hp = min(1.0, max(0.0, self.queen_hp + (0.01 if math.hypot(self.px, self.py) > 80 else -0.05) * DT))
        while self.dead and self.dead[0][0] <= self.t:
            self.spawn(self.dead.pop(0)[1])

    def _die(self, b: Bee) -> None:
        del self.bees[b.id]
        self.died.append(b.id)
        self.dead.append((self.t + 6.0, b.swarm))
        self.events += [(o.id, "ally_died") for o in self.bees.values() if o.swarm == b.swarm][:3]

    def _distance(self, b: Bee) -> float:
        return math.hypot(b.x - self.px, b.y - self.py)

    def _move(self, b: Bee) -> None:
        d = self._distance(b) or 1.0
        if b.action == "chase":
            step = min(d, 40 * DT)
            b.x += (self.px - b.x) / d * step
            b.y += (self.py - b.y) / d * step
        elif b.action == "flee":
            b.x -= (self.px - b.x) / d * 50 * DT
            b.y -= (self.py - b.y) / d * 50 * DT
        elif b.action == "wander":
            hx = -120.0 if b.swarm == 0 else 120.0
            b.x += self.rng.uniform(-30, 30) * DT + (hx - b.x) * 0.05 * DT
            b.y += self.rng.uniform(-30, 30) * DT - b.y * 0.05 * DT

    def entities(self) -> list[tuple[str, str, dict[str, Any], list[str], str | None]]:
        """Every deciding entity now: id, type, observation, legal actions, profile."""
        out: list[tuple[str, str, dict[str, Any], list[str], str | None]] = []
        for b in self.bees.values():
            d = self._distance(b)
            sees = d < 200
            obs = {"hp_fraction": round(max(0.0, b.hp), 4), "distance_to_player": round(d, 1), "sees_player": sees,
                   "current_action": b.action}  # fmt: skip
            out.append((b.id, "bee", obs, BEES if sees else ["idle", "wander", "flee"], None))
        for s in (0, 1):
            size = sum(1 for b in self.bees.values() if b.swarm == s)
            out.append((f"swarm{s}", "swarm", {"size": size}, ["surround", "retreat"], None))
        qd = math.hypot(self.px, self.py)
        queen = {"hp_fraction": round(self.queen_hp, 2), "distance_to_player": round(qd, 1),
                 "sees_player": qd < 180, "current_action": self.queen_action}  # fmt: skip
        out.append(("queen", "boss", queen, ["idle", "chase", "flee"], "queen_bee"))
        return out

    def act(self, entity_id: str, action: str) -> None:
        """Carry out a decision (the game's native AI: keep doing what it did)."""
        if entity_id in self.bees:
            self.bees[entity_id].action = action
        elif entity_id == "queen":
            self.queen_action = action


@dataclass
class Tally:
    """What a phase counted, over the entity decisions it made (each new choice the game saw)."""

    agree: int = 0
    judged: int = 0
    decisions: int = 0
    coin: int = 0  # decisions in a situation where the teacher tosses a coin
    coin_local: int = 0  # of those, the local policy's


def use_game_clock(clock: list[float]) -> None:
    """The decision cache's clock becomes the game's: its entries live ttl_ms of game time."""
    shim = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if not k.startswith("_")})
    shim.monotonic = lambda: clock[0]
    shared_memory.time = shim  # type: ignore[assignment]


def play(url: str, minutes: float, seed: int, manifest: Manifest, policy: Policy | None) -> tuple[DecideClient, Tally]:
    """One phase of the game through DecideClient; the client (its stats) and what was tallied."""
    rng = random.Random(seed)
    game = Game(rng)
    for s in (0, 1):
        for _ in range(10):
            game.spawn(s)
    clock = [0.0]
    tally = Tally()
    options = DecideOptions(world=game.world(), epoch=1, policy=policy, threshold=THRESHOLD, timeout_ms=60_000)
    client = DecideClient(url, CLIENT, options=options, clock=lambda: clock[0])
    seen: dict[str, Any] = {}
    use_game_clock(clock)
    for _ in range(int(minutes * 60 / DT)):
        clock[0] += DT
        game.step()
        for eid in game.died:
            client.untrack(eid)
        game.died.clear()
        client.world = game.world()
        for eid, typ, obs, legal, profile in game.entities():
            client.track(eid, typ, obs, legal, profile=profile)
        for eid, trigger in game.events:
            client.event(eid, trigger)
        game.events.clear()
        client.tick()
        client.wait(timeout_ms=60_000)
        _judge(client, game, tally, seen, manifest)
    client.wait(timeout_ms=60_000)
    return client, tally


def _judge(client: DecideClient, game: Game, tally: Tally, seen: dict[str, Any], manifest: Manifest) -> None:
    """Each new decision: carried out, reported (AI), and compared with the teacher on what it was asked on:
    the situation now, as the game does not move between its tick and here (``wait()`` applied the answers)."""
    world = client.world
    for eid, typ, obs, legal, profile in game.entities():
        c = client.action(eid)
        if c is None or seen.get(eid) is c:
            continue
        seen[eid] = c
        game.act(eid, c.action)
        if c.decision_id is not None:
            client.report(eid, "done")
        want, coin = teacher(manifest, Entity(eid, typ, obs, legal, profile=profile), world)
        tally.decisions += 1
        tally.coin += coin
        tally.coin_local += coin and c.source == "local"
        if not coin:
            tally.judged += 1
            tally.agree += c.action == want


def start(scripted_url: str, store: str, **settings: Any) -> tuple[Service, BackgroundServer]:
    """The service as `npcmind serve` builds it, on a real port of this process."""
    service = Service(Settings(manifest=str(FOREST), store=store, provider="openai", base_url=scripted_url,
                               model="scripted", activity_s=0, **settings))  # fmt: skip
    return service, BackgroundServer(create_app(service)).start()


def counters(service: Service) -> tuple[float, float]:
    """Provider calls that answered and input tokens, so far."""
    calls = tokens = 0.0
    for (name, labels), v in service.metrics.counts().items():
        if name == "npcmind_provider_calls_total" and dict(labels).get("outcome", "ok") == "ok":
            calls += v
        elif name == "npcmind_input_tokens_total":
            tokens += v
    return calls, tokens


@dataclass
class Row:
    """One phase's line of the table."""

    name: str
    decisions: int
    calls: float
    tokens: float
    model: int
    cache: int
    local: int
    native: int
    agreement: float
    coin_share: float
    coin_coverage: float | None


def run_phase(name: str, scripted: ScriptedServer, store: str, minutes: float, seed: int, manifest: Manifest,
              policy: Policy | None = None, **settings: Any) -> Row:  # fmt: skip
    """Start a service, play, stop; the phase's figures."""
    scripted.set(rules=RULES, seed=seed)
    service, server = start(scripted.base_url, store, **settings)
    try:
        client, tally = play(server.url, minutes, seed, manifest, policy)
        calls, tokens = counters(service)
        s = client.stats
        client.close()
    finally:
        server.stop()
    native = sum(s.fallbacks.values())
    n = s.ai + s.local + native
    coverage = tally.coin_local / tally.coin if policy is not None and tally.coin else None
    return Row(name, n, calls, tokens, s.ai - s.cached, s.cached, s.local, native,
               tally.agree / max(tally.judged, 1), tally.coin / max(tally.decisions, 1), coverage)  # fmt: skip


def table(rows: list[Row], distilled: str) -> str:
    """The figures per 1,000 entity decisions (phase 3 plays no game: what it did, in words)."""
    head = ("| phase | entity decisions | model calls | input tokens | by the model | from the cache | local policy "
            "| native fallback | agreement (no coin toss) | coin-toss decisions |")  # fmt: skip
    out = [head, "|" + "---|" * 10]
    for r in rows:
        if r.name.startswith("4"):
            out.append(f"| 3 distill from phase 2's store | {distilled} |" + " — |" * 8)
        k = 1000 / max(r.decisions, 1)
        out.append(
            f"| {r.name} | {r.decisions:,} | {r.calls * k:,.1f} | {r.tokens * k:,.0f} | {r.model * k:,.0f} | "
            f"{r.cache * k:,.0f} | {r.local * k:,.0f} | {r.native * k:,.0f} | {r.agreement:.1%} | {r.coin_share:.0%} |"
        )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0, help="game minutes a phase (default 10)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    for name in ("httpx", "npcmind"):  # a line a request would bury the table
        logging.getLogger(name).setLevel(logging.WARNING)
    tmp = Path(tempfile.mkdtemp(prefix="npcmind-cost-bench-"))
    manifest = load(FOREST)
    rows: list[Row] = []
    t0 = time.perf_counter()
    with ScriptedServer() as scripted:
        sdk_scheduler.BATCH = 1  # phase 1: the naive client, one entity a call, and no decision cache
        rows.append(run_phase("1 one call an entity", scripted, f"sqlite:///{tmp}/p1.db", args.minutes, args.seed,
                              manifest, cache_entries=0))  # fmt: skip
        sdk_scheduler.BATCH = 16
        store2 = f"sqlite:///{tmp}/p2.db"
        rows.append(run_phase("2 npcmind, batches + cache", scripted, store2, args.minutes, args.seed, manifest))
        print(f"phases 1-2 in {time.perf_counter() - t0:.0f} s; phase 3: distill from phase 2's store", flush=True)
        t3 = time.perf_counter()
        result = distill(read_rows(store2, CLIENT, None), CLIENT, manifest, None, sys.stderr)
        print("\n".join(result.lines))
        assert result.policy is not None, "phase 2 left too few decisions to distill: play more --minutes"
        size = write(result.policy, str(tmp / "policy.json"))
        learnt = sum(r.decisions for r in result.reports)
        distilled = f"{learnt:,} learnt in {time.perf_counter() - t3:.1f} s, a file of {size:,} bytes"
        print(f"distill: {distilled} ({tmp / 'policy.json'})", flush=True)
        policy = Policy.load(tmp / "policy.json", manifest_version=manifest.version)
        row4 = run_phase("4 learned cascade", scripted, f"sqlite:///{tmp}/p4.db", args.minutes, args.seed + 1,
                         manifest, policy)  # fmt: skip
        rows.append(row4)
    print()
    print(table(rows, distilled))
    p1, p4 = rows[0], row4
    free = (p4.cache + p4.local) / max(p4.decisions, 1)
    ratio = (p4.tokens / max(p4.decisions, 1)) / max(p1.tokens / max(p1.decisions, 1), 1e-9)
    print()
    print(f"phase 4: {free:.1%} of entity decisions without a model call (target >= 60%), agreement "
          f"{p4.agreement:.1%} where the teacher does not toss a coin (target >= 95%)")  # fmt: skip
    print(f"input tokens an entity decision, phase 4 / phase 1: {ratio:.3f} (target <= 0.1)")
    cov = p4.coin_coverage
    print(f"local policy's coverage of coin-toss situations: {'-' if cov is None else f'{cov:.1%}'} (target < 20%)")
    print(f"all phases in {time.perf_counter() - t0:.0f} s ({args.minutes:g} game minutes a phase, seed {args.seed})")
    print(json.dumps({"free": free, "agreement": p4.agreement, "token_ratio": ratio, "coin_coverage": cov}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
