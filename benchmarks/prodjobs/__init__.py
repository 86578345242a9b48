"""Production-shaped Zephyr evidence with ground truth (issue 15 item 8).

`generate(outdir, scenario, seed)` simulates a scenario (`scenarios.py`) and writes, per
evidence variant, `<outdir>/<scenario>.<variant>/evidence/` (what a user pulls from
production) and `<outdir>/<scenario>.<variant>/truth.json` (what an expert concludes from
that evidence). The same seed gives the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.prodjobs.known_truth import known_truth
from benchmarks.prodjobs.scenarios import BY_NAME, KNOWN_SCENARIOS, SCENARIOS, Scenario
from benchmarks.prodjobs.simulate import simulate
from benchmarks.prodjobs.truth import resolve, truth
from benchmarks.prodjobs.write import write

__all__ = ["BY_NAME", "KNOWN_SCENARIOS", "SCENARIOS", "generate", "job_dirs"]


def generate(outdir: Path, scenario: Scenario, seed: int = 0, variants: tuple[str, ...] | None = None) -> list[Path]:
    """Writes the scenario's job dirs; returns them (each holds `evidence/` and `truth.json`)."""
    run = resolve(scenario, seed, simulate)
    dirs = []
    for variant in variants or scenario.variants:
        job = Path(outdir) / f"{scenario.name}.{variant}"
        write(run, variant, job / "evidence")
        expert = dict(truth(run, variant), known=known_truth(run, variant))
        (job / "truth.json").write_text(json.dumps(expert, indent=1) + "\n", encoding="utf-8")
        dirs.append(job)
    return dirs


def job_dirs(outdir: Path) -> list[Path]:
    """The job dirs under `outdir` (those with a truth.json), sorted."""
    return sorted(p.parent for p in Path(outdir).glob("*/truth.json"))
