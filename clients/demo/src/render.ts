/** Drawing the field: each character with its current action and where that action came from. */

import { HEIGHT, HIVE, WIDTH, type Doing, type World } from "./world.js";

const COLOURS: Record<Doing["source"], string> = { AI: "#2e7d32", cached: "#00838f", local: "#1565c0", native: "#b26a00" };

/** "chase · AI", "wander · native (unavailable)". */
export function describe(d: Doing): string {
  return d.source === "native" ? `${d.action} · native${d.code ? ` (${d.code})` : ""}` : `${d.action} · ${d.source}`;
}

function label(g: CanvasRenderingContext2D, text: string, x: number, y: number, colour: string): void {
  g.font = "10px sans-serif";
  g.textAlign = "center";
  g.fillStyle = "rgba(255,255,255,0.75)";
  const w = g.measureText(text).width;
  g.fillRect(x - w / 2 - 2, y - 9, w + 4, 12);
  g.fillStyle = colour;
  g.fillText(text, x, y);
}

function bar(g: CanvasRenderingContext2D, x: number, y: number, fraction: number): void {
  g.fillStyle = "#400";
  g.fillRect(x - 10, y, 20, 3);
  g.fillStyle = "#e53935";
  g.fillRect(x - 10, y, 20 * fraction, 3);
}

const TREES = [[80, 90], [260, 520], [420, 70], [560, 560], [900, 80], [880, 540], [330, 260], [60, 470]];

/** Draw one frame. */
export function draw(g: CanvasRenderingContext2D, w: World): void {
  g.fillStyle = "#5d8a4a";
  g.fillRect(0, 0, WIDTH, HEIGHT);
  g.fillStyle = "#3f6b35";
  for (const [x, y] of TREES) {
    g.beginPath();
    g.arc(x ?? 0, y ?? 0, 28, 0, Math.PI * 2);
    g.fill();
  }
  g.fillStyle = "#8d6e3f";
  g.beginPath();
  g.arc(HIVE.x, HIVE.y, 26, 0, Math.PI * 2);
  g.fill();
  label(g, "hive", HIVE.x, HIVE.y + 40, "#333");
  const p = w.player;
  if (w.time < p.swatShown) {
    g.strokeStyle = "rgba(255,255,255,0.8)";
    g.beginPath();
    g.arc(p.x, p.y, 42, 0, Math.PI * 2);
    g.stroke();
  }
  g.fillStyle = "#1e3a8a";
  g.beginPath();
  g.arc(p.x, p.y, 10, 0, Math.PI * 2);
  g.fill();
  bar(g, p.x, p.y - 18, p.hp);
  label(g, "you", p.x, p.y + 24, "#1e3a8a");
  const q = w.queen;
  if (q.callingHelp) {
    g.strokeStyle = "rgba(255,235,59,0.9)";
    g.beginPath();
    g.arc(q.x, q.y, 30 + 12 * Math.sin(w.time * 8), 0, Math.PI * 2);
    g.stroke();
  }
  g.fillStyle = "#6a1b9a";
  g.beginPath();
  g.arc(q.x, q.y, 14, 0, Math.PI * 2);
  g.fill();
  bar(g, q.x, q.y - 22, q.hp);
  label(g, `queen: ${describe(q.doing)}${q.callingHelp ? " · calls help!" : ""}`, q.x, q.y + 28, COLOURS[q.doing.source]);
  for (const b of w.bees) {
    g.fillStyle = b.swarm === "swarm-a" ? "#fdd835" : "#ffb300";
    g.beginPath();
    g.arc(b.x, b.y, 6, 0, Math.PI * 2);
    g.fill();
    g.strokeStyle = "#222";
    g.stroke();
    bar(g, b.x, b.y - 11, b.hp);
    label(g, describe(b.doing), b.x, b.y + 17, COLOURS[b.doing.source]);
  }
  let y = 18;
  for (const s of w.swarms) {
    const text = s.respawnAt === null ? describe(s.doing) : "wiped out: a new wave comes";
    label(g, `${s.id}: ${text}`, 90, y, COLOURS[s.doing.source]);
    y += 15;
  }
}
