"""Prometheus metrics of the reference coordinator, read from its state at scrape time.

Names follow Zephyr's telemetry: `progress_time_seconds{run}` is the Unix time of the last
stage start or shard completion; counters are exported as gauges named without `zephyr/`
and with non-word characters turned into `_`. The rest is what debugging needs.
"""

from __future__ import annotations

import re

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from zephyr_debug.model import INFRA, TASK


def metric_name(counter: str) -> str:
    """Zephyr's counter → gauge name: `zephyr/worker/mem_peak_bytes` → `worker_mem_peak_bytes`."""
    name = counter.removeprefix("zephyr/")
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


class CoordinatorCollector:
    """A prometheus_client collector over one Coordinator."""

    def __init__(self, coordinator):
        self.coordinator = coordinator

    def collect(self):
        snap = self.coordinator.snapshot()
        run = self.coordinator.execution_id
        status = snap["status"]

        def gauge(name: str, doc: str, value: float, **labels: str) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, doc, labels=["run", *labels])
            family.add_metric([run, *labels.values()], value)
            return family

        yield gauge("progress_time_seconds", "Unix time of the last stage start or shard completion",
                    snap["progress_time"])
        stage = {"stage": status.stage}
        yield gauge("zephyr_shards_in_flight", "Shards running now", status.in_flight, **stage)
        yield gauge("zephyr_queue_depth", "Shards waiting for a worker", status.queue_depth, **stage)
        yield gauge("zephyr_shards_completed", "Shards completed in the current stage", status.completed, **stage)
        yield gauge("zephyr_shards_total", "Shards in the current stage", status.total, **stage)
        yield gauge("zephyr_stage_retries", "Shard retries in the current stage", status.retries, **stage)
        yield gauge("zephyr_stage_index", "Index of the current stage", snap["stage_index"])
        yield gauge("zephyr_pipeline_done", "1 when the coordinator is shutting down", float(status.done))
        yield gauge("zephyr_pipeline_failed", "1 when the pipeline aborted", float(status.fatal_error is not None))

        states = GaugeMetricFamily("zephyr_workers", "Workers by state", labels=["run", "state"])
        for state in ("active", "failed", "done"):
            states.add_metric([run, state], snap["worker_states"].get(state, 0))
        yield states

        failures = CounterMetricFamily("zephyr_shard_failures", "Shard failures by kind", labels=["run", "kind"])
        for kind in (TASK, INFRA):
            failures.add_metric([run, kind], snap["failures"].get(kind, 0))
        yield failures

        for counter, value in snap["counters"].items():
            yield gauge(metric_name(counter), f"Zephyr counter {counter}", value)

        per_worker = {
            "rss_bytes": ("zephyr_worker_memory_bytes", "Worker resident memory"),
            "rss_peak_bytes": ("zephyr_worker_memory_peak_bytes", "Worker peak resident memory"),
            "disk_bytes": ("zephyr_worker_disk_bytes", "Bytes in the worker's scratch dir"),
            "cpu_pct": ("zephyr_worker_cpu_percent", "Worker CPU, percent of one core"),
        }
        for key, (name, doc) in per_worker.items():
            family = GaugeMetricFamily(name, doc, labels=["run", "worker"])
            for worker, info in snap["workers"].items():
                if info.get(key) is not None:
                    family.add_metric([run, worker], float(info[key]))
            yield family
        seen = GaugeMetricFamily("zephyr_worker_last_seen_seconds", "Seconds since the worker was heard from",
                                 labels=["run", "worker", "state"])
        for worker, info in snap["workers"].items():
            seen.add_metric([run, worker, info["state"]], info["last_seen_ago"])
        yield seen
