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

    def counts(self) -> dict[str, float]:
        """Every counter now, by name and labels (``name,label=value,...``): what the activity line compares."""
        out: dict[str, float] = {}
        for metric in self.registry.collect():
            for sample in metric.samples:
                if sample.name.endswith("_total"):
                    out[sample.name + "".join(f",{k}={v}" for k, v in sorted(sample.labels.items()))] = sample.value
        return out


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def activity(before: dict[str, float], after: dict[str, float], seconds: float) -> str | None:
    """One line on what the service did between two counts, or None if it decided nothing: a developer
    watching the terminal sees their game's requests arrive, where they went and what they cost."""

    def grew(prefix: str, where: str = "") -> int:
        return round(sum(v - before.get(k, 0.0) for k, v in after.items() if k.startswith(prefix) and where in k))

    ai = grew("npcmind_decisions_total,code=,source=AI")
    fallbacks = {
        k.split("code=", 1)[1].split(",", 1)[0]: round(v - before.get(k, 0.0))
        for k, v in after.items()
        if k.startswith("npcmind_decisions_total,") and "source=FALLBACK" in k and v > before.get(k, 0.0)
    }
    if not ai and not fallbacks:
        return None
    cached = grew("npcmind_decision_cache_hits_total")
    calls = grew("npcmind_provider_calls_total,")
    failed = calls - grew("npcmind_provider_calls_total,", "outcome=ok")
    tokens_in, tokens_cached = grew("npcmind_input_tokens_total"), grew("npcmind_cached_input_tokens_total")
    fresh = ai - cached
    line = f"last {seconds:.0f} s: {_n(ai + sum(fallbacks.values()), 'decision')}, {ai} AI ({cached} from the cache)"
    if fallbacks:
        detail = ", ".join(f"{code} {n}" for code, n in sorted(fallbacks.items()))
        line += f", {_n(sum(fallbacks.values()), 'fallback')} ({detail})"
    if calls:
        line += f"; {_n(calls, 'provider call')}" + (f" ({failed} failed)" if failed else "")
        line += f", {tokens_in} input tokens ({tokens_cached} cached), {grew('npcmind_output_tokens_total')} output"
        if fresh:
            line += f": {tokens_in / fresh:.0f} input tokens a fresh decision"
    return line
