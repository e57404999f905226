/** Saying a problem once: a game loop would repeat it every frame. */

import type { Logger } from "./types.js";

/** Remembers what was said (at most 1,000 kinds; then it starts over). */
export class SayOnce {
  private readonly said = new Set<string>();

  constructor(private readonly log: Logger) {}

  /** Say `message` unless `key` was said; `native`: it leaves entities to the game's own AI, and it says so. */
  say(key: string, message: string, native = true): void {
    if (this.said.has(key)) return;
    if (this.said.size >= 1000) this.said.clear();
    this.said.add(key);
    this.log(native ? `${message} (the entities concerned use their native AI)` : message);
  }
}
