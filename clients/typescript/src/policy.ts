/** A distilled local policy (docs/policy.md): the game decides what the model would, without asking it.
 *
 * `npcmind distill` writes a portable JSON file of small decision trees over the manifest's named fields; this
 * module evaluates it with no dependency, exactly as the Python SDK's `npcmind_client/policy.py` does (the
 * shared vectors in clients/conformance/policy/ check both): the same encodings, rounding half to even to a
 * feature's quantum, the trees' leaves summed in tree order, masking to the legal actions, the first action
 * in the file's order on a tie. A file distilled for another manifest version is refused: its fields may mean
 * something else now. Loading checks the whole file, with the same limits and messages as the Python SDK, so that
 * `choose` cannot fail or run long in the game: every failure of `Policy.load` is a PolicyError naming the
 * place, and `choose` never throws (a value not of its feature's kind is that feature's `missing`). */

import { NpcMindError } from "./errors.js";

export const POLICY_FORMAT = "npcmind-policy";
export const POLICY_FORMAT_VERSION = 1;
const SOURCES = ["observation", "world", "scope_state", "trigger", "profile", "legal"] as const;
const ENCODINGS = ["number", "boolean", "enum"] as const;
/** distill writes ~60 kB a type: room for hundreds of types, not for a memory bomb (UTF-8 bytes). */
export const POLICY_MAX_BYTES = 16 * 1024 * 1024;
/** A policy's JSON nests 7 deep: bounded before parsing, as the Python SDK must (its parser recurses). */
export const POLICY_MAX_NESTING = 32;
/** distill's trees are at most 12 deep: 64 leaves room for other trainers and bounds a choose's walk. */
export const POLICY_MAX_DEPTH = 64;
/** Over all trees of a file: a depth-12 tree has at most 8,191 nodes. */
export const POLICY_MAX_NODES = 1_000_000;
/** What one file may hold (docs/policy.md): a choose walks one type's trees and sums their leaves over the legal
 * actions, so these bound its work whatever the file; the manifest allows 64 types of 32 actions and 64 fields
 * each, and distill writes one tree a type. */
export const POLICY_MAX_TYPES = 256;
export const POLICY_MAX_TREES = 32; // a type
export const POLICY_MAX_ACTIONS = 256; // a type
export const POLICY_MAX_FEATURES = 4096; // a type (an enum field is a feature a value)

type Source = (typeof SOURCES)[number];
type Encoding = (typeof ENCODINGS)[number];
type Json = Record<string, unknown>;

/** A policy file that cannot be used: malformed, of an unknown format, or for another manifest version. */
export class PolicyError extends NpcMindError {
  override name = "PolicyError";
}

/** What a policy reads of one entity's situation. */
interface Situation {
  observation: Json;
  world: Json;
  scope_state: Json;
  trigger: string | null;
  profile: string | null;
  legal: ReadonlySet<string>;
}

/** One input of the trees: a named value of the situation, encoded as a number. */
interface Feature {
  source: Source;
  field: string | null;
  encoding: Encoding;
  value: string | null;
  quantum: number | null;
  missing: number;
}

/** One decision tree in flat arrays: node i splits on `feature[i]` (-1: a leaf with `value[i]`). */
interface Tree {
  feature: number[];
  threshold: number[];
  left: number[];
  right: number[];
  value: number[][];
}

/** The trees of one entity type, over its features, giving a distribution over its actions. */
interface TypePolicy {
  actions: string[];
  features: Feature[];
  trees: Tree[];
  index: Map<string, number>; // an action's place, made once at load
}

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Python's `round()` on a float: to the nearest integer, a tie to the even one (the service's cache key). */
export function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const diff = x - floor;
  if (diff < 0.5) return floor;
  if (diff > 0.5) return floor + 1;
  return floor % 2 === 0 ? floor : floor + 1;
}

/** The number the trees compare for this feature (the encoding is the file's contract: docs/policy.md). */
function encode(f: Feature, s: Situation): number {
  if (f.source === "legal") return f.value !== null && s.legal.has(f.value) ? 1 : 0;
  let raw: unknown = s[f.source];
  if (f.field !== null) raw = isObject(raw) ? raw[f.field] : null;
  if (raw === null || raw === undefined) return f.missing;
  if (f.encoding === "enum") return raw === f.value ? 1 : 0;
  if (f.encoding === "boolean") return raw === true ? 1 : raw === false ? 0 : f.missing;
  if (typeof raw !== "number" || !Number.isFinite(raw)) return f.missing;
  if (!f.quantum) return raw;
  const steps = raw / f.quantum; // a huge value over a tiny quantum overflows: not a number to compare
  if (!Number.isFinite(steps)) return f.missing;
  const x = roundHalfEven(steps) * f.quantum; // as the service's cache key rounds it
  return Number.isFinite(x) ? x : f.missing;
}

/** The trees' mean probability of the actions at `places`, each summed in tree order (as the Python SDK adds);
 * a feature is encoded when a walk first reaches it, at most once. */
function mean(tp: TypePolicy, s: Situation, places: number[]): number[] {
  const x = new Map<number, number>();
  const sums = places.map(() => 0);
  for (const t of tp.trees) {
    let node = 0;
    let f: number;
    while ((f = t.feature[node] as number) >= 0) {
      let v = x.get(f);
      if (v === undefined) x.set(f, (v = encode(tp.features[f] as Feature, s)));
      node = v <= (t.threshold[node] as number) ? (t.left[node] as number) : (t.right[node] as number);
    }
    const row = t.value[node] as number[];
    for (let j = 0; j < places.length; j++) sums[j] = (sums[j] as number) + (row[places[j] as number] as number);
  }
  return sums.map((p) => p / tp.trees.length);
}

/** Legal-action masking over the mean of the trees' leaves. Work: the nodes walked in this type's trees and their
 * leaves' legal actions, never the rest of the file. */
function chooseIn(tp: TypePolicy, s: Situation): [string, number] | null {
  let places: number[];
  if (s.legal.size < tp.actions.length) {
    places = [];
    for (const a of s.legal) {
      const i = tp.index.get(a);
      if (i !== undefined) places.push(i);
    }
    places.sort((a, b) => a - b);
  } else places = tp.actions.flatMap((a, i) => (s.legal.has(a) ? [i] : []));
  const probs = mean(tp, s, places);
  let best = -1;
  let bestP = 0;
  let legal = 0;
  places.forEach((i, j) => {
    const p = probs[j] as number;
    legal += p;
    if (p > bestP) [best, bestP] = [i, p];
  });
  if (best < 0 || legal <= 0) return null;
  return [tp.actions[best] as string, bestP / legal];
}

/** A loaded policy file: `choose()` for each entity, or null to ask the service. */
export class Policy {
  readonly manifestVersion: string;
  readonly clientId: string | null;
  readonly createdAt: string | null;
  private readonly types: Map<string, TypePolicy>;

  private constructor(data: Json) {
    this.manifestVersion = text(data, "manifest_version");
    this.clientId = typeof data["client_id"] === "string" ? data["client_id"] : null;
    this.createdAt = typeof data["created_at"] === "string" ? data["created_at"] : null;
    const types = data["types"];
    if (!isObject(types)) throw new PolicyError("policy file: `types` must be an object of entity types");
    count(types);
    this.types = new Map(Object.entries(types).map(([name, spec]) => [name, typePolicy(name, spec)]));
  }

  /** A policy from JSON text, its UTF-8 bytes, or a parsed object. With `manifestVersion` (the game's, from
   * GET /v1/manifest), a file distilled for another version is refused (PolicyError). `maxBytes`: the largest
   * text read (UTF-8 bytes; 16 MiB unless a game needs another bound). */
  static load(
    source: string | Uint8Array | Json,
    options: { manifestVersion?: string | null; maxBytes?: number } = {},
  ): Policy {
    const max = options.maxBytes ?? POLICY_MAX_BYTES;
    let data: unknown = source;
    if (source instanceof Uint8Array) data = parseJson(utf8(source, "policy JSON", max), "policy JSON", max);
    else if (typeof source === "string") data = parseJson(source, "policy JSON", max);
    if (!isObject(data)) throw new PolicyError("a policy must be a JSON object");
    if (data["format"] !== POLICY_FORMAT || data["format_version"] !== POLICY_FORMAT_VERSION) {
      throw new PolicyError(
        `not a policy file this SDK reads: \`format\` must be '${POLICY_FORMAT}' and \`format_version\` ` +
          `${POLICY_FORMAT_VERSION} (found ${JSON.stringify(data["format"])}, ${JSON.stringify(data["format_version"])})`,
      );
    }
    const policy = new Policy(data);
    if (options.manifestVersion !== undefined && options.manifestVersion !== null)
      policy.check(options.manifestVersion);
    return policy;
  }

  /** The entity types this policy covers. */
  get covers(): string[] {
    return [...this.types.keys()].sort();
  }

  /** Refuse this policy for a game on another manifest version: its fields may mean something else now. */
  check(manifestVersion: string): void {
    if (manifestVersion !== this.manifestVersion) {
      throw new PolicyError(
        `this policy was distilled for manifest version ${this.manifestVersion}, and the game runs ` +
          `${manifestVersion}: a policy for another manifest version is never used (distill again)`,
      );
    }
  }

  /** The most probable legal action and its probability among the legal ones; null for a type this policy
   * does not cover or when no legal action has any probability. Never throws: a value not of its feature's
   * kind (a string for a number, NaN, a number too large for the quantum) is missing. */
  choose(
    type: string,
    observation: Json,
    legalActions: readonly string[],
    world: Json | null = null,
    scopeState: Json | null = null,
    trigger: string | null = null,
    profile: string | null = null,
  ): [string, number] | null {
    const tp = typeof type === "string" ? this.types.get(type) : undefined;
    if (tp === undefined) return null;
    const legal = Array.isArray(legalActions) ? (legalActions as unknown[]) : []; // anything else: none legal
    const situation: Situation = {
      observation: isObject(observation) ? observation : {},
      world: isObject(world) ? world : {},
      scope_state: isObject(scopeState) ? scopeState : {},
      trigger,
      profile,
      legal: new Set(legal.filter((a): a is string => typeof a === "string")),
    };
    return chooseIn(tp, situation);
  }
}

/** The file's size in types, trees and nodes, counted before any tree is built: a huge file fails fast. */
function count(types: Json): void {
  const entries = Object.entries(types);
  if (entries.length > POLICY_MAX_TYPES)
    throw new PolicyError(
      `policy file: \`types\` holds ${thousands(entries.length)} types: at most ${thousands(POLICY_MAX_TYPES)}`,
    );
  let nodes = 0;
  for (const [name, spec] of entries) {
    const trees = isObject(spec) && Array.isArray(spec["trees"]) ? (spec["trees"] as unknown[]) : [];
    if (trees.length > POLICY_MAX_TREES)
      throw new PolicyError(
        `policy file: \`types.${name}.trees\` holds ${thousands(trees.length)} trees: at most ${POLICY_MAX_TREES} a type`,
      );
    for (const t of trees) nodes += isObject(t) && Array.isArray(t["feature"]) ? t["feature"].length : 0;
    if (nodes > POLICY_MAX_NODES)
      throw new PolicyError(
        `policy file: \`types.${name}\` brings the trees past ${thousands(POLICY_MAX_NODES)} nodes in all`,
      );
  }
}

function thousands(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** The text of a policy: UTF-8 (as JSON is), within the size bound. */
function utf8(bytes: Uint8Array, where: string, max: number): string {
  if (bytes.length > max) throw new PolicyError(`${where}: larger than ${thousands(max)} bytes`);
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new PolicyError(`${where}: not UTF-8`);
  }
}

/** Parsed JSON, its size and nesting bounded before parsing, exactly as the Python SDK bounds them. */
function parseJson(source: string, where: string, max: number): unknown {
  const big = source.length > max || (3 * source.length > max && new TextEncoder().encode(source).length > max);
  if (big) throw new PolicyError(`${where}: larger than ${thousands(max)} bytes`);
  const at = tooDeep(source).at;
  if (at !== null)
    throw new PolicyError(`${where}: nested deeper than ${POLICY_MAX_NESTING} levels (at character ${at})`);
  try {
    return JSON.parse(source);
  } catch (e) {
    throw new PolicyError(`${where}: not JSON (${String(e)})`);
  }
}

/** Where the JSON first nests deeper than POLICY_MAX_NESTING (outside strings), or null, in one pass: each
 * character is read once (`steps` counts them, for the tests), an escape skips the character after it, an
 * unterminated string runs to the end. (A string pattern that could fail at an unterminated quote was tried again
 * from every later quote: quadratic.) Exported for the tests only. */
export function tooDeep(source: string): { at: number | null; steps: number } {
  let depth = 0;
  let inString = false;
  let steps = 0;
  for (let i = 0; i < source.length; i++) {
    steps++;
    const c = source.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > POLICY_MAX_NESTING) return { at: i, steps };
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return { at: null, steps };
}

function text(data: Json, key: string): string {
  const v = data[key];
  if (typeof v !== "string" || !v) throw new PolicyError(`policy file: \`${key}\` must be a non-empty string`);
  return v;
}

function num(v: unknown, path: string): number {
  if (typeof v !== "number" || !Number.isFinite(v))
    throw new PolicyError(`policy file: \`${path}\` must be a finite number`);
  return v;
}

function int(v: unknown, path: string): number {
  const x = num(v, path);
  if (!Number.isInteger(x)) throw new PolicyError(`policy file: \`${path}\` must be an integer`);
  return x;
}

/** A leaf is a distribution: probabilities in [0, 1] (so no sum can overflow) and some probability. */
function checkLeaf(row: number[], path: string, nActions: number): void {
  if (row.length !== nActions) throw new PolicyError(`policy file: \`${path}\` must hold one probability an action`);
  if (!row.every((p) => p >= 0 && p <= 1) || row.reduce((a, b) => a + b, 0) <= 0)
    throw new PolicyError(`policy file: \`${path}\` must hold probabilities from 0 to 1, not all 0`);
}

/** One feature entry, checked. */
function feature(spec: unknown, path: string): Feature {
  if (!isObject(spec)) throw new PolicyError(`policy file: \`${path}\` must be an object`);
  const source = spec["source"];
  const encoding = spec["encoding"];
  if (!SOURCES.includes(source as Source))
    throw new PolicyError(`policy file: \`${path}.source\` must be one of ${SOURCES.join(", ")}`);
  if (!ENCODINGS.includes(encoding as Encoding))
    throw new PolicyError(`policy file: \`${path}.encoding\` must be one of ${ENCODINGS.join(", ")}`);
  const field = spec["field"];
  if ((source === "observation" || source === "world" || source === "scope_state") && typeof field !== "string")
    throw new PolicyError(`policy file: \`${path}.field\` must name a field of the ${String(source)}`);
  const value = spec["value"];
  if (encoding === "enum" && typeof value !== "string")
    throw new PolicyError(`policy file: \`${path}.value\` must be the enum value this feature tests`);
  const q = spec["quantum"] === undefined || spec["quantum"] === null ? null : num(spec["quantum"], `${path}.quantum`);
  if (q !== null && q <= 0) throw new PolicyError(`policy file: \`${path}.quantum\` must be above 0`);
  return {
    source: source as Source,
    field: typeof field === "string" ? field : null,
    encoding: encoding as Encoding,
    value: typeof value === "string" ? value : null,
    quantum: q,
    missing: num(spec["missing"] ?? 0, `${path}.missing`),
  };
}

/** One tree, checked whole: a bad index would loop or crash in the game, not here. */
function tree(spec: unknown, path: string, nFeatures: number, nActions: number): Tree {
  if (!isObject(spec)) throw new PolicyError(`policy file: \`${path}\` must be an object`);
  const n = Array.isArray(spec["feature"]) ? spec["feature"].length : 0;
  const arrays: Record<string, unknown[]> = {};
  for (const k of ["feature", "threshold", "left", "right", "value"]) {
    const v = spec[k];
    if (!Array.isArray(v) || v.length !== n || n === 0)
      throw new PolicyError(`policy file: \`${path}.${k}\` must be a list of one item a node (${n || "at least 1"})`);
    arrays[k] = v;
  }
  const ints = (k: string): number[] => (arrays[k] as unknown[]).map((v, i) => int(v, `${path}.${k}[${i}]`));
  const t: Tree = {
    feature: ints("feature"),
    threshold: (arrays["threshold"] as unknown[]).map((v, i) => num(v, `${path}.threshold[${i}]`)),
    left: ints("left"),
    right: ints("right"),
    value: (arrays["value"] as unknown[]).map((row, i) =>
      (Array.isArray(row) ? row : []).map((p: unknown) => num(p, `${path}.value[${i}]`)),
    ),
  };
  const depth = new Array<number>(n).fill(0); // children come after their parent: one pass sees parents first
  for (let i = 0; i < n; i++) {
    const f = t.feature[i] as number;
    if (f >= nFeatures) throw new PolicyError(`policy file: \`${path}.feature[${i}]\` is not a feature of the type`);
    const [l, r] = [t.left[i] as number, t.right[i] as number];
    if (f < 0) {
      checkLeaf(t.value[i] as number[], `${path}.value[${i}]`, nActions);
      continue;
    }
    if (!(i < l && l < n && i < r && r < n))
      throw new PolicyError(`policy file: \`${path}\` node ${i} must point to later nodes of the tree`);
    const d = depth[i] as number;
    if (d >= POLICY_MAX_DEPTH)
      throw new PolicyError(`policy file: \`${path}\` node ${i} is deeper than ${POLICY_MAX_DEPTH} levels`);
    for (const c of [l, r]) depth[c] = Math.max(depth[c] as number, d + 1);
  }
  return t;
}

/** One type's entry, checked. */
function typePolicy(name: string, spec: unknown): TypePolicy {
  const path = `types.${name}`;
  if (!isObject(spec)) throw new PolicyError(`policy file: \`${path}\` must be an object`);
  const actions = spec["actions"];
  if (!Array.isArray(actions) || actions.length === 0 || !actions.every((a) => typeof a === "string"))
    throw new PolicyError(`policy file: \`${path}.actions\` must be a list of action names`);
  if (actions.length > POLICY_MAX_ACTIONS)
    throw new PolicyError(
      `policy file: \`${path}.actions\` names ${thousands(actions.length)} actions: at most ${POLICY_MAX_ACTIONS} a type`,
    );
  if (new Set(actions).size !== actions.length)
    throw new PolicyError(`policy file: \`${path}.actions\` must not name an action twice`);
  const features = spec["features"];
  const trees = spec["trees"];
  if (!Array.isArray(features)) throw new PolicyError(`policy file: \`${path}.features\` must be a list`);
  if (features.length > POLICY_MAX_FEATURES)
    throw new PolicyError(
      `policy file: \`${path}.features\` holds ${thousands(features.length)} features: at most ${thousands(POLICY_MAX_FEATURES)} a type`,
    );
  if (!Array.isArray(trees) || trees.length === 0)
    throw new PolicyError(`policy file: \`${path}.trees\` must be a list of at least one tree`);
  const feats = features.map((f, i) => feature(f, `${path}.features[${i}]`));
  return {
    actions: actions as string[],
    features: feats,
    trees: trees.map((t, i) => tree(t, `${path}.trees[${i}]`, feats.length, actions.length)),
    index: new Map((actions as string[]).map((a, i) => [a, i])),
  };
}
