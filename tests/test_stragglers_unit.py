"""`analyze.stragglers` on hand-built evidence: the edge cases a real job rarely hits."""

from __future__ import annotations

import numpy as np
import pytest

from zephyr_debug.analyze.stragglers import CAUSES, Thresholds, _loo_quantile, analyze
from zephyr_debug.analyze.tail import episodes
from zephyr_debug.model import (ATTEMPT_COLUMNS, SAMPLE_COLUMNS, STATUS_COLUMNS, WORKER_COLUMNS, Evidence,
                                StageInfo, frame)

T0 = 1_000_000.0
HB = 5.0  # Zephyr's heartbeat


def done(stage, shard, worker, start, secs, items=1000, attempt=0):
    return {"stage": stage, "shard": shard, "attempt": attempt, "worker": worker, "start_ts": T0 + start,
            "end_ts": T0 + start + secs, "outcome": "done", "elapsed_s": secs, "items": items, "bytes": items * 50}


def running(stage, shard, worker, start, attempt=0):
    return {"stage": stage, "shard": shard, "attempt": attempt, "worker": worker, "start_ts": T0 + start,
            "outcome": "running"}


def samples(worker, stage, shard, start, stop, items):
    """One heartbeat sample every HB seconds; `items(t)` is the shard's counter at time t."""
    return [{"ts": T0 + t, "worker": worker, "stage": stage, "shard": shard, "items": items(t), "cpu_pct": 50.0}
            for t in np.arange(start, stop, HB)]


def make(attempts, smp=(), workers=None, state="succeeded", now=None, stages=None, status=(), **config):
    names = sorted({a["worker"] for a in attempts})
    workers = workers or [{"worker": w, "state": "active", "last_seen_ago": 1.0} for w in names]
    end = max(a.get("end_ts") or a["start_ts"] for a in attempts)
    return Evidence(job="job-1", source="test", now=now or end, state=state,
                    stages=stages or [], attempts=frame(attempts, ATTEMPT_COLUMNS), samples=frame(list(smp), SAMPLE_COLUMNS),
                    workers=frame(workers, WORKER_COLUMNS), status=frame(list(status), STATUS_COLUMNS),
                    config={"heartbeat_interval": HB, "heartbeat_timeout": 120.0, **config})


def stage_of(n, secs=100.0, workers=4, stage="s0"):
    return [done(stage, i, f"w{i % workers}", (i // workers) * secs, secs) for i in range(n)]


def test_healthy_stage_has_no_findings():
    rng = np.random.default_rng(0)
    rows = [done("s0", i, f"w{i % 4}", 0, 100 * rng.uniform(0.8, 1.25)) for i in range(40)]
    report = analyze(make(rows))
    assert report["findings"] == []
    assert report["stages"][0]["done"] == 40


def test_one_shard_stage_is_never_slow_against_peers_but_can_be_stuck():
    one = [running("s0", 0, "w0", 0)]
    moving = samples("w0", "s0", 0, 0, 600, lambda t: int(t * 10))
    assert analyze(make(one, moving, state="running", now=T0 + 600))["findings"] == []
    flat = samples("w0", "s0", 0, 0, 600, lambda t: min(int(t * 10), 1000))  # no progress after 100 s
    [f] = analyze(make(one, flat, state="running", now=T0 + 600))["findings"]
    assert (f["shard"], f["cause"], f["next"]) == (0, "stuck", "zdebug dump w0 --job job-1")
    assert f["ratio_to_median"] is None and f["metrics"]["peers"] is None


def test_stuck_in_a_later_stage_is_matched_to_its_samples():
    rows = stage_of(8, secs=10, stage="s0") + stage_of(6, secs=100, stage="s1") + [running("s1", 7, "w3", 200)]
    flat = samples("w3", "s1", 7, 200, 500, lambda t: min(int((t - 200) * 10), 500))
    [f] = analyze(make(rows, flat, state="running", now=T0 + 500))["findings"]
    assert (f["stage"], f["shard"], f["cause"]) == ("s1", 7, "stuck")


def test_no_elapsed_verdict_before_enough_peers_finished():
    rows = stage_of(2) + [running("s0", i, f"w{i}", 0) for i in range(2, 8)]
    # shard 2 has run 10x the median, but only 2/8 finished (< 0.75): Spark would not speculate either.
    ev = make(rows, state="running", now=T0 + 1000)
    assert analyze(ev)["findings"] == []
    opened = analyze(ev, Thresholds(min_finished=0.25))["findings"]
    assert {f["shard"] for f in opened} == set(range(2, 8))


def test_flag_needs_both_multiplier_and_quantile():
    rows = stage_of(20) + [done("s0", 20, "w1", 0, 170.0), done("s0", 21, "w2", 0, 140.0)]
    assert [f["shard"] for f in analyze(make(rows))["findings"]] == [20]  # 1.4x is under the multiplier
    assert {f["shard"] for f in analyze(make(rows), Thresholds(multiplier=1.3))["findings"]} == {20, 21}
    # A bimodal stage: a third of the shards take 2x; above 1.5x the median but not above p75.
    bimodal = stage_of(14) + [done("s0", 14 + i, f"w{i % 4}", 0, 200.0) for i in range(8)]
    assert analyze(make(bimodal))["findings"] == []
    assert len(analyze(make(bimodal), Thresholds(quantile=0.5))["findings"]) == 8


def test_several_stages_are_judged_against_their_own_peers():
    rows = stage_of(8, secs=10, stage="s0") + stage_of(8, secs=300, stage="s1")
    rows.append(done("s1", 8, "w0", 0, 310))
    rows.append(done("s0", 8, "w1", 0, 60))  # 6x its own stage, far below the other stage's median
    [f] = analyze(make(rows))["findings"]
    assert (f["stage"], f["shard"]) == ("s0", 8)
    assert f["metrics"]["median_s"] == pytest.approx(10)


def test_data_skew_is_never_slow_worker_even_on_a_slow_looking_worker():
    rows = stage_of(12, secs=100)
    rows.append(done("s0", 12, "w0", 0, 600, items=6000))  # 6x the data at the normal rate
    [f] = analyze(make(rows))["findings"]
    assert f["cause"] == "data-skew" and "slow-worker" not in f["causes"]
    assert any("6.0x the stage median" in line for line in f["evidence"])


def test_slow_worker_versus_expensive_records():
    base = stage_of(12, secs=100)
    slow = base + [done("s0", 12 + i, "w9", 0, 400) for i in range(3)]  # w9 slow on every shard
    findings = analyze(make(slow))["findings"]
    assert {f["cause"] for f in findings} == {"slow-worker"} and {f["worker"] for f in findings} == {"w9"}
    heavy = base + [done("s0", 12, "w0", 0, 400)]  # same data, low rate, w0 normal on its other shards
    [f] = analyze(make(heavy))["findings"]
    assert f["cause"] == "data-skew"
    assert any("records are expensive" in line for line in f["evidence"])


def test_without_item_counts_the_worker_comparison_decides():
    rows = [{**r, "items": None, "bytes": None} for r in stage_of(12, secs=100)]
    rows.append({**done("s0", 12, "w0", 0, 400), "items": None})
    [f] = analyze(make(rows))["findings"]
    assert f["cause"] == "data-skew"
    assert any("no item counts" in line for line in f["evidence"])


def test_dead_holder_and_all_workers_dead():
    rows = stage_of(8) + [running("s0", 8, "w1", 0)]
    workers = [{"worker": "w0", "state": "active", "last_seen_ago": 1.0},
               {"worker": "w1", "state": "active", "last_seen_ago": 500.0},  # silent past the 120 s timeout
               {"worker": "w2", "state": "active", "last_seen_ago": 2.0}, {"worker": "w3", "state": "active",
                                                                          "last_seen_ago": 2.0}]
    [f] = analyze(make(rows, workers=workers, state="running", now=T0 + 900))["findings"]
    assert (f["shard"], f["cause"]) == (8, "dead-holder")
    gone = [{**w, "state": "failed"} for w in workers]
    [f] = analyze(make(rows, workers=gone, state="running", now=T0 + 900))["findings"]
    assert f["cause"] == "all-workers-dead" and "dead-holder" in f["causes"]


def test_crash_loop_counts_limits_and_burned_time():
    fail = {"stage": "s0", "shard": 8, "outcome": "failed", "kind": "task", "elapsed_s": 1800.0}
    rows = stage_of(8) + [{**fail, "attempt": i, "worker": f"w{i}", "start_ts": T0 + 2000 * i,
                           "end_ts": T0 + 2000 * i + 1800} for i in range(2)]
    [f] = analyze(make(rows, state="running", now=T0 + 4000))["findings"]
    assert f["causes"] == ["crash-loop"] and f["next"] == "zdebug crashes job-1 --shard 8 --dedupe"
    assert any("2/3 TASK" in line and "1.0000 worker-hours" in line for line in f["evidence"])
    oom = [{**r, "returncode": -9} if r.get("outcome") == "failed" else r for r in rows]
    assert analyze(make(oom, state="running", now=T0 + 4000))["findings"][0]["causes"] == ["oom", "crash-loop"]


def test_loo_quantile_matches_numpy():
    rng = np.random.default_rng(1)
    vals = np.sort(rng.exponential(size=17))
    for q in (0.5, 0.9, 0.99):
        got = _loo_quantile(vals, np.arange(len(vals) + 1), q)
        want = [np.quantile(np.delete(vals, i), q) for i in range(len(vals))] + [np.quantile(vals, q)]
        assert np.allclose(got, want)


def test_tail_episodes_from_status_series():
    status = [{"ts": T0 + t, "stage": "s0", "in_flight": f, "queue_depth": q}
              for t, f, q in [(0, 4, 10), (10, 4, 2), (20, 3, 0), (30, 1, 0), (40, 0, 0)]]
    ev = make(stage_of(8), status=status, stages=[StageInfo("s0", 0, 8, start_ts=T0, end_ts=T0 + 40)])
    [ep] = episodes(ev)
    assert (ep["start"], ep["duration_s"], ep["share"], ep["in_flight"]) == (T0 + 20, 20.0, 0.5, 3)


def test_contract_and_cause_vocabulary():
    rows = stage_of(12) + [done("s0", 12, "w0", 0, 600, items=6000)]
    report = analyze(make(rows))
    assert {"job", "stages", "tail", "findings"} <= set(report)
    for f in report["findings"]:
        assert {"shard", "worker", "stage", "cause", "causes", "elapsed_s", "ratio_to_median", "evidence",
                "next"} <= set(f)
        assert f["cause"] == f["causes"][0] and set(f["causes"]) <= set(CAUSES)


def test_a_log_naming_few_workers_is_not_all_workers_dead_while_its_status_says_alive():
    rows = stage_of(8) + [running("s0", 8, "w9", 0)]
    named = [{"worker": "w9", "state": "failed", "last_seen_ago": 500.0}]
    status = [{"ts": T0 + 900, "stage": "s0", "completed": 8, "total": 9, "in_flight": 1, "queue_depth": 0,
               "alive": 3000, "registered": 3180, "dead": 180}]
    ev = make(rows, workers=named, state="running", now=T0 + 900, status=status)
    causes = {c for f in analyze(ev)["findings"] for c in f["causes"]}
    assert "all-workers-dead" not in causes and "dead-holder" in causes
    ev.status = frame([{**status[0], "alive": 0, "dead": 3180}], STATUS_COLUMNS)
    assert "all-workers-dead" in {c for f in analyze(ev)["findings"] for c in f["causes"]}


def test_a_requeued_shard_with_an_unknown_holder_is_not_a_dead_holder():
    rows = stage_of(8) + [running("s0", 8, None, 0)]
    ev = make([r for r in rows if r["worker"]], state="running", now=T0 + 150)
    ev.attempts = frame(rows, ATTEMPT_COLUMNS)
    assert all("dead-holder" not in f["causes"] for f in analyze(ev)["findings"])
