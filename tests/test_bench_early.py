"""`benchmarks/bench_early.py` (issue 28) reports in the agreed shape; numbers are not asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bench_early
from benchmarks.prodjobs.scenarios import COORD

KEYS = {"value", "unit", "baseline", "baseline_value", "ratio", "target", "meets"}


def test_a_cut_holds_the_lines_whose_time_passed():
    log = bench_early.TimedLog(
        b"2026-12-02 21:59:16,743 INFO zephyr.execution: a\n"
        b"Traceback (most recent call last):\n"
        b"I20261202 21:59:18 140415056467648 zephyr.execution b\n"
        b"I20261202 21:59:20 140415056467648 zephyr.execution c\n"
    )
    assert log.end - log.start == pytest.approx(3.257)
    assert log.cut(log.start).count(b"\n") == 2  # the untimed line goes with the line before it
    assert log.cut(log.start + 1.3).count(b"\n") == 3
    assert log.cut(log.end) == log.data


def test_replay_of_one_small_job_names_its_fault(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(bench_early, "QUICK", {"task-crash": (COORD,)})
    (job,) = bench_early.generated_jobs(tmp_path, quick=True)
    job.grid = 4
    done = bench_early.replay(job)
    assert done.cuts >= 4 and done.faults
    (row,) = bench_early.rows([done])
    assert row["family"] == "crash-loop" and row["key"][1] == 500
    assert set(row) >= {"named_s", "due_s", "signal_s", "multiple", "met", "flaps"}


@pytest.mark.slow
def test_quick_run_reports_in_the_agreed_shape(monkeypatch):
    """The whole run, on a healthy job, a crash loop and a real capture (`--quick` has six jobs)."""
    monkeypatch.setattr(bench_early, "QUICK", {"healthy-50": (COORD,), "task-crash": (COORD,)})
    monkeypatch.setattr(bench_early, "QUICK_CAPTURES", ("healthy",))
    results = bench_early.run(quick=True)
    assert "early_wrong_findings_healthy" in results
    assert all(set(r) == KEYS for r in results.values())
