"""`analyze/saving.py` (issue 28 item 3) on generated production-shaped evidence cut in log time:
when a finding is named, when Zephyr's own signal would come, and the idle worker-hours between."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from benchmarks.bench_early import TimedLog
from benchmarks.prodjobs import BY_NAME
from benchmarks.prodjobs.scenarios import COORD, FULL
from benchmarks.prodjobs.simulate import Run, simulate
from benchmarks.prodjobs.truth import resolve
from benchmarks.prodjobs.write import write
from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.analyze.saving import ABORT, STALL, Saving, duration, saving
from zephyr_debug.model import MAX_SHARD_FAILURES, MAX_SHARD_INFRA_FAILURES, STALL_THRESHOLD_S
from zephyr_debug.sources import load


@functools.cache
def _run(name: str) -> Run:
    return resolve(BY_NAME[name], 0, simulate)


def _failures(run: Run, shard: int) -> list[float]:
    return sorted(a.end for a in run.attempts if a.shard == shard and a.outcome in ("task", "infra") and a.end)


def _evidence(tmp: Path, name: str, variant: str, at: float | None = None):
    """The scenario's evidence, its log cut at log time `at` (None: whole); and the analysis."""
    full = tmp / "whole"
    write(_run(name), variant, full)
    log_name = next(p.name for p in full.iterdir() if p.suffix == ".log")
    cut = tmp / "cut"
    cut.mkdir()
    log = TimedLog((full / log_name).read_bytes())
    (cut / log_name).write_bytes(log.data if at is None else log.cut(at))
    ev = load(str(cut))
    return ev, analyze(ev)


def _finding(a, kind: str):
    return next(f for f in a.findings if f.kind == kind)


@pytest.mark.parametrize("variant", [COORD, FULL])
def test_infra_crash_loop_live_estimates_the_abort(tmp_path, variant):
    run = _run("infra-crash")
    fails = _failures(run, 321)
    ev, a = _evidence(tmp_path, "infra-crash", variant, fails[2] + 10)
    f = _finding(a, "crash-loop")
    s = saving(ev, f)
    assert isinstance(s, Saving) and s.signal == ABORT and not s.observed
    assert s.named_at == ev.now
    # 17 more infra failures at the observed pace: near the simulated abort
    gap = (fails[2] - fails[0]) / 2
    assert s.signal_at == pytest.approx(fails[2] + (MAX_SHARD_INFRA_FAILURES - 3) * gap, rel=0.01)
    assert run.abort is not None
    true_lead = run.abort["ts"] - ev.now
    assert 0.5 * true_lead < s.lead_s < 1.5 * true_lead
    assert s.idle_workers is not None and 0 < s.idle_workers <= BY_NAME["infra-crash"].workers
    assert s.idle_worker_hours == pytest.approx(s.idle_workers * s.lead_s / 3600)
    text = s.text()
    assert text.startswith("named at ") and "before Zephyr's abort would have come" in text
    assert "idle worker-hours" in text and "infra failure" in text


def test_task_crash_loop_one_failure_left(tmp_path):
    fails = _failures(_run("task-crash"), 500)
    ev, a = _evidence(tmp_path, "task-crash", COORD, fails[1] + 2)
    s = saving(ev, _finding(a, "crash-loop"))
    assert s is not None and s.signal == ABORT
    assert s.signal_at == pytest.approx(fails[1] + (MAX_SHARD_FAILURES - 2) * (fails[1] - fails[0]), abs=2)
    assert "1 more task failure" in s.basis


def test_aborted_job_says_what_naming_it_at_its_2nd_failure_bought(tmp_path):
    run = _run("infra-crash")
    fails = _failures(run, 321)
    ev, a = _evidence(tmp_path, "infra-crash", COORD)
    s = saving(ev, _finding(a, "crash-loop"))
    assert s is not None and s.observed and s.signal == ABORT
    assert s.named_at == pytest.approx(fails[1], abs=1.0)  # glog prefixes: 1 s
    assert s.signal_at == ev.now
    assert run.abort is not None
    assert s.lead_s == pytest.approx(run.abort["ts"] - fails[1], abs=5.0)
    assert s.text().startswith("nameable at ") and "before Zephyr's abort came" in s.text()


def test_stuck_shard_before_the_stall_alert(tmp_path):
    sc = BY_NAME["stuck"]
    run = _run("stuck")
    frozen = next(a for a in run.attempts if a.frozen_at is not None)
    others = max(a.end for a in run.attempts if a.shard != frozen.shard and a.outcome == "done" and a.end)
    ev, a = _evidence(tmp_path, "stuck", FULL, others + 600)  # alone in flight, items frozen, for 10 min
    f = next(f for f in a.problems if f.kind == "stuck")
    s = saving(ev, f)
    assert s is not None and s.signal == STALL and not s.observed
    assert ev.progress_time is not None
    assert s.signal_at == pytest.approx(ev.progress_time + STALL_THRESHOLD_S)
    assert 0 < s.lead_s <= STALL_THRESHOLD_S
    assert s.idle_workers is not None and 0 < s.idle_workers <= sc.workers
    assert "stall alert would fire" in s.text()


def test_all_workers_dead_before_the_no_workers_abort(tmp_path):
    run = _run("all-dead")
    assert run.all_dead_ts is not None
    ev, a = _evidence(tmp_path, "all-dead", COORD, run.all_dead_ts + 20)
    f = next((f for f in a.problems if f.kind == "all-workers-dead"), None)
    if f is None:
        pytest.skip("not named 20 s after the pool is seen dead (the bench measures when)")
    s = saving(ev, f)
    assert s is not None and s.signal == ABORT and s.idle_workers is None
    assert s.signal_at > s.named_at


def test_information_and_finished_stragglers_say_nothing(tmp_path):
    ev, a = _evidence(tmp_path, "recovered-transient", COORD)
    assert all(saving(ev, f) is None for f in a.findings if f.severity == "info")
    assert [saving(ev, f) for f in a.findings if f.kind == "recovered"] in ([], [None])


def test_duration_words():
    assert duration(30) == "30 s" and duration(600) == "10 min" and duration(36000) == "10.0 h"
