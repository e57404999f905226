/** Drawing the field: each character in the colour of where its action came from (the legend says which),
 * a halo around each swarm, and a few labels (the queen, the swarms, you, the hive) that never overlap. */

import { LABEL_HEIGHT, place, type Placed, type Wanted } from "./labels.js";
import { COLOURS, describe } from "./sources.js";
import { HEIGHT, HIVE, WIDTH, dist, type Bee, type Swarm, type Vec, type World } from "./world.js";

const TREES = [[80, 90], [260, 520], [420, 70], [560, 560], [900, 80], [880, 540], [330, 260], [60, 470]];
const FONT = "600 11px system-ui, sans-serif";
const NEUTRAL = "#b0bec5";

function disc(g: CanvasRenderingContext2D, x: number, y: number, r: number, fill: string): void {
  g.fillStyle = fill;
  g.beginPath();
  g.arc(x, y, r, 0, Math.PI * 2);
  g.fill();
}

function bar(g: CanvasRenderingContext2D, x: number, y: number, fraction: number, width: number): void {
  g.fillStyle = "rgba(0,0,0,0.6)";
  g.fillRect(x - width / 2, y, width, 3);
  g.fillStyle = fraction > 0.5 ? "#7cb342" : fraction > 0.25 ? "#fbc02d" : "#e53935";
  g.fillRect(x - width / 2, y, width * fraction, 3);
}

function ground(g: CanvasRenderingContext2D): void {
  g.fillStyle = "#1e2b22";
  g.fillRect(0, 0, WIDTH, HEIGHT);
  for (const [x, y] of TREES) {
    disc(g, x ?? 0, y ?? 0, 30, "#263a2c");
    disc(g, x ?? 0, y ?? 0, 20, "#2d4634");
  }
  g.fillStyle = "#8d6e3f";
  g.beginPath();
  for (let i = 0; i < 6; i++) g.lineTo(HIVE.x + 24 * Math.cos((i * Math.PI) / 3), HIVE.y + 24 * Math.sin((i * Math.PI) / 3));
  g.fill();
  g.strokeStyle = "#c9a36a";
  g.lineWidth = 2;
  g.stroke();
}

const CLUSTER = 70; // bees this close to the swarm's busiest bee are drawn as its group

/** A swarm's halo, in the colour of the swarm's own decision, around the bees gathered near its busiest bee
 * (the one with the most others close by: a swarm split in two is haloed where most of it is); its centre
 * and radius. */
function halo(g: CanvasRenderingContext2D, s: Swarm, members: Bee[]): { x: number; y: number; r: number } {
  const near = (b: Bee): Bee[] => members.filter((o) => dist(o, b) < CLUSTER);
  const group = members.map(near).reduce((a, b) => (b.length > a.length ? b : a));
  const x = group.reduce((a, b) => a + b.x, 0) / group.length;
  const y = group.reduce((a, b) => a + b.y, 0) / group.length;
  const r = Math.max(18, ...group.map((b) => dist(b, { x, y }))) + 12;
  const colour = COLOURS[s.doing.source];
  if (group.length < 3) return { x, y, r }; // bees scattered: no group to draw, the label goes where most are
  g.save();
  g.globalAlpha = 0.1;
  disc(g, x, y, r, colour);
  g.globalAlpha = 0.55;
  g.setLineDash([5, 5]);
  g.strokeStyle = colour;
  g.lineWidth = 1.5;
  g.beginPath();
  g.arc(x, y, r, 0, Math.PI * 2);
  g.stroke();
  g.restore();
  return { x, y, r };
}

function characters(g: CanvasRenderingContext2D, w: World): void {
  const q = w.queen;
  if (q.callingHelp) {
    g.strokeStyle = "rgba(255,235,59,0.9)";
    g.lineWidth = 2;
    g.beginPath();
    g.arc(q.x, q.y, 30 + 12 * Math.sin(w.time * 8), 0, Math.PI * 2);
    g.stroke();
  }
  disc(g, q.x, q.y, 15, "#ffd54f");
  disc(g, q.x, q.y, 12, COLOURS[q.doing.source]);
  bar(g, q.x, q.y - 23, q.hp, 28);
  for (const b of w.bees) {
    disc(g, b.x, b.y, 7.5, "#101410");
    disc(g, b.x, b.y, 6, COLOURS[b.doing.source]);
    if (b.hp < 1) bar(g, b.x, b.y - 12, b.hp, 16);
  }
  const p = w.player;
  if (w.time < p.swatShown) {
    g.strokeStyle = "rgba(255,255,255,0.85)";
    g.lineWidth = 2;
    g.beginPath();
    g.arc(p.x, p.y, 42, 0, Math.PI * 2);
    g.stroke();
  }
  disc(g, p.x, p.y, 11, "#0d47a1");
  disc(g, p.x, p.y, 8, "#ffffff");
  bar(g, p.x, p.y - 19, p.hp, 24); // the player last: on top of whoever is on the same spot
}

function label(g: CanvasRenderingContext2D, l: Placed): void {
  g.fillStyle = "rgba(12,16,14,0.82)";
  g.fillRect(l.x, l.y, l.w, l.h);
  g.fillStyle = l.colour;
  g.fillRect(l.x, l.y, 3, l.h);
  g.fillStyle = "#f5f5f5";
  g.textAlign = "left";
  g.textBaseline = "middle";
  g.fillText(l.text, l.x + 6, l.y + LABEL_HEIGHT / 2 + 0.5);
}

/** The bee under the pointer (within a few pixels), whose action and source get a label of their own. */
function pointed(w: World, pointer: Vec | null): Bee | null {
  if (pointer === null) return null;
  const near = w.bees.filter((b) => dist(b, pointer) < 14);
  return near.reduce<Bee | null>((a, b) => (a === null || dist(b, pointer) < dist(a, pointer) ? b : a), null);
}

/** Draw one frame; `scripted`: the provider answers by rules (its decisions are not a model's); `pointer`:
 * where the mouse is on the field. The labels as drawn, for the tests. */
export function draw(g: CanvasRenderingContext2D, w: World, scripted: boolean, pointer: Vec | null): Placed[] {
  ground(g);
  const q = w.queen;
  const b = pointed(w, pointer);
  const wants: Wanted[] = b ? [{ text: `bee ${b.id} · ${describe(b.doing, scripted, true)}`, x: b.x, y: b.y, r: 8, colour: COLOURS[b.doing.source] }] : [];
  wants.push(
    { text: `queen · ${describe(q.doing, scripted)}${q.callingHelp ? " · calls help!" : ""}`, x: q.x, y: q.y, r: 16, colour: COLOURS[q.doing.source] },
  );
  for (const s of w.swarms) {
    const members = w.membersOf(s.id);
    if (members.length === 0) {
      const wait = Math.max(0, Math.ceil((s.respawnAt ?? w.time) - w.time));
      wants.push({ text: `${s.id} wiped out · new wave in ${wait} s`, x: HIVE.x, y: HIVE.y, r: 28, colour: NEUTRAL });
      continue;
    }
    const h = halo(g, s, members);
    wants.push({ text: `${s.id} (${members.length}) · ${describe(s.doing, scripted)}`, ...h, colour: COLOURS[s.doing.source] });
  }
  characters(g, w);
  wants.push({ text: "you", x: w.player.x, y: w.player.y, r: 12, colour: "#ffffff" });
  wants.push({ text: "hive", x: HIVE.x, y: HIVE.y, r: 26, colour: "#c9a36a" });
  g.font = FONT;
  const discs = [...w.bees.map((b) => ({ x: b.x, y: b.y, r: 8 })), { x: q.x, y: q.y, r: 16 }, { ...w.player, r: 12 }, { ...HIVE, r: 25 }];
  const placed = place(wants, discs, (t) => g.measureText(t).width, WIDTH, HEIGHT);
  for (const l of placed) label(g, l);
  return placed;
}
