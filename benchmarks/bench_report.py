"""`zdebug report` on a 5,000-shard x 200-worker job: page data size against the same page with
nothing binned and every worker's memory drawn, and chart drawing time in headless chromium
against a 50-shard x 4-worker job's page (100x fewer attempts), both measured in the same run."""

from __future__ import annotations

import tempfile
from pathlib import Path

from plotly.offline import get_plotlyjs

from benchmarks.report_data import big_evidence, chromium, draw_ms
from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.render.report import Limits, render

UNBINNED = Limits(series_points=10**9, sample_points=10**9, top_workers=10**9)


def _result(value: float, unit: str, baseline: str, baseline_value: float, target: float) -> dict:
    ratio = value / baseline_value
    return {
        "value": value,
        "unit": unit,
        "baseline": baseline,
        "baseline_value": baseline_value,
        "ratio": ratio,
        "target": f"ratio <= {target}",
        "meets": ratio <= target,
    }


def run(quick: bool = False) -> dict:
    ev = big_evidence(shards=1_000, workers=40) if quick else big_evidence()
    found = analyze(ev)
    small = big_evidence(shards=50, workers=4, straggler=7)
    pages = {
        "big": render(ev, found),
        "unbinned": render(ev, found, limits=UNBINNED),
        "small": render(small, analyze(small)),
    }
    js = len(get_plotlyjs().encode())
    size = {k: len(v.encode()) - js for k, v in pages.items()}
    out = {"report_data_bytes": _result(size["big"], "bytes", "unbinned page", size["unbinned"], 0.5)}
    with tempfile.TemporaryDirectory() as tmp:
        drawn = {}
        for name in ("big", "small"):
            page = Path(tmp) / f"{name}.html"
            page.write_text(pages[name])
            drawn[name] = draw_ms(chromium(page, Path(tmp))[0])
    if drawn["big"] and drawn["small"]:
        out["report_draw_ms"] = _result(drawn["big"], "ms", "50-shard page", drawn["small"], 20)
    return out
