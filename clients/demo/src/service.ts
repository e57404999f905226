/** What the page learns from the service beside decisions: whether it answers, which provider it runs, and
 * the tokens spent (from GET /metrics, the service's own counters). */

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
}

/** One counter of the Prometheus text (the service's totals; the demo is its only client). */
function counter(text: string, name: string): number {
  const line = text.split("\n").find((l) => l.startsWith(name + " "));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

/** Polls the service once a second; never throws. */
export class ServiceWatch {
  readonly state: ServiceState = { up: null, provider: null, model: null, ready: false, note: "", tokensIn: 0, tokensCached: 0, tokensOut: 0 };
  private timer: ReturnType<typeof setInterval> | null = null;

  constructor(private readonly url: string) {}

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
    } catch {
      this.state.up = false;
    }
  }
}
