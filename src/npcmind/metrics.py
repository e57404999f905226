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

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
