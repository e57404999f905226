/* npcmind-demo-sources {"sha256":"6bfb5ae65134cc13812ee72bb3423fd479c7c185158431bfb4e1e5b455c73538","files":["clients/demo/index.html","clients/demo/src/brain.ts","clients/demo/src/game.ts","clients/demo/src/main.ts","clients/demo/src/motion.ts","clients/demo/src/native.ts","clients/demo/src/overlay.ts","clients/demo/src/render.ts","clients/demo/src/sdk.ts","clients/demo/src/service.ts","clients/demo/src/world.ts"]} */
"use strict";
(() => {
  // src/sdk.ts
  var BATCH = 16;
  var WORKERS = 4;
  var REASK_GAP_MS = 500;
  var DEFAULT_TIMING = [4e3, 12e3];
  var DecideClient = class {
    constructor(url, clientId2, options = {}) {
      this.url = url;
      this.clientId = clientId2;
      this.world = options.world ?? {};
      this.scope = options.scope ?? null;
      this.scopeState = options.scopeState ?? null;
      this._epoch = options.epoch ?? 0;
      this.clock = options.clock ?? (() => performance.now());
      this.timeoutGiven = options.timeoutMs !== void 0;
      this.opts = {
        eventWindowMs: options.eventWindowMs ?? 50,
        telemetryMs: options.telemetryMs ?? 500,
        timeoutMs: options.timeoutMs ?? 15e3
        // until GET /v1/health tells the service's deadline
      };
    }
    world;
    scope;
    scopeState;
    stats = {
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
      refused: 0
    };
    _epoch;
    entities = /* @__PURE__ */ new Map();
    observed = [];
    removed = [];
    reports = [];
    scene = null;
    types = /* @__PURE__ */ new Map();
    manifestAsked = false;
    inFlight = 0;
    count = 0;
    lastReask = -Infinity;
    reaskPending = false;
    lastTelemetry = -Infinity;
    notBefore = -Infinity;
    closed = false;
    clock;
    timeoutGiven;
    opts;
    /** The game's epoch: answers to requests sent under another epoch are dropped. */
    get epoch() {
      return this._epoch;
    }
    set epoch(value) {
      if (value === this._epoch) return;
      this._epoch = value;
      const now = this.clock();
      for (const e of this.entities.values()) {
        e.choice = null;
        e.due = Math.min(e.due, now);
      }
    }
    /** A new scene (level, map): the service resets its population with the next telemetry. */
    setScene(scene) {
      this.scene = scene;
    }
    /** Add an entity that decides, or update what it sees and may do now. */
    track(id, type, observation, legalActions, opts = {}) {
      const e = this.entities.get(id);
      if (e === void 0) {
        const fresh = { id, type, observation, legalActions, opts, trigger: null, due: this.clock(), inFlight: false };
        this.entities.set(id, { ...fresh, choice: null, why: null });
        return;
      }
      Object.assign(e, { type, observation, legalActions, opts });
    }
    /** An observe-only entity (the player): sent as telemetry, never asked. */
    observe(id, type, fields, position) {
      this.observed = this.observed.filter((o) => o["id"] !== id);
      this.observed.push(position ? { id, type, fields, position } : { id, type, fields });
    }
    /** The entity left the scene (died): forget it and tell the service. */
    untrack(id) {
      if (this.entities.delete(id)) this.removed.push(id);
    }
    /** Something happened to the entity (one of its type's events): ask for it at once. */
    event(id, trigger) {
      const e = this.entities.get(id);
      if (e === void 0) return false;
      e.trigger = trigger;
      e.due = Math.min(e.due, this.clock() + this.opts.eventWindowMs);
      return true;
    }
    /** What became of the entity's current AI decision; sent with the next tick. */
    report(id, outcome, detail) {
      const decisionId = this.entities.get(id)?.choice?.decisionId;
      if (!decisionId) return false;
      this.reports.push(detail ? { decision_id: decisionId, outcome, detail: detail.slice(0, 200) } : { decision_id: decisionId, outcome });
      return true;
    }
    /** The entity's live decision, or null: run the game's native AI. */
    action(id, legalNow) {
      const e = this.entities.get(id);
      const c = e?.choice;
      if (!e || !c) return null;
      if (this.clock() >= c.expiresAt) {
        e.choice = null;
        e.why = "expired";
        return null;
      }
      return (legalNow ?? e.legalActions).includes(c.action) ? c : null;
    }
    /** Why an entity has no decision: the fallback code, `unreachable`, `expired`, or null when not asked yet. */
    fallbackOf(id) {
      return this.entities.get(id)?.why ?? null;
    }
    /** Send what is due. Never blocks, never throws for the network: answers apply as they come. */
    tick(now = this.clock()) {
      if (this.closed) return;
      if (!this.manifestAsked && now >= this.notBefore) this.readManifest();
      if (this.entities.size !== this.count) {
        this.count = this.entities.size;
        this.reaskPending = true;
      }
      if (this.reaskPending && now - this.lastReask >= REASK_GAP_MS) {
        this.reaskPending = false;
        this.lastReask = now;
        for (const e of this.entities.values()) e.due = Math.min(e.due, now);
      }
      if (now < this.notBefore) return;
      if (now - this.lastTelemetry >= this.opts.telemetryMs) this.sendTelemetry(now);
      if (this.reports.length) {
        const reports = this.reports.splice(0, 256);
        this.stats.reportsSent += reports.length;
        void this.call("POST", "/v1/report", { client_id: this.clientId, reports }).catch(() => void 0);
      }
      this.ask(now);
    }
    /** What the model saw in this session's last decide request (GET /v1/prompt); null when nothing yet. */
    async lastPrompt() {
      try {
        const [status, body] = await this.call("GET", `/v1/prompt?client_id=${encodeURIComponent(this.clientId)}`, null);
        return status === 200 && typeof body === "object" && body !== null ? body : null;
      } catch {
        return null;
      }
    }
    /** Stop sending; answers still in flight are ignored. */
    close() {
      this.closed = true;
    }
    timing(type) {
      return this.types.get(type) ?? DEFAULT_TIMING;
    }
    readManifest() {
      this.manifestAsked = true;
      this.call("GET", "/v1/health", null).then(([status, body]) => {
        const deadline = body.deadline_ms;
        if (status === 200 && typeof deadline === "number" && deadline > 0 && !this.timeoutGiven) this.opts.timeoutMs = deadline + 5e3;
        return this.call("GET", "/v1/manifest", null);
      }).then(([status, body]) => {
        const m = body.manifest;
        if (status !== 200 || !m) throw new Error(`manifest: ${status}`);
        const d = m.defaults ?? {};
        for (const [name, t] of Object.entries(m.types ?? {})) {
          this.types.set(name, [t["refresh_ms"] ?? d["refresh_ms"] ?? 4e3, t["ttl_ms"] ?? d["ttl_ms"] ?? 12e3]);
        }
      }).catch(() => {
        this.manifestAsked = false;
        this.notBefore = Math.max(this.notBefore, this.clock() + 1e3);
      });
    }
    ask(now) {
      const due = [...this.entities.values()].filter((e) => e.due <= now && !e.inFlight);
      due.sort((a, b) => Number(a.trigger === null) - Number(b.trigger === null) || a.due - b.due);
      while (due.length && this.inFlight < WORKERS) this.send(due.splice(0, BATCH), now);
    }
    send(batch, now) {
      const entities = batch.map((e) => {
        const item = { id: e.id, type: e.type, observation: { ...e.observation }, legal_actions: [...e.legalActions] };
        for (const k of ["position", "profile", "parent"]) if (e.opts[k] != null) item[k] = e.opts[k];
        if (e.trigger) item["trigger"] = e.trigger;
        e.due = now + this.timing(e.type)[0];
        e.inFlight = true;
        e.trigger = null;
        return item;
      });
      const legal = new Map(batch.map((e) => [e.id, [...e.legalActions]]));
      const body = { client_id: this.clientId, epoch: this._epoch, world: { ...this.world }, entities };
      if (this.scope !== null) body["scope"] = this.scope;
      if (this.scope !== null && this.scopeState !== null) body["scope_state"] = { ...this.scopeState };
      const epoch = this._epoch;
      this.stats.requests += 1;
      this.stats.asked += batch.length;
      this.inFlight += 1;
      this.call("POST", "/v1/decide", body).then(([status, answer]) => this.apply(status, answer, epoch, legal)).catch(() => this.failed(legal, "unreachable")).finally(() => {
        this.inFlight -= 1;
      });
    }
    apply(status, answer, epoch, legal) {
      if (status !== 200) {
        this.stats.errors += 1;
        if (status === 429 || status >= 500) this.notBefore = this.clock() + 1e3;
        this.release(legal, `error ${status}`);
        return;
      }
      const a = answer;
      if (a.epoch !== this._epoch || epoch !== this._epoch) {
        this.stats.droppedEpoch += 1;
        this.release(legal, null, this.clock());
        return;
      }
      const now = this.clock();
      for (const d of a.decisions ?? []) {
        const e = this.entities.get(String(d["id"]));
        const sent = legal.get(String(d["id"]));
        if (!e || !sent) continue;
        e.inFlight = false;
        if (d["source"] === "AI" && sent.includes(String(d["action"]))) {
          this.stats.ai += 1;
          this.stats.cached += d["cached"] ? 1 : 0;
          e.choice = {
            action: String(d["action"]),
            source: "AI",
            confidence: d["confidence"] ?? null,
            expiresAt: now + Number(d["ttl_ms"]),
            decisionId: d["decision_id"] ?? null,
            cached: Boolean(d["cached"]),
            label: d["label"] ?? null
          };
          e.why = null;
        } else {
          const code = d["source"] === "AI" ? "illegal" : String(d["code"]);
          if (code === "illegal") this.stats.illegal += 1;
          else this.stats.fallbacks[code] = (this.stats.fallbacks[code] ?? 0) + 1;
          e.choice = null;
          e.why = code;
        }
      }
      this.release(legal, null);
    }
    failed(legal, why) {
      this.stats.errors += 1;
      this.notBefore = this.clock() + 1e3;
      this.release(legal, why);
    }
    release(legal, why, due) {
      for (const id of legal.keys()) {
        const e = this.entities.get(id);
        if (!e || !e.inFlight) continue;
        e.inFlight = false;
        if (due !== void 0) e.due = Math.min(e.due, due);
        if (why !== null) {
          e.why = why;
          e.choice = null;
        }
      }
    }
    sendTelemetry(now) {
      const items = [...this.entities.values()].map((e) => {
        const item = { id: e.id, type: e.type, fields: { ...e.observation } };
        if (e.opts.position) item["position"] = e.opts.position;
        if (e.opts.parent) item["parent"] = e.opts.parent;
        return item;
      });
      items.push(...this.observed);
      if (!items.length && !this.removed.length && this.scene === null) return;
      this.lastTelemetry = now;
      const body = { client_id: this.clientId, epoch: this._epoch, entities: items, removed: this.removed };
      if (this.scene !== null) body["scene"] = this.scene;
      this.observed = [];
      this.removed = [];
      this.scene = null;
      void this.call("POST", "/v1/telemetry", body).catch(() => void 0);
    }
    async call(method, path, body) {
      const init = { method, signal: AbortSignal.timeout(this.opts.timeoutMs) };
      if (body !== null) {
        init.body = JSON.stringify(body);
        init.headers = { "content-type": "application/json" };
      }
      const r = await fetch(this.url + path, init);
      let payload = null;
      try {
        payload = await r.json();
      } catch {
        payload = null;
      }
      return [r.status, payload];
    }
  };

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
  var native = (action) => ({ action, source: "native", code: null });
  var World = class {
    player = { ...PLAYER_START, hp: 1, swatReady: 0, swatShown: 0 };
    bees = [];
    queen = { id: "queen", x: HIVE.x, y: HIVE.y, hp: 1, doing: native("idle"), callingHelp: false };
    swarms = [
      { id: "swarm-a", doing: native("-"), wave: 0, respawnAt: null },
      { id: "swarm-b", doing: native("-"), wave: 0, respawnAt: null }
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
          wanderAngle: a,
          x: HIVE.x - 60 + Math.cos(a) * 30,
          y: HIVE.y + side * 110 + Math.sin(a) * 30
        });
      }
    }
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
        if (b.doing.action !== "chase") b.hp = Math.min(1, b.hp + dt * 0.02);
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
  function moveAway(m, from, speed2, dt) {
    const d = Math.max(1, dist(m, from));
    moveToward(m, { x: m.x + (m.x - from.x) / d * 100, y: m.y + (m.y - from.y) / d * 100 }, speed2, dt);
  }

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
  function moveBee(b, w, dt) {
    const swarm = w.swarms.find((s) => s.id === b.swarm);
    switch (b.doing.action) {
      case "chase":
        moveToward(b, chaseTarget(b, w), BEE_SPEED * (swarm?.doing.action === "surround" ? 1.2 : 1), dt);
        return;
      case "flee":
        moveAway(b, w.player, BEE_SPEED * 1.1, dt);
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
  var Game = class {
    // decision ids already reported: one outcome each
    constructor(world2, npc2) {
      this.world = world2;
      this.npc = npc2;
    }
    sent = { events: 0, reports: 0 };
    reported = /* @__PURE__ */ new Set();
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
      this.npc.world = { player_hp_fraction: p.hp, repellent: false };
      this.npc.scopeState = { boss_phase: w.queen.hp < 0.5 ? 2 : 1 };
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
      const qObs = { hp_fraction: q.hp, distance_to_player: dq, sees_player: dq < QUEEN_SIGHT, current_action: q.doing.action };
      this.npc.track(q.id, "boss", qObs, QUEEN_ACTIONS, { position: [q.x, q.y], profile: "queen_bee" });
      this.npc.observe("player", "player", { hp_fraction: p.hp }, [p.x, p.y]);
    }
    doing(id, native2) {
      const c = this.npc.action(id);
      if (c !== null) return { action: c.action, source: c.source === "local" ? "local" : c.cached ? "cached" : "AI", code: null };
      return { action: native2, source: "native", code: this.npc.fallbackOf(id) };
    }
    decide() {
      const w = this.world;
      for (const s of w.swarms) s.doing = w.membersOf(s.id).length ? this.doing(s.id, "-") : { action: "-", source: "native", code: "no bees" };
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

  // src/overlay.ts
  function modeLine(s) {
    if (s.up === null) return ["starting", "asking npcmind\u2026"];
    if (!s.up) return ["down", "npcmind is not answering (stopped?): every bee runs its native AI until it is back."];
    if (s.provider === "none") {
      return ["none", "No model: every bee runs its native AI (fallback unavailable). Turn a model on: OPENAI_API_KEY=sk-... npcmind demo"];
    }
    if (s.model === "scripted") return ["scripted", "Provider: scripted, not a model (npcmind scripted-provider answers by fixed rules)."];
    return ["model", `Model: ${s.provider} ${s.model ?? ""}${s.ready ? "" : ` (not ready: ${s.note})`}`];
  }
  function fallbacks(st) {
    const parts = Object.entries(st.fallbacks).map(([k, v]) => `${k} ${v}`);
    return parts.length ? parts.join(", ") : "none";
  }
  function showOverlay(doc, st, sent, s) {
    const [mode, line] = modeLine(s);
    const el = doc.getElementById("mode");
    if (el) {
      el.textContent = line;
      el.dataset["mode"] = mode;
    }
    const rows = [
      ["requests", String(st.requests)],
      ["entities asked", String(st.asked)],
      ["AI decisions", `${st.ai} (cached ${st.cached})`],
      ["local", String(st.local)],
      ["fallbacks", fallbacks(st)],
      ["errors", String(st.errors)],
      ["events sent", String(sent.events)],
      ["reports sent", String(st.reportsSent)],
      ["tokens", `${s.tokensIn} in (${s.tokensCached} cached), ${s.tokensOut} out`]
    ];
    const table = doc.getElementById("stats");
    if (table) table.textContent = rows.map(([k, v]) => `${k.padEnd(15)} ${v}`).join("\n");
  }

  // src/render.ts
  var COLOURS = { AI: "#2e7d32", cached: "#00838f", local: "#1565c0", native: "#b26a00" };
  function describe(d) {
    return d.source === "native" ? `${d.action} \xB7 native${d.code ? ` (${d.code})` : ""}` : `${d.action} \xB7 ${d.source}`;
  }
  function label(g2, text, x, y, colour) {
    g2.font = "10px sans-serif";
    g2.textAlign = "center";
    g2.fillStyle = "rgba(255,255,255,0.75)";
    const w = g2.measureText(text).width;
    g2.fillRect(x - w / 2 - 2, y - 9, w + 4, 12);
    g2.fillStyle = colour;
    g2.fillText(text, x, y);
  }
  function bar(g2, x, y, fraction) {
    g2.fillStyle = "#400";
    g2.fillRect(x - 10, y, 20, 3);
    g2.fillStyle = "#e53935";
    g2.fillRect(x - 10, y, 20 * fraction, 3);
  }
  var TREES = [[80, 90], [260, 520], [420, 70], [560, 560], [900, 80], [880, 540], [330, 260], [60, 470]];
  function draw(g2, w) {
    g2.fillStyle = "#5d8a4a";
    g2.fillRect(0, 0, WIDTH, HEIGHT);
    g2.fillStyle = "#3f6b35";
    for (const [x, y2] of TREES) {
      g2.beginPath();
      g2.arc(x ?? 0, y2 ?? 0, 28, 0, Math.PI * 2);
      g2.fill();
    }
    g2.fillStyle = "#8d6e3f";
    g2.beginPath();
    g2.arc(HIVE.x, HIVE.y, 26, 0, Math.PI * 2);
    g2.fill();
    label(g2, "hive", HIVE.x, HIVE.y + 40, "#333");
    const p = w.player;
    if (w.time < p.swatShown) {
      g2.strokeStyle = "rgba(255,255,255,0.8)";
      g2.beginPath();
      g2.arc(p.x, p.y, 42, 0, Math.PI * 2);
      g2.stroke();
    }
    g2.fillStyle = "#1e3a8a";
    g2.beginPath();
    g2.arc(p.x, p.y, 10, 0, Math.PI * 2);
    g2.fill();
    bar(g2, p.x, p.y - 18, p.hp);
    label(g2, "you", p.x, p.y + 24, "#1e3a8a");
    const q = w.queen;
    if (q.callingHelp) {
      g2.strokeStyle = "rgba(255,235,59,0.9)";
      g2.beginPath();
      g2.arc(q.x, q.y, 30 + 12 * Math.sin(w.time * 8), 0, Math.PI * 2);
      g2.stroke();
    }
    g2.fillStyle = "#6a1b9a";
    g2.beginPath();
    g2.arc(q.x, q.y, 14, 0, Math.PI * 2);
    g2.fill();
    bar(g2, q.x, q.y - 22, q.hp);
    label(g2, `queen: ${describe(q.doing)}${q.callingHelp ? " \xB7 calls help!" : ""}`, q.x, q.y + 28, COLOURS[q.doing.source]);
    for (const b of w.bees) {
      g2.fillStyle = b.swarm === "swarm-a" ? "#fdd835" : "#ffb300";
      g2.beginPath();
      g2.arc(b.x, b.y, 6, 0, Math.PI * 2);
      g2.fill();
      g2.strokeStyle = "#222";
      g2.stroke();
      bar(g2, b.x, b.y - 11, b.hp);
      label(g2, describe(b.doing), b.x, b.y + 17, COLOURS[b.doing.source]);
    }
    let y = 18;
    for (const s of w.swarms) {
      const text = s.respawnAt === null ? describe(s.doing) : "wiped out: a new wave comes";
      label(g2, `${s.id}: ${text}`, 90, y, COLOURS[s.doing.source]);
      y += 15;
    }
  }

  // src/service.ts
  function counter(text, name) {
    const line = text.split("\n").find((l) => l.startsWith(name + " "));
    return line ? Number(line.slice(name.length + 1)) : 0;
  }
  var ServiceWatch = class {
    constructor(url) {
      this.url = url;
    }
    state = { up: null, provider: null, model: null, ready: false, note: "", tokensIn: 0, tokensCached: 0, tokensOut: 0 };
    timer = null;
    start() {
      void this.poll();
      this.timer = setInterval(() => void this.poll(), 1e3);
    }
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
      } catch {
        this.state.up = false;
      }
    }
  };

  // src/main.ts
  var params = new URLSearchParams(location.search);
  var speed = Math.min(20, Math.max(0.1, Number(params.get("speed") ?? "1") || 1));
  var autopilot = params.get("autopilot") === "1";
  var base = location.origin;
  var clientId = `demo-${Math.random().toString(36).slice(2, 8)}`;
  var world = new World();
  var npc = new DecideClient(base, clientId, { world: { player_hp_fraction: 1, repellent: false }, scope: "forest_boss", scopeState: { boss_phase: 1 } });
  var game = new Game(world, npc);
  var watch = new ServiceWatch(base);
  var held = /* @__PURE__ */ new Set();
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
    held.add(e.code);
  });
  addEventListener("keyup", (e) => held.delete(e.code));
  function steer(dt) {
    const p = world.player;
    let [dx, dy] = [0, 0];
    for (const k of held) {
      const v = KEYS[k];
      if (v) [dx, dy] = [dx + v[0], dy + v[1]];
    }
    if (dx || dy) moveToward(p, { x: p.x + dx * 100, y: p.y + dy * 100 }, 150, dt);
    else if (autopilot) {
      const enemies = [...world.bees, world.queen];
      const near = enemies.reduce((a, b) => dist(a, p) <= dist(b, p) ? a : b);
      moveToward(p, near, 120, dt);
      return dist(near, p) < 40;
    }
    const swat = swatAsked;
    swatAsked = false;
    return swat;
  }
  var canvas = document.getElementById("field");
  var g = canvas.getContext("2d");
  var link = document.getElementById("seen");
  link.href = `/?client_id=${encodeURIComponent(clientId)}`;
  link.textContent = `what the model saw (client_id ${clientId})`;
  var last = performance.now();
  var shown = 0;
  function frame(now) {
    const dt = Math.min(0.05, (now - last) / 1e3) * speed;
    last = now;
    const steps = Math.ceil(dt / 0.05);
    for (let i = 0; i < steps; i++) game.step(dt / steps, steer(dt / steps));
    draw(g, world);
    if (now - shown > 250) {
      shown = now;
      showOverlay(document, npc.stats, game.sent, watch.state);
    }
    requestAnimationFrame(frame);
  }
  function snapshot() {
    const who = (id, d) => ({ id, ...d });
    return {
      clientId,
      speed,
      time: world.time,
      round: world.round,
      epoch: npc.epoch,
      player: { x: world.player.x, y: world.player.y, hp: world.player.hp },
      bees: world.bees.map((b) => ({ ...who(b.id, b.doing), x: b.x, y: b.y, hp: b.hp })),
      queen: { ...who("queen", world.queen.doing), hp: world.queen.hp, callingHelp: world.queen.callingHelp },
      swarms: world.swarms.map((s) => who(s.id, s.doing)),
      stats: npc.stats,
      sent: game.sent,
      service: watch.state,
      mode: document.getElementById("mode")?.dataset["mode"] ?? null
    };
  }
  window.npcmindDemo = { snapshot };
  watch.start();
  requestAnimationFrame(frame);
})();
