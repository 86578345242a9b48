"""`analyze.analysis` (and `zdebug stragglers`) on real reference jobs: each fault gets the right
shard and cause, a healthy job gets none, and every finding says what it costs and what to run."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest
from conftest import FAST

from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.findings import ERROR, INFO
from zephyr_debug.sources import load

pytestmark = pytest.mark.slow


def analysis(result):
    return analyze(load(str(result.job_dir)))


def problems(result) -> list:
    return list(analysis(result).problems)


def by_shard(result) -> dict:
    return {s: f for f in problems(result) if f.stage and f.stage.startswith("stage0") for s in f.all_shards}


def worker_index(worker: str) -> int:
    return int(worker.rsplit("-", 1)[-1])


@pytest.mark.parametrize("options", [dict(workers=2, shards=4), dict(workers=3, shards=8)])
def test_healthy_job_has_no_findings(reference_job, options):
    # I/O-heavy chunks, as most shards are: a 4-shard stage has no spread to learn, only the 1.5x
    # floor, and CPU-bound 0.4 s shards beside other tests' load once crossed it
    a = analysis(reference_job(chunk_seconds=0.05, **options))
    assert a.problems == () and a.healthy and a.headline.startswith("Succeeded")


def test_data_skew_is_never_slow_worker(reference_job):
    # The straggler-tail playbook's job: 12 I/O-heavy shards, so the slow worker gets two shards and
    # the skew stands clear of a busy machine's run-time noise
    result = reference_job("skew-shard:3:x12", "slow-worker:1:x6", workers=3, shards=12, stages=1, chunk_seconds=0.05)
    found = analysis(result).findings
    skew = next(f for f in found if f.shard == 3)
    assert skew.kind == "data-skew" and "slow-worker" not in skew.causes
    assert any("12.0x the stage median" in line for line in skew.evidence)
    slow = [f for f in found if "slow-worker" in f.causes]
    assert slow and {worker_index(f.worker) for f in slow} == {1}
    assert {f.kind for f in found} <= {"data-skew", "slow-worker"}


def test_expensive_records_are_data_skew_not_slow_worker(reference_job):
    [f] = problems(reference_job("slow-shard:1:x40", workers=2, shards=4))
    assert (f.shard, f.kind) == (1, "data-skew")
    metrics = dict(f.metrics)
    assert metrics["size_ratio"] == pytest.approx(1.0, abs=0.01)  # same data, lower rate
    assert metrics["rate_ratio"] < 0.5
    assert f.cost.held_s > 0 and f.next[0].startswith("zdebug report ")  # finished job: no profile of a gone worker


def test_hang_is_stuck(reference_job):
    result = reference_job("hang:3:secs=2", workers=3, shards=8)
    [f] = problems(result)
    assert (f.shard, f.kind) == (3, "stuck")
    assert f.ratio_to_median > 3 and "zdebug playbook hung-shard" in f.next


def test_killed_worker_is_a_dead_holder_or_recovered(reference_job):
    result = reference_job("kill-worker:0", workers=2, shards=4, stages=1, respawn_delay_s=6.0)
    ev = load(str(result.job_dir))
    lost = ev.attempts[(ev.attempts["kind"] == "infra")]
    assert len(lost) == 1 and worker_index(lost["worker"].iloc[0]) == 0
    shard = int(lost["shard"].iloc[0])
    a = analyze(ev)
    kinds = {f.kind for f in a.findings if shard in f.all_shards}
    assert kinds & {"dead-holder", "recovered"}, a.findings  # a retry absorbed it; held the stage or not
    assert a.state == "succeeded" and "crash-loop" not in kinds


def test_crash_loop_counts_against_the_task_limit(reference_job):
    result = reference_job("crash-loop:2", workers=2, shards=4, stages=1)
    a = analysis(result)
    f = next(f for f in a.findings if f.kind == "crash-loop")
    assert f.shard == 2 and f.severity == ERROR
    assert f.next[0] == f"zdebug crashes {result.execution_id} --dedupe --shard 2"
    assert any("3/3 TASK" in line for line in f.evidence)
    # one root cause: the abort is its outcome (its metrics, its evidence, the headline), not a second finding
    assert dict(f.metrics)["aborted_pipeline"] is True and not [g for g in a.findings if g.kind == "aborted"]
    assert any(line.startswith("aborted the pipeline: Shard 2 failed 3 times") for line in f.evidence)
    assert a.headline.startswith("Aborted in") and f.title in a.headline


def test_failures_a_retry_absorbed_are_information_with_their_kind(reference_job):
    result = reference_job(
        "oom:1", "segfault:2", "exception:3", runner="subprocess", workers=3, shards=6, memory_limit_mb=300
    )
    a = analysis(result)
    assert a.state == "succeeded" and a.problems == ()  # each failed once, then finished
    [info] = [f for f in a.findings if f.kind == "recovered"]
    assert set(info.shards) == {1, 2, 3}
    assert any("MemoryError" in line for line in info.evidence) and any("SIGSEGV" in line for line in info.evidence)


def test_oom_inline_infra_loop_is_oom(reference_job):
    coordinator = replace(FAST, no_workers_timeout=5.0, max_infra_failures=3)
    result = reference_job(
        "oom:1:always", workers=2, shards=3, stages=1, memory_limit_mb=300, coordinator=coordinator, respawn_delay_s=0.2
    )
    f = by_shard(result)[1]
    assert f.kind == "crash-loop" and "oom" in f.causes
    assert any("3/3 INFRA" in line for line in f.evidence)


def test_all_workers_dead_is_one_job_level_finding(reference_job):
    result = reference_job("kill-all-workers:1", workers=2, shards=6, stages=1)
    a = analysis(result)
    dead = [f for f in a.findings if f.kind == "all-workers-dead"]
    assert len(dead) == 1 and dead[0].shard is None and dead[0].severity == ERROR
    assert not [f for f in a.problems if f.kind in ("dead-holder", "stuck", "undetermined")]
    assert a.pool.alive == 0


def test_recovered_exception_is_information(reference_job):
    a = analysis(reference_job("exception:1", workers=2, shards=4, stages=1))
    assert a.state == "succeeded" and a.problems == ()
    [info] = [f for f in a.findings if f.kind == "recovered"]
    assert info.severity == INFO and 1 in info.shards and "absorbed" in a.headline


def test_cli_json_contract_and_flags(reference_job):
    result = reference_job("crash-loop:2", workers=2, shards=4, stages=1)
    cmd = [sys.executable, "-m", "zephyr_debug.cli", "stragglers", str(result.job_dir), "--json"]
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    assert out["schema_version"] >= 2 and out["job"] == result.execution_id and out["stages"] and out["findings"]
    f = out["findings"][0]
    assert {
        "shard",
        "shards",
        "worker",
        "stage",
        "cause",
        "causes",
        "severity",
        "elapsed_s",
        "ratio_to_median",
        "evidence",
        "next",
        "cost",
    } <= set(f)
    assert isinstance(f["next"], list) and f["next"]
    bad = subprocess.run(cmd[:-1] + ["--multiplier", "0.5"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    missing = subprocess.run(cmd[:4] + ["no-such-job-xyz"], capture_output=True, text=True)
    assert missing.returncode != 0 and missing.stderr.count("\n") == 1 and "no-such-job-xyz" in missing.stderr
