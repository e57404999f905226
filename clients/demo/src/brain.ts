/**
 * The one place the game meets npcmind: which client it decides through. The game uses only the SDK's
 * game-facing methods (track, observe, untrack, event, report, action, tick, epoch, stats, lastPrompt).
 */
export { DecideClient } from "./sdk.js";
export type { Choice, Outcome, Stats } from "./sdk.js";
