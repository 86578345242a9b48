"""A REAL Prometheus scrapes three reference jobs with faults: every dashboard panel's query
returns data, each alert fires in its scenario (test-sized thresholds, production
expressions) and not in the others, and `zdebug` reading Prometheus finds what it finds in
the job dir."""

from __future__ import annotations

import json
import shutil
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import requests
from conftest import fast_stages
from typer.testing import CliRunner

from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.analyze.liveness import listing
from zephyr_debug.analyze.thresholds import Thresholds
from zephyr_debug.cli import app
from zephyr_debug.dashboards import alerts, grafana
from zephyr_debug.dashboards.local import LocalPrometheus
from zephyr_debug.reference import CoordinatorConfig, Job, JobConfig, parse_fault
from zephyr_debug.sources import load, prometheus

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus missing (.ci/run installs it)"),
]

DASHBOARDS = Path(__file__).resolve().parent.parent / "dashboards"
SCRAPE = "500ms"  # = the heartbeat below: Prometheus samples as often as the job dir's heartbeats
CONFIG = CoordinatorConfig(heartbeat_interval=0.5, heartbeat_timeout=4.0, status_interval=0.5, no_workers_timeout=8.0)
SMALL = alerts.thresholds(
    interval="500ms", stall_s=4, stall_for="2s", tail_for="3s", dead_for="1s", crash_loop_failures=2
)
# scenario -> (faults, options)
SCENARIOS = {
    "tail": (["hang:5", "exception:2"], {}),  # hangs until stopped: tail + stall
    "crash": (["crash-loop:1"], {"coordinator": replace(CONFIG, max_task_failures=6)}),
    "dead": (["kill-all-workers:3"], {}),  # no worker comes back: all dead, then the no-workers abort
}
FIRES = {
    "tail": {"ZephyrStragglerTailTooLong", "ZephyrPipelineProgressStalled"},
    "crash": {"ZephyrShardCrashLoop"},
    "dead": {"ZephyrAllWorkersDead"},
}
NEVER = {
    "tail": {"ZephyrAllWorkersDead", "ZephyrShardCrashLoop"},
    "crash": {"ZephyrAllWorkersDead"},
    "dead": {"ZephyrShardCrashLoop"},
}
COMPARED = ("state", "stage", "completed", "total", "in_flight", "queue_depth", "tail", "stalled", "alive", "failed")


@pytest.fixture(scope="module")
def observed(jobs_root, tmp_path_factory):
    """Prometheus plus the three finished jobs: (prom, {scenario: (Job, JobResult)}, start, end)."""
    with LocalPrometheus(tmp_path_factory.mktemp("prometheus"), scrape_interval=SCRAPE, thresholds=SMALL) as prom:
        start = time.time()
        jobs, results, threads = {}, {}, []
        for name, (faults, options) in SCENARIOS.items():
            options = {"coordinator": CONFIG, "deadline_s": 60.0, "linger_s": 1.5, **options}
            job = Job(
                JobConfig(
                    workers=3,
                    runner="inline",
                    stages=fast_stages(8, 4000, 0.1),
                    root=jobs_root,
                    faults=[parse_fault(f) for f in faults],
                    **options,
                )
            ).serve()
            prom.add_target(job.url, scenario=name)
            jobs[name] = job
            threads.append(threading.Thread(target=lambda n=name: results.__setitem__(n, jobs[n].wait())))
        for job in jobs.values():
            prom.wait_scraped(job.url)
            job.start()
        for t in threads:
            t.start()
        tail = jobs["tail"]
        while threads[0].is_alive() and not FIRES["tail"] <= firing(prom, tail.execution_id):
            time.sleep(0.5)
        tail.stop()  # the hang never ends by itself
        for t in threads:
            t.join()
        time.sleep(1.0)  # a last scrape (now failing: the series go stale) and rule evaluation
        yield prom, {n: (jobs[n], results[n]) for n in SCENARIOS}, start, time.time()


def query(prom: LocalPrometheus, path: str, **params) -> list[dict]:
    reply = requests.get(f"{prom.url}/api/v1/{path}", params=params, timeout=30).json()
    assert reply["status"] == "success", reply
    return reply["data"]["result"]


def firing(prom: LocalPrometheus, run: str) -> set[str]:
    return {s["metric"]["alertname"] for s in query(prom, "query", query=f'ALERTS{{alertstate="firing", run="{run}"}}')}


def test_panels_have_data_and_alerts_fire_in_their_scenario(observed):
    prom, jobs, start, end = observed
    assert {n: r.state for n, (_, r) in jobs.items()} == {"tail": "interrupted", "crash": "failed", "dead": "failed"}
    runs = "|".join(job.execution_id for job, _ in jobs.values())
    board = json.loads((DASHBOARDS / f"{grafana.UID}.json").read_text())  # what users deploy
    empty = [
        title
        for title, expr in grafana.queries(board)
        if not query(prom, "query_range", query=expr.replace("$run", runs), start=start, end=end, step="1s")
    ]
    assert not empty, f"panels without data: {empty}"
    # ... and the right data: the hung shard tops the stragglers panel, the tail indicator turns 1.
    panels = dict(grafana.queries(board))
    tail_run = jobs["tail"][0].execution_id

    def peak(title: str) -> dict[str, float]:
        series = query(
            prom, "query_range", query=panels[title].replace("$run", tail_run), start=start, end=end, step="1s"
        )
        return {s["metric"].get("shard", ""): max(float(v) for _, v in s["values"]) for s in series}

    longest = peak("Longest-running shards in flight")
    assert max(longest, key=longest.get) == "5" and longest["5"] > 4
    assert peak("Tail: in flight > 0 and queue empty") == {"": 1.0}

    window = f"{int(end - start) + 10}s"
    scenario = {job.execution_id: name for name, (job, _) in jobs.items()}
    fired = {}
    for series in query(prom, "query", query=f'max_over_time(ALERTS{{alertstate="firing"}}[{window}])'):
        fired.setdefault(scenario[series["metric"]["run"]], set()).add(series["metric"]["alertname"])
    for name in SCENARIOS:
        assert FIRES[name] <= fired.get(name, set()), (name, fired)
        assert not NEVER[name] & fired.get(name, set()), (name, fired)
    loop = query(prom, "query", query=f'max_over_time(ALERTS{{alertname="ZephyrShardCrashLoop"}}[{window}])')
    assert {s["metric"]["shard"] for s in loop} == {"1"}


def test_zdebug_reads_the_same_findings_from_prometheus_as_from_the_job_dir(observed):
    prom, jobs, _, _ = observed
    for name, (job, result) in jobs.items():
        from_prom = load(prometheus.target(prom.url, job.execution_id))
        from_dir = load(str(result.job_dir))
        a, b = (analyze(ev, Thresholds(stall_s=4)).status_json(listing(ev)) for ev in (from_prom, from_dir))
        assert {k: a[k] for k in COMPARED} == {k: b[k] for k in COMPARED}, name
        findings = [
            {(f.shard, f.stage, f.kind) for f in analyze(ev).problems if f.kind != "stalled"}  # shard or job level
            for ev in (from_prom, from_dir)
        ]
        assert findings[0] == findings[1], name
        assert findings[0], name  # every scenario has something to find
    # Without a run: the one that progressed last.
    last = max(jobs.values(), key=lambda jr: load(str(jr[1].job_dir)).progress_time)[0]
    assert load(prometheus.target(prom.url)).job == last.execution_id
    tail_job = jobs["tail"][0]
    assert (5, "stage0-Map", "stuck") in {
        (f.shard, f.stage, f.kind) for f in analyze(load(prometheus.target(prom.url, tail_job.execution_id))).problems
    }
    # The CLI: `--prometheus URL --run ID` prints the same status JSON as the job dir, minus the source.
    out = []
    for args in (["--prometheus", prom.url, "--run", tail_job.execution_id], [str(jobs["tail"][1].job_dir)]):
        result = CliRunner().invoke(app, ["status", *args, "--json", "--stall-minutes", "0.0667"])
        assert result.exit_code == 0, result.output
        out.append(json.loads(result.stdout))
    assert {k: out[0][k] for k in COMPARED} == {k: out[1][k] for k in COMPARED}
    assert out[0]["source"].startswith("prometheus+") and out[0]["job"] == out[1]["job"] == tail_job.execution_id
