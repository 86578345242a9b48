"""The diagnosis on hand-built evidence (`analyze.outliers`, `causes`, `failures`, `liveness`):
the edge cases production evidence has and a real job rarely hits."""

from __future__ import annotations

import numpy as np

from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.analyze.tail import episodes
from zephyr_debug.analyze.thresholds import Thresholds
from zephyr_debug.findings import CAUSES, ERROR
from zephyr_debug.model import (
    ATTEMPT_COLUMNS,
    SAMPLE_COLUMNS,
    STATUS_COLUMNS,
    WORKER_COLUMNS,
    Evidence,
    StageInfo,
    frame,
)

T0 = 1_000_000.0
HB = 5.0  # Zephyr's heartbeat


def done(stage, shard, worker, start, secs, items=1000, attempt=0):
    return {
        "stage": stage,
        "shard": shard,
        "attempt": attempt,
        "worker": worker,
        "start_ts": T0 + start,
        "end_ts": T0 + start + secs,
        "outcome": "done",
        "elapsed_s": secs,
        "items": items,
        "bytes": items * 50,
    }


def running(stage, shard, worker, start, attempt=0):
    return {
        "stage": stage,
        "shard": shard,
        "attempt": attempt,
        "worker": worker,
        "start_ts": T0 + start,
        "outcome": "running",
    }


def samples(worker, stage, shard, start, stop, items):
    """One heartbeat sample every HB seconds; `items(t)` is the shard's counter at time t."""
    return [
        {"ts": T0 + t, "worker": worker, "stage": stage, "shard": shard, "items": items(t), "cpu_pct": 50.0}
        for t in np.arange(start, stop, HB)
    ]


def make(attempts, smp=(), workers=None, state="succeeded", now=None, stages=None, status=(), **config):
    names = sorted({a["worker"] for a in attempts if a["worker"]})
    workers = workers or [{"worker": w, "state": "active", "last_seen_ago": 1.0} for w in names]
    end = max(a.get("end_ts") or a["start_ts"] for a in attempts) if attempts else T0
    return Evidence(
        job="job-1",
        source="test",
        now=now or end,
        state=state,
        stages=stages or [],
        attempts=frame(attempts, ATTEMPT_COLUMNS),
        samples=frame(list(smp), SAMPLE_COLUMNS),
        workers=frame(workers, WORKER_COLUMNS),
        status=frame(list(status), STATUS_COLUMNS),
        config={"heartbeat_interval": HB, "heartbeat_timeout": 120.0, **config},
    )


def stage_of(n, secs=100.0, workers=4, stage="s0"):
    return [done(stage, i, f"w{i % workers}", (i // workers) * secs, secs) for i in range(n)]


def lognormal_stage(n, workers, sigma, seed=0, median=48.0):
    """A FIFO stage: each worker takes the next shard when it finishes its last."""
    rng = np.random.default_rng(seed)
    free = np.zeros(workers)
    rows = []
    for i, secs in enumerate(median * np.exp(sigma * rng.standard_normal(n))):
        w = int(np.argmin(free))
        rows.append(done("s0", i, f"w{w}", free[w], float(secs), items=int(1000 * secs / median)))
        free[w] += secs
    return rows


def problems(ev, th=Thresholds()):
    return [f for f in analyze(ev, th).problems]


def test_healthy_stages_of_every_spread_have_no_findings():
    for n, workers, sigma in ((40, 4, 0.1), (800, 64, 0.22), (800, 64, 0.5), (5000, 400, 0.5)):
        assert problems(make(lognormal_stage(n, workers, sigma))) == [], (n, sigma)


def test_an_outlier_in_the_tail_is_found_and_one_that_finished_early_is_not():
    rows = lognormal_stage(800, 64, 0.22)
    late, early = rows[790], rows[10]
    late.update(end_ts=late["start_ts"] + 12 * 48, elapsed_s=12 * 48.0, items=12_000)
    early.update(end_ts=early["start_ts"] + 6 * 48, elapsed_s=6 * 48.0, items=6_000)  # ends while work is queued
    [f] = problems(make(rows))
    assert (f.shard, f.kind) == (790, "data-skew") and f.cost.held_s > 48


def test_a_retried_shard_that_finishes_last_at_a_normal_speed_is_not_slow():
    rows = stage_of(12, secs=100)
    rows.append({**done("s0", 12, "w0", 0, 100), "outcome": "failed", "kind": "task", "attempt": 0})
    rows.append(done("s0", 12, "w1", 300, 100, attempt=1))  # back of the queue, normal run
    a = analyze(make(rows))
    assert a.problems == () and [f.kind for f in a.findings] == ["recovered"]


def test_one_shard_stage_is_never_slow_against_peers_but_can_be_stuck():
    one = [running("s0", 0, "w0", 0)]
    moving = samples("w0", "s0", 0, 0, 600, lambda t: int(t * 10))
    assert problems(make(one, moving, state="running", now=T0 + 600)) == []
    flat = samples("w0", "s0", 0, 0, 600, lambda t: min(int(t * 10), 1000))  # no progress after 100 s
    [f] = problems(make(one, flat, state="running", now=T0 + 600))
    assert (f.shard, f.kind) == (0, "stuck") and f.ratio_to_median is None


def test_stuck_in_a_later_stage_is_matched_to_its_samples():
    rows = stage_of(8, secs=10, stage="s0") + stage_of(6, secs=100, stage="s1") + [running("s1", 7, "w3", 200)]
    flat = samples("w3", "s1", 7, 200, 500, lambda t: min(int((t - 200) * 10), 500))
    [f] = problems(make(rows, flat, state="running", now=T0 + 500))
    assert (f.stage, f.shard, f.kind) == ("s1", 7, "stuck")


def test_no_verdict_on_a_running_stage_before_enough_peers_finished():
    rows = stage_of(2) + [running("s0", i, f"w{i}", 0) for i in range(2, 8)]
    ev = make(rows, state="running", now=T0 + 1000)
    assert problems(ev) == []  # only 2/8 finished (< 0.75): Spark would not speculate either
    assert {f.shard for f in problems(ev, Thresholds(min_finished=0.25))} == set(range(2, 8))


def test_several_stages_are_judged_against_their_own_peers():
    rows = stage_of(8, secs=10, stage="s0") + stage_of(8, secs=300, stage="s1")
    rows.append(done("s1", 8, "w0", 0, 310))
    rows.append(done("s0", 8, "w1", 0, 60))  # 6x its own stage, far below the other stage's median
    [f] = problems(make(rows))
    assert (f.stage, f.shard) == ("s0", 8) and dict(f.metrics)["median_s"] == 10


def test_data_skew_is_never_slow_worker_even_on_a_slow_looking_worker():
    rows = stage_of(12, secs=100)
    rows.append(done("s0", 12, "w0", 0, 600, items=6000))  # 6x the data at the normal rate
    [f] = problems(make(rows))
    assert f.kind == "data-skew" and "slow-worker" not in f.causes
    assert any("6.0x the stage median" in line for line in f.evidence)


def test_slow_worker_versus_expensive_records():
    base = stage_of(12, secs=100)
    slow = base + [done("s0", 12 + i, "w9", 0, 400) for i in range(3)]  # w9 slow on every shard
    found = problems(make(slow))
    assert {f.kind for f in found} == {"slow-worker"} and {f.worker for f in found} == {"w9"}
    heavy = base + [done("s0", 12, "w0", 300, 400)]  # same data, low rate, w0 normal on its other shards
    [f] = problems(make(heavy))
    assert f.kind == "data-skew" and any("records are expensive" in line for line in f.evidence)


def test_without_size_evidence_the_cause_is_undetermined_and_says_what_is_missing():
    rows = [{**r, "items": None, "bytes": None} for r in stage_of(12, secs=100)]
    rows.append({**done("s0", 12, "w0", 300, 400), "items": None})
    [f] = problems(make(rows))
    assert f.kind == "undetermined" and f.causes == ("undetermined",)
    assert any("no item or byte counts" in line and "--finelog" in line for line in f.evidence)


def test_a_reduce_shard_is_sized_by_its_scatter_reader_line():
    rows = [{**r, "input_chunks": 10, "max_chunk_rows": 5} for r in stage_of(12, secs=100)]
    rows.append({**done("s0", 12, "w0", 300, 600, items=3), "input_chunks": 10, "max_chunk_rows": 60})
    [f] = problems(make(rows))
    assert f.kind == "data-skew" and any("ScatterReader" in line for line in f.evidence)


def coordinator_only(items_while_alone, n=200, workers=20, median=50.0, alone_s=600.0):
    """Status lines only (no worker lines): n shards, then one alone in flight for `alone_s`."""
    rate = 1000 / median  # items per shard-second
    rows, t, completed, items = [], 0.0, 0, 0.0
    while completed < n - 1:
        in_flight = workers if n - completed > workers else n - completed
        rows.append(
            {
                "ts": T0 + t,
                "stage": "s0",
                "completed": completed,
                "total": n,
                "in_flight": in_flight,
                "queue_depth": max(n - completed - in_flight, 0),
                "alive": workers,
                "registered": workers,
                "dead": 0,
                "items": items,
            }
        )
        t += 5
        completed = min(int(t / median * workers), n - 1)
        items = completed * 1000.0
    start = t
    while t < start + alone_s:
        rows.append(
            {
                "ts": T0 + t,
                "stage": "s0",
                "completed": n - 1,
                "total": n,
                "in_flight": 1,
                "queue_depth": 0,
                "alive": workers,
                "registered": workers,
                "dead": 0,
                "items": items,
            }
        )
        t += 5
        items += items_while_alone(rate) * 5
    return Evidence(
        job="job-1",
        source="test",
        now=T0 + t,
        state="running",
        status=frame(rows, STATUS_COLUMNS),
        stages=[StageInfo("s0", 0, n, start_ts=T0)],
        config={"heartbeat_interval": HB},
    )


def test_coordinator_only_tail_is_sized_or_frozen_by_its_status_lines():
    [big] = problems(coordinator_only(lambda rate: rate))
    assert (big.kind, big.shard, big.stage) == ("data-skew", None, "s0")
    [stuck] = problems(coordinator_only(lambda rate: 0.0))
    assert stuck.kind == "stuck"
    [slow] = problems(coordinator_only(lambda rate: rate / 10))
    assert slow.kind == "undetermined"
    assert problems(coordinator_only(lambda rate: rate, alone_s=30.0)) == []  # a normal last shard


def test_dead_holder_and_all_workers_dead():
    rows = stage_of(8) + [running("s0", 8, "w1", 0)]
    workers = [
        {"worker": "w0", "state": "active", "last_seen_ago": 1.0},
        {"worker": "w1", "state": "active", "last_seen_ago": 500.0},  # silent past the 120 s timeout
        {"worker": "w2", "state": "active", "last_seen_ago": 2.0},
        {"worker": "w3", "state": "active", "last_seen_ago": 2.0},
    ]
    found = problems(make(rows, workers=workers, state="running", now=T0 + 900))
    assert [(f.shard, f.kind) for f in found] == [(8, "dead-holder")]
    gone = [{**w, "state": "failed"} for w in workers]
    [f] = problems(make(rows, workers=gone, state="running", now=T0 + 900))
    assert f.kind == "all-workers-dead" and f.shard is None and any("w1" in line for line in f.evidence)


def test_a_log_line_is_not_a_heartbeat():
    rows = stage_of(8) + [running("s0", 8, "w1", 0)]
    workers = [
        {"worker": f"w{i}", "state": "busy" if i == 1 else "ready", "last_seen_ago": 900.0 if i == 1 else 1}
        for i in range(4)
    ]
    ev = make(rows, workers=workers, state="running", now=T0 + 900)
    ev.heartbeat_ages = False  # a log: w1 wrote nothing since it took the shard
    assert all(f.kind != "dead-holder" for f in problems(ev))


def test_crash_loop_counts_limits_and_burned_time():
    fail = {"stage": "s0", "shard": 8, "outcome": "failed", "kind": "task", "elapsed_s": 1800.0}
    rows = stage_of(8) + [
        {**fail, "attempt": i, "worker": f"w{i}", "start_ts": T0 + 2000 * i, "end_ts": T0 + 2000 * i + 1800}
        for i in range(2)
    ]
    [f] = problems(make(rows, state="running", now=T0 + 4000))
    assert f.causes == ("crash-loop",) and f.severity == ERROR
    assert f.next[0] == "zdebug crashes job-1 --dedupe --shard 8"
    assert any("2/3 TASK" in line for line in f.evidence) and f.cost.burned_worker_hours == 1.0
    oom = [{**r, "returncode": -9} if r.get("outcome") == "failed" else r for r in rows]
    assert problems(make(oom, state="running", now=T0 + 4000))[0].causes == ("crash-loop", "oom")


def test_tail_episodes_from_status_series():
    status = [
        {"ts": T0 + t, "stage": "s0", "in_flight": f, "queue_depth": q}
        for t, f, q in [(0, 4, 10), (10, 4, 2), (20, 3, 0), (30, 1, 0), (40, 0, 0)]
    ]
    ev = make(stage_of(8), status=status, stages=[StageInfo("s0", 0, 8, start_ts=T0, end_ts=T0 + 40)])
    [ep] = episodes(ev)
    assert (ep.start, ep.duration_s, ep.share, ep.in_flight, ep.ongoing) == (T0 + 20, 20.0, 0.5, 3, False)


def test_contract_and_cause_vocabulary():
    rows = stage_of(12) + [done("s0", 12, "w0", 0, 600, items=6000)]
    out = analyze(make(rows)).stragglers_json()
    assert {"schema_version", "job", "stages", "tail", "findings"} <= set(out)
    for f in out["findings"]:
        assert {
            "shard",
            "worker",
            "stage",
            "cause",
            "causes",
            "elapsed_s",
            "ratio_to_median",
            "evidence",
            "next",
            "severity",
            "cost",
        } <= set(f)
        assert f["cause"] == f["causes"][0] and set(f["causes"]) <= set(CAUSES) and isinstance(f["next"], list)


def test_a_log_naming_few_workers_is_not_all_workers_dead_while_its_status_says_alive():
    rows = stage_of(8) + [running("s0", 8, "w9", 0)]
    named = [{"worker": "w9", "state": "failed", "last_seen_ago": 500.0}]
    status = [
        {
            "ts": T0 + 900,
            "stage": "s0",
            "completed": 8,
            "total": 9,
            "in_flight": 1,
            "queue_depth": 0,
            "alive": 3000,
            "registered": 3180,
            "dead": 180,
        }
    ]
    ev = make(rows, workers=named, state="running", now=T0 + 900, status=status)
    a = analyze(ev)
    assert {f.kind for f in a.problems} == {"dead-holder"} and (a.pool.alive, a.pool.dead) == (3000, 180)
    ev.status = frame([{**status[0], "alive": 0, "dead": 3180}], STATUS_COLUMNS)
    assert "all-workers-dead" in {f.kind for f in problems(ev)}


def test_a_requeued_shard_with_an_unknown_holder_is_not_a_dead_holder():
    rows = stage_of(8) + [running("s0", 8, None, 0)]
    ev = make(rows, state="running", now=T0 + 150)
    assert all("dead-holder" not in f.causes for f in problems(ev))


def short_stage_with_a_frozen_shard(frozen_s=45.0, shard_s=0.2, n=40, workers=4):
    """The issue-27 shape from a log: 40 shards of 0.2 s on 4 workers under Zephyr's 5 s status
    line, shard 31 alone in flight with `items=` frozen for `frozen_s`, then done."""
    rows = [done("s0", i, f"w{i % workers}", (i // workers) * shard_s, shard_s) for i in range(n) if i != 31]
    rows.append(done("s0", 31, "w3", 7 * shard_s, frozen_s + 2.0))
    end = 7 * shard_s + frozen_s + 2.0
    status = [
        {
            "ts": T0 + t,
            "stage": "s0",
            "completed": 0 if t == 0 else n - 1,
            "total": n,
            "in_flight": workers if t == 0 else 1,
            "queue_depth": n - workers if t == 0 else 0,
            "alive": workers,
            "registered": workers,
            "dead": 0,
            "items": 0.0 if t == 0 else (n - 1) * 1000.0,
        }
        for t in np.arange(0.0, end, 5.0)
    ]
    ev = make(rows, status=status, stages=[StageInfo("s0", 0, n, start_ts=T0, end_ts=T0 + end)])
    ev.heartbeat_ages = False  # a log
    return ev


def test_a_shard_that_froze_alone_then_finished_is_stuck_with_that_stretch_as_its_cost():
    a = analyze(short_stage_with_a_frozen_shard())
    [f] = [f for f in a.findings if f.severity != "info"]
    assert (f.kind, f.shard) == ("stuck", 31), f
    assert any("items= did not move for" in line for line in f.evidence)
    assert 40.0 <= f.cost.held_s <= 47.0  # the frozen stretch, not the shard's own excess
    # shorter than one status period alone: nothing shows it froze (slow, not stuck)
    assert "stuck" not in {f.kind for f in problems(short_stage_with_a_frozen_shard(frozen_s=0.6))}


def momentary_all_dead(recovers=True):
    """One frozen process: every worker misses its heartbeat at once (`0/3 workers alive` in the
    last status line), the workers re-register, shard 6 crashes its worker again until Zephyr
    aborts on it (issue 27). `recovers=False`: the pool stays dead until the no-workers abort."""
    infra = {"stage": "s0", "shard": 6, "outcome": "failed", "kind": "infra", "elapsed_s": 5.0}
    attempts = range(3) if recovers else range(1)
    rows = stage_of(6, secs=10.0, workers=3) + [
        {**infra, "attempt": i, "worker": f"w{i}", "start_ts": T0 + 20 + 10 * i, "end_ts": T0 + 25 + 10 * i}
        for i in attempts
    ]
    alive = ((5, 3), (15, 3), (45, 0)) if recovers else ((5, 3), (15, 3), (25, 0), (35, 0), (45, 0))
    status = [
        {"ts": T0 + t, "stage": "s0", "completed": 6, "total": 7, "in_flight": 1, "queue_depth": 0}
        | {"alive": n, "registered": 3, "dead": 3 - n}
        for t, n in alive
    ]
    ev = make(rows, status=status, state="failed", now=T0 + (46 if recovers else 86))
    ev.worker_events = [(T0 + 25, f"w{i}", "heartbeat-timeout") for i in range(3)]
    if recovers:
        ev.worker_events += [(T0 + 27, f"w{i}", "reregistered") for i in range(3)]
        ev.fatal_error = (
            "Shard 6 crashed its worker 3 times (max 3 infra failures while in flight); treating as a "
            "deterministic crasher (likely native SIGSEGV / OOM in shard code). Last failure on worker w2."
        )
    else:
        ev.fatal_error = (
            "ZephyrWorkerError: No alive workers for 60.0s (total elapsed 86.0s). "
            "All 3 registered workers are dead/failed."
        )
    return ev


def test_a_momentary_all_dead_is_not_the_cause_and_the_abort_is_its_root_causes_outcome():
    a = analyze(momentary_all_dead())
    kinds = [f.kind for f in a.problems]
    assert kinds == ["crash-loop"], a.findings  # not all-workers-dead, and no second `aborted` finding
    [loop] = a.problems
    assert loop.shard == 6 and dict(loop.metrics)["aborted_pipeline"] is True
    assert any(line.startswith("aborted the pipeline: Shard 6 crashed its worker") for line in loop.evidence)
    assert a.headline.startswith("Aborted in s0: Shard 6 crashed") and loop.title in a.headline
    live = momentary_all_dead()  # a live job cut where its last status line counts none, the workers back since
    live.state, live.fatal_error, live.now = "running", None, T0 + 30
    live.status = live.status.assign(ts=[T0 + 5, T0 + 15, T0 + 25])
    assert "all-workers-dead" not in {f.kind for f in analyze(live).problems}
    gone = analyze(momentary_all_dead(recovers=False))
    dead = [f for f in gone.problems if f.kind == "all-workers-dead"]
    assert len(dead) == 1 and dict(dead[0].metrics)["aborted_pipeline"] is True
    assert "aborted" not in {f.kind for f in gone.findings}


def test_a_preempted_holder_whose_requeue_is_on_time_is_information():
    rows = stage_of(8) + [running("s0", 8, "w1", 200)]
    workers = [{"worker": f"w{i}", "state": "failed" if i == 1 else "active", "last_seen_ago": 1.0} for i in range(4)]
    for late, severity in ((1.0, "info"), (5.0 * HB, "warning")):
        ev = make(rows, workers=workers, state="running", now=T0 + 300)
        ev.worker_events = [(T0 + 300 - late, "w1", "heartbeat-timeout")]
        [f] = [f for f in analyze(ev).findings if f.kind == "dead-holder"]
        assert (f.shard, f.severity) == (8, severity), f
