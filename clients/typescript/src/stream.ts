/** One streamed /v1/decide answer as it arrives (docs/streaming.md): its bytes are split into lines here and
 * each line is applied at once, under the rules of a whole answer (untracked, older epoch, illegal, expiry
 * from the line's arrival), so an entity's decision reaches the game the moment the model wrote it. */

import { type AIDecision, type FallbackDecision, readStreamLine } from "./answer.js";
import { MAX_STRAY_LINES } from "./limits.js";
import { Lines } from "./lines.js";
import type { Roster } from "./roster.js";
import type { Stats } from "./types.js";

export const CUT_REASON = "the decision stream was cut"; // the fallback reason of an entity a cut stream did not reach

/** What a stream needs of its scheduler: the entities, the counters, its log said once, and a pause of its
 * decide requests after a cut (the service may be gone). */
export interface StreamHost {
  readonly roster: Roster;
  readonly stats: Stats;
  warn(key: string, message: string): void;
  cut(now: number): void;
}

/** The state of one streamed decide request, from its first chunk to its end. */
export class DecisionStream {
  private readonly lines = new Lines();
  /** The entities of the request still without a decision line, with the legal actions sent for each. */
  private readonly pending: Map<string, readonly string[]>;
  private last = false;
  /** Lines that answered no entity the request asked (ids not asked, repeats, lines not read). */
  private strays = 0;

  constructor(
    private readonly host: StreamHost,
    legal: ReadonlyMap<string, readonly string[]>,
    private readonly epoch: number,
    private readonly sentAt: number,
  ) {
    this.pending = new Map(legal);
  }

  /** Bytes of the body arrived: every line they complete is applied now. False when the stream ended here:
   * more than MAX_STRAY_LINES of its lines answered no entity it asked (the caller reads no more of it). */
  feed(data: Uint8Array | string, now: number): boolean {
    for (const line of this.lines.feed(data)) {
      if (!this.line(line, now)) this.strays++;
      if (this.strays + this.lines.overlong > MAX_STRAY_LINES) break;
    }
    if (this.strays + this.lines.overlong <= MAX_STRAY_LINES) return true;
    this.host.warn(
      "stray-lines",
      `a decision stream sent more than ${MAX_STRAY_LINES} lines that answer no entity it asked (ids not asked, ` +
        "repeats, lines that are not decisions): ended there (MAX_STRAY_LINES), the rest fall back",
    );
    this.end(now);
    return false;
  }

  /** The connection closed (a partial line is discarded). After the last line, an entity the stream did not
   * name is asked on its refresh, as today; without it the stream was cut: the lines received stand and every
   * entity of it without one falls back (`unavailable`), and decide requests wait a second. */
  end(now: number): void {
    if (this.last) {
      this.host.roster.release(this.pending.keys(), null);
      this.pending.clear();
      return;
    }
    this.host.stats.streamsCut++;
    this.host.stats.errors++;
    for (const [id, legal] of this.pending) {
      const e = this.host.roster.entities.get(id);
      const cut: FallbackDecision = { id, source: "FALLBACK", code: "unavailable", reason: CUT_REASON, ttl_ms: 0 };
      if (e !== undefined && e.inFlight) this.host.roster.use(e, cut, legal, now);
    }
    this.pending.clear();
    this.host.cut(now);
  }

  /** One line applied; false for a line that answers no entity the request asked (a stray). */
  private line(text: string, now: number): boolean {
    if (this.last) return false; // nothing counts after the last line
    const got = readStreamLine(text);
    if (typeof got === "string") {
      this.host.stats.errors++;
      this.host.warn("malformed-line", `a line of the decision stream could not be read: ${got}`);
      return false; // its entity, if any, is left without a line: it falls back if the stream is cut
    }
    if ("end" in got) {
      this.last = true;
      return true;
    }
    return this.decision(got.decision, now);
  }

  private decision(d: AIDecision | FallbackDecision, now: number): boolean {
    if (this.epoch !== this.host.roster.epoch) return this.stale(now); // asked for a state the game has left
    const legal = this.pending.get(d.id);
    if (legal === undefined) return false; // not asked in this request, or its line came already
    this.pending.delete(d.id);
    const e = this.host.roster.entities.get(d.id);
    if (e === undefined) return true; // untracked meanwhile: dropped
    this.host.stats.streamedDecisions++;
    this.host.stats.streamedMsTotal += now - this.sentAt;
    this.host.roster.use(e, d, legal, now); // expiry counted from this line's arrival
    return true;
  }

  /** The game's epoch changed since the request was sent: the rest of the stream is dropped (counted once)
   * and its entities are asked again at once, for the epoch of now. */
  private stale(now: number): boolean {
    if (this.pending.size === 0) return false;
    this.host.stats.droppedEpoch++;
    this.host.roster.release(this.pending.keys(), now);
    this.pending.clear();
    return true;
  }
}
