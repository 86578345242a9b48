"""Diagnosis on production-shaped evidence (`benchmarks/prodjobs`, issue 15 targets): every
scenario x variant is generated (seed 0), loaded with `zephyr_debug.sources.load`, analyzed
(`score.findings_of`) and scored against its truth.json. Prints one row per scenario, then
returns the totals: false findings on healthy jobs (target 0), (stage, shard, cause)
precision and recall over the faulty ones (target >= 0.95 each), seconds per job.
`--quick` leaves out the 5,000-shard scenarios.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.prodjobs import SCENARIOS, generate
from benchmarks.score import Score, score_dir

TARGET = 0.95
QUICK_MAX_SHARDS = 1000


def measure(outdir: Path, quick: bool = False) -> list[dict]:
    """One row per job dir: scenario, variant, healthy, score, seconds, findings."""
    rows = []
    for sc in SCENARIOS:
        if quick and sc.shards > QUICK_MAX_SHARDS:
            continue
        for job in generate(outdir, sc):
            truth = json.loads((job / "truth.json").read_text(encoding="utf-8"))
            s, secs, n = score_dir(job)
            rows.append(
                {
                    "scenario": sc.name,
                    "variant": truth["variant"],
                    "healthy": truth["healthy"],
                    "score": s,
                    "secs": secs,
                    "findings": n,
                }
            )
    return rows


def _table(rows: list[dict]) -> Table:
    table = Table(title="diagnosis on generated production-shaped jobs (3 variants each)")
    for col in ("scenario", "tp", "fp", "fn", "prec", "recall", "s/job"):
        table.add_column(col, justify="left" if col == "scenario" else "right")
    for name in dict.fromkeys(r["scenario"] for r in rows):
        mine = [r for r in rows if r["scenario"] == name]
        s = sum((r["score"] for r in mine), Score())
        table.add_row(
            name,
            str(s.tp),
            str(s.fp),
            str(s.fn),
            f"{s.precision:.2f}",
            f"{s.recall:.2f}",
            f"{sum(r['secs'] for r in mine) / len(mine):.2f}",
        )
    return table


def _entry(value: float, unit: str, target: str, meets: bool) -> dict:
    return {
        "value": value,
        "unit": unit,
        "baseline": "issue 15 target",
        "baseline_value": None,
        "ratio": None,
        "target": target,
        "meets": meets,
    }


def run(quick: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="zdebug-prodjobs-") as tmp:
        rows = measure(Path(tmp), quick)
    Console(width=80).print(_table(rows))
    healthy = [r for r in rows if r["healthy"]]
    faulty = sum((r["score"] for r in rows if not r["healthy"]), Score())
    false_healthy = sum(r["score"].fp for r in healthy)
    secs = sum(r["secs"] for r in rows) / len(rows)
    return {
        "diagnosis_false_findings_healthy": _entry(
            false_healthy, f"findings on {len(healthy)} healthy jobs", "0", false_healthy == 0
        ),
        "diagnosis_precision": _entry(
            round(faulty.precision, 3),
            f"(shard, cause) on {len(rows) - len(healthy)} faulty jobs",
            f">= {TARGET}",
            faulty.precision >= TARGET,
        ),
        "diagnosis_recall": _entry(
            round(faulty.recall, 3),
            f"(shard, cause) on {len(rows) - len(healthy)} faulty jobs",
            f">= {TARGET}",
            faulty.recall >= TARGET,
        ),
        "diagnosis_seconds_per_job": _entry(round(secs, 3), "s per job (load + analyze)", "report only", True),
    }
