/** The demo page: a forest, the player on the keyboard, two swarms and their queen deciding through npcmind.
 * Query parameters: `speed=N` runs game time N times faster (tests play a long game quickly),
 * `autopilot=1` lets the player move and swat by itself. */

import { Brain } from "./brain.js";
import { Game } from "./game.js";
import type { Placed } from "./labels.js";
import { showCounters, showState } from "./overlay.js";
import { Plot } from "./plot.js";
import { draw } from "./render.js";
import { ServiceWatch } from "./service.js";
import { countBySource } from "./sources.js";
import { HEIGHT, WIDTH, dist, moveToward, World, type Vec } from "./world.js";

const params = new URLSearchParams(location.search);
const speed = Math.min(20, Math.max(0.1, Number(params.get("speed") ?? "1") || 1));
const autopilot = params.get("autopilot") === "1";
const base = location.origin;
const clientId = `demo-${Math.random().toString(36).slice(2, 8)}`;

const world = new World();
const brain = new Brain(base, clientId, { world: { player_hp_fraction: 1, repellent: false }, scope: "forest_boss", scopeState: { boss_phase: 1 } });
const npc = brain.npc;
const game = new Game(world, brain);
const watch = new ServiceWatch(base);
const plot = new Plot();
const held = new Set<string>();
let swatAsked = false;
const KEYS: Record<string, [number, number]> = {
  ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1],
  KeyA: [-1, 0], KeyD: [1, 0], KeyW: [0, -1], KeyS: [0, 1],
};

addEventListener("keydown", (e) => {
  if (e.code in KEYS || e.code === "Space") e.preventDefault();
  if (e.code === "Space") swatAsked = true;
  held.add(e.code);
});
addEventListener("keyup", (e) => held.delete(e.code));

/** The player moves by the keys held, or by itself on autopilot: at the nearest enemy, swatting when close. */
function steer(dt: number): boolean {
  const p = world.player;
  let [dx, dy] = [0, 0];
  for (const k of held) {
    const v = KEYS[k];
    if (v) [dx, dy] = [dx + v[0], dy + v[1]];
  }
  if (dx || dy) moveToward(p, { x: p.x + dx * 100, y: p.y + dy * 100 }, 150, dt);
  else if (autopilot) {
    const enemies = [...world.bees, world.queen];
    const near = enemies.reduce((a, b) => (dist(a, p) <= dist(b, p) ? a : b));
    moveToward(p, near, 120, dt);
    return dist(near, p) < 40;
  }
  const swat = swatAsked;
  swatAsked = false;
  return swat;
}

const canvas = document.getElementById("field") as HTMLCanvasElement;
const g = canvas.getContext("2d") as CanvasRenderingContext2D;
const plotDecisions = (document.getElementById("plot-decisions") as HTMLCanvasElement).getContext("2d") as CanvasRenderingContext2D;
const plotTokens = (document.getElementById("plot-tokens") as HTMLCanvasElement).getContext("2d") as CanvasRenderingContext2D;
const link = document.getElementById("seen") as HTMLAnchorElement;
link.href = `/?client_id=${encodeURIComponent(clientId)}`;
link.textContent = `what the model saw (client_id ${clientId})`;
let pointer: Vec | null = null; // in field coordinates: the canvas may be drawn smaller than the field
canvas.addEventListener("mousemove", (e) => {
  const r = canvas.getBoundingClientRect();
  pointer = { x: ((e.clientX - r.left) / r.width) * WIDTH, y: ((e.clientY - r.top) / r.height) * HEIGHT };
});
canvas.addEventListener("mouseleave", () => (pointer = null));
let last = performance.now();
let shown = 0;
let labels: Placed[] = [];

function frame(now: number): void {
  const dt = Math.min(0.05, (now - last) / 1000) * speed;
  last = now;
  const steps = Math.ceil(dt / 0.05); // fast play in steps no longer than a normal frame's
  for (let i = 0; i < steps; i++) game.step(dt / steps, steer(dt / steps));
  labels = draw(g, world, watch.state.model === "scripted", pointer);
  showState(document, watch.state, countBySource([...world.bees.map((b) => b.doing), world.queen.doing]));
  if (plot.sample(now, npc.stats, brain.unanswered, watch.state)) {
    plot.drawDecisions(plotDecisions);
    plot.drawTokens(plotTokens);
  }
  if (now - shown > 250) {
    shown = now;
    showCounters(document, npc.stats, game.sent, watch.state);
  }
  requestAnimationFrame(frame);
}

/** What the tests read: every character's action and its source, the counters, the service as seen, the
 * labels as drawn and the plot's samples. */
function snapshot(): Record<string, unknown> {
  const who = (id: string, d: { action: string; source: string; code: string | null }) => ({ id, ...d });
  return {
    clientId, speed, time: world.time, round: world.round, epoch: npc.epoch,
    player: { x: world.player.x, y: world.player.y, hp: world.player.hp },
    bees: world.bees.map((b) => ({ ...who(b.id, b.doing), x: b.x, y: b.y, hp: b.hp })),
    queen: { ...who("queen", world.queen.doing), hp: world.queen.hp, callingHelp: world.queen.callingHelp },
    swarms: world.swarms.map((s) => who(s.id, s.doing)),
    stats: npc.stats, sent: game.sent, service: watch.state, mode: document.getElementById("mode")?.dataset["mode"] ?? null,
    field: { width: WIDTH, height: HEIGHT }, labels, plot: plot.samples,
  };
}

(window as unknown as { npcmindDemo: unknown }).npcmindDemo = { snapshot };
watch.start();
requestAnimationFrame(frame);
