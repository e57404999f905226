/** A small NpcMemory kept in the page or process: enough for a game to start with; a real game keeps its NPCs
 * in its own save data and recalls with its own embeddings. Recall here is word overlap, not meaning. */

import { mergePatch, type NewMemory, type NpcMemory, type NpcRecord, type RecalledMemory } from "./npc.js";

const WORD = /[\p{L}\p{N}]+/gu;

/** The set of lowercase words of a text. */
function words(text: string): Set<string> {
  return new Set(text.toLowerCase().match(WORD) ?? []);
}

/** NPCs and their memories in memory (lost when the page or process ends). */
export class InMemoryNpcs implements NpcMemory {
  private readonly npcs = new Map<string, NpcRecord>();
  private readonly memories = new Map<string, NewMemory[]>();

  /** Add an NPC (or replace who it is); its state starts empty unless given. */
  register(
    npcId: string,
    persona: string,
    data: Record<string, unknown> = {},
    state: Record<string, unknown> = {},
  ): void {
    if (!npcId || npcId.includes("/"))
      throw new TypeError(`npcId: ${JSON.stringify(npcId)} must be non-empty text without '/'`);
    this.npcs.set(npcId, { npcId, persona, data, state });
  }

  get(npcId: string): NpcRecord | null {
    return this.npcs.get(npcId) ?? null;
  }

  /** Memories sharing words with the query (Jaccard similarity), most similar first. */
  recall(npcId: string, query: string, limit: number, threshold: number): RecalledMemory[] {
    const q = words(query);
    const scored = (this.memories.get(npcId) ?? []).map((m) => {
      const w = words(m.text);
      const shared = [...w].filter((x) => q.has(x)).length;
      return { ...m, similarity: shared / Math.max(1, new Set([...w, ...q]).size) };
    });
    return scored
      .filter((m) => m.similarity >= threshold)
      .sort((a, b) => b.similarity - a.similarity)
      .slice(0, limit);
  }

  apply(npcId: string, memories: NewMemory[], stateTransform: Record<string, unknown>): Record<string, unknown> {
    const rec = this.npcs.get(npcId);
    if (rec === undefined) throw new TypeError(`unknown NPC ${JSON.stringify(npcId)}`);
    rec.state = mergePatch(rec.state, stateTransform) as Record<string, unknown>;
    this.memories.set(npcId, [...(this.memories.get(npcId) ?? []), ...memories]);
    return rec.state;
  }

  /** Everything an NPC remembers, oldest first. */
  remembered(npcId: string): readonly NewMemory[] {
    return this.memories.get(npcId) ?? [];
  }
}
