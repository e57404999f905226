/** The game's own AI, which every character runs whenever npcmind gives no decision: it chases and flees by
 * itself, bee by bee. What it lacks is what a model adds: swarms that surround, a queen that retreats in time. */

import { BEE_SIGHT, QUEEN_SIGHT, dist, type Bee, type Queen, type World } from "./world.js";

/** A bee's own choice: flee when badly hurt, chase what it sees, else drift around the hive. */
export function nativeBee(b: Bee, w: World): string {
  const d = dist(b, w.player);
  if (b.hp < 0.3 && d < BEE_SIGHT) return "flee";
  return d < BEE_SIGHT || b.alerted > 0 ? "chase" : "wander";
}

/** The queen's own choice: she charges whatever comes close, and runs only when nearly dead. */
export function nativeQueen(q: Queen, w: World): string {
  if (q.hp < 0.2) return "flee";
  return dist(q, w.player) < QUEEN_SIGHT ? "chase" : "idle";
}
