"""bench/ab.py's arithmetic: the table a person reads to decide whether the hot path regressed."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from ab import BASELINE, Measure, Row, ratio_text, table


def test_a_ratio_is_the_median_of_the_rounds_with_their_spread() -> None:
    assert ratio_text([100.0, 200.0, 100.0], [110.0, 180.0, 130.0]) == "1.100 (0.900-1.300)"
    assert ratio_text([0.0], [5.0]) == "-"  # a round that measured nothing is no ratio


def test_the_table_gives_each_row_its_cpu_and_the_in_flight_row_its_latency_and_rate() -> None:
    rows = [
        Row("cached", [Measure(400.0), Measure(420.0)], [Measure(380.0), Measure(441.0)]),
        Row("1,000 in flight", [Measure(800.0, 700.0, 2000.0)] * 2, [Measure(880.0, 770.0, 1800.0)] * 2),
        Row("streamed"),  # the new side's own row is printed apart
    ]
    text, ratios = table(rows, BASELINE, "checkout")
    lines = text.splitlines()
    assert lines[0].startswith(f"| what | old `{BASELINE}` | new `checkout` |")
    assert lines[2] == "| cached: service CPU a request | 410 us | 410 us | 1.000 (0.950-1.050) |"
    assert "| 1,000 in flight: p99 | 700 ms | 770 ms | 1.100 (1.100-1.100) |" in lines
    assert "| 1,000 in flight: requests a second | 2,000 | 1,800 | 0.900 (0.900-0.900) |" in lines
    assert ratios == [1.0, 1.1] and len(lines) == 6


def test_a_sample_goes_to_the_innermost_stage_on_its_stack() -> None:
    from ab_stages import stage_of

    root = "run (asyncio/runners.py:190);HTTPRoute.handle (/v/site-packages/litestar/routes/http.py:80)"
    decide = root + ";DecidePipeline.decide (/r/src/npcmind/decide/pipeline.py:117)"
    assert stage_of(root) == "http and event loop"
    assert stage_of(decide) == "pipeline (the rest of decide)"
    keyed = decide + ";DecidePipeline._sort (/r/src/npcmind/decide/pipeline.py:240)"
    keyed += ";Prompt.cache_keys (/r/src/npcmind/decide/prompt.py:90)"
    assert stage_of(keyed) == "cache (keys, lookup)"
    counted = decide + ";count (/r/src/npcmind/providers/tokens.py:25)"
    assert stage_of(counted) == "tokens (budget)"  # not the provider call: the innermost mark decides
