/** The panel's two small plots over the last minute: decisions a second by source (stacked, in the legend's
 * colours) and tokens a second in and out, sampled once a second from the SDK's and the service's counters. */

import type { Stats } from "./brain.js";
import type { ServiceState } from "./service.js";
import { COLOURS, SOURCES } from "./sources.js";
import type { Source } from "./world.js";

/** One second of play: decisions a second by source, tokens a second. */
export interface Sample {
  rates: Record<Source, number>;
  tokensIn: number;
  tokensOut: number;
}

interface Totals {
  at: number;
  decided: Record<Source, number>;
  tokensIn: number;
  tokensOut: number;
}

const WINDOW = 60; // samples kept and drawn: a minute
const SMOOTH = 4; // seconds each rate is taken over
const AXIS = "#8a949c";
const OUT = "#ffb74d"; // the tokens out: the panel's heading says so in this colour

/** Decisions so far by source: the SDK's counters, and the entities whose request got no decision at all
 * (`unanswered`: the service down or refusing), which run their native AI as a fallback does. */
export function decidedSoFar(st: Stats, unanswered: number): Record<Source, number> {
  const fallbacks = Object.values(st.fallbacks).reduce((a, b) => a + b, 0);
  return { AI: st.ai - st.cached, cached: st.cached, local: st.local, native: fallbacks + unanswered };
}

/** A round top for an axis: 1, 2 or 5 times a power of ten, at least the largest value. */
function top(max: number): number {
  if (max <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  return ([1, 2, 5, 10].find((k) => k * p >= max) ?? 10) * p;
}

function frame(g: CanvasRenderingContext2D, scale: number): { w: number; h: number } {
  const { width: w, height: h } = g.canvas;
  g.clearRect(0, 0, w, h);
  g.strokeStyle = "#2f363d";
  g.lineWidth = 1;
  for (const f of [0, 0.5, 1]) {
    const y = Math.round(4 + (h - 8) * f) + 0.5;
    g.beginPath();
    g.moveTo(0, y);
    g.lineTo(w, y);
    g.stroke();
  }
  g.fillStyle = AXIS;
  g.font = "10px system-ui, sans-serif";
  g.textAlign = "left";
  g.textBaseline = "top";
  g.fillText(`${scale} / s`, 3, 6);
  return { w, h };
}

/** Samples kept over a minute, and drawn into two canvases. */
export class Plot {
  readonly samples: Sample[] = [];
  private readonly totals: Totals[] = []; // one a second, the last SMOOTH + 1

  /** Take a sample when a second has passed since the last (`now` in ms): the rates over the last few
   * seconds (decisions come in bursts, one request at a time). True when one was taken. */
  sample(now: number, st: Stats, unanswered: number, s: ServiceState): boolean {
    const newest = this.totals[this.totals.length - 1];
    if (newest !== undefined && now - newest.at < 1000) return false;
    this.totals.push({ at: now, decided: decidedSoFar(st, unanswered), tokensIn: s.tokensIn, tokensOut: s.tokensOut });
    if (this.totals.length > SMOOTH + 1) this.totals.shift();
    const [first, last] = [this.totals[0], this.totals[this.totals.length - 1]];
    if (first === undefined || last === undefined || first === last) return false;
    const per = 1000 / (last.at - first.at);
    const rate = (k: Source): number => Math.max(0, last.decided[k] - first.decided[k]) * per;
    this.samples.push({
      rates: { AI: rate("AI"), cached: rate("cached"), local: rate("local"), native: rate("native") },
      tokensIn: Math.max(0, last.tokensIn - first.tokensIn) * per,
      tokensOut: Math.max(0, last.tokensOut - first.tokensOut) * per,
    });
    if (this.samples.length > WINDOW) this.samples.shift();
    return true;
  }

  /** Decisions a second, stacked by source, newest at the right. */
  drawDecisions(g: CanvasRenderingContext2D): void {
    const sum = (r: Record<Source, number>): number => SOURCES.reduce((a, k) => a + r[k], 0);
    const scale = top(Math.max(0, ...this.samples.map((s) => sum(s.rates))));
    const { w, h } = frame(g, scale);
    const step = w / (WINDOW - 1);
    const x0 = w - (this.samples.length - 1) * step;
    const base = this.samples.map(() => 0);
    for (const k of SOURCES) {
      const upper = this.samples.map((s, i) => (base[i] ?? 0) + s.rates[k]);
      const y = (v: number): number => h - 4 - ((h - 8) * v) / scale;
      g.fillStyle = COLOURS[k];
      g.beginPath();
      upper.forEach((v, i) => g.lineTo(x0 + i * step, y(v)));
      for (let i = base.length - 1; i >= 0; i--) g.lineTo(x0 + i * step, y(base[i] ?? 0));
      g.fill();
      upper.forEach((v, i) => (base[i] = v));
    }
  }

  /** Tokens a second: in as an area on the left scale, out (far fewer) as a line on its own right scale. */
  drawTokens(g: CanvasRenderingContext2D): void {
    const scale = top(Math.max(0, ...this.samples.map((s) => s.tokensIn)));
    const outScale = top(Math.max(0, ...this.samples.map((s) => s.tokensOut)));
    const { w, h } = frame(g, scale);
    g.fillStyle = OUT;
    g.textAlign = "right";
    g.fillText(`${outScale} / s`, w - 3, 6);
    const step = w / (WINDOW - 1);
    const x0 = w - (this.samples.length - 1) * step;
    const y = (v: number, of: number): number => h - 4 - ((h - 8) * v) / of;
    g.fillStyle = "rgba(207,216,220,0.55)";
    g.beginPath();
    g.moveTo(x0, h - 4);
    this.samples.forEach((s, i) => g.lineTo(x0 + i * step, y(s.tokensIn, scale)));
    g.lineTo(x0 + (this.samples.length - 1) * step, h - 4);
    g.fill();
    g.strokeStyle = OUT;
    g.lineWidth = 2;
    g.beginPath();
    this.samples.forEach((s, i) => g.lineTo(x0 + i * step, y(s.tokensOut, outScale)));
    g.stroke();
  }
}
