/** The page playing itself until a key is pressed, so that a viewer who only watches sees within half a minute
 * every source at work: a tour of a minute of game time, again and again. It waits out of the bees' sight (the
 * scene at rest repeats exactly: the cache answers its second asking), fights (the model decides, the demo
 * learns its policy from those decisions, and the policy takes over as it is published), cuts the model and
 * fights on (what the cache and the policy do not give runs the native AI), and restores it. */

import { HEIGHT, HIVE, WIDTH, dist, moveToward, type Vec, type World } from "./world.js";

/** A part of the tour: from `from` seconds of its minute. */
export interface Leg {
  name: "fight" | "rest" | "cut";
  from: number;
  words: string;
}

export const TOUR: readonly Leg[] = [
  { name: "rest", from: 0, words: "waiting out of sight: the scene repeats" },
  { name: "fight", from: 10, words: "fighting: the demo learns" },
  { name: "cut", from: 30, words: "fighting, the model cut" },
  { name: "fight", from: 40, words: "fighting, the model back" },
  { name: "rest", from: 52, words: "resting out of sight" },
];
const MINUTE = 60;
const REST: Vec = { x: 130, y: 300 }; // out of every bee's sight of the hive's side, not a corner
const KEEP_OFF = 75; // from the hive and the queen: the player fights the swarms, not the nest
const SPEED = 120;

/** Where the tour is at game time `t`. */
export function legAt(t: number): Leg {
  const m = t % MINUTE;
  return TOUR.reduce((a, l) => (l.from <= m ? l : a));
}

/** Seconds of game time until the tour's next leg. */
export function untilNext(t: number): number {
  const m = t % MINUTE;
  const next = TOUR.find((l) => l.from > m);
  return (next ? next.from : MINUTE) - m;
}

/** A point `to`, moved out of the ring of `keep` around `c` (on the side it came from). */
function outside(to: Vec, c: Vec, keep: number): Vec {
  const d = dist(to, c);
  if (d >= keep) return to;
  if (d < 1) return { x: c.x - keep, y: c.y }; // on it: out on the side away from the hive
  const k = keep / d;
  return { x: c.x + (to.x - c.x) * k, y: c.y + (to.y - c.y) * k };
}

/** One step of the player on autopilot; true when it swats. In a fight it goes for the nearest bee that is
 * not fleeing (a fleeing one is left to get away), staying off the hive and the queen; at rest it waits. */
export function steer(w: World, dt: number): boolean {
  const p = w.player;
  if (legAt(w.time).name === "rest") {
    moveToward(p, REST, SPEED, dt);
    return false;
  }
  const foes = w.bees.filter((b) => b.doing.action !== "flee");
  const near = foes.reduce<Vec | null>((a, b) => (a === null || dist(b, p) < dist(a, p) ? b : a), null);
  let to: Vec = near ?? { x: HIVE.x - 220, y: HIVE.y };
  to = outside(outside(to, HIVE, KEEP_OFF), w.queen, KEEP_OFF);
  to = { x: Math.max(40, Math.min(WIDTH - 40, to.x)), y: Math.max(40, Math.min(HEIGHT - 40, to.y)) };
  moveToward(p, to, SPEED, dt);
  return w.bees.some((b) => dist(b, p) < 36);
}
