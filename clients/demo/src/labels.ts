/** Where the field's few text labels go: each beside what it names (at most RINGS label heights out), inside the
 * canvas, never over another label. A label that finds no free place near its thing is left out rather than
 * drawn over another or far away (the legend still counts it). */

/** A label that wants to sit beside a thing at (x, y) of radius r. */
export interface Wanted {
  text: string;
  x: number;
  y: number;
  r: number;
  colour: string;
}

/** Something drawn on the field that a label should rather not cover: a character's disc. */
export interface Disc {
  x: number;
  y: number;
  r: number;
}

/** A label where it was drawn: its box on the canvas (x, y: top left), and the thing it names (`at`). */
export interface Placed {
  text: string;
  colour: string;
  x: number;
  y: number;
  w: number;
  h: number;
  at: Disc;
}

export const LABEL_HEIGHT = 16;
const PAD = 4; // text to box edge
const GAP = 3; // box to box, and box to canvas edge
const RINGS = 3; // places tried around a thing, one label height further out each

function overlaps(a: Placed, b: Placed): boolean {
  return a.x < b.x + b.w + GAP && b.x < a.x + a.w + GAP && a.y < b.y + b.h + GAP && b.y < a.y + a.h + GAP;
}

/** The boxes tried for a label, nearest first: below, above, right, left of its thing, then further out. */
function candidates(want: Wanted, w: number): [number, number][] {
  const h = LABEL_HEIGHT;
  const out: [number, number][] = [];
  for (let ring = 0; ring < RINGS; ring++) {
    const d = want.r + 4 + ring * (h + GAP);
    out.push(
      [want.x - w / 2, want.y + d],
      [want.x - w / 2, want.y - d - h],
      [want.x + d, want.y - h / 2],
      [want.x - d - w, want.y - h / 2],
      [want.x + d, want.y + d],
      [want.x - d - w, want.y + d],
      [want.x + d, want.y - d - h],
      [want.x - d - w, want.y - d - h],
    );
  }
  return out;
}

function covers(box: Placed, d: Disc): boolean {
  const nx = Math.max(box.x, Math.min(d.x, box.x + box.w));
  const ny = Math.max(box.y, Math.min(d.y, box.y + box.h));
  return Math.hypot(nx - d.x, ny - d.y) < d.r;
}

/** Place labels in the order given (the first are the most important) on a canvas of width x height: the
 * nearest place that covers no other label and no disc, else the nearest that covers no other label. */
export function place(
  wants: readonly Wanted[],
  discs: readonly Disc[],
  measure: (text: string) => number,
  width: number,
  height: number,
): Placed[] {
  const placed: Placed[] = [];
  for (const want of wants) {
    const w = Math.ceil(measure(want.text)) + 2 * PAD;
    const boxes = candidates(want, w).map(([cx, cy]) => ({
      text: want.text,
      colour: want.colour,
      x: Math.max(GAP, Math.min(width - GAP - w, cx)),
      y: Math.max(GAP, Math.min(height - GAP - LABEL_HEIGHT, cy)),
      w,
      h: LABEL_HEIGHT,
      at: { x: want.x, y: want.y, r: want.r },
    }));
    const free = boxes.filter((box) => !placed.some((p) => overlaps(p, box)));
    const best = free.find((box) => !discs.some((d) => covers(box, d))) ?? free[0];
    if (best) placed.push(best);
  }
  return placed;
}
