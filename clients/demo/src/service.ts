/** What the page learns from the service beside decisions: whether it answers, which provider it runs, the
 * calls and tokens spent (from GET /metrics, the service's own counters), and what `npcmind demo` adds (GET
 * /demo/state): the model cut or not, how often it learns, the policy it published for this page's client. */

/** A policy the demo published for this page's client: when, and per type what it was trained on. */
export interface Published {
  created_at: number;
  types: Record<string, { trained_on: number; agreement: number }>;
}

/** The service as last seen. */
export interface ServiceState {
  up: boolean | null;
  provider: string | null;
  model: string | null;
  ready: boolean;
  note: string;
  tokensIn: number;
  tokensCached: number;
  tokensOut: number;
  calls: number; // model calls made, whatever their outcome
  callsOk: number;
  cut: boolean; // the model cut from this page (npcmind demo's PUT /demo/model)
  learnEvery: number | null; // seconds between the demo's distil rounds; null: it does not learn
  policy: Published | null;
  staticTokens: number | null; // of the prompt's static prefix, which every call sends
}

/** One counter of the Prometheus text, summed over its labels (the service's totals; the demo is its only
 * client); `labels`: only the lines holding this text. */
function counter(text: string, name: string, labels = ""): number {
  let sum = 0;
  for (const l of text.split("\n")) {
    if (!(l.startsWith(name + " ") || l.startsWith(name + "{")) || !l.includes(labels)) continue;
    sum += Number(l.slice(l.lastIndexOf(" ") + 1)) || 0;
  }
  return sum;
}

/** Polls the service once a second; never throws. */
export class ServiceWatch {
  readonly state: ServiceState = {
    up: null, provider: null, model: null, ready: false, note: "", tokensIn: 0, tokensCached: 0, tokensOut: 0,
    calls: 0, callsOk: 0, cut: false, learnEvery: null, policy: null, staticTokens: null,
  };
  private timer: ReturnType<typeof setInterval> | null = null;

  constructor(private readonly url: string, private readonly clientId: string) {}

  /** Cut the model or restore it (npcmind demo's own route); the state as the service then says it. */
  async cutModel(cut: boolean): Promise<void> {
    try {
      const r = await fetch(`${this.url}/demo/model?client_id=${encodeURIComponent(this.clientId)}`, {
        method: "PUT", body: JSON.stringify({ cut }), signal: AbortSignal.timeout(3000),
      });
      if (r.ok) this.demo(await r.json());
    } catch {
      // the service down: the next poll says so
    }
  }

  private demo(d: { cut: boolean; learn_every_s: number | null; policy: Published | null; static_tokens: number | null }): void {
    Object.assign(this.state, { cut: d.cut, learnEvery: d.learn_every_s, policy: d.policy, staticTokens: d.static_tokens });
  }

  /** Poll from now on: the page must notice a service that stops while the game goes on. */
  start(): void {
    void this.poll();
    this.timer = setInterval(() => void this.poll(), 1000);
  }

  /** Stop polling. */
  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
  }

  private async poll(): Promise<void> {
    try {
      const h = await (await fetch(`${this.url}/v1/health`, { signal: AbortSignal.timeout(3000) })).json();
      Object.assign(this.state, { up: true, provider: h.provider, model: h.model, ready: Boolean(h.provider_ready), note: String(h.note) });
      const m = await (await fetch(`${this.url}/metrics`, { signal: AbortSignal.timeout(3000) })).text();
      this.state.tokensIn = counter(m, "npcmind_input_tokens_total");
      this.state.tokensCached = counter(m, "npcmind_cached_input_tokens_total");
      this.state.tokensOut = counter(m, "npcmind_output_tokens_total");
      this.state.calls = counter(m, "npcmind_provider_calls_total");
      this.state.callsOk = counter(m, "npcmind_provider_calls_total", 'outcome="ok"');
      const d = await fetch(`${this.url}/demo/state?client_id=${encodeURIComponent(this.clientId)}`, { signal: AbortSignal.timeout(3000) });
      if (d.ok) this.demo(await d.json());
    } catch {
      this.state.up = false;
    }
  }
}
