/** How each action moves a character; a swarm's decision changes where its chasing bees go. */

import { HEIGHT, HIVE, WIDTH, dist, moveToward, type Bee, type Vec, type World } from "./world.js";

const BEE_SPEED = 95;
const QUEEN_SPEED = 55;

/** Where a chasing bee heads: straight at the player, or, when its swarm surrounds, its place on a ring
 * around the player that tightens and opens so the whole swarm stings together. */
function chaseTarget(b: Bee, w: World): Vec {
  const swarm = w.swarms.find((s) => s.id === b.swarm);
  if (swarm?.doing.action !== "surround") return w.player;
  const members = w.membersOf(b.swarm);
  const k = members.indexOf(b);
  const offset = b.swarm === "swarm-a" ? 0 : Math.PI / members.length;
  const a = (k / Math.max(1, members.length)) * Math.PI * 2 + offset + w.time * 0.4;
  const r = 34 + 26 * Math.sin(w.time * 1.6);
  return { x: w.player.x + Math.cos(a) * r, y: w.player.y + Math.sin(a) * r };
}

// where a fleeing bee heads: open ground along the edges' middles, never a corner, and the hive
const REFUGES: readonly Vec[] = [HIVE, { x: WIDTH / 2, y: 70 }, { x: WIDTH / 2, y: HEIGHT - 70 }, { x: 90, y: HEIGHT / 2 }, { x: WIDTH - 90, y: HEIGHT / 2 }];

/** A fleeing bee's refuge: the one that takes it furthest from the player for the least flight (a bee pushed
 * to a wall slides along it to the next refuge instead of pinning itself in a corner). */
function refuge(b: Bee, player: Vec): Vec {
  const worth = (r: Vec): number => dist(r, player) - 0.6 * dist(r, b);
  return REFUGES.reduce((a, r) => (worth(r) > worth(a) ? r : a));
}

/** A bee's own place near a point, by its slot in its wave: bees fleeing to one refuge gather round it instead of
 * stacking on one pixel. */
function spread(at: Vec, slot: number): Vec {
  const a = (slot / 6) * Math.PI * 2;
  return { x: at.x + Math.cos(a) * 22, y: at.y + Math.sin(a) * 22 };
}

/** Move a bee one step by its current action. */
export function moveBee(b: Bee, w: World, dt: number): void {
  const swarm = w.swarms.find((s) => s.id === b.swarm);
  switch (b.doing.action) {
    case "chase":
      moveToward(b, chaseTarget(b, w), BEE_SPEED * (swarm?.doing.action === "surround" ? 1.2 : 1), dt);
      return;
    case "flee":
      moveToward(b, spread(refuge(b, w.player), b.slot), BEE_SPEED * 1.1, dt);
      return;
    case "wander": {
      const home = swarm?.doing.action === "retreat" ? HIVE : { x: HIVE.x - 60, y: HIVE.y + (b.swarm === "swarm-a" ? -110 : 110) };
      b.wanderAngle += dt * (0.8 + (b.slot % 3) * 0.3);
      const to = { x: home.x + Math.cos(b.wanderAngle) * 60, y: home.y + Math.sin(b.wanderAngle * 1.3) * 40 };
      moveToward(b, to, BEE_SPEED * 0.5, dt);
      return;
    }
    default: // idle
  }
}

/** Move the queen one step by her current action: charge, retreat to the nest, or wait. */
export function moveQueen(w: World, dt: number): void {
  const q = w.queen;
  if (q.doing.action === "chase") moveToward(q, w.player, QUEEN_SPEED, dt);
  else if (q.doing.action === "flee") moveToward(q, HIVE, QUEEN_SPEED * 1.6, dt);
  else if (dist(q, HIVE) > 80) moveToward(q, HIVE, QUEEN_SPEED * 0.5, dt);
}
