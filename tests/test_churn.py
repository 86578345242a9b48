"""Worker churn (`analyze.churn`): losses per worker and hour, flapping workers and infra
requeue bursts, from Zephyr's log lines and from a real reference job whose worker is
SIGKILLed up to four times (`kill-worker:1:times=4`)."""

from __future__ import annotations

import pytest
from conftest import run_reference

from benchmarks.bench_counters import kills
from zephyr_debug import zephyrlog
from zephyr_debug.analyze import churn
from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.analyze.nextsteps import Steps
from zephyr_debug.findings import Finding
from zephyr_debug.model import ATTEMPT_COLUMNS, Evidence, frame
from zephyr_debug.sources import load

STEPS = Steps("job", False)
T0 = 1_800_000_000.0


def _log(tmp_path, lines: list[tuple[float, str]]):
    text = "".join(f"{zephyrlog.timestamp(ts)} INFO zephyr.execution: {line}\n" for ts, line in lines)
    path = tmp_path / "coordinator.log"
    path.write_text(text)
    return load(str(path))


def test_flapping_worker_from_log_lines(tmp_path):
    w, other = "zephyr-ab-p0-workers-3", "zephyr-ab-p0-workers-1"
    lines = [(T0, zephyrlog.REGISTERED.format(worker=w, n=1)), (T0 + 1, zephyrlog.REGISTERED.format(worker=other, n=2))]
    for i in range(4):  # lost every 10 minutes: a timeout, then it comes back (one loss each)
        t = T0 + 600 * (i + 1)
        lines += [
            (t, zephyrlog.HEARTBEAT_TIMEOUT.format(worker=w, secs=121.0)),
            (t + 30, zephyrlog.REREGISTERING.format(worker=w)),
        ]
    lines.append((T0 + 4000, zephyrlog.HEARTBEAT_TIMEOUT.format(worker=other, secs=125.0)))
    ev = _log(tmp_path, lines)
    workers = churn.per_worker(ev)
    assert [(x.worker, len(x.times), x.reregistered, x.timeouts) for x in workers] == [(w, 4, 4, 4), (other, 1, 0, 1)]
    assert sum(r + t for _, r, t in churn.per_hour(ev)) == 9
    found = churn.findings(ev, STEPS)
    assert [(f.kind, f.worker) for f in found] == [("flapping-worker", w)]
    assert "4 times" in found[0].title and found[0].next[0].startswith("zdebug workers job")


def _attempts(losses: list[tuple[int, str, float]]) -> Evidence:
    rows = []
    for shard, worker, at in losses:
        rows.append(
            {
                "stage": "stage0-Map",
                "shard": shard,
                "attempt": 0,
                "worker": worker,
                "start_ts": at - 50,
                "end_ts": at,
                "outcome": "failed",
                "kind": "infra",
            }
        )
        rows.append(
            {
                "stage": "stage0-Map",
                "shard": shard,
                "attempt": 1,
                "worker": f"new-{worker}",
                "start_ts": at + 1,
                "end_ts": at + 60,
                "outcome": "done",
            }
        )
    ev = Evidence(job="j", source="j", now=T0 + 9999, state="succeeded")
    ev.attempts = frame(rows, ATTEMPT_COLUMNS)
    return ev


def test_requeue_burst_names_workers_shards_and_replacements():
    burst = [(s, f"w{s % 3}", T0 + 10 * s) for s in range(6)]  # 6 shards from 3 workers within 60 s
    found = churn.findings(_attempts(burst + [(40, "w9", T0 + 5000)]), STEPS)
    assert [(f.kind, f.shards) for f in found] == [("requeue-burst", (0, 1, 2, 3, 4, 5))]
    assert "claimed by 3 replacements: new-w0, new-w1, new-w2" in found[0].evidence[1]
    spread = [(s, f"w{s}", T0 + 400 * s) for s in range(6)]  # preemptions far apart: background noise
    assert churn.findings(_attempts(spread), STEPS) == []
    crash = Finding(kind="crash-loop", title="", stage="stage0-Map", shards=tuple(range(6)))
    assert churn.findings(_attempts(burst), STEPS, [crash]) == []  # the crash loop explains them


def test_healthy_generated_jobs_have_no_churn_findings(tmp_path):
    from benchmarks.prodjobs import BY_NAME, generate

    for name in ("healthy-50", "recovered-transient", "dead-holder"):
        for job in generate(tmp_path, BY_NAME[name], variants=("full", "coord")):
            ev = load(str(job / "evidence"))
            assert churn.findings(ev, STEPS) == [], job


@pytest.mark.slow
def test_reference_killed_worker_loses_once_per_kill(tmp_path):
    r = run_reference(tmp_path / "jobs", ("kill-worker:1:times=4",), workers=3, shards=8)
    ev = load(str(r.job_dir))
    worker = f"zephyr-{r.execution_id[-8:]}-p0-workers-1"
    n = kills(r.job_dir, "workers-1")  # 4, or fewer when an idle worker claimed the requeued shard first
    assert 1 <= n <= 4
    assert [(w.worker, len(w.times)) for w in churn.per_worker(ev)] == [(worker, n)]
    flapping = [(f.worker, dict(f.metrics)["losses"]) for f in analyze(ev).findings if f.kind == "flapping-worker"]
    assert flapping == ([(worker, n)] if n >= churn.ChurnRules().flap_count else [])
    assert r.state == "succeeded"
