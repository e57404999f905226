/* npcmind-demo-sources {"sha256":"bd6bdb56d19ffbc4ed5b87d971621e66171a9578eb3cd23b301b3d9dc4fe6d54","files":["clients/demo/index.html","clients/demo/src/autopilot.ts","clients/demo/src/brain.ts","clients/demo/src/game.ts","clients/demo/src/labels.ts","clients/demo/src/main.ts","clients/demo/src/motion.ts","clients/demo/src/native.ts","clients/demo/src/overlay.ts","clients/demo/src/plot.ts","clients/demo/src/render.ts","clients/demo/src/service.ts","clients/demo/src/sources.ts","clients/demo/src/world.ts","clients/typescript/src/answer.ts","clients/typescript/src/cascade.ts","clients/typescript/src/decide.ts","clients/typescript/src/errors.ts","clients/typescript/src/limits.ts","clients/typescript/src/lines.ts","clients/typescript/src/outbox.ts","clients/typescript/src/policy.ts","clients/typescript/src/refusals.ts","clients/typescript/src/roster.ts","clients/typescript/src/say.ts","clients/typescript/src/scheduler.ts","clients/typescript/src/session.ts","clients/typescript/src/stream.ts","clients/typescript/src/timings.ts","clients/typescript/src/transport.ts","clients/typescript/src/types.ts"]} */
"use strict";
(() => {
  // src/world.ts
  var WIDTH = 960;
  var HEIGHT = 600;
  var HIVE = { x: 760, y: 300 };
  var PLAYER_START = { x: 160, y: 300 };
  var BEE_SIGHT = 200;
  var QUEEN_SIGHT = 250;
  var BEE_HIT = 0.25;
  var QUEEN_HIT = 0.06;
  var STING = 0.03;
  var HEAL_AFTER = 10;
  var native = (action) => ({ action, source: "native", code: null, ms: null });
  var World = class {
    player = { ...PLAYER_START, hp: 1, swatReady: 0, swatShown: 0 };
    bees = [];
    queen = { id: "queen", x: HIVE.x, y: HIVE.y, hp: 1, doing: native("idle"), callingHelp: false };
    swarms = [
      { id: "swarm-a", doing: native("each bee alone"), wave: 0, respawnAt: null },
      { id: "swarm-b", doing: native("each bee alone"), wave: 0, respawnAt: null }
    ];
    time = 0;
    round = 1;
    constructor() {
      for (const s of this.swarms) this.spawn(s);
    }
    /** A new wave of six bees for a swarm, with ids never used before (a dead bee's id is not reused). */
    spawn(s) {
      s.wave += 1;
      s.respawnAt = null;
      const side = s.id === "swarm-a" ? -1 : 1;
      for (let i = 0; i < 6; i++) {
        const a = i / 6 * Math.PI * 2;
        this.bees.push({
          id: `${s.id.slice(-1)}${s.wave}-${i}`,
          swarm: s.id,
          slot: i,
          hp: 1,
          doing: native("wander"),
          stingReady: 0,
          alerted: 0,
          hitAt: 0,
          wanderAngle: a,
          x: HIVE.x - 60 + Math.cos(a) * 30,
          y: HIVE.y + side * 110 + Math.sin(a) * 30
        });
      }
    }
    /** The living bees of a swarm: its size, and who its decision moves. */
    membersOf(swarm) {
      return this.bees.filter((b) => b.swarm === swarm);
    }
    /** The player swats: every bee within reach is hit, the queen too. */
    swat(out) {
      const p = this.player;
      if (this.time < p.swatReady) return;
      p.swatReady = this.time + 0.5;
      p.swatShown = this.time + 0.15;
      for (const b of [...this.bees]) {
        if (dist(b, p) > 42) continue;
        b.hp = Math.max(0, b.hp - BEE_HIT);
        b.hitAt = this.time;
        if (b.hp > 0) {
          out.push({ kind: "hit", bee: b.id });
          continue;
        }
        this.bees = this.bees.filter((x) => x !== b);
        const near = this.bees.filter((x) => dist(x, b) <= BEE_SIGHT).map((x) => x.id);
        out.push({ kind: "died", bee: b.id, near });
      }
      if (dist(this.queen, p) <= 50 && this.queen.hp > 0) {
        this.queen.hp = Math.max(0.05, this.queen.hp - QUEEN_HIT);
        out.push({ kind: "queen-hit" });
      }
    }
    /** Stings, escapes, healing, respawns: the rules of one step of `dt` game seconds. */
    rules(dt, out) {
      this.time += dt;
      const p = this.player;
      for (const b of this.bees) {
        b.alerted = Math.max(0, b.alerted - dt);
        if (b.doing.action === "chase" && dist(b, p) < 16 && this.time >= b.stingReady) {
          b.stingReady = this.time + 1.2;
          p.hp = Math.max(0, p.hp - STING);
          out.push({ kind: "stung", bee: b.id });
        }
        if (b.doing.action === "flee" && dist(b, p) > BEE_SIGHT * 1.3) out.push({ kind: "escaped", bee: b.id });
        if (b.hp < 1 && b.doing.action !== "chase" && this.time - b.hitAt >= HEAL_AFTER) b.hp = 1;
      }
      const q = this.queen;
      if (dist(q, HIVE) < 30) q.hp = Math.min(1, q.hp + dt * 0.03);
      q.callingHelp = q.doing.action === "flee" && q.hp < 0.5 && q.doing.source !== "native";
      if (q.callingHelp) for (const b of this.bees) b.alerted = 2;
      for (const s of this.swarms) {
        if (this.membersOf(s.id).length > 0) continue;
        if (s.respawnAt === null) s.respawnAt = this.time + 6;
        else if (this.time >= s.respawnAt) this.spawn(s);
      }
      if (p.hp <= 0) {
        out.push({ kind: "player-died" });
        this.round += 1;
        Object.assign(p, { ...PLAYER_START, hp: 1 });
      }
    }
  };
  function dist(a, b) {
    return Math.hypot(a.x - b.x, a.y - b.y);
  }
  function moveToward(m, to, speed2, dt) {
    const d = dist(m, to);
    if (d > 0.5) {
      const k = Math.min(1, speed2 * dt / d);
      m.x += (to.x - m.x) * k;
      m.y += (to.y - m.y) * k;
    }
    m.x = Math.max(8, Math.min(WIDTH - 8, m.x));
    m.y = Math.max(8, Math.min(HEIGHT - 8, m.y));
  }

  // src/autopilot.ts
  var TOUR = [
    { name: "rest", from: 0, words: "waiting out of sight: the scene repeats" },
    { name: "fight", from: 10, words: "fighting: the demo learns" },
    { name: "cut", from: 30, words: "fighting, the model cut" },
    { name: "fight", from: 40, words: "fighting, the model back" },
    { name: "rest", from: 52, words: "resting out of sight" }
  ];
  var MINUTE = 60;
  var REST = { x: 130, y: 300 };
  var KEEP_OFF = 75;
  var SPEED = 120;
  function legAt(t) {
    const m = t % MINUTE;
    return TOUR.reduce((a, l) => l.from <= m ? l : a);
  }
  function untilNext(t) {
    const m = t % MINUTE;
    const next = TOUR.find((l) => l.from > m);
    return (next ? next.from : MINUTE) - m;
  }
  function outside(to, c, keep) {
    const d = dist(to, c);
    if (d >= keep) return to;
    if (d < 1) return { x: c.x - keep, y: c.y };
    const k = keep / d;
    return { x: c.x + (to.x - c.x) * k, y: c.y + (to.y - c.y) * k };
  }
  function steer(w, dt) {
    const p = w.player;
    if (legAt(w.time).name === "rest") {
      moveToward(p, REST, SPEED, dt);
      return false;
    }
    const foes = w.bees.filter((b) => b.doing.action !== "flee");
    const near = foes.reduce((a, b) => a === null || dist(b, p) < dist(a, p) ? b : a, null);
    let to = near ?? { x: HIVE.x - 220, y: HIVE.y };
    to = outside(outside(to, HIVE, KEEP_OFF), w.queen, KEEP_OFF);
    to = { x: Math.max(40, Math.min(WIDTH - 40, to.x)), y: Math.max(40, Math.min(HEIGHT - 40, to.y)) };
    moveToward(p, to, SPEED, dt);
    return w.bees.some((b) => dist(b, p) < 36);
  }

  // ../typescript/src/errors.ts
  var NpcMindError = class extends Error {
    name = "NpcMindError";
    status;
    code;
    /** `status` and `code` optional: a game's own code may throw one with a message alone. */
    constructor(message, options = {}) {
      super(message);
      this.status = options.status ?? null;
      this.code = options.code ?? null;
    }
  };
  function readError(body) {
    const err = isObject(body) && isObject(body["error"]) ? body["error"] : {};
    const found = err["details"];
    const details = Array.isArray(found) ? found.filter(isObject).map((d) => ({ path: String(d["path"] ?? ""), message: String(d["message"] ?? "") })) : [];
    return { code: String(err["code"] ?? ""), message: String(err["message"] ?? ""), details };
  }
  function errorLine(body, otherwise) {
    const { message, details } = readError(body);
    return details.map((d) => `${d.path}: ${d.message}`).join("; ") || message || otherwise;
  }
  function isObject(value) {
    return typeof value === "object" && value !== null && !Array.isArray(value);
  }

  // ../typescript/src/policy.ts
  var POLICY_FORMAT = "npcmind-policy";
  var POLICY_FORMAT_VERSION = 1;
  var SOURCES = ["observation", "world", "scope_state", "trigger", "profile", "legal"];
  var ENCODINGS = ["number", "boolean", "enum"];
  var POLICY_MAX_BYTES = 16 * 1024 * 1024;
  var POLICY_MAX_NESTING = 32;
  var POLICY_MAX_DEPTH = 64;
  var POLICY_MAX_NODES = 1e6;
  var POLICY_MAX_TYPES = 256;
  var POLICY_MAX_TREES = 32;
  var POLICY_MAX_ACTIONS = 256;
  var POLICY_MAX_FEATURES = 4096;
  var PolicyError = class extends NpcMindError {
    name = "PolicyError";
  };
  function isObject2(v) {
    return typeof v === "object" && v !== null && !Array.isArray(v);
  }
  function roundHalfEven(x) {
    const floor = Math.floor(x);
    const diff = x - floor;
    if (diff < 0.5) return floor;
    if (diff > 0.5) return floor + 1;
    return floor % 2 === 0 ? floor : floor + 1;
  }
  function encode(f, s) {
    if (f.source === "legal") return f.value !== null && s.legal.has(f.value) ? 1 : 0;
    let raw = s[f.source];
    if (f.field !== null) raw = isObject2(raw) ? raw[f.field] : null;
    if (raw === null || raw === void 0) return f.missing;
    if (f.encoding === "enum") return raw === f.value ? 1 : 0;
    if (f.encoding === "boolean") return raw === true ? 1 : raw === false ? 0 : f.missing;
    if (typeof raw !== "number" || !Number.isFinite(raw)) return f.missing;
    if (!f.quantum) return raw;
    const steps = raw / f.quantum;
    if (!Number.isFinite(steps)) return f.missing;
    const x = roundHalfEven(steps) * f.quantum;
    return Number.isFinite(x) ? x : f.missing;
  }
  function mean(tp, s, places) {
    const x = /* @__PURE__ */ new Map();
    const sums = places.map(() => 0);
    for (const t of tp.trees) {
      let node = 0;
      let f;
      while ((f = t.feature[node]) >= 0) {
        let v = x.get(f);
        if (v === void 0) x.set(f, v = encode(tp.features[f], s));
        node = v <= t.threshold[node] ? t.left[node] : t.right[node];
      }
      const row = t.value[node];
      for (let j = 0; j < places.length; j++) sums[j] = sums[j] + row[places[j]];
    }
    return sums.map((p) => p / tp.trees.length);
  }
  function chooseIn(tp, s) {
    let places;
    if (s.legal.size < tp.actions.length) {
      places = [];
      for (const a of s.legal) {
        const i = tp.index.get(a);
        if (i !== void 0) places.push(i);
      }
      places.sort((a, b) => a - b);
    } else places = tp.actions.flatMap((a, i) => s.legal.has(a) ? [i] : []);
    const probs = mean(tp, s, places);
    let best = -1;
    let bestP = 0;
    let legal = 0;
    places.forEach((i, j) => {
      const p = probs[j];
      legal += p;
      if (p > bestP) [best, bestP] = [i, p];
    });
    if (best < 0 || legal <= 0) return null;
    return [tp.actions[best], bestP / legal];
  }
  var Policy = class _Policy {
    manifestVersion;
    clientId;
    createdAt;
    types;
    constructor(data) {
      this.manifestVersion = text(data, "manifest_version");
      this.clientId = typeof data["client_id"] === "string" ? data["client_id"] : null;
      this.createdAt = typeof data["created_at"] === "string" ? data["created_at"] : null;
      const types = data["types"];
      if (!isObject2(types)) throw new PolicyError("policy file: `types` must be an object of entity types");
      count(types);
      this.types = new Map(Object.entries(types).map(([name, spec]) => [name, typePolicy(name, spec)]));
    }
    /** A policy from JSON text, its UTF-8 bytes, or a parsed object. With `manifestVersion` (the game's, from
     * GET /v1/manifest), a file distilled for another version is refused (PolicyError). `maxBytes`: the largest
     * text read (UTF-8 bytes; 16 MiB unless a game needs another bound). */
    static load(source, options = {}) {
      const max = options.maxBytes ?? POLICY_MAX_BYTES;
      let data = source;
      if (source instanceof Uint8Array) data = parseJson(utf8(source, "policy JSON", max), "policy JSON", max);
      else if (typeof source === "string") data = parseJson(source, "policy JSON", max);
      if (!isObject2(data)) throw new PolicyError("a policy must be a JSON object");
      if (data["format"] !== POLICY_FORMAT || data["format_version"] !== POLICY_FORMAT_VERSION) {
        throw new PolicyError(
          `not a policy file this SDK reads: \`format\` must be '${POLICY_FORMAT}' and \`format_version\` ${POLICY_FORMAT_VERSION} (found ${JSON.stringify(data["format"])}, ${JSON.stringify(data["format_version"])})`
        );
      }
      const policy = new _Policy(data);
      if (options.manifestVersion !== void 0 && options.manifestVersion !== null)
        policy.check(options.manifestVersion);
      return policy;
    }
    /** The entity types this policy covers. */
    get covers() {
      return [...this.types.keys()].sort();
    }
    /** Refuse this policy for a game on another manifest version: its fields may mean something else now. */
    check(manifestVersion) {
      if (manifestVersion !== this.manifestVersion) {
        throw new PolicyError(
          `this policy was distilled for manifest version ${this.manifestVersion}, and the game runs ${manifestVersion}: a policy for another manifest version is never used (distill again)`
        );
      }
    }
    /** The most probable legal action and its probability among the legal ones; null for a type this policy
     * does not cover or when no legal action has any probability. Never throws: a value not of its feature's
     * kind (a string for a number, NaN, a number too large for the quantum) is missing. */
    choose(type, observation, legalActions, world2 = null, scopeState = null, trigger = null, profile = null) {
      const tp = typeof type === "string" ? this.types.get(type) : void 0;
      if (tp === void 0) return null;
      const legal = Array.isArray(legalActions) ? legalActions : [];
      const situation = {
        observation: isObject2(observation) ? observation : {},
        world: isObject2(world2) ? world2 : {},
        scope_state: isObject2(scopeState) ? scopeState : {},
        trigger,
        profile,
        legal: new Set(legal.filter((a) => typeof a === "string"))
      };
      return chooseIn(tp, situation);
    }
  };
  function count(types) {
    const entries = Object.entries(types);
    if (entries.length > POLICY_MAX_TYPES)
      throw new PolicyError(
        `policy file: \`types\` holds ${thousands(entries.length)} types: at most ${thousands(POLICY_MAX_TYPES)}`
      );
    let nodes = 0;
    for (const [name, spec] of entries) {
      const trees = isObject2(spec) && Array.isArray(spec["trees"]) ? spec["trees"] : [];
      if (trees.length > POLICY_MAX_TREES)
        throw new PolicyError(
          `policy file: \`types.${name}.trees\` holds ${thousands(trees.length)} trees: at most ${POLICY_MAX_TREES} a type`
        );
      for (const t of trees) nodes += isObject2(t) && Array.isArray(t["feature"]) ? t["feature"].length : 0;
      if (nodes > POLICY_MAX_NODES)
        throw new PolicyError(
          `policy file: \`types.${name}\` brings the trees past ${thousands(POLICY_MAX_NODES)} nodes in all`
        );
    }
  }
  function thousands(n) {
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }
  function utf8(bytes, where, max) {
    if (bytes.length > max) throw new PolicyError(`${where}: larger than ${thousands(max)} bytes`);
    try {
      return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
    } catch {
      throw new PolicyError(`${where}: not UTF-8`);
    }
  }
  function parseJson(source, where, max) {
    const big = source.length > max || 3 * source.length > max && new TextEncoder().encode(source).length > max;
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
  function tooDeep(source) {
    let depth = 0;
    let inString = false;
    let steps = 0;
    for (let i = 0; i < source.length; i++) {
      steps++;
      const c = source.charCodeAt(i);
      if (inString) {
        if (c === 92) i++;
        else if (c === 34) inString = false;
      } else if (c === 34) inString = true;
      else if (c === 91 || c === 123) {
        if (++depth > POLICY_MAX_NESTING) return { at: i, steps };
      } else if (c === 93 || c === 125) depth--;
    }
    return { at: null, steps };
  }
  function text(data, key) {
    const v = data[key];
    if (typeof v !== "string" || !v) throw new PolicyError(`policy file: \`${key}\` must be a non-empty string`);
    return v;
  }
  function num(v, path) {
    if (typeof v !== "number" || !Number.isFinite(v))
      throw new PolicyError(`policy file: \`${path}\` must be a finite number`);
    return v;
  }
  function int(v, path) {
    const x = num(v, path);
    if (!Number.isInteger(x)) throw new PolicyError(`policy file: \`${path}\` must be an integer`);
    return x;
  }
  function checkLeaf(row, path, nActions) {
    if (row.length !== nActions) throw new PolicyError(`policy file: \`${path}\` must hold one probability an action`);
    if (!row.every((p) => p >= 0 && p <= 1) || row.reduce((a, b) => a + b, 0) <= 0)
      throw new PolicyError(`policy file: \`${path}\` must hold probabilities from 0 to 1, not all 0`);
  }
  function feature(spec, path) {
    if (!isObject2(spec)) throw new PolicyError(`policy file: \`${path}\` must be an object`);
    const source = spec["source"];
    const encoding = spec["encoding"];
    if (!SOURCES.includes(source))
      throw new PolicyError(`policy file: \`${path}.source\` must be one of ${SOURCES.join(", ")}`);
    if (!ENCODINGS.includes(encoding))
      throw new PolicyError(`policy file: \`${path}.encoding\` must be one of ${ENCODINGS.join(", ")}`);
    const field = spec["field"];
    if ((source === "observation" || source === "world" || source === "scope_state") && typeof field !== "string")
      throw new PolicyError(`policy file: \`${path}.field\` must name a field of the ${String(source)}`);
    const value = spec["value"];
    if (encoding === "enum" && typeof value !== "string")
      throw new PolicyError(`policy file: \`${path}.value\` must be the enum value this feature tests`);
    const q = spec["quantum"] === void 0 || spec["quantum"] === null ? null : num(spec["quantum"], `${path}.quantum`);
    if (q !== null && q <= 0) throw new PolicyError(`policy file: \`${path}.quantum\` must be above 0`);
    return {
      source,
      field: typeof field === "string" ? field : null,
      encoding,
      value: typeof value === "string" ? value : null,
      quantum: q,
      missing: num(spec["missing"] ?? 0, `${path}.missing`)
    };
  }
  function tree(spec, path, nFeatures, nActions) {
    if (!isObject2(spec)) throw new PolicyError(`policy file: \`${path}\` must be an object`);
    const n = Array.isArray(spec["feature"]) ? spec["feature"].length : 0;
    const arrays = {};
    for (const k of ["feature", "threshold", "left", "right", "value"]) {
      const v = spec[k];
      if (!Array.isArray(v) || v.length !== n || n === 0)
        throw new PolicyError(`policy file: \`${path}.${k}\` must be a list of one item a node (${n || "at least 1"})`);
      arrays[k] = v;
    }
    const ints = (k) => arrays[k].map((v, i) => int(v, `${path}.${k}[${i}]`));
    const t = {
      feature: ints("feature"),
      threshold: arrays["threshold"].map((v, i) => num(v, `${path}.threshold[${i}]`)),
      left: ints("left"),
      right: ints("right"),
      value: arrays["value"].map(
        (row, i) => (Array.isArray(row) ? row : []).map((p) => num(p, `${path}.value[${i}]`))
      )
    };
    const depth = new Array(n).fill(0);
    for (let i = 0; i < n; i++) {
      const f = t.feature[i];
      if (f >= nFeatures) throw new PolicyError(`policy file: \`${path}.feature[${i}]\` is not a feature of the type`);
      const [l, r] = [t.left[i], t.right[i]];
      if (f < 0) {
        checkLeaf(t.value[i], `${path}.value[${i}]`, nActions);
        continue;
      }
      if (!(i < l && l < n && i < r && r < n))
        throw new PolicyError(`policy file: \`${path}\` node ${i} must point to later nodes of the tree`);
      const d = depth[i];
      if (d >= POLICY_MAX_DEPTH)
        throw new PolicyError(`policy file: \`${path}\` node ${i} is deeper than ${POLICY_MAX_DEPTH} levels`);
      for (const c of [l, r]) depth[c] = Math.max(depth[c], d + 1);
    }
    return t;
  }
  function typePolicy(name, spec) {
    const path = `types.${name}`;
    if (!isObject2(spec)) throw new PolicyError(`policy file: \`${path}\` must be an object`);
    const actions = spec["actions"];
    if (!Array.isArray(actions) || actions.length === 0 || !actions.every((a) => typeof a === "string"))
      throw new PolicyError(`policy file: \`${path}.actions\` must be a list of action names`);
    if (actions.length > POLICY_MAX_ACTIONS)
      throw new PolicyError(
        `policy file: \`${path}.actions\` names ${thousands(actions.length)} actions: at most ${POLICY_MAX_ACTIONS} a type`
      );
    if (new Set(actions).size !== actions.length)
      throw new PolicyError(`policy file: \`${path}.actions\` must not name an action twice`);
    const features = spec["features"];
    const trees = spec["trees"];
    if (!Array.isArray(features)) throw new PolicyError(`policy file: \`${path}.features\` must be a list`);
    if (features.length > POLICY_MAX_FEATURES)
      throw new PolicyError(
        `policy file: \`${path}.features\` holds ${thousands(features.length)} features: at most ${thousands(POLICY_MAX_FEATURES)} a type`
      );
    if (!Array.isArray(trees) || trees.length === 0)
      throw new PolicyError(`policy file: \`${path}.trees\` must be a list of at least one tree`);
    const feats = features.map((f, i) => feature(f, `${path}.features[${i}]`));
    return {
      actions,
      features: feats,
      trees: trees.map((t, i) => tree(t, `${path}.trees[${i}]`, feats.length, actions.length)),
      index: new Map(actions.map((a, i) => [a, i]))
    };
  }

  // ../typescript/src/limits.ts
  var MAX_ANSWER_BYTES = 1024 * 1024;
  var MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
  var MAX_ERROR_BYTES = 64 * 1024;
  var MAX_STREAM_BYTES = 2 * 1024 * 1024;
  var MAX_STRAY_LINES = 16;
  var MAX_PROMPT_BYTES = 4 * 1024 * 1024;
  var MAX_STEP_BYTES = 4 * 1024 * 1024;
  var MAX_KEYS_BYTES = 64 * 1024;
  var MAX_MODEL_BYTES = 8 * 1024 * 1024;
  var TICK_STREAM_BYTES = 256 * 1024;
  var MIN_CHUNK_BYTES = 1024;
  var TOO_LARGE = "answer_too_large";
  var TooLargeError = class extends NpcMindError {
    name = "TooLargeError";
    /** The code is the one every reader of errors gives a body read no further than its cap. */
    constructor(message, options = {}) {
      super(message, { status: options.status ?? null, code: TOO_LARGE });
    }
  };
  function tooLarge(what, cap, name) {
    return `${what}: the answer passed ${cap.toLocaleString("en-US")} bytes (${name}, the SDK's cap): not read past that`;
  }
  function tooLargeBody(message) {
    return { error: { code: TOO_LARGE, message } };
  }
  function isTooLarge(body) {
    if (typeof body !== "object" || body === null) return false;
    const error = body["error"];
    return typeof error === "object" && error !== null && error["code"] === TOO_LARGE;
  }
  async function readCapped(res, cap, what, name) {
    if (res.body === null) return new Uint8Array(0);
    const reader = res.body.getReader();
    const chunks = [];
    let size = 0;
    for (; ; ) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > cap) {
        await reader.cancel().catch(() => void 0);
        throw new TooLargeError(tooLarge(what, cap, name));
      }
      chunks.push(value);
    }
    const out = new Uint8Array(size);
    let at = 0;
    for (const c of chunks) {
      out.set(c, at);
      at += c.length;
    }
    return out;
  }
  async function textCapped(res, cap, what, name) {
    const [limit, label2] = res.status >= 200 && res.status < 300 ? [cap, name] : [MAX_ERROR_BYTES, "MAX_ERROR_BYTES"];
    return new TextDecoder().decode(await readCapped(res, limit, what, label2));
  }

  // ../typescript/src/answer.ts
  var CODES = /* @__PURE__ */ new Set(["budget", "busy", "invalid_choice", "refused", "unavailable"]);
  var AI_FIELDS = [
    ["id", "string"],
    ["action", "string"],
    ["label", "string"],
    ["ttl_ms", "number"],
    ["decision_id", "string"],
    ["cached", "boolean"]
  ];
  var MAX_INTEGER = 2 ** 53 - 1;
  function ttlProblem(ttl, at) {
    if (typeof ttl !== "number" || !Number.isInteger(ttl)) return `${at}.ttl_ms: must be an integer`;
    return Math.abs(ttl) <= MAX_INTEGER ? null : `${at}.ttl_ms: out of range (at most ${MAX_INTEGER})`;
  }
  function decisionProblem(d, at) {
    if (!isObject(d)) return `${at}: not an object`;
    if (d["source"] === "AI") {
      for (const [name, kind2] of AI_FIELDS) if (typeof d[name] !== kind2) return `${at}.${name}: must be a ${kind2}`;
      const confidence = d["confidence"];
      if (confidence !== null && (typeof confidence !== "number" || !Number.isFinite(confidence)))
        return `${at}.confidence: must be a finite number`;
      return ttlProblem(d["ttl_ms"], at);
    }
    if (d["source"] === "FALLBACK") {
      if (typeof d["id"] !== "string") return `${at}.id: must be a string`;
      if (!CODES.has(String(d["code"]))) return `${at}.code: not a known fallback code`;
      if (typeof d["reason"] !== "string") return `${at}.reason: must be a string`;
      return d["ttl_ms"] === void 0 ? null : ttlProblem(d["ttl_ms"], at);
    }
    return `${at}.source: must be AI or FALLBACK`;
  }
  function readDecideResponse(body, asked = null) {
    if (!isObject(body)) return "not a JSON object";
    const error = body["error"];
    if (!("epoch" in body) && isObject(error)) return String(error["message"] ?? "an error, with a 200");
    if (typeof body["epoch"] !== "number") return "epoch: must be a number";
    const decisions = body["decisions"];
    if (!Array.isArray(decisions)) return "decisions: must be an array";
    if (asked !== null && decisions.length > asked + MAX_STRAY_LINES)
      return `decisions: ${decisions.length.toLocaleString("en-US")} decisions for ${asked} entities asked (one each, and at most ${MAX_STRAY_LINES} more: MAX_STRAY_LINES)`;
    for (let i = 0; i < decisions.length; i++) {
      const problem = decisionProblem(decisions[i], `decisions[${i}]`);
      if (problem !== null) return problem;
    }
    return body;
  }
  function readStreamLine(line) {
    let d;
    try {
      d = JSON.parse(line);
    } catch {
      return `not JSON: ${line.slice(0, 80)}`;
    }
    if (isObject(d) && "source" in d) {
      const problem = decisionProblem(d, "line");
      return problem ?? { decision: d };
    }
    if (!isObject(d) || typeof d["a2g"] !== "string") return "line: neither a decision (source) nor the last line (a2g)";
    if (typeof d["epoch"] !== "number") return "line.epoch: must be a number";
    if (typeof d["latency_ms"] !== "number") return "line.latency_ms: must be a number";
    return { end: d };
  }

  // ../typescript/src/cascade.ts
  var DEFAULT_POLICY_REFRESH_MS = 6e4;
  var kind = (text2) => text2.replace(/sha256:[0-9a-f]+|\d+/g, "#");
  var Cascade = class {
    constructor(clientId2, policy, fetch2, refreshMs, say, manifestVersion = null, maxBytes = POLICY_MAX_BYTES) {
      this.clientId = clientId2;
      this.refreshMs = refreshMs;
      this.say = say;
      this.maxBytes = maxBytes;
      this.own = policy;
      this.fetch = fetch2 ?? policy === null;
      this.manifestVersion = manifestVersion;
    }
    own;
    fetch;
    fetched = null;
    manifestVersion;
    /** A policy for another version came: the manifest may have changed, ask it again. */
    recheckManifest = false;
    etag = null;
    next = Number.NEGATIVE_INFINITY;
    asking = false;
    /** The policy that decides now: the service's while one is usable, else the game's own (a `Policy` of the
     * game's only for the manifest version it was distilled for, once that is known). */
    active() {
      if (this.fetched !== null) return this.fetched;
      const own = this.own;
      if (own instanceof Policy && this.manifestVersion !== null && own.manifestVersion !== this.manifestVersion) {
        this.say.say(
          `own-policy:${this.manifestVersion}`,
          `the game's policy was distilled for manifest version ${own.manifestVersion}, and the service runs ${this.manifestVersion}: a policy for another manifest version is never used (distill again)`
        );
        return null;
      }
      return own;
    }
    /** The active policy's choice for `e` (action, confidence), or null: ask the service. */
    choose(e, world2, scopeState) {
      const policy = this.active();
      if (policy === null) return null;
      if (policy instanceof Policy)
        return policy.choose(e.type, e.observation, e.legalActions, world2, scopeState, e.trigger, e.profile);
      return policy(e);
    }
    // --- fetching the service's -------------------------------------------------------------------
    /** Whether GET /v1/policy goes out now (fetching on, the manifest version known, none in flight). */
    due(now) {
      return this.fetch && this.manifestVersion !== null && !this.asking && now >= this.next;
    }
    /** The path and the extra headers of GET /v1/policy; the next is due `refreshMs` later. */
    request(now) {
      this.asking = true;
      this.next = now + this.refreshMs;
      const path = `/v1/policy?client_id=${encodeURIComponent(this.clientId)}`;
      return [path, this.etag !== null ? { "if-none-match": this.etag } : {}];
    }
    /** Take the answer to GET /v1/policy; false for an answer the scheduler deals with (401, 429, 5xx). */
    answered(status, body, headers) {
      this.asking = false;
      if (status === 304) return true;
      if (status === 404) {
        this.drop();
        return true;
      }
      if (status !== 200) return false;
      const isDoc = typeof body === "object" && body !== null && !Array.isArray(body) && !(body instanceof Uint8Array) && !(body instanceof Policy) && !(body instanceof PolicyError);
      const doc = isDoc ? body : {};
      let loaded = null;
      try {
        if (body instanceof PolicyError) throw body;
        if (body instanceof Uint8Array && body.length > this.maxBytes)
          throw new PolicyError(
            `GET /v1/policy: the body is larger than ${this.maxBytes.toLocaleString("en-US")} bytes (policyMaxBytes), not read past that`
          );
        loaded = body instanceof Policy ? body : Policy.load(body instanceof Uint8Array ? body : doc, { maxBytes: this.maxBytes });
        if (this.manifestVersion !== null) loaded.check(this.manifestVersion);
        this.fetched = loaded;
        this.etag = headers["etag"] ?? null;
      } catch (e) {
        this.drop();
        const version = loaded !== null ? loaded.manifestVersion : isDoc ? doc["manifest_version"] : void 0;
        this.recheckManifest = (loaded !== null || isDoc) && version !== this.manifestVersion;
        const why = e instanceof PolicyError ? e.message : String(e);
        this.say.say(`policy:${kind(why)}`, `the service's local policy is not used: ${why}`, false);
      }
      return true;
    }
    /** GET /v1/policy got no answer: asked again on its period. */
    failed() {
      this.asking = false;
    }
    /** The manifest version the service runs now: on a change the policy for the old one goes, and the
     * service's is asked at once. */
    manifest(version) {
      this.recheckManifest = false;
      if (version === null || version === this.manifestVersion) return;
      this.manifestVersion = version;
      this.drop();
      this.next = Number.NEGATIVE_INFINITY;
    }
    drop() {
      this.fetched = null;
      this.etag = null;
    }
  };

  // ../typescript/src/outbox.ts
  var TELEMETRY_BATCH = 1e3;
  var REPORTS_A_REQUEST = 256;
  var MAX_QUEUED_REPORTS = 1e4;
  var Outbox = class {
    constructor(host, everyMs) {
      this.host = host;
      this.everyMs = everyMs;
    }
    observed = /* @__PURE__ */ new Map();
    removed = [];
    scene = null;
    reports = [];
    batch = TELEMETRY_BATCH;
    // halved on a 413: observations too rich for the body limit
    sent = /* @__PURE__ */ new Map();
    newest = [];
    // refs of the newest telemetry tick: a decide request waits for them
    again = [];
    // bodies to send again: halved, or without a refused entity
    last = Number.NEGATIVE_INFINITY;
    /** An observe-only entity (the player): sent as telemetry, never asked. */
    observe(id, type, fields, position) {
      const item = { id, type, fields };
      if (position !== null) item["position"] = position;
      this.observed.set(id, item);
    }
    /** Forget an observed entity; whether it was one. */
    forget(id) {
      return this.observed.delete(id);
    }
    /** An entity left: the service hears it with the next telemetry. */
    remove(id) {
      this.removed.push(id);
    }
    /** A new scene: the service resets its population with the next telemetry. */
    setScene(scene) {
      this.scene = scene;
    }
    /** Queue a report; the oldest tenth goes when the service has been away too long. */
    report(item) {
      if (this.reports.length >= MAX_QUEUED_REPORTS) {
        this.reports.splice(0, MAX_QUEUED_REPORTS / 10);
        this.host.warn(
          "reports-dropped",
          `more than ${MAX_QUEUED_REPORTS} reports wait for npcmind: the oldest are dropped`,
          false
        );
      }
      this.reports.push(item);
    }
    /** Reports still waiting to be sent. */
    get queuedReports() {
      return this.reports.length;
    }
    /** One request of queued reports (at most 256), or none; how many it carries. */
    sendReports(clientId2) {
      if (this.reports.length === 0) return { request: null, count: 0 };
      const reports = this.reports.splice(0, REPORTS_A_REQUEST);
      const request = this.host.post("/v1/report", { client_id: clientId2, reports });
      if (request !== null) this.sent.set(request.ref, { kind: "report" });
      return { request, count: reports.length };
    }
    /** The telemetry due now: bodies to send again first (halved, or without a refused entity), then, every
     * `telemetryMs`, the changed entities, the observed ones, the removals and the scene (none when nothing is new). */
    sendTelemetry(now, clientId2, epoch, entities) {
      const again = this.again;
      this.again = [];
      const bodies = this.telemetry(now, clientId2, epoch, entities);
      if (bodies.length > 0) this.newest = [];
      const out = [];
      for (const body of [...again, ...bodies]) this.push(body, out);
      return out;
    }
    telemetry(now, clientId2, epoch, entities) {
      if (now - this.last < this.everyMs) return [];
      const items = [];
      for (const e of entities) {
        if (!e.changed) continue;
        e.changed = false;
        const item = { id: e.id, type: e.type, fields: e.observation };
        if (e.position !== null) item["position"] = e.position;
        if (e.state !== null) item["state"] = e.state;
        if (e.parent !== null) item["parent"] = e.parent;
        items.push(item);
      }
      items.push(...this.observed.values());
      if (items.length === 0 && this.removed.length === 0 && this.scene === null) return [];
      this.last = now;
      const alone = items.filter((i) => this.host.refusals.alone.has(i.id));
      const together = items.filter((i) => !this.host.refusals.alone.has(i.id));
      const bodies = [];
      let first = this.scene !== null ? { scene: this.scene } : {};
      for (let i = 0; i < Math.max(together.length, 1); i += this.batch) {
        const body = {
          client_id: clientId2,
          epoch,
          entities: together.slice(i, i + this.batch),
          ...first
        };
        if (i === 0) body["removed"] = this.removed;
        bodies.push(body);
        first = {};
      }
      if (alone.length > 0) bodies.push({ client_id: clientId2, epoch, entities: alone });
      this.observed.clear();
      this.removed = [];
      this.scene = null;
      return bodies;
    }
    /** Refs of the newest telemetry still unanswered: a decide request goes after them. */
    pendingTelemetry() {
      return this.newest.filter((ref) => this.sent.has(ref));
    }
    /** Whether a request is the outbox's. */
    owns(ref) {
      return this.sent.has(ref);
    }
    /** An answer to one of the outbox's requests; true when the service refused the request as a whole (the
     * scheduler then backs off as for any refusal). What goes again goes with the next telemetry. */
    answer(ref, status, body) {
      const sent = this.sent.get(ref);
      this.sent.delete(ref);
      if (sent?.kind === "telemetry" && status === 200) this.taken(sent.body);
      if (sent === void 0 || sent.kind === "report" || status === 200) return status !== 200;
      const items = sent.body["entities"];
      if (status === 413 && items.length > 1) {
        const half = Math.floor(items.length / 2);
        this.batch = Math.max(1, Math.min(this.batch, half));
        this.again.push({ ...sent.body, entities: items.slice(0, half) });
        const { scene: _scene, removed: _removed, ...rest } = sent.body;
        this.again.push({ ...rest, entities: items.slice(half) });
        return false;
      }
      const bad = this.host.refusals.entities(status, body, new Map(items.map((i) => [i.id, i.type])));
      if (bad === null) return true;
      const kept = { ...sent.body, entities: items.filter((i) => !bad.has(i.id)) };
      if (kept["entities"].length > 0 || kept["removed"]?.length || kept["scene"]) {
        this.again.push(kept);
      }
      return false;
    }
    /** A request that got no answer is forgotten (telemetry is sent again when the entities change). */
    failed(ref) {
      this.sent.delete(ref);
    }
    taken(body) {
      const alone = this.host.refusals.alone;
      for (const item of body["entities"]) if (!this.host.tracked(item.id)) alone.delete(item.id);
    }
    push(body, out) {
      const request = this.host.post("/v1/telemetry", body);
      if (request === null) return;
      this.sent.set(request.ref, { kind: "telemetry", body });
      this.newest.push(request.ref);
      out.push(request);
    }
  };

  // ../typescript/src/refusals.ts
  var ENTITY_PATH = /^entities\[(\d+)\]\.?/;
  var NUMBER = /\d+(?:\.\d+)?/g;
  var Refusals = class {
    constructor(say, stats) {
      this.say = say;
      this.stats = stats;
    }
    /** Entity id -> why the service refused it: sent alone until taken. */
    alone = /* @__PURE__ */ new Map();
    /** The entities of a 422 whose every problem lies in one of the request's entities (`sent`: id -> type, in the
     * request's order), each with why, named once and sent alone from now on; null otherwise. */
    entities(status, body, sent) {
      const found = refusedEntities(status, body, [...sent.keys()]);
      for (const [id, why] of found ?? []) {
        this.stats.refused++;
        this.alone.set(id, why);
        const said = `npcmind refused ${sent.get(id) ?? "entity"} ${JSON.stringify(id)} (${why}): the others go on without it, and it is sent alone until the service takes it`;
        this.say(`refused:${id}:${why}`, said);
      }
      return found;
    }
    /** Say a refusal of the whole request once (a countdown in its text is not a new refusal). */
    said(status, body, hosted) {
      let msg = `npcmind answered ${status} ${readError(body).code}: ${errorLine(body, "")}`;
      if (status === 401 && !hosted) msg += " (the service runs the hosted profile: give DecideClient its apiKey)";
      this.say(`${status}:${msg.replace(NUMBER, "#")}`, msg);
    }
  };
  var MAX_RETRY_AFTER_S = 3600;
  function retryAfterMs(headers) {
    const retry = headers["retry-after"];
    return retry !== void 0 && /^\d+(\.\d+)?$/.test(retry) ? Math.min(Number(retry), MAX_RETRY_AFTER_S) * 1e3 : 1e3;
  }
  function refusedEntities(status, body, sent) {
    const details = status === 422 ? readError(body).details : [];
    if (details.length === 0) return null;
    const why = /* @__PURE__ */ new Map();
    for (const d of details) {
      const m = ENTITY_PATH.exec(d.path);
      const id = m ? sent[Number(m[1])] : void 0;
      if (m === null || id === void 0) return null;
      const problems = why.get(id) ?? [];
      problems.push(`${d.path.slice(m[0].length) || "entity"}: ${d.message}`);
      why.set(id, problems);
    }
    return new Map([...why].map(([id, problems]) => [id, problems.join("; ")]));
  }

  // ../typescript/src/types.ts
  var OUTCOMES = ["done", "failed", "interrupted", "rejected"];
  function newStats() {
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
      streamsCut: 0
    };
  }

  // ../typescript/src/roster.ts
  var REASK_GAP_MS = 500;
  var NUMBER2 = /\d+(?:\.\d+)?/g;
  var Roster = class {
    constructor(epoch, windowMs, choose, threshold, stats, say) {
      this.windowMs = windowMs;
      this.stats = stats;
      this.say = say;
      this.epoch = epoch;
      this.choose = choose;
      this.threshold = threshold;
    }
    entities = /* @__PURE__ */ new Map();
    epoch;
    choose;
    threshold;
    windowEnd = Number.NEGATIVE_INFINITY;
    // events until then go out together, when it ends
    count = 0;
    lastReask = Number.NEGATIVE_INFINITY;
    reaskPending = false;
    /** Add an entity that decides, or update what it sees and may do now (not asked again for that alone:
     * on its refresh, on an event, or when the population changes). */
    track(id, type, observation, legalActions, options, now) {
      const e = this.entities.get(id);
      const position = options.position ?? null;
      const profile = options.profile ?? null;
      const parent = options.parent ?? null;
      const state = options.state ?? null;
      if (e === void 0) {
        const fresh = {
          trigger: null,
          due: now,
          askedAt: Number.NEGATIVE_INFINITY,
          inFlight: false,
          choice: null,
          changed: true
        };
        this.entities.set(id, { id, type, observation, legalActions, position, profile, parent, state, ...fresh });
        return;
      }
      if (e.type !== type) {
        e.choice = null;
        e.due = now;
      }
      e.type = type;
      e.observation = observation;
      e.legalActions = legalActions;
      e.position = position;
      e.profile = profile;
      e.parent = parent;
      e.state = state;
      e.changed = true;
    }
    /** Something happened to the entity: asked when the event window it opened or joined ends. False (said
     * once) for an entity not tracked: a game loop must not crash on the order of two calls. */
    event(id, trigger, now) {
      const e = this.entities.get(id);
      if (e === void 0) {
        this.say.say(
          `event:${trigger}`,
          `event(${JSON.stringify(id)}, ${JSON.stringify(trigger)}) for an entity not tracked: ignored`,
          false
        );
        return false;
      }
      e.trigger = trigger;
      if (now >= this.windowEnd) this.windowEnd = now + this.windowMs;
      e.due = Math.min(e.due, this.windowEnd);
      return true;
    }
    /** The report item for the entity's current AI decision, or null: it has none, or the outcome is unknown. */
    report(id, outcome, detail) {
      if (!OUTCOMES.includes(outcome)) {
        const why = `report(${JSON.stringify(id)}, ${JSON.stringify(outcome)}): the outcome must be one of ${OUTCOMES.join(", ")}; not sent`;
        this.say.say(`outcome:${String(outcome)}`, why, false);
        return null;
      }
      const decisionId = this.entities.get(id)?.choice?.decisionId;
      if (decisionId === void 0 || decisionId === null) return null;
      const item = { decision_id: decisionId, outcome };
      if (detail) item["detail"] = detail.slice(0, 200);
      return item;
    }
    /** The entity's live decision, or null: run the game's native AI. Checked against `legalNow`, else the
     * legal actions last tracked. */
    action(id, legalNow, now) {
      const e = this.entities.get(id);
      const c = e?.choice;
      if (e === void 0 || c === null || c === void 0) return null;
      if (now >= c.expiresAt) {
        e.choice = null;
        return null;
      }
      return (legalNow ?? e.legalActions).includes(c.action) ? c : null;
    }
    /** A new epoch: what was decided for the old state no longer holds, and everyone is asked again. */
    setEpoch(value, now) {
      if (value === this.epoch) return;
      this.epoch = value;
      for (const e of this.entities.values()) {
        e.choice = null;
        e.due = Math.min(e.due, now);
      }
    }
    /** When the number of entities changed, everyone is due now (at most every 500 ms). */
    population(now) {
      if (this.entities.size !== this.count) {
        this.count = this.entities.size;
        this.reaskPending = true;
      }
      if (this.reaskPending && now - this.lastReask >= REASK_GAP_MS) {
        this.reaskPending = false;
        this.lastReask = now;
        for (const e of this.entities.values()) e.due = Math.min(e.due, now);
      }
    }
    /** Cascade: whether the local policy is sure enough of `e` to decide it here (none, or one that gives null
     * for it: the service decides). */
    local(e, now, ttl) {
      let got = null;
      try {
        got = this.choose(e);
      } catch (exc) {
        this.say.say(
          "policy",
          `the local policy failed for ${JSON.stringify(e.id)} (said once; the service decides instead): ${String(exc)}`,
          false
        );
        return false;
      }
      if (got === null) return false;
      const [action, confidence] = got;
      if (confidence < this.threshold || !e.legalActions.includes(action)) return false;
      e.choice = {
        action,
        source: "local",
        confidence,
        expiresAt: now + ttl,
        decisionId: null,
        cached: false,
        label: null
      };
      e.trigger = null;
      this.stats.local++;
      return true;
    }
    /** One decision of an answer, for the entity it names; `legal`: the legal actions sent with it. */
    use(e, d, legal, now) {
      e.inFlight = false;
      if (d.source === "AI") {
        if (!legal.includes(d.action)) {
          this.stats.illegal++;
          e.choice = null;
          return;
        }
        this.stats.ai++;
        if (d.cached) this.stats.cached++;
        const { action, confidence, decision_id: decisionId, cached, label: label2 } = d;
        e.choice = { action, source: "AI", confidence, expiresAt: now + d.ttl_ms, decisionId, cached, label: label2 };
        return;
      }
      this.stats.fallbacks[d.code] = (this.stats.fallbacks[d.code] ?? 0) + 1;
      e.choice = null;
      if (d.code === "budget")
        this.say.say(`budget:${e.type}`, `${e.type} ${JSON.stringify(e.id)} is over its token budget: ${d.reason}`);
      else if (d.code === "unavailable" || d.code === "busy") {
        this.say.say(`${d.code}:${d.reason.replace(NUMBER2, "#")}`, `npcmind fell back with '${d.code}': ${d.reason}`);
      }
    }
    /** The entities of an answered or failed request may be asked again: at `due`, or else on their next
     * refresh (the seed's reaction to `unavailable` and `busy`); those in `keep` on their refresh. */
    release(ids, due, keep = /* @__PURE__ */ new Map()) {
      for (const id of ids) {
        const e = this.entities.get(id);
        if (e === void 0 || !e.inFlight) continue;
        e.inFlight = false;
        if (due !== null && !keep.has(id)) e.due = Math.min(e.due, due);
      }
    }
  };

  // ../typescript/src/say.ts
  var MAX_KEY = 300;
  var MAX_MESSAGE = 2e3;
  var SayOnce = class {
    constructor(log) {
      this.log = log;
    }
    said = /* @__PURE__ */ new Set();
    /** Say `message` unless `key` was said; `native`: it leaves entities to the game's own AI, and it says so. */
    say(key, message, native2 = true) {
      const kind2 = key.slice(0, MAX_KEY);
      if (this.said.has(kind2)) return;
      if (this.said.size >= 1e3) this.said.clear();
      this.said.add(kind2);
      const line = message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}\u2026` : message;
      this.log(native2 ? `${line} (the entities concerned use their native AI)` : line);
    }
  };

  // ../typescript/src/session.ts
  var RENEW_RETRY_MS = 3e4;
  var Session = class {
    constructor(apiKey) {
      this.apiKey = apiKey;
    }
    token = null;
    renewAt = Number.POSITIVE_INFINITY;
    // on the client's clock
    /** The ref of the POST /v1/session in flight, if any. */
    pending = null;
    /** Whether requests may go: a token is held (an old one while it is renewed). */
    get open() {
      return this.token !== null;
    }
    /** Whether requests may be made: a token held, or one asked for (they wait for it). */
    get ready() {
      return this.token !== null || this.pending !== null;
    }
    /** The session request the others must wait for: the first one (a renewal goes on with the old token). */
    awaited() {
      return this.pending !== null && this.token === null ? [this.pending] : [];
    }
    /** Whether to ask for a session now: none yet, or the token near its expiry (not a 401 and a lost request). */
    due(now) {
      return this.pending === null && (this.token === null || now >= this.renewAt);
    }
    /** The headers of the session request itself: the api key. */
    keyHeaders() {
      return { authorization: `Bearer ${this.apiKey}` };
    }
    /** The headers of every other request; while the first token is asked for, `Bearer @<ref>`: the transport
     * puts in the `session_token` the answer to request `ref` brings. */
    headers() {
      if (this.token !== null) return { authorization: `Bearer ${this.token}` };
      return this.pending !== null ? { authorization: `Bearer @${this.pending}` } : {};
    }
    /** The session request's answer; the reason when it was refused. */
    answer(status, body, now) {
      this.pending = null;
      const token = sessionToken(status, body);
      if (token === null || !isObject(body)) {
        if (this.token !== null) this.renewAt = now + RENEW_RETRY_MS;
        return `npcmind did not open a session (POST /v1/session answered ${status}: ${errorLine(body, "(no session_token)")})`;
      }
      const ttl = body["expires_in_s"];
      this.token = token;
      this.renewAt = typeof ttl === "number" ? now + 0.9 * ttl * 1e3 : Number.POSITIVE_INFINITY;
      return null;
    }
    /** The session request got no answer. */
    failed(now) {
      this.pending = null;
      if (this.token !== null) this.renewAt = now + RENEW_RETRY_MS;
    }
    /** The service said the session ended (a 401): a new one before the next request. */
    expire() {
      this.token = null;
      this.renewAt = Number.POSITIVE_INFINITY;
    }
  };
  function sessionToken(status, body) {
    const token = status === 200 && isObject(body) ? body["session_token"] : null;
    return typeof token === "string" && token !== "" ? token : null;
  }

  // ../typescript/src/lines.ts
  var MAX_LINE = 64 * 1024;
  var NEWLINE = 10;
  var encoder = new TextEncoder();
  var decoder = new TextDecoder();
  var Lines = class {
    rest = new Uint8Array(0);
    skipping = false;
    // inside a line past MAX_LINE: dropped up to its newline
    /** Lines dropped for being past MAX_LINE (for the scheduler to say). */
    overlong = 0;
    /** The lines this chunk completes (without their newline; a blank line is skipped), in order; a string is
     * taken as its UTF-8 bytes. */
    feed(data) {
      const bytes = typeof data === "string" ? encoder.encode(data) : data;
      const all = this.rest.length === 0 ? bytes : concat(this.rest, bytes);
      const out = [];
      let start = 0;
      for (let at = all.indexOf(NEWLINE); at !== -1; at = all.indexOf(NEWLINE, start)) {
        const raw = all.subarray(start, at);
        start = at + 1;
        if (this.skipping) {
          this.skipping = false;
          continue;
        }
        if (raw.length > MAX_LINE) {
          this.overlong++;
          continue;
        }
        const line = decoder.decode(raw).trim();
        if (line !== "") out.push(line);
      }
      this.rest = all.slice(start);
      if (this.rest.length > MAX_LINE) {
        this.overlong++;
        this.skipping = true;
        this.rest = new Uint8Array(0);
      }
      return out;
    }
    /** Whether a line was left incomplete (the stream cut mid-line). */
    get partial() {
      return this.rest.length > 0 || this.skipping;
    }
  };
  function concat(a, b) {
    const out = new Uint8Array(a.length + b.length);
    out.set(a, 0);
    out.set(b, a.length);
    return out;
  }

  // ../typescript/src/stream.ts
  var CUT_REASON = "the decision stream was cut";
  var DecisionStream = class {
    constructor(host, legal, epoch, sentAt) {
      this.host = host;
      this.epoch = epoch;
      this.sentAt = sentAt;
      this.pending = new Map(legal);
    }
    lines = new Lines();
    /** The entities of the request still without a decision line, with the legal actions sent for each. */
    pending;
    last = false;
    /** Lines that answered no entity the request asked (ids not asked, repeats, lines not read). */
    strays = 0;
    /** Bytes of the body arrived: every line they complete is applied now. False when the stream ended here:
     * more than MAX_STRAY_LINES of its lines answered no entity it asked (the caller reads no more of it). */
    feed(data, now) {
      for (const line of this.lines.feed(data)) {
        if (!this.line(line, now)) this.strays++;
        if (this.strays + this.lines.overlong > MAX_STRAY_LINES) break;
      }
      if (this.strays + this.lines.overlong <= MAX_STRAY_LINES) return true;
      this.host.warn(
        "stray-lines",
        `a decision stream sent more than ${MAX_STRAY_LINES} lines that answer no entity it asked (ids not asked, repeats, lines that are not decisions): ended there (MAX_STRAY_LINES), the rest fall back`
      );
      this.end(now);
      return false;
    }
    /** The connection closed (a partial line is discarded). After the last line, an entity the stream did not
     * name is asked on its refresh, as today; without it the stream was cut: the lines received stand and every
     * entity of it without one falls back (`unavailable`), and decide requests wait a second. */
    end(now) {
      if (this.last) {
        this.host.roster.release(this.pending.keys(), null);
        this.pending.clear();
        return;
      }
      this.host.stats.streamsCut++;
      this.host.stats.errors++;
      for (const [id, legal] of this.pending) {
        const e = this.host.roster.entities.get(id);
        const cut = { id, source: "FALLBACK", code: "unavailable", reason: CUT_REASON, ttl_ms: 0 };
        if (e !== void 0 && e.inFlight) this.host.roster.use(e, cut, legal, now);
      }
      this.pending.clear();
      this.host.cut(now);
    }
    /** One line applied; false for a line that answers no entity the request asked (a stray). */
    line(text2, now) {
      if (this.last) return false;
      const got = readStreamLine(text2);
      if (typeof got === "string") {
        this.host.stats.errors++;
        this.host.warn("malformed-line", `a line of the decision stream could not be read: ${got}`);
        return false;
      }
      if ("end" in got) {
        this.last = true;
        return true;
      }
      return this.decision(got.decision, now);
    }
    decision(d, now) {
      if (this.epoch !== this.host.roster.epoch) return this.stale(now);
      const legal = this.pending.get(d.id);
      if (legal === void 0) return false;
      this.pending.delete(d.id);
      const e = this.host.roster.entities.get(d.id);
      if (e === void 0) return true;
      this.host.stats.streamedDecisions++;
      this.host.stats.streamedMsTotal += now - this.sentAt;
      this.host.roster.use(e, d, legal, now);
      return true;
    }
    /** The game's epoch changed since the request was sent: the rest of the stream is dropped (counted once)
     * and its entities are asked again at once, for the epoch of now. */
    stale(now) {
      if (this.pending.size === 0) return false;
      this.host.stats.droppedEpoch++;
      this.host.roster.release(this.pending.keys(), now);
      this.pending.clear();
      return true;
    }
  };

  // ../typescript/src/timings.ts
  var DEFAULT_REFRESH_MS = 4e3;
  var DEFAULT_TTL_MS = 12e3;
  var Timings = class {
    /** `refreshMs`: the game's own, over every type's; `manifest`: when it is known already. */
    constructor(refreshMs, manifest) {
      this.refreshMs = refreshMs;
      if (manifest) this.load(manifest);
    }
    types = null;
    // type -> [refresh_ms, ttl_ms]
    /** GET /v1/manifest is out. */
    asked = false;
    /** Whether a manifest was read. */
    get known() {
      return this.types !== null;
    }
    /** The type's refresh and ttl, in ms. */
    of(type) {
      const [refresh, ttl] = this.types?.get(type) ?? [DEFAULT_REFRESH_MS, DEFAULT_TTL_MS];
      return [this.refreshMs ?? refresh, ttl];
    }
    /** Take the answer to GET /v1/manifest; false when it holds none (asked again later). Entities asked before
     * it came are due again on their type's refresh. */
    read(status, body, entities) {
      this.asked = false;
      const data = status === 200 && isObject(body) ? body["manifest"] : null;
      if (!isObject(data)) return false;
      this.load(data);
      for (const e of entities) e.due = Math.min(e.due, e.askedAt + this.of(e.type)[0]);
      return true;
    }
    load(data) {
      const defaults = isObject(data["defaults"]) ? data["defaults"] : {};
      const types = isObject(data["types"]) ? data["types"] : {};
      this.types = /* @__PURE__ */ new Map();
      const refresh = ms(defaults["refresh_ms"], DEFAULT_REFRESH_MS);
      const ttl = ms(defaults["ttl_ms"], DEFAULT_TTL_MS);
      for (const [name, t] of Object.entries(types)) {
        const one = isObject(t) ? t : {};
        this.types.set(name, [ms(one["refresh_ms"], refresh), ms(one["ttl_ms"], ttl)]);
      }
    }
  };
  var MAX_MS = 2 ** 53 - 1;
  function ms(value, fallback) {
    return typeof value === "number" && value > 0 && value <= MAX_MS ? Math.trunc(value) : fallback;
  }
  function deadlineTimeoutMs(status, body) {
    const deadline = status === 200 && isObject(body) ? body["deadline_ms"] : null;
    return typeof deadline === "number" && deadline > 0 && deadline <= MAX_MS ? deadline : null;
  }

  // ../typescript/src/scheduler.ts
  var BATCH = 16;
  var DEFAULT_DEADLINE_MS = 1e4;
  var TIMEOUT_MARGIN_MS = 5e3;
  function dispatch(table, s) {
    return table[s.kind];
  }
  var Scheduler = class {
    stats = newStats();
    clientId;
    /** The per-entity rules: track, event, action, setEpoch go there. */
    roster;
    /** Which local policy decides first, and fetching the service's. */
    cascade;
    world;
    scope;
    scopeState;
    maxInFlight;
    streamed;
    said;
    timeoutGiven;
    timeout;
    session;
    outbox;
    refusals;
    sent = /* @__PURE__ */ new Map();
    timings;
    refs = 0;
    decidesInFlight = 0;
    notBefore = Number.NEGATIVE_INFINITY;
    // after a 429 or a service that is down
    constructor(options) {
      this.clientId = options.clientId;
      this.world = { ...options.world ?? {} };
      this.scope = options.scope ?? null;
      this.scopeState = options.scopeState ?? null;
      this.maxInFlight = options.maxInFlight ?? 4;
      this.streamed = options.stream ?? true;
      this.said = new SayOnce(options.log ?? ((m) => console.warn(`npcmind: ${m}`)));
      this.refusals = new Refusals((key, message, native2) => this.warn(key, message, native2), this.stats);
      this.cascade = new Cascade(
        this.clientId,
        options.policy ?? null,
        options.fetchPolicy ?? null,
        options.policyRefreshMs ?? DEFAULT_POLICY_REFRESH_MS,
        this.said,
        options.manifestVersion ?? null,
        options.policyMaxBytes ?? POLICY_MAX_BYTES
      );
      const choose = (e) => this.cascade.choose(e, this.world, this.scope !== null ? this.scopeState : null);
      const [threshold, windowMs] = [options.threshold ?? 0.8, options.eventWindowMs ?? 50];
      this.roster = new Roster(options.epoch ?? 0, windowMs, choose, threshold, this.stats, this.said);
      this.timeoutGiven = options.timeoutMs !== void 0 && options.timeoutMs !== null;
      this.timeout = options.timeoutMs ?? DEFAULT_DEADLINE_MS + TIMEOUT_MARGIN_MS;
      this.session = options.apiKey ? new Session(options.apiKey) : null;
      this.outbox = new Outbox(this.outboxHost(), options.telemetryMs ?? 500);
      this.timings = new Timings(options.refreshMs ?? null, options.manifest ?? null);
    }
    // --- what the game tells (the per-entity rules are the roster's) ----------------------------
    /** The game's epoch: answers to requests sent under another epoch are dropped. */
    get epoch() {
      return this.roster.epoch;
    }
    /** A new scene (level, map): the service resets its population with the next telemetry. */
    setScene(scene) {
      this.outbox.setScene(scene);
    }
    /** An observe-only entity (the player): sent as telemetry, never asked. */
    observe(id, type, fields, position = null) {
      this.outbox.observe(id, type, fields, position);
    }
    /** The entity left the scene (died, despawned): forget it and tell the service. */
    untrack(id) {
      this.refusals.alone.delete(id);
      const tracked = this.roster.entities.delete(id);
      if (this.outbox.forget(id) || tracked) this.outbox.remove(id);
    }
    /** What became of the entity's current AI decision; false when it has none to report. */
    report(id, outcome, detail = null) {
      const item = this.roster.report(id, outcome, detail);
      if (item !== null) this.outbox.report(item);
      return item !== null;
    }
    /** How long a request may take: the one given, else the service's deadline plus 5 s once it told it. */
    get timeoutMs() {
      return this.timeout;
    }
    /** Requests sent and not yet answered. */
    get inFlight() {
      return this.sent.size;
    }
    /** Entities tracked (that decide). */
    get size() {
      return this.roster.entities.size;
    }
    /** The headers a request of this client carries (a hosted session's token). */
    headers() {
      return this.session?.headers() ?? {};
    }
    /** What is due now, in the order to send: session, manifest, telemetry, reports, decisions. */
    tick(now) {
      const out = [];
      if (this.session !== null && this.session.due(now) && now >= this.notBefore) {
        const r = this.make("POST", "/v1/session", { client_id: this.clientId }, [], this.session.keyHeaders());
        this.session.pending = r.ref;
        this.sent.set(r.ref, { kind: "session" });
        out.push(r);
      }
      if (this.session !== null && !this.session.ready) return out;
      const again = this.cascade.recheckManifest;
      if ((!this.timings.known || again) && !this.timings.asked && now >= this.notBefore)
        this.askManifest(out, again);
      if (this.cascade.due(now) && now >= this.notBefore) {
        const [path, extra] = this.cascade.request(now);
        const r = this.make("GET", path, null, [], { ...this.headers(), ...extra });
        this.sent.set(r.ref, { kind: "policy" });
        out.push(r);
      }
      this.roster.population(now);
      if (now < this.notBefore) return out;
      out.push(...this.outbox.sendTelemetry(now, this.clientId, this.roster.epoch, this.roster.entities.values()));
      const reports = this.outbox.sendReports(this.clientId);
      if (reports.request !== null) out.push(reports.request);
      this.stats.reportsSent += reports.count;
      this.ask(now, out);
      return out;
    }
    /** Send every queued report now (before closing, or for a turn-based game). */
    flushReports() {
      const out = [];
      while (this.outbox.queuedReports > 0) {
        const { request, count: count2 } = this.outbox.sendReports(this.clientId);
        this.stats.reportsSent += count2;
        if (request !== null) out.push(request);
      }
      return out;
    }
    /** An answer came back for `ref`: applied by the request's kind (`ANSWERED`; telemetry and reports: the outbox). */
    answer(ref, status, body, headers, now) {
      if (status >= 200 && status < 300 && isTooLarge(body) && this.sent.get(ref)?.kind !== "decide")
        this.warn(`too-large:${ref.replace(/\d+/g, "#")}`, body.error.message);
      if (this.outbox.owns(ref)) {
        if (this.outbox.answer(ref, status, body)) this.refused(status, body, headers, now);
        return;
      }
      const s = this.take(ref);
      if (s !== void 0) dispatch(this.answered, s)(s, { status, body, headers }, now);
    }
    /** Bytes of a streamed decide answer arrived (200, application/x-ndjson; a string: its UTF-8): the lines they
     * complete are applied now, so an entity's decision is usable before the stream ends. */
    chunk(ref, data, now) {
      const s = this.sent.get(ref);
      if (s?.kind !== "decide") return false;
      if (s.stream === null) {
        for (const id of s.legal.keys()) this.refusals.alone.delete(id);
        s.stream = new DecisionStream(this.streamHost(), s.legal, s.epoch, s.at);
      }
      if (s.stream.feed(data, now)) return true;
      this.take(ref);
      this.decidesInFlight--;
      return false;
    }
    /** A streamed decide answer's connection closed: without its last line it was cut, and the entities of it
     * without a line fall back (`unavailable`), while the lines received stand. `failed`: the transport ended it
     * (no line within the timeout, the connection lost), said as `fail` says it. */
    end(ref, now, failed = null, detail = "") {
      const s = this.sent.get(ref);
      if (s?.kind !== "decide") return;
      this.take(ref);
      this.decidesInFlight--;
      if (failed !== null) this.failed(failed);
      else if (detail !== "") this.warn(`stream-end:${detail.replace(/\d+/g, "#")}`, detail);
      (s.stream ?? new DecisionStream(this.streamHost(), s.legal, s.epoch, s.at)).end(now);
    }
    /** A request got no answer (`timeout` or `unreachable`): said once, then undone by its kind (`FAILED`); its
     * entities use their native AI and are retried later. */
    fail(ref, kind2, now) {
      this.failed(kind2);
      if (this.outbox.owns(ref)) return this.outbox.failed(ref);
      const s = this.take(ref);
      if (s !== void 0) dispatch(this.failedKinds, s)(s, now);
    }
    take(ref) {
      const s = this.sent.get(ref);
      this.sent.delete(ref);
      return s;
    }
    /** What an answer does, by the kind of request (Python: `ANSWERED` in scheduler.py). */
    answered = {
      decide: (s, a, now) => this.applyDecide(s, a.status, a.body, a.headers, now),
      manifest: (_s, a, now) => this.manifestAnswered(a.status, a.body, now),
      health: (_s, a) => this.healthAnswered(a.status, a.body),
      session: (_s, a, now) => this.sessionAnswered(a.status, a.body, now),
      policy: (_s, a, now) => {
        if (!this.cascade.answered(a.status, a.body, a.headers)) this.refused(a.status, a.body, a.headers, now);
      }
    };
    /** What a failure undoes, by the kind of request (Python: `FAILED` in scheduler.py). */
    failedKinds = {
      decide: (s, now) => {
        this.decidesInFlight--;
        this.stats.errors++;
        this.notBefore = now + 1e3;
        this.roster.release(s.legal.keys(), null);
      },
      manifest: (_s, now) => {
        this.timings.asked = false;
        this.notBefore = Math.max(this.notBefore, now + 1e3);
      },
      health: () => {
      },
      session: (_s, now) => {
        if (this.session !== null && !this.session.open) this.notBefore = Math.max(this.notBefore, now + 1e3);
        this.session?.failed(now);
      },
      policy: () => this.cascade.failed()
    };
    // --- scheduling -----------------------------------------------------------------------------
    askManifest(out, again) {
      if (!this.timeoutGiven && !again) {
        const health = this.make("GET", "/v1/health", null, []);
        this.sent.set(health.ref, { kind: "health" });
        out.push(health);
      }
      const r = this.make("GET", "/v1/manifest", null, []);
      this.timings.asked = true;
      this.sent.set(r.ref, { kind: "manifest" });
      out.push(r);
    }
    /** Send what is due, events first, then the longest waiting; no more requests than `maxInFlight`. */
    ask(now, out) {
      const free = this.maxInFlight - this.decidesInFlight;
      if (free <= 0) return;
      const due = [];
      for (const e of this.roster.entities.values()) if (e.due <= now && !e.inFlight) due.push(e);
      if (due.length === 0) return;
      due.sort((a, b) => Number(a.trigger === null) - Number(b.trigger === null) || a.due - b.due);
      const asked = [];
      let room = free * BATCH;
      for (const e of due) {
        room -= this.refusals.alone.has(e.id) ? BATCH : 1;
        if (room < 0) break;
        const [refresh, ttl] = this.timings.of(e.type);
        e.due = now + refresh;
        e.askedAt = now;
        if (this.roster.local(e, now, ttl)) continue;
        asked.push(e);
      }
      const together = asked.filter((e) => !this.refusals.alone.has(e.id));
      for (let i = 0; i < together.length; i += BATCH) this.sendBatch(together.slice(i, i + BATCH), now, out);
      for (const e of asked) if (this.refusals.alone.has(e.id)) this.sendBatch([e], now, out);
    }
    sendBatch(batch, now, out) {
      const body = {
        client_id: this.clientId,
        epoch: this.roster.epoch,
        world: this.world,
        entities: batch.map(entityItem)
      };
      if (this.scope !== null) {
        body["scope"] = this.scope;
        if (this.scopeState !== null) body["scope_state"] = this.scopeState;
      }
      const after = this.outbox.pendingTelemetry();
      for (const [ref, sent] of this.sent) if (sent.kind === "health" || sent.kind === "manifest") after.push(ref);
      const r = this.post("/v1/decide", body, after);
      if (r === null) return;
      const kept = new Set((r.body?.["entities"]).map((i) => i.id));
      const legal = /* @__PURE__ */ new Map();
      for (const e of batch) {
        if (!kept.has(e.id)) continue;
        e.inFlight = true;
        e.trigger = null;
        legal.set(e.id, [...e.legalActions]);
      }
      this.sent.set(r.ref, { kind: "decide", epoch: this.roster.epoch, legal, at: now, stream: null });
      this.decidesInFlight++;
      this.stats.requests++;
      this.stats.asked += legal.size;
      out.push(this.streamed ? { ...r, stream: true } : r);
    }
    // --- answers ----------------------------------------------------------------------------------
    applyDecide(s, status, body, headers, now) {
      this.decidesInFlight--;
      if (status !== 200) {
        this.stats.errors++;
        const types = [...s.legal.keys()].map((id) => [id, this.roster.entities.get(id)?.type ?? "entity"]);
        const bad = this.refusals.entities(status, body, new Map(types));
        if (bad !== null) {
          return this.roster.release(s.legal.keys(), now, bad);
        }
        this.refused(status, body, headers, now);
        return this.roster.release(s.legal.keys(), status === 401 && this.session !== null ? now : null);
      }
      for (const id of s.legal.keys()) this.refusals.alone.delete(id);
      const answer = readDecideResponse(body, s.legal.size);
      if (typeof answer === "string") {
        this.stats.errors++;
        this.warn("malformed", `the answer to /v1/decide could not be read: ${answer}`);
        return this.roster.release(s.legal.keys(), null);
      }
      if (answer.epoch !== this.roster.epoch || s.epoch !== this.roster.epoch) {
        this.stats.droppedEpoch++;
        return this.roster.release(s.legal.keys(), now);
      }
      for (const d of answer.decisions) {
        const e = this.roster.entities.get(d.id);
        const legal = s.legal.get(d.id);
        if (e !== void 0 && legal !== void 0) this.roster.use(e, d, legal, now);
      }
      this.roster.release(s.legal.keys(), null);
    }
    manifestAnswered(status, body, now) {
      if (!this.timings.read(status, body, this.roster.entities.values())) {
        this.notBefore = Math.max(this.notBefore, now + 1e3);
        return;
      }
      this.cascade.manifest(isObject(body) && typeof body["version"] === "string" ? body["version"] : null);
    }
    healthAnswered(status, body) {
      const deadline = deadlineTimeoutMs(status, body);
      if (!this.timeoutGiven && deadline !== null) this.timeout = deadline + TIMEOUT_MARGIN_MS;
    }
    sessionAnswered(status, body, now) {
      const why = this.session?.answer(status, body, now) ?? null;
      if (why === null) return;
      this.warn(`session:${why.replace(NUMBER, "#")}`, why);
      if (!this.session?.open) this.notBefore = Math.max(this.notBefore, now + 1e3);
    }
    refused(status, body, headers, now) {
      if (status === 429 || status >= 500) this.notBefore = now + retryAfterMs(headers);
      if (status === 401 && this.session !== null) {
        this.session.expire();
        this.notBefore = Math.max(this.notBefore, now + 250);
      }
      this.refusals.said(status, body, this.session !== null);
    }
    failed(kind2) {
      if (kind2 === "timeout") {
        const why = this.timeoutGiven ? "its model may take up to NPCMIND_DEADLINE_MS: leave timeoutMs out to follow it" : `${TIMEOUT_MARGIN_MS / 1e3} s past its own deadline for the model: it is overloaded or stalled`;
        this.warn("timeout", `npcmind did not answer within ${this.timeout / 1e3} s (${why})`);
      } else this.warn("transport", "npcmind is unreachable");
    }
    warn(key, message, native2 = true) {
      this.said.say(key, message, native2);
    }
    // --- requests ---------------------------------------------------------------------------------
    make(method, path, body, after, headers) {
      const json = body === null ? null : JSON.stringify(body);
      const ref = `r${++this.refs}`;
      const waits = path === "/v1/session" ? [] : [...this.session?.awaited() ?? [], ...after];
      return { ref, method, path, headers: headers ?? this.headers(), body, json, after: waits };
    }
    /** A POST whose body is made now (a snapshot: the game may change its objects from the next frame on); an
     * entity that is not JSON is left out and named once; null when nothing is left to send. */
    post(path, body, after = []) {
      try {
        return this.make("POST", path, body, after);
      } catch {
      }
      const entities = Array.isArray(body["entities"]) ? body["entities"] : [];
      body["entities"] = entities.filter((item) => {
        try {
          JSON.stringify(item);
          return true;
        } catch (exc) {
          this.warn(
            `encode:${item.id}`,
            `${item.type} ${JSON.stringify(item.id)} cannot be sent as JSON (${String(exc)}): left out`
          );
          return false;
        }
      });
      const removed = body["removed"];
      if (body["entities"].length === 0 && !removed?.length && !body["scene"]) return null;
      try {
        return this.make("POST", path, body, after);
      } catch (exc) {
        this.warn(`encode:${String(exc)}`, `a request cannot be sent as JSON (${String(exc)}): skipped`);
        return null;
      }
    }
    streamHost() {
      return {
        roster: this.roster,
        stats: this.stats,
        warn: (key, message) => this.warn(key, message),
        cut: (now) => this.notBefore = now + 1e3
        // as after a decide request that failed
      };
    }
    outboxHost() {
      return {
        post: (path, body, after) => this.post(path, body, after),
        refusals: this.refusals,
        tracked: (id) => this.roster.entities.has(id),
        warn: (key, message, native2) => this.warn(key, message, native2)
      };
    }
  };
  function entityItem(e) {
    const item = {
      id: e.id,
      type: e.type,
      observation: e.observation,
      legal_actions: e.legalActions
    };
    if (e.position !== null) item["position"] = e.position;
    if (e.profile !== null) item["profile"] = e.profile;
    if (e.parent !== null) item["parent"] = e.parent;
    if (e.trigger !== null) item["trigger"] = e.trigger;
    return item;
  }

  // ../typescript/src/transport.ts
  var GZIP_FROM = 16 * 1024;
  var NDJSON = "application/x-ndjson";
  var Transport = class {
    constructor(options) {
      this.options = options;
      this.base = options.baseUrl.replace(/\/+$/, "");
      this.fetchFn = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    }
    base;
    fetchFn;
    running = /* @__PURE__ */ new Map();
    controllers = /* @__PURE__ */ new Set();
    streams = /* @__PURE__ */ new Map();
    // a streamed request's, to stop reading it
    stopped = /* @__PURE__ */ new Set();
    // streams the scheduler ended: read no further
    queue = [];
    tokens = /* @__PURE__ */ new Map();
    // session request ref -> the token it brought
    closed = false;
    /** Start a request; what becomes of it is queued. */
    send(request) {
      const waits = request.after.map((ref) => this.running.get(ref)).filter((p) => p !== void 0);
      const run = Promise.allSettled(waits).then(() => this.execute(request)).then((settled) => {
        if (settled !== null) this.push(settled);
      }).finally(() => this.running.delete(request.ref));
      this.running.set(request.ref, run);
    }
    /** What came back since the last call, in the order it came. */
    drain() {
      const out = this.queue;
      this.queue = [];
      return out;
    }
    /** Requests still running. */
    get inFlight() {
      return this.running.size;
    }
    /** Resolves once every request sent so far has settled. */
    async idle() {
      while (this.running.size > 0) await Promise.allSettled([...this.running.values()]);
    }
    /** One request outside the core (a debug view): its status and JSON body, read within `cap`. */
    async call(method, path, headers, cap = MAX_ANSWER_BYTES, name = "MAX_ANSWER_BYTES") {
      const request = { ref: "call", method, path, headers, body: null, json: null, after: [] };
      const got = await this.execute(request, cap, name);
      return got ?? { ref: "call", fail: "unreachable", error: "a stream where one answer was expected" };
    }
    /** Read no more of request `ref`'s stream (the scheduler ended it): its connection is aborted, and its reader
     * cancelled at its next chunk (a game's own `fetch` may not heed the abort). */
    stop(ref) {
      const controller = this.streams.get(ref);
      if (controller === void 0) return;
      this.stopped.add(ref);
      controller.abort();
    }
    /** Abort what runs and drop what would come: a game that quits must not hang on a slow service. */
    close() {
      this.closed = true;
      for (const c of this.controllers) c.abort();
      this.queue = [];
    }
    push(settled) {
      if (!this.closed) this.queue.push(settled);
    }
    /** A streamed answer's bytes queued as they arrive, then its end; a connection lost in the middle, or no
     * bytes within the timeout, ends it too: the scheduler keeps the lines received, the rest fall back. */
    async stream(ref, body, timer, what) {
      const reader = body.getReader();
      let failed = null;
      let error = "";
      let size = 0;
      try {
        for (; ; ) {
          const { done, value } = await reader.read();
          if (done) break;
          timer.arm();
          if (this.stopped.has(ref)) {
            await reader.cancel().catch(() => void 0);
            break;
          }
          size += Math.max(value.length, MIN_CHUNK_BYTES);
          if (size > MAX_STREAM_BYTES) {
            error = tooLarge(`${what}, a stream`, MAX_STREAM_BYTES, "MAX_STREAM_BYTES");
            await reader.cancel().catch(() => void 0);
            break;
          }
          if (value.length > 0) this.push({ ref, chunk: value });
        }
      } catch (exc) {
        failed = timer.fired ? "timeout" : "unreachable";
        error = String(exc);
      }
      this.stopped.delete(ref);
      this.push({ ref, end: true, failed, error });
    }
    /** GET /v1/policy's answer: a 200 read no further than one byte past `policyMaxBytes` and loaded here, out
     * of the game's `tick()` (the `Policy`, or the `PolicyError` saying why it cannot be used); any other
     * status its JSON, within MAX_ERROR_BYTES. */
    async policy(res) {
      if (res.status !== 200) return this.read(res, "GET /v1/policy", MAX_ANSWER_BYTES, "MAX_ANSWER_BYTES");
      const max = this.options.policyMaxBytes ?? POLICY_MAX_BYTES;
      const bytes = await capped(res, max);
      if (bytes.length > max)
        return new PolicyError(
          `GET /v1/policy: the body is larger than ${max.toLocaleString("en-US")} bytes (policyMaxBytes), not read past that`
        );
      try {
        return Policy.load(bytes, { maxBytes: max });
      } catch (e) {
        return e instanceof PolicyError ? e : new PolicyError(String(e));
      }
    }
    /** A whole answer's JSON read within `cap` (an error's within MAX_ERROR_BYTES); past it, the error shape
     * naming the cap, so every reader of errors says it. */
    async read(res, what, cap, name) {
      try {
        return parse(await textCapped(res, cap, what, name));
      } catch (e) {
        if (e instanceof TooLargeError) return tooLargeBody(e.message);
        throw e;
      }
    }
    /** The request's headers, with the token of the session it waited for (`Bearer @<ref>`); null when that
     * session brought none (the request is then answered 401 here, never sent with "@r9"). */
    authorized(given) {
      const headers = { ...given };
      const awaited = /^Bearer @(\S+)$/.exec(headers["authorization"] ?? "");
      if (awaited?.[1] === void 0) return headers;
      const token = this.tokens.get(awaited[1]);
      if (!token) return null;
      headers["authorization"] = `Bearer ${token}`;
      return headers;
    }
    /** The request's answer, or null when it came as a stream (queued piece by piece meanwhile). */
    async execute(r, cap = MAX_ANSWER_BYTES, name = "MAX_ANSWER_BYTES") {
      const controller = new AbortController();
      this.controllers.add(controller);
      if (r.stream === true) this.streams.set(r.ref, controller);
      const timer = new Timer(this.options.timeoutMs(), () => controller.abort());
      try {
        const headers = this.authorized(r.headers);
        if (headers === null)
          return {
            ref: r.ref,
            status: 401,
            body: { error: { code: "unauthorized", message: "no session was opened" } },
            headers: {}
          };
        let body;
        if (r.json !== null) {
          headers["content-type"] = "application/json";
          body = r.json.length >= GZIP_FROM ? await gzip(r.json) : r.json;
          if (typeof body !== "string") headers["content-encoding"] = "gzip";
        }
        if (r.stream === true) headers["accept"] = NDJSON;
        const what = `${r.method} ${r.path.split("?")[0] ?? r.path}`;
        const res = await this.fetchFn(this.base + r.path, {
          method: r.method,
          headers,
          body,
          signal: controller.signal
        });
        const answered = {};
        res.headers.forEach((v, k) => answered[k.toLowerCase()] = v);
        if (r.stream === true && res.status === 200 && res.body !== null && isNdjson(answered["content-type"])) {
          await this.stream(r.ref, res.body, timer, what);
          return null;
        }
        if (r.path.startsWith("/v1/policy"))
          return { ref: r.ref, status: res.status, body: await this.policy(res), headers: answered };
        const [limit, label2] = r.path === "/v1/manifest" ? [MAX_MANIFEST_BYTES, "MAX_MANIFEST_BYTES"] : [cap, name];
        const answer = await this.read(res, what, limit, label2);
        if (r.path === "/v1/session") {
          this.tokens.set(r.ref, sessionToken(res.status, answer));
          if (this.tokens.size > 8) this.tokens.delete(this.tokens.keys().next().value);
        }
        return { ref: r.ref, status: res.status, body: answer, headers: answered };
      } catch (exc) {
        return { ref: r.ref, fail: timer.fired ? "timeout" : "unreachable", error: String(exc) };
      } finally {
        timer.stop();
        this.controllers.delete(controller);
        this.streams.delete(r.ref);
      }
    }
  };
  var Timer = class {
    constructor(ms2, abort) {
      this.ms = ms2;
      this.abort = abort;
      this.arm();
    }
    fired = false;
    handle;
    /** Start the wait again from now. */
    arm() {
      clearTimeout(this.handle);
      this.handle = setTimeout(() => {
        this.fired = true;
        this.abort();
      }, this.ms);
    }
    /** No abort from now on: the request is over. */
    stop() {
      clearTimeout(this.handle);
    }
  };
  function isNdjson(type) {
    return (type ?? "").split(";")[0]?.trim().toLowerCase() === NDJSON;
  }
  async function capped(res, max) {
    if (res.body === null) return new Uint8Array(0);
    const reader = res.body.getReader();
    const chunks = [];
    let size = 0;
    for (; ; ) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
      if (size > max) {
        await reader.cancel();
        break;
      }
    }
    const out = new Uint8Array(Math.min(size, max + 1));
    let at = 0;
    for (const c of chunks) {
      const part = c.subarray(0, out.length - at);
      out.set(part, at);
      at += part.length;
    }
    return out;
  }
  function parse(text2) {
    try {
      return JSON.parse(text2);
    } catch {
      return { error: { message: text2.slice(0, 200) } };
    }
  }
  async function gzip(text2) {
    if (typeof CompressionStream === "undefined") return text2;
    const stream = new Blob([text2]).stream().pipeThrough(new CompressionStream("gzip"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  // ../typescript/src/decide.ts
  function kindOf(value) {
    return value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`;
  }
  var DecideClient = class {
    core;
    transport;
    clock;
    closed = false;
    backlog = [];
    // what came and waits for a tick with room (TICK_STREAM_BYTES)
    stopped = /* @__PURE__ */ new Set();
    // streams the scheduler ended: what still comes of them is dropped
    constructor(serviceUrl, clientId2, options = {}) {
      if (!/^https?:\/\/[^/]/.test(serviceUrl)) {
        throw new TypeError(
          `serviceUrl: ${JSON.stringify(serviceUrl)} is not an http(s) URL (e.g. http://127.0.0.1:8080)`
        );
      }
      if (!clientId2) throw new TypeError("clientId: must be a non-empty string (the game's name for itself)");
      this.core = new Scheduler({ ...options, clientId: clientId2 });
      this.clock = options.clock ?? (() => performance.now());
      const transport = {
        baseUrl: serviceUrl,
        timeoutMs: () => this.core.timeoutMs,
        policyMaxBytes: options.policyMaxBytes ?? POLICY_MAX_BYTES
      };
      this.transport = new Transport(options.fetch ? { ...transport, fetch: options.fetch } : transport);
    }
    /** The game's epoch: answers to requests sent under another epoch are dropped. */
    get epoch() {
      return this.core.epoch;
    }
    set epoch(value) {
      this.core.roster.setEpoch(value, this.clock());
    }
    /** Counters for a debug overlay. */
    get stats() {
      return this.core.stats;
    }
    /** The game's own local policy (a `Policy` or a function); it may be changed as the game goes. */
    get policy() {
      return this.core.cascade.own;
    }
    set policy(value) {
      this.core.cascade.own = value;
    }
    /** The service's distilled policy in use (fetched from GET /v1/policy), or null: none yet, fetching off, or
     * the service's is for another manifest version. */
    get servicePolicy() {
      return this.core.cascade.fetched;
    }
    /** The world the service sees beside the entities: change its fields, or set a new one, as the game goes. */
    get world() {
      return this.core.world;
    }
    set world(value) {
      if (!isObject(value)) throw new TypeError(`world: must be an object, not ${kindOf(value)}`);
      this.core.world = value;
    }
    /** The manifest's scope the game is in (a boss fight), or null; it may change as the game goes: the next
     * decide request carries it, and the local policy sees its state from then on. */
    get scope() {
      return this.core.scope;
    }
    set scope(value) {
      if (value !== null && typeof value !== "string")
        throw new TypeError(`scope: must be a scope's name or null, not ${kindOf(value)}`);
      this.core.scope = value;
    }
    /** The scope's state, sent with the scope (and given to the local policy while a scope is set). */
    get scopeState() {
      return this.core.scopeState;
    }
    set scopeState(value) {
      if (value !== null && !isObject(value))
        throw new TypeError(`scopeState: must be an object or null, not ${kindOf(value)}`);
      this.core.scopeState = value;
    }
    /** How sure the local policy must be to decide an entity here (the cascade); the next choice uses it. */
    get threshold() {
      return this.core.roster.threshold;
    }
    set threshold(value) {
      if (typeof value !== "number" || !Number.isFinite(value)) {
        const shown2 = typeof value === "number" ? String(value) : kindOf(value);
        throw new TypeError(`threshold: must be a finite number, not ${shown2}`);
      }
      this.core.roster.threshold = value;
    }
    /** How long a request may take before its entities use their native AI. */
    get timeoutMs() {
      return this.core.timeoutMs;
    }
    /** A new scene (level, map): the service resets its population with the next telemetry. */
    setScene(scene) {
      this.core.setScene(scene);
    }
    /** Add an entity that decides, or update what it sees and may do now. */
    track(id, type, observation, legalActions, options = {}) {
      this.core.roster.track(id, type, observation, legalActions, options, this.clock());
    }
    /** An observe-only entity (the player): sent as telemetry, never asked. */
    observe(id, type, fields, position = null) {
      this.core.observe(id, type, fields, position);
    }
    /** The entity left the scene: forget it and tell the service. */
    untrack(id) {
      this.core.untrack(id);
    }
    /** Something happened to the entity: ask for it at once; false for one not tracked. */
    event(id, trigger) {
      return this.core.roster.event(id, trigger, this.clock());
    }
    /** What became of the entity's current AI decision; sent with the next tick. */
    report(id, outcome, detail = null) {
      return this.core.report(id, outcome, detail);
    }
    /** The entity's live decision, or null: run the game's native AI. */
    action(id, legalNow = null) {
      return this.core.roster.action(id, legalNow, this.clock());
    }
    /** Apply the answers that came in, then send what is due. Never blocks, never throws for the network. */
    tick(now) {
      if (this.closed) return;
      const at = now ?? this.clock();
      this.apply(at);
      this.send(this.core.tick(at));
    }
    /** Send the queued reports, wait until every request sent so far has answered (or `timeoutMs` passed),
     * and apply the answers: for turn-based games, tests, and before `close()`. True if nothing is in flight. */
    async wait(timeoutMs = 1e4) {
      if (!this.closed) this.send(this.core.flushReports());
      let timer;
      const late = new Promise((resolve) => timer = setTimeout(resolve, timeoutMs));
      await Promise.race([this.transport.idle(), late]);
      clearTimeout(timer);
      this.apply(this.clock(), Number.POSITIVE_INFINITY);
      return this.transport.inFlight === 0 && this.core.inFlight === 0;
    }
    /** What the model saw in this client's last decide request and what it answered (GET /v1/prompt), for a
     * debug overlay; null when there is nothing yet or the service cannot say. It never throws. */
    async lastPrompt() {
      const path = `/v1/prompt?client_id=${encodeURIComponent(this.core.clientId)}`;
      const got = await this.transport.call("GET", path, this.core.headers(), MAX_PROMPT_BYTES, "MAX_PROMPT_BYTES");
      if ("fail" in got || got.status !== 200 || typeof got.body !== "object" || got.body === null) return null;
      if (isTooLarge(got.body)) return null;
      return got.body;
    }
    /** Stop without waiting for answers (a game that quits must not hang); call `wait()` first to keep them. */
    close() {
      this.closed = true;
      this.transport.close();
    }
    /** Apply what came, in order, up to TICK_STREAM_BYTES of streamed bytes a tick (the rest waits for the next
     * frame, so a flood of lines never holds one); what comes of a stream the scheduler ended is dropped. */
    apply(now, room = TICK_STREAM_BYTES) {
      for (const s of this.transport.drain()) this.backlog.push(s);
      let at = 0;
      for (; at < this.backlog.length && room > 0; at++) {
        const s = this.backlog[at];
        if ("chunk" in s || "end" in s) {
          if (this.stopped.has(s.ref)) {
            if ("end" in s) this.stopped.delete(s.ref);
            continue;
          }
        }
        if ("fail" in s) this.core.fail(s.ref, s.fail, now);
        else if ("chunk" in s) {
          room -= Math.max(s.chunk.length, MIN_CHUNK_BYTES);
          if (!this.core.chunk(s.ref, s.chunk, now)) {
            this.stopped.add(s.ref);
            this.transport.stop(s.ref);
          }
        } else if ("end" in s) this.core.end(s.ref, now, s.failed, s.failed === null ? s.error : "");
        else this.core.answer(s.ref, s.status, s.body, s.headers, now);
      }
      this.backlog = this.backlog.slice(at);
    }
    send(requests) {
      for (const r of requests) this.transport.send(r);
    }
  };

  // src/brain.ts
  var POLICY_EVERY_MS = 1e3;
  function askedIds(init) {
    if (typeof init?.body !== "string") return [];
    try {
      const body = JSON.parse(init.body);
      return (body.entities ?? []).map((e) => e.id);
    } catch {
      return [];
    }
  }
  function parse2(line) {
    try {
      return JSON.parse(line);
    } catch {
      return null;
    }
  }
  var Brain = class {
    // ms from its request's send to its decision's line
    /** `published`: whether npcmind demo says it published a policy for this client (GET /demo/state). */
    constructor(serviceUrl, clientId2, published, options = {}) {
      this.published = published;
      this.npc = new DecideClient(serviceUrl, clientId2, {
        fetchPolicy: true,
        policyRefreshMs: POLICY_EVERY_MS,
        ...options,
        fetch: (input, init) => this.fetch(input, init)
      });
    }
    npc;
    /** Entities whose decide request got no decision (the service unreachable or refusing, or its stream cut). */
    unanswered = 0;
    why = /* @__PURE__ */ new Map();
    arrived = /* @__PURE__ */ new Map();
    /** Why the entity has no decision: its last fallback's code, `unreachable`, or null (none known). */
    fallbackOf(id) {
      return this.why.get(id) ?? null;
    }
    /** How long after its request was sent the entity's last decision arrived (ms), or null: none yet. */
    arrivalOf(id) {
      return this.arrived.get(id) ?? null;
    }
    /** Forget an entity's reason with the entity (a long game spawns many). */
    forget(id) {
      this.why.delete(id);
      this.arrived.delete(id);
    }
    async fetch(input, init) {
      const url = input instanceof Request ? input.url : String(input);
      if (url.includes("/v1/policy?") && !this.published()) return new Response(null, { status: 404 });
      if (!url.endsWith("/v1/decide")) return fetch(input, init);
      const ids = askedIds(init);
      const sent = performance.now();
      let r;
      try {
        r = await fetch(input, init);
      } catch (e) {
        for (const id of ids) this.why.set(id, "unreachable");
        this.unanswered += ids.length;
        throw e;
      }
      if (!r.ok) {
        for (const id of ids) this.why.set(id, `error ${r.status}`);
        this.unanswered += ids.length;
      } else if (r.headers.get("content-type")?.startsWith("application/x-ndjson") && r.body !== null)
        void this.stream(r.clone(), ids, sent);
      else void this.read(r.clone(), sent);
      return r;
    }
    decided(d, sent) {
      if (typeof d !== "object" || d === null || !("id" in d) || typeof d.id !== "string") return null;
      const { id, source, code } = d;
      this.why.set(id, source === "AI" ? null : code ?? null);
      this.arrived.set(id, performance.now() - sent);
      return id;
    }
    async read(r, sent) {
      try {
        const body = await r.json();
        for (const d of body.decisions ?? []) this.decided(d, sent);
      } catch {
      }
    }
    /** A streamed answer, a line at a time as it arrives; cut before its last line, the entities without one
     * lost their answer with the connection (the SDK gives them its `unavailable` fallback). */
    async stream(r, ids, sent) {
      const lines = new Lines();
      const got = /* @__PURE__ */ new Set();
      let whole = false;
      try {
        const reader = r.body.getReader();
        for (let part = await reader.read(); !part.done; part = await reader.read()) {
          for (const line of lines.feed(part.value)) {
            const d = parse2(line);
            if (d !== null && typeof d === "object" && "a2g" in d) whole = true;
            else if (d !== null && typeof d === "object" && "source" in d) got.add(this.decided(d, sent) ?? "");
          }
        }
      } catch {
      }
      if (whole) return;
      const lost = ids.filter((id) => !got.has(id));
      for (const id of lost) this.why.set(id, "unreachable");
      this.unanswered += lost.length;
    }
  };

  // src/motion.ts
  var BEE_SPEED = 95;
  var QUEEN_SPEED = 55;
  function chaseTarget(b, w) {
    const swarm = w.swarms.find((s) => s.id === b.swarm);
    if (swarm?.doing.action !== "surround") return w.player;
    const members = w.membersOf(b.swarm);
    const k = members.indexOf(b);
    const offset = b.swarm === "swarm-a" ? 0 : Math.PI / members.length;
    const a = k / Math.max(1, members.length) * Math.PI * 2 + offset + w.time * 0.4;
    const r = 34 + 26 * Math.sin(w.time * 1.6);
    return { x: w.player.x + Math.cos(a) * r, y: w.player.y + Math.sin(a) * r };
  }
  var REFUGES = [HIVE, { x: WIDTH / 2, y: 70 }, { x: WIDTH / 2, y: HEIGHT - 70 }, { x: 90, y: HEIGHT / 2 }, { x: WIDTH - 90, y: HEIGHT / 2 }];
  function refuge(b, player) {
    const worth = (r) => dist(r, player) - 0.6 * dist(r, b);
    return REFUGES.reduce((a, r) => worth(r) > worth(a) ? r : a);
  }
  function spread(at, slot) {
    const a = slot / 6 * Math.PI * 2;
    return { x: at.x + Math.cos(a) * 22, y: at.y + Math.sin(a) * 22 };
  }
  function moveBee(b, w, dt) {
    const swarm = w.swarms.find((s) => s.id === b.swarm);
    switch (b.doing.action) {
      case "chase":
        moveToward(b, chaseTarget(b, w), BEE_SPEED * (swarm?.doing.action === "surround" ? 1.2 : 1), dt);
        return;
      case "flee":
        moveToward(b, spread(refuge(b, w.player), b.slot), BEE_SPEED * 1.1, dt);
        return;
      case "wander": {
        const home = swarm?.doing.action === "retreat" ? HIVE : { x: HIVE.x - 60, y: HIVE.y + (b.swarm === "swarm-a" ? -110 : 110) };
        b.wanderAngle += dt * (0.8 + b.slot % 3 * 0.3);
        const to = { x: home.x + Math.cos(b.wanderAngle) * 60, y: home.y + Math.sin(b.wanderAngle * 1.3) * 40 };
        moveToward(b, to, BEE_SPEED * 0.5, dt);
        return;
      }
      default:
    }
  }
  function moveQueen(w, dt) {
    const q = w.queen;
    if (q.doing.action === "chase") moveToward(q, w.player, QUEEN_SPEED, dt);
    else if (q.doing.action === "flee") moveToward(q, HIVE, QUEEN_SPEED * 1.6, dt);
    else if (dist(q, HIVE) > 80) moveToward(q, HIVE, QUEEN_SPEED * 0.5, dt);
  }

  // src/native.ts
  function nativeBee(b, w) {
    const d = dist(b, w.player);
    if (b.hp < 0.3 && d < BEE_SIGHT) return "flee";
    return d < BEE_SIGHT || b.alerted > 0 ? "chase" : "wander";
  }
  function nativeQueen(q, w) {
    if (q.hp < 0.2) return "flee";
    return dist(q, w.player) < QUEEN_SIGHT ? "chase" : "idle";
  }

  // src/game.ts
  var BEE_ACTIONS = ["idle", "wander", "chase", "flee"];
  var QUEEN_ACTIONS = ["idle", "chase", "flee"];
  var SWARM_ACTIONS = ["surround", "retreat"];
  var ALONE = "each bee alone";
  function step(v, q) {
    return Math.round(Math.round(v / q) * q * 100) / 100;
  }
  var Game = class {
    constructor(world2, brain2) {
      this.world = world2;
      this.brain = brain2;
      this.npc = brain2.npc;
    }
    sent = { events: 0, reports: 0 };
    reported = /* @__PURE__ */ new Set();
    // decision ids already reported: one outcome each
    npc;
    /** Advance the game by `dt` seconds of game time; `swat`: the player swats this step. */
    step(dt, swat) {
      const w = this.world;
      this.tell();
      this.npc.tick();
      this.decide();
      for (const b of w.bees) moveBee(b, w, dt);
      moveQueen(w, dt);
      const out = [];
      if (swat) w.swat(out);
      w.rules(dt, out);
      for (const h of out) this.happened(h);
    }
    tell() {
      const w = this.world;
      const p = w.player;
      Object.assign(this.npc.world, { player_hp_fraction: p.hp, repellent: false });
      for (const s of w.swarms) {
        const size = w.membersOf(s.id).length;
        if (size > 0) this.npc.track(s.id, "swarm", { size }, SWARM_ACTIONS);
      }
      for (const b of w.bees) {
        const d = dist(b, p);
        const obs = { hp_fraction: b.hp, distance_to_player: d, sees_player: d < BEE_SIGHT || b.alerted > 0, current_action: b.doing.action };
        this.npc.track(b.id, "bee", obs, BEE_ACTIONS, { position: [b.x, b.y], parent: b.swarm });
      }
      const q = w.queen;
      const dq = dist(q, p);
      const qObs = { hp_fraction: step(q.hp, 0.05), distance_to_player: step(dq, 10), sees_player: dq < QUEEN_SIGHT, current_action: q.doing.action };
      this.npc.track(q.id, "boss", qObs, QUEEN_ACTIONS, { position: [q.x, q.y], profile: "queen_bee" });
      this.npc.observe("player", "player", { hp_fraction: p.hp }, [p.x, p.y]);
    }
    doing(id, native2) {
      const c = this.npc.action(id);
      if (c !== null) {
        const source = c.source === "local" ? "local" : c.cached ? "cached" : "AI";
        return { action: c.action, source, code: null, ms: source === "local" ? null : this.brain.arrivalOf(id) };
      }
      return { action: native2, source: "native", code: this.brain.fallbackOf(id), ms: null };
    }
    decide() {
      const w = this.world;
      for (const s of w.swarms) s.doing = w.membersOf(s.id).length ? this.doing(s.id, ALONE) : { action: ALONE, source: "native", code: "no bees", ms: null };
      for (const b of w.bees) b.doing = this.doing(b.id, nativeBee(b, w));
      const before = w.queen.doing.action;
      w.queen.doing = this.doing(w.queen.id, nativeQueen(w.queen, w));
      if (before === "flee" && w.queen.doing.action === "flee" && dist(w.queen, HIVE) < 30) this.report("queen", "done", "reached the nest");
    }
    happened(h) {
      switch (h.kind) {
        case "hit":
          this.report(h.bee, "interrupted", "hit by the player");
          this.event(h.bee, "hit");
          return;
        case "died":
          this.report(h.bee, "failed", "killed by the player");
          this.npc.untrack(h.bee);
          this.brain.forget(h.bee);
          for (const id of h.near) this.event(id, "ally_died");
          return;
        case "stung":
          this.report(h.bee, "done", "stung the player");
          return;
        case "escaped":
          this.report(h.bee, "done", "got away from the player");
          return;
        case "queen-hit":
          this.report("queen", "interrupted", "hit by the player");
          return;
        case "player-died":
          this.npc.epoch = this.npc.epoch + 1;
      }
    }
    event(id, trigger) {
      if (this.npc.event(id, trigger)) this.sent.events += 1;
    }
    report(id, outcome, detail) {
      const decision = this.npc.action(id)?.decisionId;
      if (!decision || this.reported.has(decision)) return;
      if (this.reported.size > 1e4) this.reported.clear();
      if (this.npc.report(id, outcome, detail)) {
        this.reported.add(decision);
        this.sent.reports += 1;
      }
    }
  };

  // src/sources.ts
  var SOURCES2 = ["AI", "cached", "local", "native"];
  var COLOURS = { AI: "#56b4e9", cached: "#cc79a7", local: "#f0e442", native: "#e4572e" };
  function sourceWord(source, scripted) {
    if (source === "AI") return scripted ? "scripted" : "model";
    return { cached: "cache", local: "policy", native: "native AI" }[source];
  }
  function describe(d, scripted, arrival = false) {
    const word = sourceWord(d.source, scripted);
    const when = arrival && d.ms !== null ? ` \xB7 in ${Math.round(d.ms)} ms` : "";
    return `${d.action} \xB7 ${word}${d.source === "native" && d.code ? ` (${d.code})` : ""}${when}`;
  }
  function countBySource(doings) {
    const counts = { AI: 0, cached: 0, local: 0, native: 0 };
    for (const d of doings) counts[d.source] += 1;
    return counts;
  }

  // src/overlay.ts
  var MEANING = {
    AI: (scripted) => scripted ? "fixed rules, not a model" : "decided by the model",
    cached: () => "an answer npcmind reused",
    local: () => "learned, runs in the game",
    native: () => "game code, as a fallback"
  };
  function nativeWords(c) {
    const held2 = c.AI + c.cached + c.local;
    if (held2 === 0) return "every character runs its native AI";
    return `${held2} of ${held2 + c.native} characters still act on earlier decisions until these expire, the other ${c.native} run their native AI`;
  }
  function modeLine(s, c) {
    if (s.up === null) return ["starting", "asking npcmind\u2026"];
    if (!s.up) return ["down", `npcmind is not answering (stopped?): ${nativeWords(c)} until it is back.`];
    if (s.provider === "none") {
      return ["none", `No model: ${nativeWords(c)} (fallback unavailable). Turn a model on: OPENAI_API_KEY=sk-... npcmind demo`];
    }
    if (s.cut) return ["cut", "The model is cut: the cache and the learned policy answer what they can, the rest runs its native AI."];
    if (s.model === "scripted") return ["scripted", "Provider: scripted, not a model (npcmind scripted-provider answers by fixed rules)."];
    return ["model", `Model: ${s.provider} ${s.model ?? ""}${s.ready ? "" : ` (not ready: ${s.note})`}`];
  }
  function setText(el, text2) {
    if (el && el.textContent !== text2) el.textContent = text2;
  }
  function legendRows(doc) {
    const list = doc.getElementById("legend");
    if (!list) return [];
    if (list.children.length === 0) {
      for (const k of SOURCES2) {
        const li = doc.createElement("li");
        li.dataset["source"] = k;
        for (const part of ["swatch", "word", "meaning", "count"]) li.appendChild(doc.createElement("span")).className = part;
        li.firstElementChild.style.background = COLOURS[k];
        list.appendChild(li);
      }
    }
    return Array.from(list.children);
  }
  function showState(doc, s, counts) {
    const [mode, line] = modeLine(s, counts);
    const el = doc.getElementById("mode");
    if (el) {
      setText(el, line);
      if (el.dataset["mode"] !== mode) el.dataset["mode"] = mode;
    }
    const scripted = s.model === "scripted";
    for (const li of legendRows(doc)) {
      const k = li.dataset["source"];
      setText(li.querySelector(".word"), sourceWord(k, scripted));
      setText(li.querySelector(".meaning"), MEANING[k](scripted));
      setText(li.querySelector(".count"), String(counts[k]));
    }
  }
  function fallbacks(st) {
    const parts = Object.entries(st.fallbacks).map(([k, v]) => `${k} ${v}`);
    return parts.length ? parts.join(", ") : "none";
  }
  function streamed(st, long = false) {
    if (st.streamedDecisions === 0) return "";
    const mean2 = Math.round(st.streamedMsTotal / st.streamedDecisions);
    return long ? `; each decision came ${mean2} ms after its request on average (streamed)` : `, ${mean2} ms each`;
  }
  function showCounters(doc, st, sent, s) {
    const tiles = [
      ["requests", st.requests, `${st.asked} asked${streamed(st)}`, `${st.asked} entities asked${streamed(st, true)}`],
      ["decisions", st.ai, `cache ${st.cached} of these; policy ${st.local} more`, `the service's AI decisions, ${st.cached} of them from its cache; ${st.local} more made in the game by the learned policy`],
      ["fallbacks", Object.values(st.fallbacks).reduce((a, b) => a + b, 0), fallbacks(st)],
      ["errors", st.errors, "requests unanswered"],
      ["sent back", sent.events + st.reportsSent, `${sent.events} events, ${st.reportsSent} reports`],
      ["tokens", s.tokensIn + s.tokensOut, `${s.tokensIn} in \xB7 ${s.tokensOut} out`, `${s.tokensCached} of the input cached`]
    ];
    const box = doc.getElementById("stats");
    if (!box) return;
    if (box.children.length === 0) {
      for (const [k] of tiles) {
        const tile = box.appendChild(doc.createElement("div"));
        tile.dataset["k"] = k;
        for (const part of ["value", "name", "detail"]) tile.appendChild(doc.createElement("span")).className = part;
      }
    }
    for (const [k, value, detail, more] of tiles) {
      const tile = box.querySelector(`[data-k="${k}"]`);
      if (tile && tile.title !== (more ?? detail)) tile.title = more ?? detail;
      setText(tile?.querySelector(".value") ?? null, String(value));
      setText(tile?.querySelector(".name") ?? null, k);
      setText(tile?.querySelector(".detail") ?? null, detail);
    }
  }
  function costOf(st, s) {
    const naiveCalls = st.asked + st.local;
    const fresh = st.ai - st.cached;
    let naiveTokens = null;
    if (s.staticTokens !== null && fresh > 0 && s.callsOk > 0) {
      const perEntity = Math.max(0, s.tokensIn - s.callsOk * s.staticTokens) / fresh;
      naiveTokens = Math.round(naiveCalls * (s.staticTokens + perEntity));
    }
    return { calls: s.calls, naiveCalls, tokens: s.tokensIn, naiveTokens };
  }
  var short = (n) => n >= 1e4 ? `${Math.round(n / 1e3)}k` : n.toLocaleString("en-US");
  function showCost(doc, c) {
    const rows = [
      ["model calls", c.calls, c.naiveCalls],
      ["input tokens", c.tokens, c.naiveTokens]
    ];
    const box = doc.getElementById("cost");
    if (!box) return;
    if (box.children.length === 0) {
      for (const [k] of rows) {
        const row = box.appendChild(doc.createElement("div"));
        row.dataset["k"] = k;
        for (const part of ["name", "value", "naive", "bar"]) row.appendChild(doc.createElement("span")).className = part;
        row.querySelector(".bar")?.appendChild(doc.createElement("i"));
      }
    }
    for (const [k, value, naive] of rows) {
      const row = box.querySelector(`[data-k="${k}"]`);
      const share = naive ? Math.min(1, value / naive) : null;
      setText(row?.querySelector(".name") ?? null, k);
      setText(row?.querySelector(".value") ?? null, short(value));
      setText(row?.querySelector(".naive") ?? null, naive === null ? "naive: \u2014" : `naive ${short(naive)} \xB7 ${share === null ? "\u2014" : `${Math.round(share * 100)}%`}`);
      const bar2 = row?.querySelector(".bar i");
      if (bar2) bar2.style.width = `${Math.round((share ?? 0) * 100)}%`;
    }
  }
  function learnedWords(s, local) {
    if (s.learnEvery === null) return "No learning (npcmind demo --no-learn, or without the distill extra).";
    if (s.policy === null) return `Learning: npcmind demo distils a policy from the model's decisions every ${s.learnEvery} s (100 a type).`;
    const types = Object.entries(s.policy.types).map(([t, v]) => `${t} (${v.trained_on} decisions, ${Math.round(v.agreement * 100)}% agree)`);
    return `Learned policy for ${types.join(", ")}: ${local} decisions made in the game, no call.`;
  }

  // src/plot.ts
  var WINDOW = 60;
  var SMOOTH = 4;
  var AXIS = "#8a949c";
  var OUT = "#ffb74d";
  function decidedSoFar(st, unanswered) {
    const fallbacks2 = Object.values(st.fallbacks).reduce((a, b) => a + b, 0);
    return { AI: st.ai - st.cached, cached: st.cached, local: st.local, native: fallbacks2 + unanswered };
  }
  function top(max) {
    if (max <= 1) return 1;
    const p = 10 ** Math.floor(Math.log10(max));
    return ([1, 2, 5, 10].find((k) => k * p >= max) ?? 10) * p;
  }
  function frame(g2, scale) {
    const { width: w, height: h } = g2.canvas;
    g2.clearRect(0, 0, w, h);
    g2.strokeStyle = "#2f363d";
    g2.lineWidth = 1;
    for (const f of [0, 0.5, 1]) {
      const y = Math.round(4 + (h - 8) * f) + 0.5;
      g2.beginPath();
      g2.moveTo(0, y);
      g2.lineTo(w, y);
      g2.stroke();
    }
    g2.fillStyle = AXIS;
    g2.font = "10px system-ui, sans-serif";
    g2.textAlign = "left";
    g2.textBaseline = "top";
    g2.fillText(`${scale} / s`, 3, 6);
    return { w, h };
  }
  var Plot = class {
    samples = [];
    totals = [];
    // one a second, the last SMOOTH + 1
    /** Take a sample when a second has passed since the last (`now` in ms): the rates over the last few
     * seconds (decisions come in bursts, one request at a time). True when one was taken. */
    sample(now, st, unanswered, s) {
      const newest = this.totals[this.totals.length - 1];
      if (newest !== void 0 && now - newest.at < 1e3) return false;
      this.totals.push({ at: now, decided: decidedSoFar(st, unanswered), tokensIn: s.tokensIn, tokensOut: s.tokensOut });
      if (this.totals.length > SMOOTH + 1) this.totals.shift();
      const [first, last2] = [this.totals[0], this.totals[this.totals.length - 1]];
      if (first === void 0 || last2 === void 0 || first === last2) return false;
      const per = 1e3 / (last2.at - first.at);
      const rate = (k) => Math.max(0, last2.decided[k] - first.decided[k]) * per;
      this.samples.push({
        rates: { AI: rate("AI"), cached: rate("cached"), local: rate("local"), native: rate("native") },
        tokensIn: Math.max(0, last2.tokensIn - first.tokensIn) * per,
        tokensOut: Math.max(0, last2.tokensOut - first.tokensOut) * per
      });
      if (this.samples.length > WINDOW) this.samples.shift();
      return true;
    }
    /** Decisions a second, stacked by source, newest at the right. */
    drawDecisions(g2) {
      const sum = (r) => SOURCES2.reduce((a, k) => a + r[k], 0);
      const scale = top(Math.max(0, ...this.samples.map((s) => sum(s.rates))));
      const { w, h } = frame(g2, scale);
      const step2 = w / (WINDOW - 1);
      const x0 = w - (this.samples.length - 1) * step2;
      const base2 = this.samples.map(() => 0);
      for (const k of SOURCES2) {
        const upper = this.samples.map((s, i) => (base2[i] ?? 0) + s.rates[k]);
        const y = (v) => h - 4 - (h - 8) * v / scale;
        g2.fillStyle = COLOURS[k];
        g2.beginPath();
        upper.forEach((v, i) => g2.lineTo(x0 + i * step2, y(v)));
        for (let i = base2.length - 1; i >= 0; i--) g2.lineTo(x0 + i * step2, y(base2[i] ?? 0));
        g2.fill();
        upper.forEach((v, i) => base2[i] = v);
      }
    }
    /** Tokens a second: in as an area on the left scale, out (far fewer) as a line on its own right scale. */
    drawTokens(g2) {
      const scale = top(Math.max(0, ...this.samples.map((s) => s.tokensIn)));
      const outScale = top(Math.max(0, ...this.samples.map((s) => s.tokensOut)));
      const { w, h } = frame(g2, scale);
      g2.fillStyle = OUT;
      g2.textAlign = "right";
      g2.fillText(`${outScale} / s`, w - 3, 6);
      const step2 = w / (WINDOW - 1);
      const x0 = w - (this.samples.length - 1) * step2;
      const y = (v, of) => h - 4 - (h - 8) * v / of;
      g2.fillStyle = "rgba(207,216,220,0.55)";
      g2.beginPath();
      g2.moveTo(x0, h - 4);
      this.samples.forEach((s, i) => g2.lineTo(x0 + i * step2, y(s.tokensIn, scale)));
      g2.lineTo(x0 + (this.samples.length - 1) * step2, h - 4);
      g2.fill();
      g2.strokeStyle = OUT;
      g2.lineWidth = 2;
      g2.beginPath();
      this.samples.forEach((s, i) => g2.lineTo(x0 + i * step2, y(s.tokensOut, outScale)));
      g2.stroke();
    }
  };

  // src/labels.ts
  var LABEL_HEIGHT = 16;
  var PAD = 4;
  var GAP = 3;
  var RINGS = 3;
  function overlaps(a, b) {
    return a.x < b.x + b.w + GAP && b.x < a.x + a.w + GAP && a.y < b.y + b.h + GAP && b.y < a.y + a.h + GAP;
  }
  function candidates(want, w) {
    const h = LABEL_HEIGHT;
    const out = [];
    for (let ring = 0; ring < RINGS; ring++) {
      const d = want.r + 4 + ring * (h + GAP);
      out.push(
        [want.x - w / 2, want.y + d],
        [want.x - w / 2, want.y - d - h],
        [want.x + d, want.y - h / 2],
        [want.x - d - w, want.y - h / 2],
        [want.x + d, want.y + d],
        [want.x - d - w, want.y + d],
        [want.x + d, want.y - d - h],
        [want.x - d - w, want.y - d - h]
      );
    }
    return out;
  }
  function covers(box, d) {
    const nx = Math.max(box.x, Math.min(d.x, box.x + box.w));
    const ny = Math.max(box.y, Math.min(d.y, box.y + box.h));
    return Math.hypot(nx - d.x, ny - d.y) < d.r;
  }
  function place(wants, discs, measure, width, height) {
    const placed = [];
    for (const want of wants) {
      const w = Math.ceil(measure(want.text)) + 2 * PAD;
      const boxes = candidates(want, w).map(([cx, cy]) => ({
        text: want.text,
        colour: want.colour,
        x: Math.max(GAP, Math.min(width - GAP - w, cx)),
        y: Math.max(GAP, Math.min(height - GAP - LABEL_HEIGHT, cy)),
        w,
        h: LABEL_HEIGHT,
        at: { x: want.x, y: want.y, r: want.r }
      }));
      const free = boxes.filter((box) => !placed.some((p) => overlaps(p, box)));
      const best = free.find((box) => !discs.some((d) => covers(box, d))) ?? free[0];
      if (best) placed.push(best);
    }
    return placed;
  }

  // src/render.ts
  var TREES = [[80, 90], [260, 520], [420, 70], [560, 560], [900, 80], [880, 540], [330, 260], [60, 470]];
  var FONT = "600 11px system-ui, sans-serif";
  var NEUTRAL = "#b0bec5";
  function disc(g2, x, y, r, fill) {
    g2.fillStyle = fill;
    g2.beginPath();
    g2.arc(x, y, r, 0, Math.PI * 2);
    g2.fill();
  }
  function bar(g2, x, y, fraction, width) {
    g2.fillStyle = "rgba(0,0,0,0.6)";
    g2.fillRect(x - width / 2, y, width, 3);
    g2.fillStyle = fraction > 0.5 ? "#7cb342" : fraction > 0.25 ? "#fbc02d" : "#e53935";
    g2.fillRect(x - width / 2, y, width * fraction, 3);
  }
  function ground(g2) {
    g2.fillStyle = "#1e2b22";
    g2.fillRect(0, 0, WIDTH, HEIGHT);
    for (const [x, y] of TREES) {
      disc(g2, x ?? 0, y ?? 0, 30, "#263a2c");
      disc(g2, x ?? 0, y ?? 0, 20, "#2d4634");
    }
    g2.fillStyle = "#8d6e3f";
    g2.beginPath();
    for (let i = 0; i < 6; i++) g2.lineTo(HIVE.x + 24 * Math.cos(i * Math.PI / 3), HIVE.y + 24 * Math.sin(i * Math.PI / 3));
    g2.fill();
    g2.strokeStyle = "#c9a36a";
    g2.lineWidth = 2;
    g2.stroke();
  }
  var CLUSTER = 70;
  function halo(g2, s, members) {
    const near = (b) => members.filter((o) => dist(o, b) < CLUSTER);
    const group = members.map(near).reduce((a, b) => b.length > a.length ? b : a);
    const x = group.reduce((a, b) => a + b.x, 0) / group.length;
    const y = group.reduce((a, b) => a + b.y, 0) / group.length;
    const r = Math.max(18, ...group.map((b) => dist(b, { x, y }))) + 12;
    const colour = COLOURS[s.doing.source];
    if (group.length < 3) return { x, y, r };
    g2.save();
    g2.globalAlpha = 0.1;
    disc(g2, x, y, r, colour);
    g2.globalAlpha = 0.55;
    g2.setLineDash([5, 5]);
    g2.strokeStyle = colour;
    g2.lineWidth = 1.5;
    g2.beginPath();
    g2.arc(x, y, r, 0, Math.PI * 2);
    g2.stroke();
    g2.restore();
    return { x, y, r };
  }
  function characters(g2, w) {
    const q = w.queen;
    if (q.callingHelp) {
      g2.strokeStyle = "rgba(255,235,59,0.9)";
      g2.lineWidth = 2;
      g2.beginPath();
      g2.arc(q.x, q.y, 30 + 12 * Math.sin(w.time * 8), 0, Math.PI * 2);
      g2.stroke();
    }
    disc(g2, q.x, q.y, 15, "#ffd54f");
    disc(g2, q.x, q.y, 12, COLOURS[q.doing.source]);
    bar(g2, q.x, q.y - 23, q.hp, 28);
    for (const b of w.bees) {
      disc(g2, b.x, b.y, 7.5, "#101410");
      disc(g2, b.x, b.y, 6, COLOURS[b.doing.source]);
      if (b.hp < 1) bar(g2, b.x, b.y - 12, b.hp, 16);
    }
    const p = w.player;
    if (w.time < p.swatShown) {
      g2.strokeStyle = "rgba(255,255,255,0.85)";
      g2.lineWidth = 2;
      g2.beginPath();
      g2.arc(p.x, p.y, 42, 0, Math.PI * 2);
      g2.stroke();
    }
    disc(g2, p.x, p.y, 11, "#0d47a1");
    disc(g2, p.x, p.y, 8, "#ffffff");
    bar(g2, p.x, p.y - 19, p.hp, 24);
  }
  function label(g2, l) {
    g2.fillStyle = "rgba(12,16,14,0.82)";
    g2.fillRect(l.x, l.y, l.w, l.h);
    g2.fillStyle = l.colour;
    g2.fillRect(l.x, l.y, 3, l.h);
    g2.fillStyle = "#f5f5f5";
    g2.textAlign = "left";
    g2.textBaseline = "middle";
    g2.fillText(l.text, l.x + 6, l.y + LABEL_HEIGHT / 2 + 0.5);
  }
  function pointed(w, pointer2) {
    if (pointer2 === null) return null;
    const near = w.bees.filter((b) => dist(b, pointer2) < 14);
    return near.reduce((a, b) => a === null || dist(b, pointer2) < dist(a, pointer2) ? b : a, null);
  }
  function draw(g2, w, scripted, pointer2) {
    ground(g2);
    const q = w.queen;
    const b = pointed(w, pointer2);
    const wants = b ? [{ text: `bee ${b.id} \xB7 ${describe(b.doing, scripted, true)}`, x: b.x, y: b.y, r: 8, colour: COLOURS[b.doing.source] }] : [];
    wants.push(
      { text: `queen \xB7 ${describe(q.doing, scripted)}${q.callingHelp ? " \xB7 calls help!" : ""}`, x: q.x, y: q.y, r: 16, colour: COLOURS[q.doing.source] }
    );
    for (const s of w.swarms) {
      const members = w.membersOf(s.id);
      if (members.length === 0) {
        const wait = Math.max(0, Math.ceil((s.respawnAt ?? w.time) - w.time));
        wants.push({ text: `${s.id} wiped out \xB7 new wave in ${wait} s`, x: HIVE.x, y: HIVE.y, r: 28, colour: NEUTRAL });
        continue;
      }
      const h = halo(g2, s, members);
      wants.push({ text: `${s.id} (${members.length}) \xB7 ${describe(s.doing, scripted)}`, ...h, colour: COLOURS[s.doing.source] });
    }
    characters(g2, w);
    wants.push({ text: "you", x: w.player.x, y: w.player.y, r: 12, colour: "#ffffff" });
    wants.push({ text: "hive", x: HIVE.x, y: HIVE.y, r: 26, colour: "#c9a36a" });
    g2.font = FONT;
    const discs = [...w.bees.map((b2) => ({ x: b2.x, y: b2.y, r: 8 })), { x: q.x, y: q.y, r: 16 }, { ...w.player, r: 12 }, { ...HIVE, r: 25 }];
    const placed = place(wants, discs, (t) => g2.measureText(t).width, WIDTH, HEIGHT);
    for (const l of placed) label(g2, l);
    return placed;
  }

  // src/service.ts
  function counter(text2, name, labels2 = "") {
    let sum = 0;
    for (const l of text2.split("\n")) {
      if (!(l.startsWith(name + " ") || l.startsWith(name + "{")) || !l.includes(labels2)) continue;
      sum += Number(l.slice(l.lastIndexOf(" ") + 1)) || 0;
    }
    return sum;
  }
  var ServiceWatch = class {
    constructor(url, clientId2) {
      this.url = url;
      this.clientId = clientId2;
    }
    state = {
      up: null,
      provider: null,
      model: null,
      ready: false,
      note: "",
      tokensIn: 0,
      tokensCached: 0,
      tokensOut: 0,
      calls: 0,
      callsOk: 0,
      cut: false,
      learnEvery: null,
      policy: null,
      staticTokens: null
    };
    timer = null;
    /** Cut the model or restore it (npcmind demo's own route); the state as the service then says it. */
    async cutModel(cut) {
      try {
        const r = await fetch(`${this.url}/demo/model?client_id=${encodeURIComponent(this.clientId)}`, {
          method: "PUT",
          body: JSON.stringify({ cut }),
          signal: AbortSignal.timeout(3e3)
        });
        if (r.ok) this.demo(await r.json());
      } catch {
      }
    }
    demo(d) {
      Object.assign(this.state, { cut: d.cut, learnEvery: d.learn_every_s, policy: d.policy, staticTokens: d.static_tokens });
    }
    /** Poll from now on: the page must notice a service that stops while the game goes on. */
    start() {
      void this.poll();
      this.timer = setInterval(() => void this.poll(), 1e3);
    }
    /** Stop polling. */
    stop() {
      if (this.timer !== null) clearInterval(this.timer);
    }
    async poll() {
      try {
        const h = await (await fetch(`${this.url}/v1/health`, { signal: AbortSignal.timeout(3e3) })).json();
        Object.assign(this.state, { up: true, provider: h.provider, model: h.model, ready: Boolean(h.provider_ready), note: String(h.note) });
        const m = await (await fetch(`${this.url}/metrics`, { signal: AbortSignal.timeout(3e3) })).text();
        this.state.tokensIn = counter(m, "npcmind_input_tokens_total");
        this.state.tokensCached = counter(m, "npcmind_cached_input_tokens_total");
        this.state.tokensOut = counter(m, "npcmind_output_tokens_total");
        this.state.calls = counter(m, "npcmind_provider_calls_total");
        this.state.callsOk = counter(m, "npcmind_provider_calls_total", 'outcome="ok"');
        const d = await fetch(`${this.url}/demo/state?client_id=${encodeURIComponent(this.clientId)}`, { signal: AbortSignal.timeout(3e3) });
        if (d.ok) this.demo(await d.json());
      } catch {
        this.state.up = false;
      }
    }
  };

  // src/main.ts
  var params = new URLSearchParams(location.search);
  var speed = Math.min(20, Math.max(0.1, Number(params.get("speed") ?? "1") || 1));
  var autopilot = params.get("autopilot") !== "0";
  var tourCuts = autopilot;
  var base = location.origin;
  var clientId = pageClient();
  function pageClient() {
    const given = params.get("client_id");
    if (given) return given;
    let kept = null;
    try {
      kept = localStorage.getItem("npcmind-demo-client");
      if (!kept) localStorage.setItem("npcmind-demo-client", kept = `demo-${Math.random().toString(36).slice(2, 8)}`);
    } catch {
    }
    return kept ?? `demo-${Math.random().toString(36).slice(2, 8)}`;
  }
  var world = new World();
  var watch = new ServiceWatch(base, clientId);
  var brain = new Brain(base, clientId, () => watch.state.policy !== null, {
    world: { player_hp_fraction: 1, repellent: false },
    scope: "forest_boss",
    scopeState: { boss_phase: 1 }
  });
  var npc = brain.npc;
  var game = new Game(world, brain);
  var plot = new Plot();
  var held = /* @__PURE__ */ new Set();
  var firsts = {};
  var swatAsked = false;
  var KEYS = {
    ArrowLeft: [-1, 0],
    ArrowRight: [1, 0],
    ArrowUp: [0, -1],
    ArrowDown: [0, 1],
    KeyA: [-1, 0],
    KeyD: [1, 0],
    KeyW: [0, -1],
    KeyS: [0, 1]
  };
  addEventListener("keydown", (e) => {
    if (e.code in KEYS || e.code === "Space") e.preventDefault();
    if (e.code === "Space") swatAsked = true;
    if (e.code in KEYS || e.code === "Space") autopilot = tourCuts = false;
    held.add(e.code);
  });
  addEventListener("keyup", (e) => held.delete(e.code));
  var cutButton = document.getElementById("cut");
  cutButton.addEventListener("click", () => {
    tourCuts = false;
    void watch.cutModel(!watch.state.cut);
  });
  function steer2(dt) {
    if (autopilot) return steer(world, dt);
    const p = world.player;
    let [dx, dy] = [0, 0];
    for (const k of held) {
      const v = KEYS[k];
      if (v) [dx, dy] = [dx + v[0], dy + v[1]];
    }
    if (dx || dy) moveToward(p, { x: p.x + dx * 100, y: p.y + dy * 100 }, 150, dt);
    const swat = swatAsked;
    swatAsked = false;
    return swat;
  }
  function tour() {
    const st = watch.state;
    if (!tourCuts || !st.up || st.provider === "none") return;
    const cut = legAt(world.time).name === "cut";
    if (cut !== st.cut && !cutting) {
      cutting = true;
      void watch.cutModel(cut).finally(() => cutting = false);
    }
  }
  var cutting = false;
  function showControl() {
    const st = watch.state;
    cutButton.disabled = !st.up || st.provider === "none";
    const label2 = st.cut ? "Restore the model" : "Cut the model";
    if (cutButton.textContent !== label2) cutButton.textContent = label2;
    const leg = legAt(world.time);
    const words = autopilot ? `Autopilot, ${leg.words} (${Math.ceil(untilNext(world.time) / speed)} s); a key takes over.` : "You play: arrows or WASD move, Space swats.";
    const el = document.getElementById("tour");
    if (el && el.textContent !== words) el.textContent = words;
    const learned = document.getElementById("learned");
    const text2 = learnedWords(st, npc.stats.local);
    if (learned && learned.textContent !== text2) learned.textContent = text2;
  }
  var canvas = document.getElementById("field");
  var g = canvas.getContext("2d");
  var plotDecisions = document.getElementById("plot-decisions").getContext("2d");
  var plotTokens = document.getElementById("plot-tokens").getContext("2d");
  var link = document.getElementById("seen");
  link.href = `/?client_id=${encodeURIComponent(clientId)}`;
  link.textContent = `what the model saw (client_id ${clientId})`;
  var pointer = null;
  canvas.addEventListener("mousemove", (e) => {
    const r = canvas.getBoundingClientRect();
    pointer = { x: (e.clientX - r.left) / r.width * WIDTH, y: (e.clientY - r.top) / r.height * HEIGHT };
  });
  canvas.addEventListener("mouseleave", () => pointer = null);
  var last = performance.now();
  var shown = 0;
  var labels = [];
  function frame2(now) {
    const dt = Math.min(0.05, (now - last) / 1e3) * speed;
    last = now;
    const steps = Math.ceil(dt / 0.05);
    for (let i = 0; i < steps; i++) game.step(dt / steps, steer2(dt / steps));
    tour();
    const sofar = decidedSoFar(npc.stats, brain.unanswered);
    for (const k of SOURCES2) if (sofar[k] > 0 && firsts[k] === void 0) firsts[k] = world.time;
    labels = draw(g, world, watch.state.model === "scripted", pointer);
    showState(document, watch.state, countBySource([...world.bees.map((b) => b.doing), world.queen.doing]));
    if (plot.sample(now, npc.stats, brain.unanswered, watch.state)) {
      plot.drawDecisions(plotDecisions);
      plot.drawTokens(plotTokens);
    }
    if (now - shown > 250) {
      shown = now;
      showCounters(document, npc.stats, game.sent, watch.state);
      showCost(document, costOf(npc.stats, watch.state));
      showControl();
    }
    requestAnimationFrame(frame2);
  }
  function snapshot() {
    const who = (id, d) => ({ id, ...d });
    return {
      clientId,
      speed,
      time: world.time,
      round: world.round,
      epoch: npc.epoch,
      autopilot,
      leg: legAt(world.time).name,
      counted: decidedSoFar(npc.stats, brain.unanswered),
      firsts,
      cost: costOf(npc.stats, watch.state),
      policy: npc.servicePolicy !== null,
      player: { x: world.player.x, y: world.player.y, hp: world.player.hp },
      bees: world.bees.map((b) => ({ ...who(b.id, b.doing), x: b.x, y: b.y, hp: b.hp })),
      queen: { ...who("queen", world.queen.doing), x: world.queen.x, y: world.queen.y, hp: world.queen.hp, callingHelp: world.queen.callingHelp },
      swarms: world.swarms.map((s) => who(s.id, s.doing)),
      stats: npc.stats,
      sent: game.sent,
      service: watch.state,
      mode: document.getElementById("mode")?.dataset["mode"] ?? null,
      field: { width: WIDTH, height: HEIGHT },
      labels,
      plot: plot.samples
    };
  }
  window.npcmindDemo = { snapshot };
  watch.start();
  requestAnimationFrame(frame2);
})();
