"""Prometheus metrics: what each decision cost and where it came from, per service instance."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest


class Metrics:
    """Counters and histograms on a registry of this app's own (tests run several apps in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.decisions = Counter(
            "npcmind_decisions_total", "Decisions answered, by source and fallback code", ["source", "code"], registry=r
        )
        self.provider_latency = Histogram(
            "npcmind_provider_latency_seconds",
            "Wall time of one provider call",
            ["provider"],
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.provider_calls = Counter(
            "npcmind_provider_calls_total", "Provider calls, by outcome", ["provider", "outcome"], registry=r
        )
        self.tokens_in = Counter("npcmind_input_tokens_total", "Input tokens the provider reported", registry=r)
        self.tokens_cached = Counter(
            "npcmind_cached_input_tokens_total", "Input tokens the provider served from its prompt cache", registry=r
        )
        self.tokens_out = Counter("npcmind_output_tokens_total", "Output tokens the provider reported", registry=r)
        self.cache_hits = Counter("npcmind_decision_cache_hits_total", "Decisions served from the cache", registry=r)
        self.shadow_calls = Counter(
            "npcmind_shadow_calls_total",
            "Calls to the shadow model (--shadow-provider), by outcome",
            ["outcome"],
            registry=r,
        )
        self.shadow_dropped = Counter(
            "npcmind_shadow_dropped_total", "Answered batches not shadowed: the shadow queue was full", registry=r
        )

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)

    def counts(self) -> Counts:
        """Every counter now, by sample name and labels: what the activity line compares."""
        return {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for metric in self.registry.collect()
            for sample in metric.samples
            if sample.name.endswith("_total")
        }


Counts = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def activity(before: Counts, after: Counts, seconds: float, span: str | None = None) -> str | None:
    """One line on what the service did between two counts, or None if it decided nothing: a developer
    watching the terminal sees their game's requests arrive, where they went and what they cost. ``span``
    names the time it covers (default: the last so many seconds)."""
    grown = {key: round(v - before.get(key, 0.0)) for key, v in after.items()}

    def grew(name: str, **labels: str) -> int:
        return sum(n for (k, ls), n in grown.items() if k == name and labels.items() <= ls)

    ai = grew("npcmind_decisions_total", source="AI")
    fallbacks = {
        dict(ls)["code"]: n
        for (k, ls), n in grown.items()
        if k == "npcmind_decisions_total" and ("source", "FALLBACK") in ls and n > 0
    }
    if not ai and not fallbacks:
        return None
    cached = grew("npcmind_decision_cache_hits_total")
    calls = grew("npcmind_provider_calls_total")
    failed = calls - grew("npcmind_provider_calls_total", outcome="ok")
    tokens_in = grew("npcmind_input_tokens_total")
    fresh = ai - cached
    span = span or f"last {seconds:.0f} s"
    line = f"{span}: {_n(ai + sum(fallbacks.values()), 'decision')}, {ai} AI ({cached} from the cache)"
    if fallbacks:
        detail = ", ".join(f"{code} {n}" for code, n in sorted(fallbacks.items()))
        line += f", {_n(sum(fallbacks.values()), 'fallback')} ({detail})"
    if calls:
        line += f"; {_n(calls, 'provider call')}" + (f" ({failed} failed)" if failed else "")
        line += (
            f", {tokens_in} input tokens ({grew('npcmind_cached_input_tokens_total')} cached), "
            f"{grew('npcmind_output_tokens_total')} output"
        )
        if fresh:
            line += f": {tokens_in / fresh:.0f} input tokens a fresh decision"
    return line
