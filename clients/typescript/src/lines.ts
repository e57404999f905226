/** The lines of a streamed decide answer (NDJSON, docs/streaming.md), assembled from the bytes as they arrive.
 *
 * Bytes become text a whole line at a time: a newline byte never falls inside a UTF-8 character, so a chunk
 * that splits one (the network cuts anywhere) is never decoded half; a line is only read once it is complete,
 * and a partial line left when the stream ends is discarded (Python: `lines.py` `Lines`, the same). */

export const MAX_LINE = 64 * 1024; // a decision line is a few hundred bytes; past this it is not npcmind's: dropped

const NEWLINE = 0x0a;
const encoder = new TextEncoder();
const decoder = new TextDecoder(); // not fatal: a line that is not UTF-8 gets U+FFFD, which its JSON reader refuses

/** The complete lines of one stream so far, and the part of a line still coming. */
export class Lines {
  private rest: Uint8Array = new Uint8Array(0);
  private skipping = false; // inside a line past MAX_LINE: dropped up to its newline
  /** Lines dropped for being past MAX_LINE (for the scheduler to say). */
  overlong = 0;

  /** The lines this chunk completes (without their newline; a blank line is skipped), in order; a string is
   * taken as its UTF-8 bytes. */
  feed(data: Uint8Array | string): string[] {
    const bytes = typeof data === "string" ? encoder.encode(data) : data;
    const all = this.rest.length === 0 ? bytes : concat(this.rest, bytes);
    const out: string[] = [];
    let start = 0;
    for (let at = all.indexOf(NEWLINE); at !== -1; at = all.indexOf(NEWLINE, start)) {
      const raw = all.subarray(start, at);
      start = at + 1;
      if (this.skipping) {
        this.skipping = false; // the end of the line too long to keep
        continue;
      }
      if (raw.length > MAX_LINE) {
        this.overlong++;
        continue;
      }
      const line = decoder.decode(raw).trim();
      if (line !== "") out.push(line);
    }
    this.rest = all.slice(start); // a copy: the transport's buffer is not kept
    if (this.rest.length > MAX_LINE) {
      this.overlong++; // no newline coming soon: keep none of it
      this.skipping = true;
      this.rest = new Uint8Array(0);
    }
    return out;
  }

  /** Whether a line was left incomplete (the stream cut mid-line). */
  get partial(): boolean {
    return this.rest.length > 0 || this.skipping;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}
