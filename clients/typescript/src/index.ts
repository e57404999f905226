/** npcmind's game SDK: the public API, named here and nowhere else. */

export { DecideClient, type DecideClientOptions } from "./decide.js";
export { Scheduler, BATCH, type SchedulerOptions } from "./scheduler.js";
export { Transport, type Reply, type Settled, type TransportOptions } from "./transport.js";
export type {
  Choice,
  Entity,
  FailKind,
  Logger,
  OutRequest,
  Outcome,
  PolicyFunction,
  Stats,
  TrackOptions,
} from "./types.js";
export {
  Policy,
  POLICY_MAX_ACTIONS,
  POLICY_MAX_BYTES,
  POLICY_MAX_DEPTH,
  POLICY_MAX_FEATURES,
  POLICY_MAX_NODES,
  POLICY_MAX_TREES,
  POLICY_MAX_TYPES,
  PolicyError,
} from "./policy.js";
export { DEFAULT_POLICY_REFRESH_MS, type LocalPolicy } from "./cascade.js";
export {
  MAX_ANSWER_BYTES,
  MAX_ERROR_BYTES,
  MAX_KEYS_BYTES,
  MAX_MANIFEST_BYTES,
  MAX_MODEL_BYTES,
  MAX_PROMPT_BYTES,
  MAX_STEP_BYTES,
  MAX_STREAM_BYTES,
  MAX_STRAY_LINES,
  MIN_CHUNK_BYTES,
  TICK_STREAM_BYTES,
  TooLargeError,
} from "./limits.js";
export { OUTCOMES } from "./types.js";
export {
  InvalidInputError,
  NpcMindError,
  ProtocolError,
  ServiceError,
  SignatureError,
  UnreachableError,
} from "./errors.js";
export {
  NpcMind,
  mergePatch,
  type Cortex,
  type NewMemory,
  type NpcMemory,
  type NpcMindOptions,
  type NpcOutcome,
  type NpcRecord,
  type PromptConstraints,
  type RecalledMemory,
} from "./npc.js";
export { InMemoryNpcs } from "./memory.js";
export { OpenAICortex, CortexError } from "./cortex.js";
export { canonical, digest, NotCanonical } from "./jcs.js";
export { signedPayload, verify } from "./signing.js";
export type { components, paths } from "./wire.js";
