/** Saying a problem once: a game loop would repeat it every frame. */

import type { Logger } from "./types.js";

/** A kind of problem is its key's first 300 characters: 1,000 kinds hold 300 kB at most. */
const MAX_KEY = 300;
/** A line in the game's log: an error body of 64 KiB is cut here. */
const MAX_MESSAGE = 2000;

/** Remembers what was said (at most 1,000 kinds; then it starts over). */
export class SayOnce {
  private readonly said = new Set<string>();

  constructor(private readonly log: Logger) {}

  /** Say `message` unless `key` was said; `native`: it leaves entities to the game's own AI, and it says so. */
  say(key: string, message: string, native = true): void {
    const kind = key.slice(0, MAX_KEY);
    if (this.said.has(kind)) return;
    if (this.said.size >= 1000) this.said.clear();
    this.said.add(kind);
    const line = message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}…` : message;
    this.log(native ? `${line} (the entities concerned use their native AI)` : line);
  }
}
