/** The SDK's shared shapes: what the game tells about an entity, what it gets back, and what goes on the wire. */

/** One of the outcomes a report may tell (POST /v1/report). */
export type Outcome = "done" | "failed" | "interrupted" | "rejected";

/** Every outcome, to check one a game passes at run time. */
export const OUTCOMES: readonly Outcome[] = ["done", "failed", "interrupted", "rejected"];

/** A usable decision for one entity: from the model (`AI`, fresh or cached) or the local policy. */
export interface Choice {
  readonly action: string;
  readonly source: "AI" | "local";
  readonly confidence: number | null;
  /** On the client's clock, in ms. */
  readonly expiresAt: number;
  readonly decisionId: string | null;
  readonly cached: boolean;
  readonly label: string | null;
}

/** What the game may add to an entity beside its observation and legal actions. */
export interface TrackOptions {
  position?: number[] | null;
  profile?: string | null;
  parent?: string | null;
  state?: string | null;
}

/** What the game tells about one entity; the SDK's own bookkeeping sits beside it. */
export interface Entity {
  readonly id: string;
  type: string;
  observation: Record<string, unknown>;
  legalActions: string[];
  position: number[] | null;
  profile: string | null;
  parent: string | null;
  state: string | null;
  trigger: string | null;
  due: number;
  askedAt: number;
  inFlight: boolean;
  choice: Choice | null;
  /** Changed since the last telemetry. */
  changed: boolean;
}

/** A local policy function for cascade mode: the action it would take and how sure it is (0..1), or null to
 * ask the service. A distilled policy file is a `Policy` (policy.ts) instead. */
export type PolicyFunction = (entity: Entity) => readonly [string, number] | null;

/** Counters a game can show in a debug overlay; the tests read them too. */
export interface Stats {
  requests: number;
  asked: number;
  ai: number;
  cached: number;
  local: number;
  fallbacks: Record<string, number>;
  droppedEpoch: number;
  illegal: number;
  errors: number;
  reportsSent: number;
  /** Times the service refused an entity as malformed (it then goes alone until taken). */
  refused: number;
  /** Decision lines of streamed answers applied: each reached the game the moment its line came. */
  streamedDecisions: number;
  /** The sum of ms from a streamed request's send to each of its decision lines: divided by
   * `streamedDecisions`, the mean time an entity waits for its decision. */
  streamedMsTotal: number;
  /** Streams that ended before their last line: their entities without a line fell back (`unavailable`). */
  streamsCut: number;
}

/** A fresh set of counters. */
export function newStats(): Stats {
  return {
    requests: 0,
    asked: 0,
    ai: 0,
    cached: 0,
    local: 0,
    fallbacks: {},
    droppedEpoch: 0,
    illegal: 0,
    errors: 0,
    reportsSent: 0,
    refused: 0,
    streamedDecisions: 0,
    streamedMsTotal: 0,
    streamsCut: 0,
  };
}

/** A request the core wants sent: the transport executes it after every ref in `after` has settled. */
export interface OutRequest {
  readonly ref: string;
  readonly method: "GET" | "POST";
  readonly path: string;
  readonly headers: Record<string, string>;
  /** The body as sent (null for a GET); `json` is its text, made when the request was made (a snapshot). */
  readonly body: Record<string, unknown> | null;
  readonly json: string | null;
  readonly after: readonly string[];
  /** A decide request whose answer may come as a stream of NDJSON lines (docs/streaming.md): the transport
   * asks for one and hands its bytes over as they arrive. */
  readonly stream?: boolean;
}

/** Why a request got no answer. */
export type FailKind = "timeout" | "unreachable";

/** Where the SDK says a problem (once: a game loop would repeat it every frame). */
export type Logger = (message: string) => void;
