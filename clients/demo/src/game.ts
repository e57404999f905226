/** One step of play: tell npcmind what each character sees, take its decision or the native AI's, move,
 * apply the rules, and send what happened back as events and reports so memory closes the loop. */

import type { Brain, Choice } from "./brain.js";
import { moveBee, moveQueen } from "./motion.js";
import { nativeBee, nativeQueen } from "./native.js";
import { BEE_SIGHT, QUEEN_SIGHT, HIVE, dist, type Doing, type Happening, type World } from "./world.js";

const BEE_ACTIONS = ["idle", "wander", "chase", "flee"];
const QUEEN_ACTIONS = ["idle", "chase", "flee"];
const SWARM_ACTIONS = ["surround", "retreat"];
const ALONE = "each bee alone"; // a swarm has no native AI: without a decision its bees act one by one

/** `v` rounded to a multiple of `q` (to the hundredth: 0.05 * 3 is 0.15, not 0.15000000000000002). */
function step(v: number, q: number): number {
  return Math.round(Math.round(v / q) * q * 100) / 100;
}

/** What was sent back to npcmind, for the overlay and the tests. */
export interface Sent {
  events: number;
  reports: number;
}

/** The game's side of npcmind: one `step()` a frame. */
export class Game {
  readonly sent: Sent = { events: 0, reports: 0 };
  private readonly reported = new Set<string>(); // decision ids already reported: one outcome each

  private readonly npc: Brain["npc"];

  constructor(readonly world: World, readonly brain: Brain) {
    this.npc = brain.npc;
  }

  /** Advance the game by `dt` seconds of game time; `swat`: the player swats this step. */
  step(dt: number, swat: boolean): void {
    const w = this.world;
    this.tell();
    this.npc.tick();
    this.decide();
    for (const b of w.bees) moveBee(b, w, dt);
    moveQueen(w, dt);
    const out: Happening[] = [];
    if (swat) w.swat(out);
    w.rules(dt, out);
    for (const h of out) this.happened(h);
  }

  private tell(): void {
    const w = this.world;
    const p = w.player;
    Object.assign(this.npc.world, { player_hp_fraction: p.hp, repellent: false });
    for (const s of w.swarms) {
      const size = w.membersOf(s.id).length;
      if (size > 0) this.npc.track(s.id, "swarm", { size }, SWARM_ACTIONS);
    }
    for (const b of w.bees) {
      const d = dist(b, p);
      const obs = { hp_fraction: b.hp, distance_to_player: d, sees_player: d < BEE_SIGHT || b.alerted > 0, current_action: b.doing.action };
      this.npc.track(b.id, "bee", obs, BEE_ACTIONS, { position: [b.x, b.y], parent: b.swarm });
    }
    const q = w.queen;
    const dq = dist(q, p);
    // the manifest gives the boss no quanta: the game tells her health and distance in steps (a bee's are the
    // manifest's), so that a scene at rest repeats in what the model sees and the cache can answer it
    const qObs = { hp_fraction: step(q.hp, 0.05), distance_to_player: step(dq, 10), sees_player: dq < QUEEN_SIGHT, current_action: q.doing.action };
    this.npc.track(q.id, "boss", qObs, QUEEN_ACTIONS, { position: [q.x, q.y], profile: "queen_bee" });
    this.npc.observe("player", "player", { hp_fraction: p.hp }, [p.x, p.y]);
  }

  private doing(id: string, native: string): Doing {
    const c: Choice | null = this.npc.action(id);
    if (c !== null) {
      const source = c.source === "local" ? "local" : c.cached ? "cached" : "AI";
      return { action: c.action, source, code: null, ms: source === "local" ? null : this.brain.arrivalOf(id) };
    }
    return { action: native, source: "native", code: this.brain.fallbackOf(id), ms: null };
  }

  private decide(): void {
    const w = this.world;
    for (const s of w.swarms) s.doing = w.membersOf(s.id).length ? this.doing(s.id, ALONE) : { action: ALONE, source: "native", code: "no bees", ms: null };
    for (const b of w.bees) b.doing = this.doing(b.id, nativeBee(b, w));
    const before = w.queen.doing.action;
    w.queen.doing = this.doing(w.queen.id, nativeQueen(w.queen, w));
    if (before === "flee" && w.queen.doing.action === "flee" && dist(w.queen, HIVE) < 30) this.report("queen", "done", "reached the nest");
  }

  private happened(h: Happening): void {
    switch (h.kind) {
      case "hit":
        this.report(h.bee, "interrupted", "hit by the player");
        this.event(h.bee, "hit");
        return;
      case "died":
        this.report(h.bee, "failed", "killed by the player");
        this.npc.untrack(h.bee);
        this.brain.forget(h.bee);
        for (const id of h.near) this.event(id, "ally_died");
        return;
      case "stung":
        this.report(h.bee, "done", "stung the player");
        return;
      case "escaped":
        this.report(h.bee, "done", "got away from the player");
        return;
      case "queen-hit":
        this.report("queen", "interrupted", "hit by the player");
        return;
      case "player-died":
        this.npc.epoch = this.npc.epoch + 1; // a new round: decisions made for the last one no longer hold
    }
  }

  private event(id: string, trigger: string): void {
    if (this.npc.event(id, trigger)) this.sent.events += 1;
  }

  private report(id: string, outcome: "done" | "failed" | "interrupted", detail: string): void {
    const decision = this.npc.action(id)?.decisionId;
    if (!decision || this.reported.has(decision)) return;
    if (this.reported.size > 10_000) this.reported.clear(); // a long game: old decisions are long gone
    if (this.npc.report(id, outcome, detail)) {
      this.reported.add(decision);
      this.sent.reports += 1;
    }
  }
}
