"""Typed results that analyzers return and every reporter renders (text, JSON, HTML).

A `Finding` is one root cause: a straggling shard, a crash loop (all the shards one bug
breaks), a dead pool, an abort. It carries its evidence lines, what it costs, and the next
commands to run. `to_json()` is the one JSON form (README's contract).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 2

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITIES = (ERROR, WARNING, INFO)

# Shard causes, most specific first: a finding's `kind` is the first of its `causes`.
CAUSES = ("all-workers-dead", "oom", "crash-loop", "dead-holder", "stuck", "slow-worker", "data-skew", "undetermined")
# Job-level kinds (not about one shard).
JOB_KINDS = ("aborted", "all-workers-dead", "stalled", "recovered")


@dataclass(frozen=True)
class Kind:
    """A finding kind: what it is about (`scope`), how a terminal styles it, whether it is a
    straggler cause (a shard that held its stage up)."""

    name: str
    scope: str  # "shard", "job", "counter", "pool" or "known" (an upstream mode of its own)
    style: str
    straggler: bool = False


def _kinds(scope: str, style: str, *names: str, straggler: bool = False) -> dict[str, Kind]:
    return {n: Kind(n, scope, style, straggler) for n in names}


# Every finding kind, declared once: `Finding` refuses any other, every renderer styles from here.
KINDS: dict[str, Kind] = {
    "all-workers-dead": Kind("all-workers-dead", "job", "bold red"),
    **_kinds("shard", "red", "oom", "crash-loop"),
    "dead-holder": Kind("dead-holder", "shard", "magenta"),
    "stuck": Kind("stuck", "shard", "yellow", straggler=True),
    "slow-worker": Kind("slow-worker", "shard", "cyan", straggler=True),
    "data-skew": Kind("data-skew", "shard", "blue", straggler=True),
    "undetermined": Kind("undetermined", "shard", "white", straggler=True),
    "aborted": Kind("aborted", "job", "red"),
    "stalled": Kind("stalled", "job", "yellow"),
    "recovered": Kind("recovered", "job", "green"),
    **_kinds("counter", "cyan", "throughput-cliff", "throughput-drop"),
    **_kinds("counter", "blue", "counter-per-item", "counter-few-shards"),
    **_kinds("pool", "magenta", "flapping-worker", "requeue-burst"),
    **_kinds(
        "known",
        "bold magenta",
        "fail-loop",
        "preemptions-counted",
        "oom-behind-heartbeat",
        "heartbeat-killed",
        "stale-coordinator",
        "all-dead-waiting",
        "last-stage-shutdown",
        "dispatch-stall",
        "duplicate-execution",
        "workers-after-exit",
    ),
}


def clean_number(value: Any) -> Any:
    """JSON-safe numbers: NaN/inf -> None, whole floats -> int, others rounded to 3 places."""
    if value is None or isinstance(value, (str, bool)):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if math.isnan(number) or math.isinf(number):
        return None
    return int(number) if number.is_integer() else round(number, 3)


@dataclass(frozen=True)
class Cost:
    """What a finding costs: stage wall time it held up, workers idle meanwhile, work burned."""

    held_s: float = 0.0
    idle_worker_hours: float = 0.0
    burned_worker_hours: float = 0.0

    @property
    def worker_hours(self) -> float:
        return self.idle_worker_hours + self.burned_worker_hours

    def sentence(self) -> str:
        """`held the stage 55s; 12.3 idle worker-hours` (empty when it cost nothing measurable)."""
        parts = []
        if self.held_s >= 1:
            parts.append(f"held its stage {_duration(self.held_s)}")
        if self.idle_worker_hours >= 0.01:
            parts.append(f"{self.idle_worker_hours:,.2f} idle worker-hours")
        if self.burned_worker_hours >= 0.01:
            parts.append(f"{self.burned_worker_hours:,.2f} worker-hours on failed attempts")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "held_s": clean_number(self.held_s),
            "idle_worker_hours": clean_number(self.idle_worker_hours),
            "burned_worker_hours": clean_number(self.burned_worker_hours),
        }


@dataclass(frozen=True)
class Finding:
    """One root cause, with its evidence, cost and next commands."""

    kind: str  # one of KINDS
    title: str
    severity: str = WARNING
    evidence: tuple[str, ...] = ()
    next: tuple[str, ...] = ()
    causes: tuple[str, ...] = ()
    stage: str | None = None
    shard: int | None = None  # the shard (the aborting / first one when `shards` has several)
    shards: tuple[int, ...] = ()  # every shard this root cause covers
    worker: str | None = None
    cost: Cost = field(default_factory=Cost)
    known: str | None = None  # an upstream issue this is a known mode of, e.g. "marin#4575"
    fingerprint: str | None = None  # crash group it stands for
    playbook: str | None = None
    elapsed_s: float | None = None
    ratio_to_median: float | None = None
    metrics: tuple[tuple[str, Any], ...] = ()  # (name, number) pairs behind the evidence
    saving: Any = None  # analyze.saving.Saving: what naming it now saves over waiting for Zephyr

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"finding kind {self.kind!r} is not declared in findings.KINDS")

    @property
    def all_shards(self) -> tuple[int, ...]:
        return self.shards or ((self.shard,) if self.shard is not None else ())

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "cause": self.kind,
            "causes": list(self.causes or (self.kind,)),
            "severity": self.severity,
            "title": self.title,
            "stage": self.stage,
            "shard": self.shard,
            "shards": list(self.all_shards),
            "worker": self.worker,
            "elapsed_s": clean_number(self.elapsed_s),
            "ratio_to_median": clean_number(self.ratio_to_median),
            "cost": self.cost.to_json(),
            "evidence": list(self.evidence),
            "next": list(self.next),
            "known": self.known,
            "fingerprint": self.fingerprint,
            "playbook": self.playbook,
            "metrics": {k: clean_number(v) for k, v in self.metrics},
            "saving": self.saving.to_json() if self.saving is not None else None,
        }


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
