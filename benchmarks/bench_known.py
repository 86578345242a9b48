"""Known failure modes (issue 17, `zephyr_debug/analyze/known.py`) on production-shaped evidence:
every scenario of `benchmarks/prodjobs` (the diagnosis set: healthy jobs and the other faults,
and KNOWN_SCENARIOS: one per mode) x variant is generated (seed 0), loaded, analyzed, and the
`known` ids of its findings compared with truth.json's `known`. Prints precision and recall per
mode; targets: 0 false matches, every mode recalled. `--quick` leaves out the 5,000-shard jobs.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.prodjobs import KNOWN_SCENARIOS, SCENARIOS, generate
from zephyr_debug.analyze.known import KNOWN_IDS

QUICK_MAX_SHARDS = 1000


def known_of(job: Path) -> set[str]:
    """The known ids the analysis names for one generated job dir."""
    from zephyr_debug.analyze.analysis import analyze
    from zephyr_debug.sources import load

    return {f.known for f in analyze(load(str(job / "evidence"))).findings if f.known}


def measure(outdir: Path, quick: bool = False) -> list[dict]:
    """One row per job dir: scenario, variant, expected ids, found ids."""
    rows = []
    for sc in SCENARIOS + KNOWN_SCENARIOS:
        if quick and sc.shards > QUICK_MAX_SHARDS:
            continue
        for job in generate(outdir, sc):
            truth = json.loads((job / "truth.json").read_text(encoding="utf-8"))
            rows.append(
                {
                    "scenario": sc.name,
                    "variant": truth["variant"],
                    "expected": set(truth["known"]),
                    "found": known_of(job),
                }
            )
    return rows


def per_mode(rows: list[dict]) -> dict[str, tuple[int, int, int]]:
    """known id -> (tp, fp, fn) over the rows."""
    out = {}
    for known in KNOWN_IDS:
        tp = sum(known in r["found"] and known in r["expected"] for r in rows)
        fp = sum(known in r["found"] and known not in r["expected"] for r in rows)
        fn = sum(known not in r["found"] and known in r["expected"] for r in rows)
        out[known] = (tp, fp, fn)
    return out


def _table(modes: dict[str, tuple[int, int, int]], jobs: int) -> Table:
    table = Table(title=f"known failure modes over {jobs} generated jobs")
    for col in ("mode", "tp", "fp", "fn", "prec", "recall"):
        table.add_column(col, justify="left" if col == "mode" else "right")
    for known, (tp, fp, fn) in modes.items():
        table.add_row(
            known,
            str(tp),
            str(fp),
            str(fn),
            f"{tp / (tp + fp) if tp + fp else 1:.2f}",
            f"{tp / (tp + fn) if tp + fn else 1:.2f}",
        )
    return table


def run(quick: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="zdebug-known-") as tmp:
        rows = measure(Path(tmp), quick)
    modes = per_mode(rows)
    Console(width=80).print(_table(modes, len(rows)))
    fp = sum(m[1] for m in modes.values())
    missed = [k for k, (tp, _, fn) in modes.items() if fn or not tp]
    return {
        "known_false_matches": {
            "value": fp,
            "unit": f"false known-mode matches on {len(rows)} jobs",
            "baseline": "issue 17 target",
            "baseline_value": None,
            "ratio": None,
            "target": "0",
            "meets": fp == 0,
        },
        "known_modes_recalled": {
            "value": len(KNOWN_IDS) - len(missed),
            "unit": f"of {len(KNOWN_IDS)} modes found in every variant that shows them",
            "baseline": "issue 17 target",
            "baseline_value": None,
            "ratio": None,
            "target": str(len(KNOWN_IDS)),
            "meets": not missed,
        },
    }
