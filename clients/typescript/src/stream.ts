/** One streamed /v1/decide answer as it arrives (docs/streaming.md): its bytes are split into lines here and
 * each line is applied at once, under the rules of a whole answer (untracked, older epoch, illegal, expiry
 * from the line's arrival), so an entity's decision reaches the game the moment the model wrote it. */

import { type AIDecision, type FallbackDecision, readStreamLine } from "./answer.js";
import type { Roster } from "./roster.js";
import type { Stats } from "./types.js";

export const CUT_REASON = "the decision stream was cut";

/** Text in, whole lines out: a line split across chunks waits for its end; a partial line at the end of the
 * stream is never a line (the connection was lost inside it). */
export class Lines {
  private rest = "";

  /** The lines this text completes (blank ones left out); the rest waits for the next chunk. */
  push(text: string): string[] {
    const parts = (this.rest + text).split("\n");
    this.rest = parts.pop() ?? "";
    return parts.filter((line) => line.trim() !== "");
  }
}

/** What a stream needs of its scheduler: the entities, the counters, and its log said once. */
export interface StreamHost {
  readonly roster: Roster;
  readonly stats: Stats;
  warn(key: string, message: string): void;
}

/** The state of one streamed decide request, from its first chunk to its end. */
export class DecisionStream {
  private readonly lines = new Lines();
  /** The entities of the request still without a decision line, with the legal actions sent for each. */
  private readonly pending: Map<string, readonly string[]>;
  private last = false;

  constructor(
    private readonly host: StreamHost,
    legal: ReadonlyMap<string, readonly string[]>,
    private readonly epoch: number,
    private readonly sentAt: number,
  ) {
    this.pending = new Map(legal);
  }

  /** Bytes of the body arrived (decoded): every line they complete is applied now. */
  push(text: string, now: number): void {
    for (const line of this.lines.push(text)) this.line(line, now);
  }

  /** The connection closed: without the last line the stream was cut, and every entity of it without a
   * decision line falls back (`unavailable`); the lines received stand. */
  end(now: number): void {
    if (!this.last) {
      this.host.stats.streamsCut++;
      for (const [id, legal] of this.pending) {
        const e = this.host.roster.entities.get(id);
        const cut: FallbackDecision = { id, source: "FALLBACK", code: "unavailable", reason: CUT_REASON, ttl_ms: 0 };
        if (e !== undefined && e.inFlight) this.host.roster.use(e, cut, legal, now);
      }
    }
    this.host.roster.release(this.pending.keys(), null);
    this.pending.clear();
  }

  private line(text: string, now: number): void {
    if (this.last) return; // nothing counts after the last line
    const got = readStreamLine(text);
    if (typeof got === "string") {
      this.host.stats.errors++;
      this.host.warn("malformed", `a line of the /v1/decide stream could not be read: ${got}`);
      return; // its entity, if any, falls back at the end like one without a line
    }
    if ("end" in got) {
      this.last = true;
      if (got.end.epoch !== this.host.roster.epoch) this.stale(now);
      return;
    }
    this.decision(got.decision, now);
  }

  private decision(d: AIDecision | FallbackDecision, now: number): void {
    const legal = this.pending.get(d.id);
    if (legal === undefined) return; // not asked in this request, or its line came already
    if (this.epoch !== this.host.roster.epoch) return this.stale(now);
    this.pending.delete(d.id);
    const e = this.host.roster.entities.get(d.id);
    if (e === undefined) return; // untracked meanwhile: dropped
    this.host.stats.streamedDecisions++;
    this.host.stats.streamedMsTotal += now - this.sentAt;
    this.host.roster.use(e, d, legal, now); // expiry counted from this line's arrival
  }

  /** The game's epoch changed since the request was sent: the rest of the stream is dropped (counted once)
   * and its entities are asked again at once, for the epoch of now. */
  private stale(now: number): void {
    if (this.pending.size === 0) return;
    this.host.stats.droppedEpoch++;
    this.host.roster.release(this.pending.keys(), now);
    this.pending.clear();
  }
}
