"""Prometheus metrics of the reference coordinator, read from its state at scrape time.

Names follow Zephyr's telemetry: `progress_time_seconds{run}` is the Unix time of the last
stage start or shard completion; counters are exported as gauges named without `zephyr/`
and with non-word characters turned into `_`. The rest is what debugging needs: stage
progress, queue, workers by state, failures by kind, per-worker resources, and per-shard
rows of the current stage, one per attempt (like Zephyr's per-shard telemetry) so stragglers can be found
from Prometheus alone. `METRICS` lists every name; the dashboards and alerts use only those.
"""

from __future__ import annotations

import re
import time

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from zephyr_debug.model import INFRA, TASK

WORKER_STATES = ("active", "failed", "done")
# Per-worker sample key -> (metric, help).
PER_WORKER = {
    "rss_bytes": ("zephyr_worker_memory_bytes", "Worker resident memory (process tree)"),
    "rss_peak_bytes": ("zephyr_worker_memory_peak_bytes", "Worker peak resident memory"),
    "disk_bytes": ("zephyr_worker_disk_bytes", "Bytes in the worker's scratch dir"),
    "cpu_pct": ("zephyr_worker_cpu_percent", "Worker CPU, percent of one core"),
}
SHARD_LABELS = ["run", "stage", "shard", "attempt", "worker"]
METRICS = {
    "progress_time_seconds",
    "zephyr_shards_in_flight",
    "zephyr_queue_depth",
    "zephyr_shards_completed",
    "zephyr_shards_total",
    "zephyr_stage_retries",
    "zephyr_stage_index",
    "zephyr_stage_start_time_seconds",
    "zephyr_stages",
    "zephyr_pipeline_done",
    "zephyr_pipeline_failed",
    "zephyr_workers",
    "zephyr_shard_failures_total",
    "zephyr_worker_last_seen_seconds",
    "zephyr_worker_shard",
    "zephyr_shard_start_time_seconds",
    "zephyr_shard_elapsed_seconds",
    "zephyr_shard_done",
    "zephyr_shard_items",
    "zephyr_shard_bytes",
    "zephyr_shard_attempt_failures",
    "zephyr_shard_attempt_failed",
    "zephyr_worker_shard_items",
    "zephyr_worker_shard_bytes",
    "zephyr_coordinator_setting",
    *(name for name, _ in PER_WORKER.values()),
}


def metric_name(counter: str) -> str:
    """Zephyr's counter → gauge name: `zephyr/worker/mem_peak_bytes` → `worker_mem_peak_bytes`."""
    name = counter.removeprefix("zephyr/")
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


class CoordinatorCollector:
    """A prometheus_client collector over one Coordinator."""

    def __init__(self, coordinator):
        self.coordinator = coordinator

    def collect(self):
        c = self.coordinator
        snap = c.snapshot()
        run = c.execution_id
        status = snap["status"]
        now = time.time()

        def gauge(name: str, doc: str, value: float, **labels: str) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, doc, labels=["run", *labels])
            family.add_metric([run, *labels.values()], value)
            return family

        yield gauge(
            "progress_time_seconds", "Unix time of the last stage start or shard completion", snap["progress_time"]
        )
        stage = {"stage": status.stage}
        yield gauge("zephyr_shards_in_flight", "Shards running now", status.in_flight, **stage)
        yield gauge("zephyr_queue_depth", "Shards waiting for a worker", status.queue_depth, **stage)
        yield gauge("zephyr_stage_retries", "Shard retries in the current stage", status.retries, **stage)
        yield gauge("zephyr_stage_index", "Index of the current stage", snap["stage_index"])
        yield gauge(
            "zephyr_stage_start_time_seconds", "Unix time the current stage started", snap["stage_started"], **stage
        )
        yield gauge("zephyr_stages", "Stages in the pipeline", snap["stage_count"])
        yield gauge("zephyr_pipeline_done", "1 when the coordinator is shutting down", float(status.done))
        yield gauge("zephyr_pipeline_failed", "1 when the pipeline aborted", float(status.fatal_error is not None))
        settings = GaugeMetricFamily(
            "zephyr_coordinator_setting", "Coordinator settings (timeouts in s, limits)", labels=["run", "setting"]
        )
        for name, value in snap["config"].items():
            settings.add_metric([run, name], float(value))
        yield settings
        yield from self._stages(run, snap)

        states = GaugeMetricFamily("zephyr_workers", "Workers by state", labels=["run", "state"])
        for state in WORKER_STATES:
            states.add_metric([run, state], snap["worker_states"].get(state, 0))
        yield states
        failures = CounterMetricFamily("zephyr_shard_failures", "Shard failures by kind", labels=["run", "kind"])
        for kind in (TASK, INFRA):
            failures.add_metric([run, kind], snap["failures"].get(kind, 0))
        yield failures

        for counter, value in snap["counters"].items():
            yield gauge(metric_name(counter), f"Zephyr counter {counter}", value)
        yield from self._workers(run, snap)
        yield from self._shards(run, status.stage, snap["shards"], snap["workers"], now)

    def _stages(self, run: str, snap: dict):
        """Completed / total per stage started so far (earlier stages are complete)."""
        completed = GaugeMetricFamily("zephyr_shards_completed", "Shards completed, per stage", labels=["run", "stage"])
        total = GaugeMetricFamily("zephyr_shards_total", "Shards, per stage", labels=["run", "stage"])
        for index, spec in enumerate(self.coordinator.stages[: snap["stage_index"] + 1]):
            name = f"stage{index}-{spec.ops}"
            done = snap["status"].completed if index == snap["stage_index"] else spec.shards
            completed.add_metric([run, name], done)
            total.add_metric([run, name], spec.shards)
        yield completed
        yield total

    def _workers(self, run: str, snap: dict):
        for key, (name, doc) in PER_WORKER.items():
            family = GaugeMetricFamily(name, doc, labels=["run", "worker"])
            for worker, info in snap["workers"].items():
                if info.get(key) is not None:
                    family.add_metric([run, worker], float(info[key]))
            yield family
        seen = GaugeMetricFamily(
            "zephyr_worker_last_seen_seconds",
            "Seconds since the worker was heard from",
            labels=["run", "worker", "state"],
        )
        held = GaugeMetricFamily("zephyr_worker_shard", "Shard the worker holds now", labels=["run", "worker", "stage"])
        progress = {
            key: GaugeMetricFamily(
                f"zephyr_worker_shard_{key}",
                f"{key.capitalize()} of the held shard processed so far (last heartbeat)",
                labels=["run", "worker"],
            )
            for key in ("items", "bytes")
        }
        holders = {s["holder"]: s["index"] for s in snap["shards"] if s["holder"]}  # the coordinator's truth
        for worker, info in snap["workers"].items():
            seen.add_metric([run, worker, info["state"]], info["last_seen_ago"])
            if worker in holders:
                held.add_metric([run, worker, snap["status"].stage], holders[worker])
                for key, family in progress.items():
                    if info.get("shard") == holders[worker] and info.get(key) is not None:
                        family.add_metric([run, worker], info[key])
        yield seen
        yield held
        yield from progress.values()

    def _shards(self, run: str, stage: str, shards: list[dict], workers: dict, now: float):
        """One series per attempt of the current stage's shards (failed ones included)."""
        families = {
            "start": GaugeMetricFamily(
                "zephyr_shard_start_time_seconds", "Unix time the attempt started", labels=SHARD_LABELS
            ),
            "elapsed": GaugeMetricFamily(
                "zephyr_shard_elapsed_seconds", "Seconds the attempt has run (or ran)", labels=SHARD_LABELS
            ),
            "done": GaugeMetricFamily("zephyr_shard_done", "1 once the attempt completed", labels=SHARD_LABELS),
            "items": GaugeMetricFamily("zephyr_shard_items", "Items the attempt has processed", labels=SHARD_LABELS),
            "bytes": GaugeMetricFamily("zephyr_shard_bytes", "Bytes the attempt has processed", labels=SHARD_LABELS),
        }
        failed = GaugeMetricFamily(
            "zephyr_shard_attempt_failed", "1 for an attempt that failed, by kind", labels=[*SHARD_LABELS, "kind"]
        )
        failures = GaugeMetricFamily(
            "zephyr_shard_attempt_failures",
            "Failed attempts of the shard, by kind",
            labels=["run", "stage", "shard", "kind"],
        )
        for s in shards:
            for kind, count in ((TASK, s["task_errors"]), (INFRA, s["infra_errors"])):
                if count:
                    failures.add_metric([run, stage, str(s["index"]), kind], count)
            for a in s["attempts"]:
                labels = [run, stage, str(s["index"]), str(a["attempt"]), a["worker"]]
                progress = workers.get(a["worker"], {}) if a["outcome"] == "running" else a
                if progress.get("shard", s["index"]) != s["index"]:
                    progress = {}  # the worker's last heartbeat is about an earlier shard
                families["start"].add_metric(labels, a["start"])
                families["elapsed"].add_metric(labels, a.get("elapsed") or (a["end"] or now) - a["start"])
                families["done"].add_metric(labels, float(a["outcome"] == "done"))
                families["items"].add_metric(labels, progress.get("items") or 0)
                families["bytes"].add_metric(labels, progress.get("bytes") or 0)
                if a["outcome"] == "failed":
                    failed.add_metric([*labels, a["kind"]], 1)
        yield from families.values()
        yield failed
        yield failures
