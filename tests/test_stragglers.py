"""`zdebug stragglers` on real reference jobs: each fault gets the right shard and cause."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from conftest import FAST
from zephyr_debug.analyze.stragglers import analyze
from zephyr_debug.sources import load

pytestmark = pytest.mark.slow


def findings(result) -> list[dict]:
    return analyze(load(str(result.job_dir)))["findings"]


def by_shard(result) -> dict[int, dict]:
    return {f["shard"]: f for f in findings(result) if f["stage"].startswith("stage0")}


def worker_index(worker: str) -> int:
    return int(worker.rsplit("-", 1)[-1])


@pytest.mark.parametrize("options", [dict(workers=2, shards=4), dict(workers=3, shards=8)])
def test_healthy_job_has_no_findings(reference_job, options):
    assert findings(reference_job(**options)) == []


def test_data_skew_is_never_slow_worker(reference_job):
    result = reference_job("skew-shard:3:x8", "slow-worker:1:x6", workers=3, shards=9, stages=1)
    found = findings(result)
    skew = next(f for f in found if f["shard"] == 3)
    assert skew["cause"] == "data-skew"
    if worker_index(skew["worker"]) != 1:
        assert "slow-worker" not in skew["causes"]
    slow = [f for f in found if "slow-worker" in f["causes"]]
    assert slow and {worker_index(f["worker"]) for f in slow} == {1}
    assert {f["cause"] for f in found} <= {"data-skew", "slow-worker"}


def test_expensive_records_are_data_skew_not_slow_worker(reference_job):
    [f] = findings(reference_job("slow-shard:1:x40", workers=2, shards=4))
    assert (f["shard"], f["cause"]) == (1, "data-skew")
    assert f["metrics"]["items_ratio"] == pytest.approx(1.0, abs=0.01)  # same data, lower rate
    assert f["metrics"]["rate_ratio"] < 0.5


def test_hang_is_stuck_with_a_dump_next(reference_job):
    result = reference_job("hang:3:secs=2", workers=3, shards=8)
    [f] = findings(result)
    assert (f["shard"], f["cause"]) == (3, "stuck")
    assert f["next"] == f"zdebug dump {f['worker']} --job {result.execution_id}"
    assert f["ratio_to_median"] > 3


def test_killed_worker_is_a_dead_holder(reference_job):
    result = reference_job("kill-worker:0", workers=2, shards=4, stages=1, respawn_delay_s=6.0)
    ev = load(str(result.job_dir))
    lost = ev.attempts[(ev.attempts["kind"] == "infra")]
    assert len(lost) == 1 and worker_index(lost["worker"].iloc[0]) == 0
    f = by_shard(result)[int(lost["shard"].iloc[0])]
    assert f["cause"] == "dead-holder"


def test_crash_loop_counts_against_the_task_limit(reference_job):
    result = reference_job("crash-loop:2", workers=2, shards=4, stages=1)
    f = by_shard(result)[2]
    assert f["cause"] == "crash-loop"
    assert f["next"] == f"zdebug crashes {result.execution_id} --shard 2 --dedupe"
    assert any("3/3 TASK" in line for line in f["evidence"])


def test_oom_subprocess_is_oom(reference_job):
    result = reference_job("oom:1", "segfault:2", "exception:3", runner="subprocess", workers=3, shards=6,
                           memory_limit_mb=300)
    found = by_shard(result)
    assert found[1]["cause"] == "oom"
    assert all(f["cause"] != "oom" for shard, f in found.items() if shard != 1)


def test_oom_inline_infra_loop_is_oom(reference_job):
    coordinator = replace(FAST, no_workers_timeout=5.0, max_infra_failures=3)
    result = reference_job("oom:1:always", workers=2, shards=3, stages=1, memory_limit_mb=300,
                           coordinator=coordinator, respawn_delay_s=0.2)
    f = by_shard(result)[1]
    assert f["cause"] == "oom" and "crash-loop" in f["causes"]
    assert any("3/3 INFRA" in line for line in f["evidence"])


def test_all_workers_dead(reference_job):
    result = reference_job("kill-all-workers:1", workers=2, shards=6, stages=1)
    found = by_shard(result)
    assert found[1]["cause"] == "all-workers-dead"
    assert {f["cause"] for f in found.values()} == {"all-workers-dead"}


def test_cli_json_contract_and_flags(reference_job):
    result = reference_job("crash-loop:2", workers=2, shards=4, stages=1)
    cmd = [sys.executable, "-m", "zephyr_debug.cli", "stragglers", str(result.job_dir), "--json"]
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    assert out["job"] == result.execution_id and out["stages"] and out["findings"]
    assert {"shard", "worker", "stage", "cause", "causes", "elapsed_s", "ratio_to_median", "evidence",
            "next"} <= set(out["findings"][0])
    bad = subprocess.run(cmd[:-1] + ["--multiplier", "0.5"], capture_output=True, text=True)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    missing = subprocess.run(cmd[:4] + ["no-such-job-xyz"], capture_output=True, text=True)
    assert missing.returncode != 0 and missing.stderr.count("\n") == 1 and "no-such-job-xyz" in missing.stderr
