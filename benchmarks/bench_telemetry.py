"""Telemetry costs. Run: `python -m benchmarks telemetry`.

- `metrics_scrape_5000_shards`: one /metrics scrape of a coordinator in a 5,000-shard stage
  (4,800 done, 200 in flight, 200 workers), against the baseline of the job-level series
  alone (what Zephyr itself exports): the price of the per-attempt rows that let
  `zdebug stragglers` work from Prometheus. Target: under a 1 s scrape interval.
- `prometheus_source_load`: building the Evidence of one finished reference run from a real
  Prometheus, against loading the same run from its job dir.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from zephyr_debug.jobstore import EventLog
from zephyr_debug.reference import CoordinatorConfig, Job, JobConfig, StageSpec, parse_fault
from zephyr_debug.reference.coordinator import Coordinator
from zephyr_debug.reference.logfmt import LineLog
from zephyr_debug.reference.metrics import CoordinatorCollector

SCRAPE_TARGET_MS = 1000.0


class _JobLevelOnly(CoordinatorCollector):
    """The baseline: every series except the per-attempt rows."""

    def _shards(self, *args):
        return iter(())


def _busy_coordinator(root: Path, shards: int, workers: int) -> Coordinator:
    c = Coordinator(
        "bench-20261203-000000-abcdef12",
        [StageSpec("Map", shards)],
        CoordinatorConfig(),
        EventLog(root / "events.jsonl"),
        LineLog(root / "coordinator.log", "zephyr.execution"),
    )
    c.begin()
    sample = {"rss_bytes": 1 << 28, "rss_peak_bytes": 1 << 29, "cpu_pct": 97.0, "disk_bytes": 1 << 30}
    ids = [f"zephyr-abcdef12-p0-workers-{i}" for i in range(workers)]
    for wid in ids:
        c.register(wid, 1)
        c.heartbeat(wid, sample)
    for i in range(shards - workers):
        wid = ids[i % workers]
        task = c.pull_task(wid)["task"]
        c.report_result(wid, 0, task["shard"], task["attempt"], elapsed_s=1.0, items=1000, bytes=10_000)
    for wid in ids:
        c.pull_task(wid)
    return c


def _ms_per_scrape(collector, repeat: int) -> tuple[float, int]:
    registry = CollectorRegistry()
    registry.register(collector)
    start = time.perf_counter()
    for _ in range(repeat):
        body = generate_latest(registry)
    return (time.perf_counter() - start) / repeat * 1000, len(body)


def _scrape(quick: bool) -> dict:
    shards, workers = (500, 50) if quick else (5000, 200)
    with tempfile.TemporaryDirectory() as tmp:
        c = _busy_coordinator(Path(tmp), shards, workers)
        ours, size = _ms_per_scrape(CoordinatorCollector(c), 3 if quick else 5)
        base, _ = _ms_per_scrape(_JobLevelOnly(c), 3 if quick else 5)
    return {
        f"metrics_scrape_{shards}_shards": {
            "value": round(ours, 1),
            "unit": f"ms/scrape ({size / 1e6:.2f} MB)",
            "baseline": "job-level series only",
            "baseline_value": round(base, 1),
            "ratio": round(ours / base, 1),
            "target": f"< {SCRAPE_TARGET_MS:.0f} ms",
            "meets": ours < SCRAPE_TARGET_MS,
        }
    }


def _source_load() -> dict:
    from zephyr_debug.dashboards.local import LocalPrometheus
    from zephyr_debug.sources import load, prometheus

    if shutil.which("prometheus") is None:
        return {}
    with tempfile.TemporaryDirectory() as tmp, LocalPrometheus(Path(tmp) / "prom", scrape_interval="500ms") as prom:
        stages = [StageSpec("Map", 16, {"rows": 4000, "chunk_rows": 400, "chunk_seconds": 0.05})]
        config = JobConfig(
            workers=4,
            runner="inline",
            stages=stages,
            root=Path(tmp) / "jobs",
            linger_s=1.5,
            faults=[parse_fault("exception:2")],
            coordinator=CoordinatorConfig(heartbeat_interval=0.5, heartbeat_timeout=5.0, status_interval=0.5),
        )
        job = Job(config).serve()
        prom.add_target(job.url)
        prom.wait_scraped(job.url)
        job.start()
        job.wait()
        time.sleep(1.0)
        timed = {}
        for name, target in (
            ("prometheus", prometheus.target(prom.url, job.execution_id)),
            ("jobdir", str(job.job_dir)),
        ):
            start = time.perf_counter()
            for _ in range(3):
                load(target)
            timed[name] = (time.perf_counter() - start) / 3 * 1000
    return {
        "prometheus_source_load": {
            "value": round(timed["prometheus"], 1),
            "unit": "ms/load (16-shard run)",
            "baseline": "job dir load",
            "baseline_value": round(timed["jobdir"], 1),
            "ratio": round(timed["prometheus"] / timed["jobdir"], 1),
            "target": "< 2000 ms",
            "meets": timed["prometheus"] < 2000,
        }
    }


def run(quick: bool = False) -> dict:
    return {**_scrape(quick), **({} if quick else _source_load())}
