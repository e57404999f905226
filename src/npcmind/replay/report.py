"""The replay report: per type, how often the target chose what was decided (and where the game reported the
decision ``failed``), the confusion table of actions, tokens, cost, latency, fallbacks by code and the situations
that differ most. One JSON object (`--out`), which the page at GET /replay shows (docs/replay.md).

``Tally`` takes one decision at a time (its type, what was decided, what the other side chose or its fallback
code, the reported outcome): the agreement figures do not depend on where the second choice came from.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from npcmind.replay.run import CallResult

FORMAT = "npcmind-replay-report"
SHOWN_SITUATIONS = 20  # the situations that differ most, in the report
SHOWN_FAILURES = 8  # the reasons calls failed told apart (a long shadow run must not grow without end)


def fallback_label(code: str) -> str:
    """How a fallback stands in the confusion table's columns, beside the actions."""
    return f"({code})"


@dataclass(slots=True)
class _TypeTally:
    decisions: int = 0
    agreed: int = 0
    failed: int = 0
    failed_changed: int = 0
    prompts_changed: int = 0
    fallbacks: int = 0
    confusion: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))


class Tally:
    """Agreement figures per type, a decision at a time."""

    def __init__(self) -> None:
        self.types: dict[str, _TypeTally] = {}

    def add(
        self, type_name: str, decided: str, choice: str | None, code: str | None, outcome: str | None, changed: bool
    ) -> None:
        """One decision: ``choice`` the other side's action, or None with its fallback ``code``."""
        t = self.types.get(type_name)
        if t is None:
            t = self.types[type_name] = _TypeTally()
        t.decisions += 1
        t.agreed += choice == decided
        t.fallbacks += choice is None
        t.prompts_changed += changed
        if outcome == "failed":
            t.failed += 1
            t.failed_changed += choice != decided
        t.confusion[decided][choice if choice is not None else fallback_label(code or "unknown")] += 1

    def figures(self) -> dict[str, Any]:
        """Per type, sorted by name: decisions, agreement, where it failed, prompts changed and the table."""
        out: dict[str, Any] = {}
        for name in sorted(self.types):
            t = self.types[name]
            out[name] = {
                "decisions": t.decisions,
                "agreed": t.agreed,
                "agreement": _share(t.agreed, t.decisions),
                "failed": t.failed,
                "failed_changed": t.failed_changed,
                "failed_changed_share": _share(t.failed_changed, t.failed),
                "prompts_changed": t.prompts_changed,
                "fallbacks": t.fallbacks,
                "confusion": {a: dict(sorted(row.items())) for a, row in sorted(t.confusion.items())},
            }
        return out

    def agreement(self) -> float | None:
        """Over every type."""
        return _share(sum(t.agreed for t in self.types.values()), sum(t.decisions for t in self.types.values()))


def _share(k: int, n: int) -> float | None:
    return round(k / n, 4) if n else None


def percentile(values: list[float], p: float) -> float | None:
    """The nearest-rank percentile (p in 0-100) of the values; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)], 1)


class Report:
    """A report's figures, a call's results at a time: what replay builds at its end and shadow mode keeps while
    it runs. ``max_situations`` bounds the situations told apart (a long shadow run must not grow without end):
    past it, a new situation's decisions are counted in the figures, not shown among those that differ."""

    def __init__(self, max_situations: int | None = None) -> None:
        self.max_situations = max_situations
        self.tally = Tally()
        self.fallbacks: Counter[str] = Counter()
        self.situations: dict[str, _Situation] = {}
        self.calls = 0
        self.failed = 0
        self.failures: Counter[str] = Counter()
        self.decisions = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.latencies: list[float] = []

    def add(self, r: CallResult) -> None:
        """One call's results."""
        self.calls += 1
        if r.error is not None:
            self.failed += 1
            known = r.error in self.failures or len(self.failures) < SHOWN_FAILURES
            self.failures[r.error if known else "(other reasons)"] += 1
        self.decisions += len(r.decisions)
        self.tokens_in += r.tokens_in
        self.tokens_out += r.tokens_out
        if r.latency_ms is not None:
            self.latencies.append(r.latency_ms)
            if self.max_situations is not None and len(self.latencies) > 2 * self.max_situations:
                del self.latencies[: self.max_situations]  # the newest calls' latencies
        for d in r.decisions:
            k = d.kept
            self.tally.add(k.type, k.action, d.choice, d.code, k.outcome, d.changed)
            if d.code is not None:
                self.fallbacks[d.code] += 1
            s = self.situations.get(d.situation)
            if s is None:
                if self.max_situations is not None and len(self.situations) >= self.max_situations:
                    continue
                s = self.situations[d.situation] = _Situation(k.type, d.before, d.after)
            s.add(k.action, d.choice if d.choice is not None else fallback_label(d.code or "unknown"))

    def figures(
        self,
        target: dict[str, Any],
        left_out: dict[str, int],
        price_in: float | None = None,
        price_out: float | None = None,
    ) -> dict[str, Any]:
        """The report (prices in currency units per million tokens)."""
        situations = self.situations.values()
        differ = sorted((s for s in situations if s.differ), key=lambda s: (-s.differ, -s.decisions, s.before))
        return {
            "format": FORMAT,
            "target": target,
            "calls": self.calls,
            "calls_failed": self.failed,
            "failures": dict(self.failures.most_common()),
            "decisions": self.decisions,
            "left_out": dict(sorted(left_out.items())),
            "agreement": self.tally.agreement(),
            "types": self.tally.figures(),
            "tokens": {"in": self.tokens_in, "out": self.tokens_out},
            "cost": _cost(self.tokens_in, self.tokens_out, price_in, price_out),
            "latency_ms": {
                "p50": percentile(self.latencies, 50),
                "p99": percentile(self.latencies, 99),
                "calls": len(self.latencies),
            },
            "fallbacks": dict(sorted(self.fallbacks.items())),
            "situations_differing": len(differ),
            "differ": [s.shown() for s in differ[:SHOWN_SITUATIONS]],
        }


def build(
    target: dict[str, Any],
    results: list[CallResult],
    left_out: dict[str, int],
    price_in: float | None,
    price_out: float | None,
) -> dict[str, Any]:
    """The report of a replay's results (prices in currency units per million tokens)."""
    report = Report()
    for r in results:
        report.add(r)
    return report.figures(target, left_out, price_in, price_out)


def _cost(tokens_in: int, tokens_out: int, price_in: float | None, price_out: float | None) -> dict[str, Any] | None:
    if price_in is None and price_out is None:
        return None
    cin = tokens_in * (price_in or 0.0) / 1e6
    cout = tokens_out * (price_out or 0.0) / 1e6
    return {
        "price_in": price_in,
        "price_out": price_out,
        "in": round(cin, 6),
        "out": round(cout, 6),
        "total": round(cin + cout, 6),
    }


@dataclass(slots=True)
class _Situation:
    """The decisions of one situation: what was decided and what the target chose, with an example of each
    entity part (the first seen)."""

    type: str
    before: str
    after: str
    decisions: int = 0
    differ: int = 0
    decided: Counter[str] = field(default_factory=Counter)
    replayed: Counter[str] = field(default_factory=Counter)

    def add(self, decided: str, replayed: str) -> None:
        """One decision of this situation: what was decided, and the replay's action or ``(code)``."""
        self.decisions += 1
        self.differ += decided != replayed
        self.decided[decided] += 1
        self.replayed[replayed] += 1

    def shown(self) -> dict[str, Any]:
        """The situation as the report shows it."""
        return {
            "type": self.type,
            "decisions": self.decisions,
            "differ": self.differ,
            "prompt_before": self.before,
            "prompt_after": self.after,
            "decided": dict(self.decided.most_common()),
            "replayed": dict(self.replayed.most_common()),
        }
