"""Scores a diagnosis against a generated job's ground truth (`benchmarks/prodjobs`).

Shard level: (stage, shard, cause) triples. A finding counts once for each shard it covers
(`shards`, else `shard`) and each cause in its `causes`. Job level: a finding without a
shard counts by kind (or a cause) against truth's `job` list; the finding that aborted the
pipeline (`aborted_pipeline` in its metrics) also counts the job's `aborted`. Findings of severity `info`
(e.g. `recovered`) are information, not faults: not counted.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from zephyr_debug.findings import INFO, Finding


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    details: list[str] = field(default_factory=list)  # `fp …` / `fn …` lines

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    def __add__(self, other: Score) -> Score:
        return Score(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn, self.details + other.details)


def score(truth: dict, findings) -> Score:
    expected = {(e["stage"], e["shard"], e["cause"]) for e in truth["expect"] if e["shard"] is not None}
    job_expected = set(truth["job"]) | {e["cause"] for e in truth["expect"] if e["shard"] is None}
    got: set[tuple] = set()
    job_got: set[str] = set()
    for f in findings:
        if f.severity == INFO:
            continue
        if dict(f.metrics).get("aborted_pipeline"):  # the abort is the outcome of its root cause (issue 27)
            job_got.add("aborted")
        shards = f.shards or ((f.shard,) if f.shard is not None else ())
        if not shards:
            job_got.add(next((k for k in (f.kind, *f.causes) if k in job_expected), f.kind))
            continue
        for shard in shards:
            for cause in f.causes or (f.kind,):
                got.add((f.stage, int(shard), cause))
    s = Score(
        len(got & expected) + len(job_got & job_expected),
        len(got - expected) + len(job_got - job_expected),
        len(expected - got) + len(job_expected - job_got),
    )
    s.details = (
        [f"fp {t}" for t in sorted(got - expected, key=str)]
        + [f"fp job {k}" for k in sorted(job_got - job_expected)]
        + [f"fn {t}" for t in sorted(expected - got, key=str)]
        + [f"fn job {k}" for k in sorted(job_expected - job_got)]
    )
    return s


def findings_of(ev) -> list[Finding]:
    """THE analysis being scored: the one pass every command renders."""
    from zephyr_debug.analyze.analysis import analyze

    return list(analyze(ev).findings)


def score_dir(path: Path) -> tuple[Score, float, int]:
    """(score, seconds to load + analyze, findings) of one generated job dir."""
    from zephyr_debug.sources import load

    truth = json.loads((Path(path) / "truth.json").read_text(encoding="utf-8"))
    t = time.perf_counter()
    findings = findings_of(load(str(Path(path) / "evidence")))
    return score(truth, findings), time.perf_counter() - t, len(findings)
