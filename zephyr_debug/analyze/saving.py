"""What naming a failure early saves (issue 28 item 3): "named at HH:MM, N h before Zephyr's abort
would have come / before the stall alert", and the idle worker-hours that waiting would cost.

Pure: `saving(ev, finding)` reads the evidence and one finding of its analysis, nothing else.

- A crash loop (`crash-loop` / `oom`): Zephyr aborts the pipeline once the shard has failed
  MAX_SHARD_FAILURES (3) times with task errors or been in flight during MAX_SHARD_INFRA_FAILURES
  (20) infra failures (`max_task_failures` / `max_infra_failures` in the evidence's config win).
  While the job runs, the abort is estimated from the shard's own failures: the mean time between
  them x the failures still missing, counted from its last failure (whichever limit comes first).
  Once the job aborted the abort is in the evidence: the saving is what naming it at its
  `repeated_failures`-th failure (the crash-loop rule, 2nd by default) would have bought.
- `all-workers-dead`: Zephyr's no-workers abort comes `no_workers_timeout` (60 s in the coordinator,
  6 h in the pool: the evidence's config wins) after the pool is seen dead.
- The rest (a straggler, a stuck shard, `stalled`): Zephyr's only signal is the stall alert, 45 min
  after the last progress (`ZephyrPipelineProgressStalled`); while the job runs only.

Idle workers: registered workers minus the shards in flight (the newest get_status, else the newest
status line); the idle worker-hours are those workers x the time until Zephyr's signal.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import pandas as pd

from zephyr_debug.analyze.thresholds import Thresholds
from zephyr_debug.findings import INFO, Finding
from zephyr_debug.model import (
    INFRA,
    MAX_SHARD_FAILURES,
    MAX_SHARD_INFRA_FAILURES,
    NO_WORKERS_TIMEOUT_S,
    Evidence,
)

FAILED = ("failed", "requeued")  # attempt outcomes that count against Zephyr's limits
CRASH_KINDS = ("crash-loop", "oom")
STALL_KINDS = ("stuck", "data-skew", "slow-worker", "undetermined", "dead-holder", "stalled")
ABORT, STALL = "abort", "stall alert"


@dataclass(frozen=True)
class Saving:
    """When the finding was (or could be) named, when Zephyr's own signal comes, and the idle
    workers meanwhile."""

    named_at: float  # unix s
    signal: str  # ABORT | STALL
    signal_at: float  # unix s: when Zephyr's signal comes (or came)
    observed: bool  # the signal is in the evidence (the job aborted), not an estimate
    basis: str  # how `signal_at` was found
    idle_workers: int | None  # registered workers minus shards in flight

    @property
    def lead_s(self) -> float:
        return max(self.signal_at - self.named_at, 0.0)

    @property
    def idle_worker_hours(self) -> float | None:
        return None if self.idle_workers is None else self.idle_workers * self.lead_s / 3600

    def text(self) -> str:
        """One line for `diagnose` / `watch` / the report."""
        what = "Zephyr's abort" if self.signal == ABORT else "Zephyr's stall alert"
        at = _hhmm(self.named_at)
        if self.lead_s <= 0:
            return f"named at {at}; {what} came as early ({_hhmm(self.signal_at)})"
        if self.observed:
            head = f"nameable at {at}, {duration(self.lead_s)} before {what} came ({_hhmm(self.signal_at)})"
        else:
            verb = "would have come" if self.signal == ABORT else "would fire"
            head = f"named at {at}, {duration(self.lead_s)} before {what} {verb} ({self.basis})"
        hours = self.idle_worker_hours
        if hours is None or not self.idle_workers:
            return head
        cost = "cost" if self.observed else "would cost"
        return f"{head}; waiting {cost} {_number(hours)} idle worker-hours ({self.idle_workers} workers idle)"

    def to_json(self) -> dict[str, Any]:
        hours = self.idle_worker_hours
        return {
            "named_at": self.named_at,
            "signal": self.signal,
            "signal_at": self.signal_at,
            "observed": self.observed,
            "lead_s": round(self.lead_s, 3),
            "basis": self.basis,
            "idle_workers": self.idle_workers,
            "idle_worker_hours": None if hours is None else round(hours, 3),
            "text": self.text(),
        }


def saving(ev: Evidence, finding: Finding, th: Thresholds = Thresholds()) -> Saving | None:
    """What naming `finding` now (or, in an aborted job, at its crash-loop moment) saves over
    waiting for Zephyr; None when there is nothing to say (information, no time in the evidence)."""
    if finding.severity == INFO or not math.isfinite(ev.now):
        return None
    if finding.kind in CRASH_KINDS and finding.shard is not None:
        return _crash_loop(ev, finding, th)
    if finding.kind == "all-workers-dead":
        return _all_dead(ev)
    if finding.kind in STALL_KINDS and ev.state == "running":
        return _stall(ev, th)
    return None


def _crash_loop(ev: Evidence, f: Finding, th: Thresholds) -> Saving | None:
    a = ev.attempts
    mine = a[(a["stage"] == f.stage) & (pd.to_numeric(a["shard"], errors="coerce") == f.shard)]
    mine = mine[mine["outcome"].isin(FAILED)]
    ends = pd.to_numeric(mine["end_ts"], errors="coerce")
    mine = mine.assign(end=ends).dropna(subset=["end"]).sort_values("end")
    times = [float(t) for t in mine["end"]]
    if not times:
        return None
    idle = idle_workers(ev)
    if ev.state == "failed":  # the abort is in the evidence: what naming it at its 2nd failure bought
        n = max(th.repeated_failures, 1)
        if len(times) < n:
            return None
        return Saving(times[n - 1], ABORT, ev.now, True, f"failure {n} of the shard", idle)
    infra = (mine["kind"] == INFRA).to_numpy()
    limits = {
        "task": int(ev.config.get("max_task_failures") or MAX_SHARD_FAILURES),
        "infra": int(ev.config.get("max_infra_failures") or MAX_SHARD_INFRA_FAILURES),
    }
    overall = (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else None
    best: tuple[float, str] | None = None
    for kind, mask in (("task", ~infra), ("infra", infra)):
        seen = [t for t, m in zip(times, mask, strict=True) if m]
        if not seen:
            continue
        gap = (seen[-1] - seen[0]) / (len(seen) - 1) if len(seen) > 1 else overall
        if gap is None or gap <= 0:
            continue
        left = max(limits[kind] - len(seen), 0)
        est = left * gap
        if best is None or est < best[0]:
            best = (est, f"{left} more {kind} failure(s) to max {limits[kind]} x {duration(gap)} between its failures")
    if best is None:
        return None
    return Saving(ev.now, ABORT, times[-1] + best[0], False, best[1], idle)


def _all_dead(ev: Evidence) -> Saving | None:
    timeout = float(ev.config.get("no_workers_timeout") or NO_WORKERS_TIMEOUT_S)
    since = dead_since(ev)
    if since is None:
        return None
    if ev.state == "failed":
        return Saving(since, ABORT, ev.now, True, "the pool seen dead", None)
    return Saving(ev.now, ABORT, since + timeout, False, f"no_workers_timeout {duration(timeout)}", None)


def _stall(ev: Evidence, th: Thresholds) -> Saving | None:
    last = last_progress(ev)
    if last is None:
        return None
    return Saving(
        ev.now, STALL, last + th.stall_s, False, f"{duration(th.stall_s)} after the last progress", idle_workers(ev)
    )


def dead_since(ev: Evidence) -> float | None:
    """The first status line of the newest run of `0 … alive` lines."""
    s = ev.status
    if not len(s):
        return None
    ts = pd.to_numeric(s["ts"], errors="coerce")
    alive = pd.to_numeric(s["alive"], errors="coerce")
    order = ts.sort_values().index
    ts, alive = ts[order], alive[order]
    if not len(alive) or alive.iloc[-1] != 0:
        return None
    live = ts[alive > 0]
    dead = ts[(alive == 0) & (ts > (live.max() if len(live) else -math.inf))]
    return float(dead.iloc[0]) if len(dead) else None


def last_progress(ev: Evidence) -> float | None:
    """Zephyr's progress_time (last stage start or shard completion), else the newest status line
    whose completed count changed."""
    if ev.progress_time is not None and math.isfinite(ev.progress_time):
        return float(ev.progress_time)
    s = ev.status
    if not len(s):
        return None
    s = s.assign(t=pd.to_numeric(s["ts"], errors="coerce")).sort_values("t")
    changed = (s["completed"] != s["completed"].shift()) | (s["stage"] != s["stage"].shift())
    return float(s["t"][changed].max())


def idle_workers(ev: Evidence) -> int | None:
    """Registered workers minus the shards in flight: get_status, else the newest status line."""
    if ev.live is not None and ev.live.workers:
        return max(len(ev.live.workers) - int(ev.live.in_flight), 0)
    s = ev.status
    if not len(s):
        return None
    last = s.assign(t=pd.to_numeric(s["ts"], errors="coerce")).sort_values("t").iloc[-1]
    pool = last["registered"] if pd.notna(last["registered"]) else last["alive"]
    if pd.isna(pool):
        return None
    return max(int(pool) - int(last["in_flight"] if pd.notna(last["in_flight"]) else 0), 0)


def duration(secs: float) -> str:
    if secs >= 5400:
        return f"{secs / 3600:.1f} h"
    if secs >= 90:
        return f"{secs / 60:.0f} min"
    return f"{secs:.0f} s"


def _hhmm(ts: float) -> str:
    return time.strftime("%H:%M", time.gmtime(ts))


def _number(x: float) -> str:
    return f"{x:,.0f}" if x >= 10 else f"{x:.1f}"
