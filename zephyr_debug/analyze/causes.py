"""Why an outlier shard is slow, only as far as the evidence shows it.

`stuck` needs frozen progress, `slow-worker` the worker's other shards slow too, `data-skew`
size evidence (more items or input chunks at a normal rate) or a normal size processed slowly
on a worker that is normal elsewhere (expensive records). Anything else is `undetermined`,
with what is missing and the command that will tell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from zephyr_debug.analyze.nextsteps import Steps
from zephyr_debug.analyze.progress import Alone
from zephyr_debug.analyze.thresholds import FROZEN_LINES, MIN_WORKER_SHARDS, Thresholds
from zephyr_debug.findings import CAUSES, INFO, KINDS, WARNING, Cost, Finding
from zephyr_debug.zephyrlog import BYTE_COUNT, human_bytes

STRAGGLER_KINDS = tuple(k.name for k in KINDS.values() if k.straggler)
METRICS = (
    "size",
    "size_ratio",
    "rate",
    "rate_ratio",
    "worker_speed",
    "worker_shards",
    "cpu",
    "cpu_ratio",
    "plateau_s",
    "stalled_s",
    "plateau_now_s",
    "held_s",
)


@dataclass(frozen=True)
class StageView:
    """What a cause decision needs to know about the stage (from `outliers.stage_stats`)."""

    median_s: float
    p99_s: float
    cut_s: float
    peers: int
    frozen_s: float  # status-line `items=` unchanged this long (past `stuck_heartbeats` status lines) in the tail
    alone: Alone | None = None  # the stretch its last shard ran alone (status lines)
    sizes_from: str = ""  # where per-shard item counts came from, when it is worth saying (telemetry)
    timeout_s: float = math.inf  # Zephyr's heartbeat timeout: a lost holder's shard is requeued after it
    requeue_by_s: float = math.inf  # ... at the latest this long after its death (the timeout and its grace)

    def alone_for(self, r, hb: float) -> Alone | None:
        """The alone stretch when it is this shard's (it ran then and ended, or still runs, at its end)."""
        a = self.alone
        if a is None or a.shard_rate != a.shard_rate or not a.seconds > 0:
            return None
        near = 2 * a.line_period(hb)
        return a if r.start <= a.start + near and abs(r.end - a.end) <= near + a.seconds * 0.05 else None


def straggler(r, stage: StageView, hb: float, th: Thresholds, steps: Steps, cost: Cost) -> Finding:
    """The finding for one outlier row `r` of the shard table."""
    worker = r.worker if isinstance(r.worker, str) else None
    lines = [
        f"ran {r.own_s:.1f}s = {r.own_s / stage.median_s:.1f}x the median {stage.median_s:.1f}s of "
        f"{stage.peers} finished peer(s), past the outlier cut {stage.cut_s:.1f}s (p99 {stage.p99_s:.1f}s)"
        if stage.peers and r.own_s > stage.cut_s
        else f"ran {r.own_s:.1f}s so far" + ("" if stage.peers else " (no finished peer to compare with)")
    ]
    causes: list[str] = []
    missing: list[str] = []
    stuck = _stuck(r, stage, hb, th, lines)
    if stuck:
        causes.append("stuck")
        if not r.running:  # stuck, then finished: the frozen stretch is what it cost
            cost = replace(cost, held_s=stuck)
    slow_worker = _known(r.worker_speed) and r.worker_shards >= MIN_WORKER_SHARDS
    if slow_worker:
        lines.append(
            f"{worker} ran its {int(r.worker_shards)} other finished shard(s) at {r.worker_speed:.2f}x the stage speed"
        )
        if r.worker_speed <= th.slow_worker_speed:
            causes.append("slow-worker")
    else:
        missing.append(
            f"{worker or 'its worker'} finished no other shard to compare with"
            if worker
            else "no source names the shard's worker"
        )
    if "slow-worker" not in causes and not stuck:
        causes += _data(r, slow_worker, th, lines, missing, stage.sizes_from)
    elif "slow-worker" in causes and _known(r.size_ratio) and r.size_ratio >= th.skew_items:
        lines.append(f"and its input is {r.size_ratio:.1f}x the stage median: a bigger shard on a slow worker")
        causes.append("data-skew")  # two true causes: both listed
    if not causes and not stuck and "slow-worker" not in causes:
        causes += _alone_rate(
            r,
            None if r.size_is_rows else stage.alone_for(r, hb),
            slow_worker and r.worker_speed > th.slow_worker_speed,
            th,
            lines,
            missing,
        )
    if not causes:
        causes.append("undetermined")
        lines.append(
            "cause undetermined: " + "; ".join(missing or ["the evidence cannot tell size, speed or a stall apart"])
        )
    causes.sort(key=CAUSES.index)
    kind = causes[0]
    severity = WARNING
    # Not yet requeued: its worker lived `requeue_by_s` ago at the latest; until the shard has run past
    # the cut on a worker known to live, it may be a lost one (a preemption) that Zephyr will requeue.
    if kind == "undetermined" and _silent_since_start(r) and r.own_s - stage.requeue_by_s <= stage.cut_s:
        severity = INFO
        lines.insert(
            1,
            f"{worker} {SILENT_HOLDER}: a lost worker looks like this until "
            f"Zephyr's heartbeat timeout ({stage.timeout_s:.0f}s) requeues its shard; a warning if it still "
            f"runs at {stage.cut_s + stage.requeue_by_s:.0f}s",
        )
    nxt = steps.for_straggler(kind, worker, int(r.shard), live=bool(r.running))
    ratio = r.own_s / stage.median_s if stage.median_s == stage.median_s and stage.median_s else None
    title = f"shard {int(r.shard)} of {r.stage}: {', '.join(causes)}"
    metrics = tuple((m, getattr(r, m, None)) for m in METRICS)
    return Finding(
        kind=kind,
        title=title,
        severity=severity,
        evidence=tuple(lines),
        next=tuple(nxt),
        causes=tuple(causes),
        stage=r.stage,
        shard=int(r.shard),
        worker=worker,
        cost=cost,
        elapsed_s=float(r.elapsed_s),
        ratio_to_median=ratio,
        metrics=metrics + (("median_s", stage.median_s), ("cut_s", stage.cut_s), ("peers", stage.peers)),
    )


SILENT_HOLDER = "has logged nothing since the shard began"  # the line that makes a straggler one to watch


def _silent_since_start(r) -> bool:
    """A running shard whose holder has logged nothing since the shard began (a log's silence
    is not a death: workers log nothing while they run a shard)."""
    seen = getattr(r, "holder_seen_ago", math.nan)
    return bool(r.running) and _known(seen) and seen >= r.own_s


def _stuck(r, stage: StageView, hb: float, th: Thresholds, lines: list[str]) -> float:
    """The seconds its items stayed frozen while its holder lived (0: not stuck)."""
    need = th.stuck_heartbeats * hb
    if r.running and r.holder_alive and _known(r.plateau_now_s) and r.plateau_now_s >= need:
        lines.append(
            f"no new items for {r.plateau_now_s:.0f}s ({r.plateau_now_s / hb:.0f} heartbeats) at "
            f"{_count(r.last_items)} items while {r.worker} stays alive"
        )
        return float(r.plateau_now_s)
    excess = r.own_s - stage.median_s
    if not r.running and _known(r.plateau_s) and r.plateau_s >= need and r.stalled_s >= 0.5 * excess:
        lines.append(
            f"stalled {r.stalled_s:.0f}s in all (longest {r.plateau_s:.0f}s with no new items) while "
            f"{r.worker} stayed alive"
        )
        return float(r.stalled_s)
    solo = None if r.size_is_rows else stage.alone_for(r, hb)  # a reduce stage's items= count outputs
    if (
        solo is not None
        and solo.frozen()
        and solo.seconds >= max(th.alone_shards * solo.shard_s, FROZEN_LINES * solo.line_period(hb))
    ):
        lines.append(
            f"the status line's {solo.counts} did not move for {solo.seconds:.0f}s while it was the only shard "
            f"in flight (a typical shard moves items= by {solo.shard_rate * solo.seconds:,.0f} in that time)"
        )
        return solo.seconds
    if r.running and stage.frozen_s > 0 and not r.size_is_rows:
        lines.append(
            f"the status line's items= did not move for {stage.frozen_s:.0f}s while only the tail's "
            "shards were in flight"
        )
        return stage.frozen_s
    return 0.0


def _data(r, worker_known: bool, th: Thresholds, lines: list[str], missing: list[str], source: str = "") -> list[str]:
    """data-skew from size evidence, or from a normal size run slowly on a worker normal elsewhere."""
    size_known, rate_known = _known(r.size_ratio), _known(r.rate_ratio) and not r.size_is_rows
    if size_known:
        what = "input rows (ScatterReader: chunks x largest chunk)" if r.size_is_rows else "items"
        lines.append(
            f"{what} {_count(r.size)} ({f'from {source}; ' if source else ''}{r.size_ratio:.1f}x the stage "
            "median)" + (f" at {r.rate_ratio:.2f}x the stage median rate" if rate_known else "")
        )
    else:
        missing.append("no item or byte counts for this shard (heartbeats, counters or Zephyr's telemetry: --finelog)")
    if (
        size_known
        and r.size_ratio >= th.skew_items
        and (r.size_is_rows or not rate_known or r.rate_ratio >= th.normal_rate)
    ):
        return ["data-skew"]
    normal_elsewhere = worker_known and r.worker_speed > th.slow_worker_speed
    if rate_known and r.rate_ratio < th.normal_rate and normal_elsewhere:
        lines.append(
            "a normal-sized input processed slowly by a worker that is normal elsewhere: "
            "its records are expensive (per-record cost skew)"
        )
        return ["data-skew"]
    if (
        rate_known
        and r.rate_ratio < th.normal_rate
        and not worker_known
        and _known(r.cpu_ratio)
        and r.cpu_ratio >= th.skew_cpu
    ):
        lines.append(
            f"a normal-sized input processed slowly while burning {r.cpu_ratio:.1f}x the stage's median CPU: "
            "its records are expensive (per-record cost skew), not a worker waiting"
        )
        missing.clear()
        return ["data-skew"]
    if normal_elsewhere:
        missing.append(
            "its worker is normal elsewhere, so the shard itself is slower, but nothing shows whether it "
            "is bigger or costlier per record"
        )
    return []


def _known(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _count(value) -> str:
    return f"{int(value):,}" if _known(value) else "?"


def _per_s(count: str, rate: float) -> str:
    """A status-line count's rate as Zephyr prints it: `44.4/s`, `15.2 KiB/s`."""
    return f"{human_bytes(rate)}/s" if count == BYTE_COUNT else f"{rate:,.1f}/s"


def frozen_stage(prog, frozen_s: float, hb: float, steps: Steps) -> Finding:
    """A coordinator-only stuck tail: `items=` frozen while the last shards are in flight (the log
    does not say which shards)."""
    return Finding(
        kind="stuck",
        causes=("stuck",),
        severity=WARNING,
        stage=prog.stage,
        title=f"{prog.stage}: {prog.in_flight} shard(s) in flight make no progress",
        evidence=(
            f"the status line's items= did not move for {frozen_s:.0f}s ({frozen_s / hb:.0f} "
            f"heartbeats) while the queue is empty and {prog.in_flight} shard(s) are in flight",
            "this log does not name the shards in flight: worker lines (`iris job logs` with "
            "children) or Zephyr's telemetry (--finelog) do",
        ),
        next=tuple(steps.playbook("stuck")),
        cost=Cost(held_s=frozen_s),
    )


def _alone_rate(
    r, solo: Alone | None, normal_elsewhere: bool, th: Thresholds, lines: list[str], missing: list[str]
) -> list[str]:
    """Size evidence from the status line while the shard ran alone: its count's rate is that shard's."""
    pace = solo.pace() if solo is not None else None
    if solo is None or pace is None:
        return []
    count, rate, typical = pace
    ratio = rate / typical
    lines.append(
        f"while it ran alone ({solo.seconds:.0f}s) the stage's {count} rose {_per_s(count, rate)} = {ratio:.2f}x "
        "a typical shard's rate"
    )
    if ratio >= th.normal_rate:
        lines.append(
            f"a normal rate for {r.own_s / solo.shard_s:.1f}x a typical shard's run: a bigger input "
            f"(about {ratio * r.own_s / solo.shard_s:.0f}x the items)"
        )
        missing.clear()
        return ["data-skew"]
    if normal_elsewhere:
        lines.append(
            "a low rate on a worker that is normal elsewhere: its records are expensive (per-record cost skew)"
        )
        missing.clear()
        return ["data-skew"]
    return []


def solo_tail(
    stage: str, solo: Alone, shard: int | None, worker: str | None, hb: float, th: Thresholds, steps: Steps, cost: Cost
) -> Finding:
    """A stage held by one shard that a coordinator-only log cannot name: its status lines show one
    shard in flight for longer than `alone_shards` typical runs (Little's law gives a typical run)."""
    lines = [
        f"one shard ran alone for {solo.seconds:.0f}s = {solo.seconds / solo.shard_s:.1f}x a typical shard's "
        f"run ({solo.shard_s:.0f}s: mean in flight / completions per second)"
    ]
    if solo.frozen() and solo.seconds >= FROZEN_LINES * solo.line_period(hb):
        lines.append(
            f"the status line's {solo.counts} did not move meanwhile (a typical shard moves items= by "
            f"{solo.shard_rate * solo.seconds:,.0f})"
        )
        kind = "stuck"
    elif (pace := solo.pace()) is not None and pace[1] / pace[2] >= th.normal_rate:
        lines.append(
            f"{pace[0]} rose at {pace[1] / pace[2]:.2f}x a typical shard's rate meanwhile: a bigger "
            "input at a normal speed"
        )
        kind = "data-skew"
    else:
        if solo.rate != solo.rate and pace is None:
            why = "no item counts in the status lines"
        elif pace is None:  # unmoved, but a typical shard would not have moved the printed count yet
            why = (
                f"items= is printed in steps of {solo.step:,.0f} and a typical shard moves it by only "
                f"{solo.shard_rate * solo.seconds:,.0f} in {solo.seconds:.0f}s: a stall and slow progress "
                "look the same until then"
            )
        else:
            why = f"a low {pace[0]} rate: a slow worker or expensive records"
        tells = "worker lines or Zephyr's telemetry (--finelog) name the shard and tell"
        lines.append(f"cause undetermined: {why}; {tells if shard is None else 'its telemetry (--finelog) tells'}")
        kind = "undetermined"
    if shard is None:
        lines.append("this log does not name the shard (no worker lines)")
    who = f"shard {shard}" if shard is not None else "its last shard"
    return Finding(
        kind=kind,
        causes=(kind,),
        severity=WARNING,
        stage=stage,
        shard=shard,
        worker=worker,
        title=f"{stage} held by {who}: {kind}",
        evidence=tuple(lines),
        next=tuple(steps.for_straggler(kind, worker, shard if shard is not None else -1, live=True)),
        cost=cost,
    )
