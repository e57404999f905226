/** The game's own state and rules: positions, health, stings and swats. Nothing here knows npcmind. */

export const WIDTH = 960;
export const HEIGHT = 600;
export const HIVE = { x: 760, y: 300 };
export const PLAYER_START = { x: 160, y: 300 };
export const BEE_SIGHT = 200; // the manifest's perception_radius of a bee
export const QUEEN_SIGHT = 250;
const BEE_HIT = 0.25;
const QUEEN_HIT = 0.06;
const STING = 0.03;
// a bee heals at once, not a little every second: its health, which the model sees, changes once and then
// holds, so that a scene at rest repeats and the cache answers it
const HEAL_AFTER = 10;

/** Where a decision came from (sources.ts gives each its colour and word). */
export type Source = "AI" | "cached" | "local" | "native";

/** What a character does now and why; `code` is the fallback's code when the native AI runs; `ms`: how long
 * after its request was sent its decision's line arrived (streamed: each entity's own time), when known. */
export interface Doing {
  action: string;
  source: Source;
  code: string | null;
  ms: number | null;
}

export interface Vec {
  x: number;
  y: number;
}

/** A worker bee: fast, fragile, in a swarm. */
export interface Bee extends Vec {
  id: string;
  swarm: string;
  slot: number;
  hp: number;
  doing: Doing;
  stingReady: number;
  alerted: number;
  hitAt: number; // game time of its last hit: a bee left alone for HEAL_AFTER seconds is whole again
  wanderAngle: number;
}

/** The queen: slow, tough, calls help when hurt (if her brain tells her to retreat). */
export interface Queen extends Vec {
  id: string;
  hp: number;
  doing: Doing;
  callingHelp: boolean;
}

/** A swarm: a parent with no body; its decision shapes how its bees chase. */
export interface Swarm {
  id: string;
  doing: Doing;
  wave: number;
  respawnAt: number | null;
}

/** The one character the keyboard moves. */
export interface Player extends Vec {
  hp: number;
  swatReady: number;
  swatShown: number;
}

/** Something the rules made happen this step, for npcmind: events and reports. */
export type Happening =
  | { kind: "hit"; bee: string }
  | { kind: "died"; bee: string; near: string[] }
  | { kind: "stung"; bee: string }
  | { kind: "escaped"; bee: string }
  | { kind: "queen-hit" }
  | { kind: "player-died" };

const native = (action: string): Doing => ({ action, source: "native", code: null, ms: null });

/** Everything on the field. */
export class World {
  player: Player = { ...PLAYER_START, hp: 1, swatReady: 0, swatShown: 0 };
  bees: Bee[] = [];
  queen: Queen = { id: "queen", x: HIVE.x, y: HIVE.y, hp: 1, doing: native("idle"), callingHelp: false };
  swarms: Swarm[] = [
    { id: "swarm-a", doing: native("each bee alone"), wave: 0, respawnAt: null },
    { id: "swarm-b", doing: native("each bee alone"), wave: 0, respawnAt: null },
  ];
  time = 0;
  round = 1;

  constructor() {
    for (const s of this.swarms) this.spawn(s);
  }

  /** A new wave of six bees for a swarm, with ids never used before (a dead bee's id is not reused). */
  spawn(s: Swarm): void {
    s.wave += 1;
    s.respawnAt = null;
    const side = s.id === "swarm-a" ? -1 : 1;
    for (let i = 0; i < 6; i++) {
      const a = (i / 6) * Math.PI * 2;
      this.bees.push({
        id: `${s.id.slice(-1)}${s.wave}-${i}`, swarm: s.id, slot: i, hp: 1, doing: native("wander"), stingReady: 0,
        alerted: 0, hitAt: 0, wanderAngle: a, x: HIVE.x - 60 + Math.cos(a) * 30, y: HIVE.y + side * 110 + Math.sin(a) * 30,
      });
    }
  }

  /** The living bees of a swarm: its size, and who its decision moves. */
  membersOf(swarm: string): Bee[] {
    return this.bees.filter((b) => b.swarm === swarm);
  }

  /** The player swats: every bee within reach is hit, the queen too. */
  swat(out: Happening[]): void {
    const p = this.player;
    if (this.time < p.swatReady) return;
    p.swatReady = this.time + 0.5;
    p.swatShown = this.time + 0.15;
    for (const b of [...this.bees]) {
      if (dist(b, p) > 42) continue;
      b.hp = Math.max(0, b.hp - BEE_HIT);
      b.hitAt = this.time;
      if (b.hp > 0) {
        out.push({ kind: "hit", bee: b.id });
        continue;
      }
      this.bees = this.bees.filter((x) => x !== b);
      const near = this.bees.filter((x) => dist(x, b) <= BEE_SIGHT).map((x) => x.id);
      out.push({ kind: "died", bee: b.id, near });
    }
    if (dist(this.queen, p) <= 50 && this.queen.hp > 0) {
      this.queen.hp = Math.max(0.05, this.queen.hp - QUEEN_HIT);
      out.push({ kind: "queen-hit" });
    }
  }

  /** Stings, escapes, healing, respawns: the rules of one step of `dt` game seconds. */
  rules(dt: number, out: Happening[]): void {
    this.time += dt;
    const p = this.player;
    for (const b of this.bees) {
      b.alerted = Math.max(0, b.alerted - dt);
      if (b.doing.action === "chase" && dist(b, p) < 16 && this.time >= b.stingReady) {
        b.stingReady = this.time + 1.2;
        p.hp = Math.max(0, p.hp - STING);
        out.push({ kind: "stung", bee: b.id });
      }
      if (b.doing.action === "flee" && dist(b, p) > BEE_SIGHT * 1.3) out.push({ kind: "escaped", bee: b.id });
      if (b.hp < 1 && b.doing.action !== "chase" && this.time - b.hitAt >= HEAL_AFTER) b.hp = 1;
    }
    const q = this.queen;
    if (dist(q, HIVE) < 30) q.hp = Math.min(1, q.hp + dt * 0.03); // the nest heals her
    q.callingHelp = q.doing.action === "flee" && q.hp < 0.5 && q.doing.source !== "native";
    if (q.callingHelp) for (const b of this.bees) b.alerted = 2; // her call: every bee comes for the player
    for (const s of this.swarms) {
      if (this.membersOf(s.id).length > 0) continue;
      if (s.respawnAt === null) s.respawnAt = this.time + 6;
      else if (this.time >= s.respawnAt) this.spawn(s);
    }
    if (p.hp <= 0) {
      out.push({ kind: "player-died" });
      this.round += 1;
      Object.assign(p, { ...PLAYER_START, hp: 1 });
    }
  }
}

/** Distance between two points. */
export function dist(a: Vec, b: Vec): number {
  return Math.hypot(a.x - b.x, a.y - b.y);
}

/** Move `m` toward `to` by at most `speed * dt`, kept on the field. */
export function moveToward(m: Vec, to: Vec, speed: number, dt: number): void {
  const d = dist(m, to);
  if (d > 0.5) {
    const k = Math.min(1, (speed * dt) / d);
    m.x += (to.x - m.x) * k;
    m.y += (to.y - m.y) * k;
  }
  m.x = Math.max(8, Math.min(WIDTH - 8, m.x));
  m.y = Math.max(8, Math.min(HEIGHT - 8, m.y));
}
