"""`zdebug watch --metrics-port`: the findings of the job's one analysis as Prometheus metrics.

Each refresh of `watch` hands its analysis to `FindingsCollector.update`; a scrape reads the
newest one. Every series carries `job_id` (Zephyr's execution id) and `target` (the evidence as
`watch` was given it, so an alert's next command can name it). The `Zdebug*` rules in
`alerts.RULES` read these series: they fire on what zdebug names, not on Zephyr's counters.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

    from prometheus_client.core import GaugeMetricFamily

    from zephyr_debug.analyze.analysis import Analysis

FINDING = "zdebug_finding"
RUNNING = "zdebug_job_running"
LOG_TIME = "zdebug_log_time_seconds"
ANALYZED = "zdebug_analysis_timestamp_seconds"
CANNOT_TELL = "zdebug_cannot_tell"
METRICS = frozenset({FINDING, RUNNING, LOG_TIME, ANALYZED, CANNOT_TELL})
JOB_LABELS = ("job_id", "target")
FINDING_LABELS = (*JOB_LABELS, "kind", "level", "stage", "shard")
Samples = dict[str, list[tuple[tuple[str, ...], float]]]  # metric -> [(label values, value)]


def samples(
    a: Analysis, target: str, log_time: float | None, analyzed_at: float
) -> dict[str, list[tuple[tuple[str, ...], float]]]:
    """Metric name -> [(label values, value)] for one analysis. A warning/error finding is one
    `zdebug_finding` series (value: the shards it covers, at least 1); info findings are not."""
    job = (a.job, target)
    findings: list[tuple[tuple[str, ...], float]] = [
        (
            (*job, f.kind, f.severity, f.stage or "", "" if f.shard is None else str(f.shard)),
            float(max(1, len(f.all_shards))),
        )
        for f in a.problems
    ]
    return {
        FINDING: findings,
        RUNNING: [(job, 1.0 if a.state == "running" else 0.0)],
        LOG_TIME: [(job, float(log_time))] if log_time else [],
        ANALYZED: [(job, analyzed_at)],
        CANNOT_TELL: [(job, float(len(a.cannot_tell)))],
    }


HELP = {
    FINDING: "A problem zdebug names now (kind, level, stage, first shard); value: shards it covers",
    RUNNING: "1 while the job runs, as the analysis reads its evidence",
    LOG_TIME: "Newest evidence time of the analysis (Unix seconds)",
    ANALYZED: "When the analysis was made (Unix seconds)",
    CANNOT_TELL: "Problems the evidence could not have shown (zdebug diagnose says which)",
}


class FindingsCollector:
    """A prometheus_client collector holding the newest analysis's samples; `target` labels them
    (a local path made absolute, so an alert's `zdebug diagnose` runs from anywhere)."""

    def __init__(self, target: str) -> None:
        path = Path(target)
        self.target = str(path.resolve()) if path.exists() else target
        self._lock = threading.Lock()
        self._samples: Samples = {}

    def update(self, a: Analysis, log_time: float | None) -> None:
        new = samples(a, self.target, log_time, time.time())
        with self._lock:
            self._samples = new

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from prometheus_client.core import GaugeMetricFamily

        with self._lock:
            current = dict(self._samples)
        for name, rows in current.items():
            family = GaugeMetricFamily(name, HELP[name], labels=FINDING_LABELS if name == FINDING else JOB_LABELS)
            for labels, value in rows:
                family.add_metric(list(labels), value)
            yield family


def serve(target: str, port: int, addr: str = "127.0.0.1") -> tuple[FindingsCollector, int]:
    """Start the /metrics endpoint on `addr:port` (0: any free port); the collector and the port."""
    from prometheus_client import CollectorRegistry, start_http_server

    collector = FindingsCollector(target)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    server, _ = start_http_server(port, addr=addr, registry=registry)
    return collector, server.server_port
