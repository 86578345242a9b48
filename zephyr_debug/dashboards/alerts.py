"""Prometheus alert rules for Zephyr pipelines, as data rendered with thresholds.

The rule file `dashboards/alerts.yml` is `rules(PRODUCTION)`; tests render the same
expressions with test-sized thresholds (`rules(thresholds(...))`), so what they exercise
is what ships. `ZephyrPipelineProgressStalled` is Zephyr's own alert; the `Zephyr*` rules read
the coordinator's own metrics, the `Zdebug*` rules the findings `zdebug watch --metrics-port`
exports (`exporter.py`), so they fire when zdebug names the cause, hours before Zephyr gives up.
In the templates, `{name}` is a `Thresholds` field; `{{ ... }}` is left to Prometheus.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace

from zephyr_debug.dashboards.exporter import FINDING, RUNNING
from zephyr_debug.findings import KINDS


@dataclass(frozen=True)
class Thresholds:
    interval: str = "1m"  # rule evaluation interval
    stall_s: float = 45 * 60  # no progress for this long = stalled (Zephyr: 45 min)
    stall_for: str = "5m"
    seen_s: float = 90  # only producers scraped within this window
    tail_for: str = "30m"  # in-flight shards with nothing queued for this long
    dead_for: str = "2m"  # no active worker for this long
    crash_loop_failures: int = 3  # failed attempts of one shard
    crash_loop_for: str = "0m"
    finding_for: str = "2m"  # a zdebug stuck / straggler finding held this long (crash loops: at once)


PRODUCTION = Thresholds()
# `zdebug observe`: the demo compresses time (heartbeat 0.5 s), so do its alerts.
DEMO = Thresholds(
    interval="1s",
    stall_s=20,
    stall_for="5s",
    seen_s=30,
    tail_for="15s",
    dead_for="5s",
    crash_loop_failures=2,
    finding_for="5s",
)
# The next command, reading this Prometheus (`$externalURL`) for the alert's run.
NEXT = "zdebug {command} 'prometheus+{{ $externalURL }}?run={{ $labels.run }}'"
# A `Zdebug*` alert's next command: the analysis of the evidence `watch` was reading.
DIAGNOSE = "zdebug diagnose '{{ $labels.target }}'"
# Finding kinds per zdebug alert: a shard that kills its workers, one that does not move, a tail.
CRASHING = ("crash-loop", "oom")
NOT_MOVING = ("stuck", "dead-holder")
TAILING = tuple(k.name for k in KINDS.values() if k.straggler and k.name not in NOT_MOVING)


def _finding(kinds: tuple[str, ...]) -> str:
    """The current findings of `kinds`, one series per job and shard, while the job runs."""
    return (
        f'max by (job_id, target, stage, shard, kind) ({FINDING}{{kind=~"{"|".join(kinds)}"}})'
        f" and on(job_id, target) ({RUNNING} == 1)"
    )


RULES = [
    {
        "alert": "ZephyrPipelineProgressStalled",
        "expr": "(time() - progress_time_seconds >= {stall_s})"
        " and (time() - timestamp(progress_time_seconds) <= {seen_s})",
        "for": "{stall_for}",
        "severity": "warning",
        "summary": "Zephyr run {{ $labels.run }} made no progress for {{ $value | humanizeDuration }}",
        "next": NEXT.replace("{command}", "status"),
    },
    {
        "alert": "ZephyrStragglerTailTooLong",
        "expr": "(zephyr_shards_in_flight > 0) and on(run, stage) (zephyr_queue_depth == 0)"
        " unless on(run) (zephyr_pipeline_done == 1)",
        "for": "{tail_for}",
        "severity": "warning",
        "summary": "Zephyr run {{ $labels.run }} {{ $labels.stage }}: {{ $value }} shard(s) in flight and "
        "none queued for {tail_for}",
        "next": NEXT.replace("{command}", "stragglers"),
    },
    {
        "alert": "ZephyrAllWorkersDead",
        "expr": '(sum by (run) (zephyr_workers{state="active"}) == 0)'
        " and on(run) (sum by (run) (zephyr_workers) > 0)"
        " unless on(run) (zephyr_pipeline_done == 1)",
        "for": "{dead_for}",
        "severity": "critical",
        "summary": "Zephyr run {{ $labels.run }} has no live worker: queued shards cannot finish",
        "next": NEXT.replace("{command}", "workers"),
    },
    {
        "alert": "ZephyrShardCrashLoop",
        "expr": "sum by (run, stage, shard) (zephyr_shard_attempt_failures) >= {crash_loop_failures}",
        "for": "{crash_loop_for}",
        "severity": "critical",
        "summary": "Zephyr run {{ $labels.run }}: shard {{ $labels.shard }} of {{ $labels.stage }} "
        "failed {{ $value }} times",
        "next": NEXT.replace("{command}", "stragglers"),  # crash-loop cause, attempts vs limits
    },
    {
        "alert": "ZdebugShardCrashLoop",
        "expr": _finding(CRASHING),
        "for": "{crash_loop_for}",
        "severity": "critical",
        "summary": "zdebug: job {{ $labels.job_id }} {{ $labels.stage }} shard {{ $labels.shard }} "
        "is a {{ $labels.kind }} ({{ $value }} shard(s)): Zephyr will retry it until it gives up",
        "next": DIAGNOSE,
    },
    {
        "alert": "ZdebugStuckShard",
        "expr": _finding(NOT_MOVING),
        "for": "{finding_for}",
        "severity": "warning",
        "summary": "zdebug: job {{ $labels.job_id }} {{ $labels.stage }} shard {{ $labels.shard }} "
        "is not moving ({{ $labels.kind }})",
        "next": DIAGNOSE,
    },
    {
        "alert": "ZdebugStragglerTail",
        "expr": _finding(TAILING),
        "for": "{finding_for}",
        "severity": "warning",
        "summary": "zdebug: job {{ $labels.job_id }} {{ $labels.stage }} shard {{ $labels.shard }} "
        "holds up its stage ({{ $labels.kind }})",
        "next": DIAGNOSE,
    },
]
NAMES = [rule["alert"] for rule in RULES]


def thresholds(**overrides) -> Thresholds:
    return replace(PRODUCTION, **overrides)


def _fill(template: str, values: dict) -> str:
    return re.sub(
        r"(?<!\{)\{(\w+)\}(?!\})",
        lambda m: f"{values[m[1]]:g}" if isinstance(values[m[1]], float) else str(values[m[1]]),
        template,
    )


def rules(t: Thresholds = PRODUCTION) -> dict:
    """The rule file (a dict ready for YAML) with thresholds `t`."""
    values = asdict(t)
    out = [
        {
            "alert": r["alert"],
            "expr": _fill(r["expr"], values),
            "for": _fill(r["for"], values),
            "labels": {"severity": r["severity"]},
            "annotations": {"summary": _fill(r["summary"], values), "next": r["next"]},
        }
        for r in RULES
    ]
    return {"groups": [{"name": "zephyr", "interval": t.interval, "rules": out}]}
