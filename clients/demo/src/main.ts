/** The demo page: a forest, the player on the keyboard, two swarms and their queen deciding through npcmind.
 * Until a key is pressed the page plays itself (autopilot.ts: a minute's tour of every source); query
 * parameters: `autopilot=0` starts on the keyboard, `speed=N` runs game time N times faster (tests play a long
 * game quickly), `client_id=ID` names the game to npcmind (else one kept in this browser's localStorage, so a
 * policy published for it applies on the next visit too). */

import { legAt, steer as autoSteer, untilNext } from "./autopilot.js";
import { Brain } from "./brain.js";
import { Game } from "./game.js";
import type { Placed } from "./labels.js";
import { costOf, learnedWords, showCost, showCounters, showState } from "./overlay.js";
import { decidedSoFar, Plot } from "./plot.js";
import { draw } from "./render.js";
import { ServiceWatch } from "./service.js";
import { countBySource, SOURCES } from "./sources.js";
import { HEIGHT, WIDTH, moveToward, World, type Source, type Vec } from "./world.js";

const params = new URLSearchParams(location.search);
const speed = Math.min(20, Math.max(0.1, Number(params.get("speed") ?? "1") || 1));
let autopilot = params.get("autopilot") !== "0";
let tourCuts = autopilot; // the tour cuts and restores the model until the button is used by hand
const base = location.origin;
const clientId = pageClient();

/** The page's client id: the query's, else the one this browser keeps, else a new one kept from now on. */
function pageClient(): string {
  const given = params.get("client_id");
  if (given) return given;
  let kept: string | null = null;
  try {
    kept = localStorage.getItem("npcmind-demo-client");
    if (!kept) localStorage.setItem("npcmind-demo-client", (kept = `demo-${Math.random().toString(36).slice(2, 8)}`));
  } catch {
    // storage refused (a private window's policy): a new id for this visit
  }
  return kept ?? `demo-${Math.random().toString(36).slice(2, 8)}`;
}

const world = new World();
const watch = new ServiceWatch(base, clientId);
const brain = new Brain(base, clientId, () => watch.state.policy !== null, {
  world: { player_hp_fraction: 1, repellent: false }, scope: "forest_boss", scopeState: { boss_phase: 1 },
});
const npc = brain.npc;
const game = new Game(world, brain);
const plot = new Plot();
const held = new Set<string>();
const firsts: Partial<Record<Source, number>> = {}; // game time each source's counter first counted
let swatAsked = false;
const KEYS: Record<string, [number, number]> = {
  ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1],
  KeyA: [-1, 0], KeyD: [1, 0], KeyW: [0, -1], KeyS: [0, 1],
};

addEventListener("keydown", (e) => {
  if (e.code in KEYS || e.code === "Space") e.preventDefault();
  if (e.code === "Space") swatAsked = true;
  if (e.code in KEYS || e.code === "Space") autopilot = tourCuts = false; // the player is the viewer's now
  held.add(e.code);
});
addEventListener("keyup", (e) => held.delete(e.code));

const cutButton = document.getElementById("cut") as HTMLButtonElement;
cutButton.addEventListener("click", () => {
  tourCuts = false;
  void watch.cutModel(!watch.state.cut);
});

/** The player moves by the keys held, or by itself on autopilot. */
function steer(dt: number): boolean {
  if (autopilot) return autoSteer(world, dt);
  const p = world.player;
  let [dx, dy] = [0, 0];
  for (const k of held) {
    const v = KEYS[k];
    if (v) [dx, dy] = [dx + v[0], dy + v[1]];
  }
  if (dx || dy) moveToward(p, { x: p.x + dx * 100, y: p.y + dy * 100 }, 150, dt);
  const swat = swatAsked;
  swatAsked = false;
  return swat;
}

/** The tour's model: cut in its leg for it, restored after (asked again while the service says otherwise). */
function tour(): void {
  const st = watch.state;
  if (!tourCuts || !st.up || st.provider === "none") return;
  const cut = legAt(world.time).name === "cut";
  if (cut !== st.cut && !cutting) {
    cutting = true;
    void watch.cutModel(cut).finally(() => (cutting = false));
  }
}
let cutting = false;

/** The control and the line under it: what the button does, and where the tour is. */
function showControl(): void {
  const st = watch.state;
  cutButton.disabled = !st.up || st.provider === "none";
  const label = st.cut ? "Restore the model" : "Cut the model";
  if (cutButton.textContent !== label) cutButton.textContent = label;
  const leg = legAt(world.time);
  const words = autopilot
    ? `Autopilot, ${leg.words} (${Math.ceil(untilNext(world.time) / speed)} s); a key takes over.`
    : "You play: arrows or WASD move, Space swats.";
  const el = document.getElementById("tour");
  if (el && el.textContent !== words) el.textContent = words;
  const learned = document.getElementById("learned");
  const text = learnedWords(st, npc.stats.local);
  if (learned && learned.textContent !== text) learned.textContent = text;
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
  tour();
  const sofar = decidedSoFar(npc.stats, brain.unanswered);
  for (const k of SOURCES) if (sofar[k] > 0 && firsts[k] === undefined) firsts[k] = world.time;
  labels = draw(g, world, watch.state.model === "scripted", pointer);
  showState(document, watch.state, countBySource([...world.bees.map((b) => b.doing), world.queen.doing]));
  if (plot.sample(now, npc.stats, brain.unanswered, watch.state)) {
    plot.drawDecisions(plotDecisions);
    plot.drawTokens(plotTokens);
  }
  if (now - shown > 250) {
    shown = now;
    showCounters(document, npc.stats, game.sent, watch.state);
    showCost(document, costOf(npc.stats, watch.state));
    showControl();
  }
  requestAnimationFrame(frame);
}

/** What the tests read: every character's action and its source, the counters, the service as seen, the
 * labels as drawn and the plot's samples. */
function snapshot(): Record<string, unknown> {
  const who = (id: string, d: { action: string; source: string; code: string | null }) => ({ id, ...d });
  return {
    clientId, speed, time: world.time, round: world.round, epoch: npc.epoch, autopilot, leg: legAt(world.time).name,
    counted: decidedSoFar(npc.stats, brain.unanswered), firsts, cost: costOf(npc.stats, watch.state), policy: npc.servicePolicy !== null,
    player: { x: world.player.x, y: world.player.y, hp: world.player.hp },
    bees: world.bees.map((b) => ({ ...who(b.id, b.doing), x: b.x, y: b.y, hp: b.hp })),
    queen: { ...who("queen", world.queen.doing), x: world.queen.x, y: world.queen.y, hp: world.queen.hp, callingHelp: world.queen.callingHelp },
    swarms: world.swarms.map((s) => who(s.id, s.doing)),
    stats: npc.stats, sent: game.sent, service: watch.state, mode: document.getElementById("mode")?.dataset["mode"] ?? null,
    field: { width: WIDTH, height: HEIGHT }, labels, plot: plot.samples,
  };
}

(window as unknown as { npcmindDemo: unknown }).npcmindDemo = { snapshot };
watch.start();
requestAnimationFrame(frame);
