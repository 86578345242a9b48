"""One analysis pass per job: every finding, its cost and its next commands, ranked.

`analyze(ev)` is the single truth that `status`, `stragglers`, `diagnose`, `report` and
`watch` render, so they cannot disagree. Findings are ranked by severity, then by what they
cost (idle and burned worker-hours, stage time held).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from zephyr_debug.analyze import (
    causes,
    churn,
    counters,
    coverage,
    failures,
    known,
    liveness,
    outliers,
    progress,
    saving,
    shardtable,
    speed,
)
from zephyr_debug.analyze.coverage import Coverage
from zephyr_debug.analyze.nextsteps import Steps, is_live
from zephyr_debug.analyze.tail import Episode, episodes, stage_bounds
from zephyr_debug.analyze.thresholds import REQUEUE_GRACE_HEARTBEATS, Thresholds
from zephyr_debug.findings import ERROR, INFO, SCHEMA_VERSION, SEVERITIES, WARNING, Cost, Finding, clean_number
from zephyr_debug.model import HEARTBEAT_INTERVAL_S, Evidence

STAGE_FIELDS = ("total", "done", "running", "median_s", "p90_s", "p99_s", "cut_s", "wall_s")


@dataclass(frozen=True)
class StageRow:
    """One stage as the analysis saw it."""

    stage: str
    total: int
    done: int
    running: int
    median_s: float | None
    p90_s: float | None
    p99_s: float | None
    cut_s: float | None  # run time above which a shard is an outlier
    wall_s: float | None

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, **{f: clean_number(getattr(self, f)) for f in STAGE_FIELDS}}


@dataclass(frozen=True)
class Analysis:
    """Everything the commands show about one job."""

    job: str
    target: str  # the evidence as the user named it (next commands use it)
    state: str
    source: str
    headline: str
    progress: progress.Progress
    pool: liveness.Pool
    stages: tuple[StageRow, ...]
    tail: tuple[Episode, ...]
    findings: tuple[Finding, ...]
    crash_groups: tuple[Any, ...]  # crashes.cluster groups, biggest first
    heartbeat_interval_s: float
    thresholds: Thresholds
    warnings: tuple[str, ...] = ()
    next: tuple[str, ...] = field(default=())
    coverage: Coverage | None = None  # what the evidence could show (None: not judged)

    @property
    def problems(self) -> tuple[Finding, ...]:
        """Findings of severity error or warning (info findings are not problems)."""
        return tuple(f for f in self.findings if f.severity != INFO)

    @property
    def healthy(self) -> bool:
        """No problem found, and the evidence could have shown each (nothing `cannot_tell`)."""
        return not self.problems and not self.cannot_tell

    @property
    def cannot_tell(self) -> tuple[str, ...]:
        return self.coverage.blind if self.coverage else ()

    @property
    def has_errors(self) -> bool:
        return any(f.severity == ERROR for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "job": self.job,
            "state": self.state,
            "source": self.source,
            "headline": self.headline,
            "healthy": self.healthy,
            "progress": self.progress.to_json(),
            "workers": {
                "alive": self.pool.alive,
                "dead": self.pool.dead,
                "registered": self.pool.registered,
                "counted_from": self.pool.counted_from,
            },
            "stages": [s.to_json() for s in self.stages],
            "tail": [t.to_json() for t in self.tail],
            "findings": [dict(f.to_json(), rank=i) for i, f in enumerate(self.findings, 1)],
            "next": list(self.next),
            "warnings": list(self.warnings),
            "coverage": self.coverage.to_json() if self.coverage else None,
            "thresholds": self._thresholds_json(),
        }

    def _thresholds_json(self) -> dict[str, Any]:
        return {**asdict(self.thresholds), "heartbeat_interval_s": self.heartbeat_interval_s}

    def stragglers_json(self) -> dict[str, Any]:
        """`zdebug stragglers --json`: stages, tail episodes and the findings about stages/shards."""
        return {
            "schema_version": SCHEMA_VERSION,
            "job": self.job,
            "state": self.state,
            "source": self.source,
            "headline": self.headline,
            "stages": [s.to_json() for s in self.stages],
            "tail": [t.to_json() for t in self.tail],
            "findings": [f.to_json() for f in self.problems if f.stage is not None],
            "thresholds": self._thresholds_json(),
            "warnings": list(self.warnings),
        }

    def status_json(self, workers: list[dict[str, Any]]) -> dict[str, Any]:
        """`zdebug status --json`: the newest status, counts, the headline and the findings."""
        p = self.progress.to_json()
        return {
            "schema_version": SCHEMA_VERSION,
            "job": self.job,
            "state": self.state,
            "source": self.source,
            **{
                k: p[k]
                for k in (
                    "stage",
                    "completed",
                    "total",
                    "in_flight",
                    "queue_depth",
                    "retries",
                    "retries_total",
                    "failures_absorbed",
                    "done",
                    "fatal_error",
                    "progress_time",
                    "since_progress_s",
                    "ended_at",
                    "tail",
                )
            },
            "alive": self.pool.alive,
            "dead": self.pool.dead,
            "failed": self.pool.dead,
            "registered": self.pool.registered,
            "workers": workers,
            "stalled": any(f.kind == "stalled" for f in self.findings),
            "headline": self.headline,
            "diagnosis": " ".join([self.headline, *(f"{f.title}." for f in self.problems[:3])]),
            "healthy": self.healthy,
            "coverage": self.coverage.to_json() if self.coverage else None,
            "stragglers": [
                {
                    "shard": f.shard,
                    "stage": f.stage,
                    "worker": f.worker,
                    "cause": f.kind,
                    "elapsed_s": clean_number(f.elapsed_s),
                    "next": list(f.next),
                }
                for f in self.problems
                if f.shard is not None
            ],
            "findings": [f.to_json() for f in self.findings],
            "next": list(self.next),
            "warnings": list(self.warnings),
        }


def heartbeat_interval(ev: Evidence) -> float:
    """Configured, else the median gap between one worker's samples, else Zephyr's 5 s."""
    value = ev.config.get("heartbeat_interval")
    if value:
        return float(value)
    s = ev.samples
    if len(s) > 1:
        gaps = pd.to_numeric(s["ts"], errors="coerce").groupby(s["worker"]).diff().dropna()
        if len(gaps) and gaps.median() > 0:
            return float(gaps.median())
    return HEARTBEAT_INTERVAL_S


@dataclass
class Context:
    """What every finder reads: the evidence and the tables built from it once per analysis."""

    ev: Evidence
    th: Thresholds
    hb: float  # heartbeat interval (s)
    steps: Steps
    shards: pd.DataFrame  # the shard table with outlier, speed and holder columns
    prog: progress.Progress
    pool: liveness.Pool
    stats: pd.DataFrame  # per-stage statistics (`outliers.stage_stats`)
    bounds: pd.DataFrame  # per-stage start, end, wall_s (`tail.stage_bounds`)
    judged: pd.Series  # per shard row: its stage has enough finished peers to judge outliers
    solo: dict  # stage -> its last shard's alone stretch (`progress.alone`), or None
    idle: Callable[[str, float, float], float]  # idle worker-hours of a stage in [t0, t1]
    frozen_s: float  # the current stage's items= frozen this long (0: under `frozen_need`)
    frozen_need: float  # how long items= must freeze to count (`stuck_heartbeats` status lines)
    earlier: list  # counter summaries of earlier runs
    groups: list  # crash groups, biggest first
    covered: set = field(default_factory=set)  # (stage, shard) a failure finding explains: set by `failures`

    @property
    def gone(self) -> bool:
        """Every worker is dead: no running shard is late for a reason of its own."""
        return self.pool.all_dead


Finder = Callable[[Context, list[Finding]], list[Finding]]


def context(ev: Evidence, th: Thresholds, target: str | None, earlier) -> Context:
    hb = heartbeat_interval(ev)
    shards = shardtable.build(ev, hb, th)
    prog = progress.latest(ev, shards)
    stats = outliers.stage_stats(shards, {s.name: s.total for s in ev.stages}, progress.queue_empty(ev, prog), th)
    shards = outliers.held(shards, stats, ev.now)
    shards = liveness.add_holders(speed.add_speed(shards, stats), ev)
    judged = shards["stage"].map(stats["judged"]).fillna(False).astype(bool)
    shards["held_s"] = shards["held_s"].where(judged | ~shards["running"], 0.0)
    frozen = progress.frozen_items_s(ev, prog)
    need = th.stuck_heartbeats * _status_period(ev, prog.stage, hb)
    return Context(
        ev=ev,
        th=th,
        hb=hb,
        steps=Steps(target or ev.job, is_live(ev)),
        shards=shards,
        prog=prog,
        pool=liveness.pool(ev),
        stats=stats,
        bounds=stage_bounds(ev),
        judged=judged,
        solo={
            stage: progress.alone(ev, stage, stats["median_s"].get(stage, np.nan))
            for stage in dict.fromkeys([*(s.name for s in ev.stages), *stats.index])
        },
        idle=_idle_hours(ev),
        frozen_s=frozen if frozen >= need else 0.0,
        frozen_need=need,
        earlier=list(earlier),
        groups=_crash_groups(ev),
    )


def analyze(ev: Evidence, th: Thresholds = Thresholds(), target: str | None = None, earlier=()) -> Analysis:
    """The one analysis of `ev`; `target` is the evidence as the user named it (for next commands),
    `earlier` the counter summaries of earlier runs to compare with (`sources.earlier.runs`)."""
    ctx = context(ev, th, target, earlier)
    found: list[Finding] = []
    for finder in FINDERS:
        found = finder(ctx, found)
    found.sort(
        key=lambda f: (SEVERITIES.index(f.severity), -f.cost.worker_hours, -f.cost.held_s, -(f.elapsed_s or 0.0))
    )
    found = [replace(f, saving=saving.saving(ev, f, th)) for f in found]
    return Analysis(
        job=ev.job,
        target=ctx.steps.target,
        state=ev.state,
        source=ev.source,
        headline=progress.headline(ev, ctx.prog, ctx.pool, ctx.shards, found),
        progress=ctx.prog,
        pool=ctx.pool,
        stages=_stage_rows(ev, ctx.stats, ctx.bounds),
        tail=tuple(episodes(ev, ctx.bounds)),
        findings=tuple(found),
        crash_groups=tuple(ctx.groups),
        heartbeat_interval_s=ctx.hb,
        thresholds=th,
        warnings=tuple(ev.warnings),
        next=tuple(dict.fromkeys(step for f in found if f.severity != INFO for step in f.next[:1])),
        coverage=coverage.judge(ev, ctx.prog, ctx.steps.target, ctx.steps.live),
    )


# -- finders: each takes the findings so far and returns them with its own -------------------------
# What one finding suppresses, stated once:
# - a shard a failure finding explains (`ctx.covered`) is neither a straggler nor a dead holder;
# - with every worker dead (`ctx.gone`) no running shard is a straggler, a solo tail or a dead holder;
# - a running shard whose holder is dead is a dead holder, not a straggler;
# - a stage with a problem finding gets no solo-tail finding; a frozen stage needs no straggler or
#   crash loop in flight to explain it; a slow worker already named by a straggler is not repeated;
# - a failed job's abort marks the finding it names (else an `aborted` finding of its own);
# - a known failure mode absorbs the findings it attaches (`known.findings`).
def _all_dead(ctx: Context, found: list[Finding]) -> list[Finding]:
    if not ctx.gone:
        return found
    ev, pool, shards, prog = ctx.ev, ctx.pool, ctx.shards, ctx.prog
    stage = prog.stage or failures.current_stage(ev, shards) or "?"
    waiting = shards[~shards["done"].to_numpy(dtype=bool) & (shards["stage"] == stage)] if len(shards) else shards
    lines = list(pool.all_dead_evidence)
    if len(waiting):
        names = ", ".join(str(int(s)) for s in waiting["shard"].head(failures.MAX_LISTED))
        lines.append(f"{len(waiting)} unfinished shard(s) of {stage} with no worker to run them: {names}")
        dead = waiting[waiting["worker"].notna()]
        if len(dead):
            lines.append("their last holders: " + ", ".join(sorted({str(w) for w in dead["worker"]})[:5]))
    held = max(0.0, ev.now - (ev.progress_time or ev.now))
    counts = f" ({prog.completed}/{prog.total} complete)" if prog.total else ""
    return [
        *found,
        Finding(
            kind="all-workers-dead",
            causes=("all-workers-dead",),
            severity=ERROR,
            stage=stage,
            title=f"no worker is alive: {stage} cannot finish{counts}",
            evidence=tuple(lines),
            next=tuple(ctx.steps.for_workers("all-workers-dead")),
            cost=Cost(held_s=held),
        ),
    ]


def _failures(ctx: Context, found: list[Finding]) -> list[Finding]:
    more, ctx.covered = failures.findings(ctx.ev, ctx.shards, ctx.groups, ctx.steps, ctx.th, ctx.hb, ctx.idle, ctx.solo)
    return [*found, *more]


def _stragglers(ctx: Context, found: list[Finding]) -> list[Finding]:
    """Outlier shards that held their stage long enough, and shards stuck now (stuck needs no peers)."""
    shards, th, hb = ctx.shards, ctx.th, ctx.hb
    held_enough = shards["held_s"] >= th.min_held_heartbeats * shards["tick_s"].fillna(0.0)
    stalled_now = (
        shards["running"].to_numpy(dtype=bool)
        & shards["holder_alive"].to_numpy(dtype=bool)
        & (shards["plateau_now_s"].to_numpy(dtype=float) >= th.stuck_heartbeats * hb)
    )
    sizes_from = "Zephyr's telemetry" if "finelog" in ctx.ev.provenance else ""
    timeout = liveness.heartbeat_timeout(ctx.ev)
    out = list(found)
    for r in shards[
        (shards["outlier"].fillna(False).astype(bool) & held_enough & ctx.judged) | stalled_now
    ].itertuples():
        if (
            (r.stage, int(r.shard)) in ctx.covered
            or (ctx.gone and r.running)
            or (r.running and r.holder_known and not r.holder_alive)
        ):
            continue
        st = ctx.stats.loc[r.stage] if r.stage in ctx.stats.index else pd.Series(np.nan, index=outliers.STAGE_STATS)
        view = causes.StageView(
            st["median_s"],
            st["p99_s"],
            st["cut_s"],
            int(np.nan_to_num(st["peers"])),
            ctx.frozen_s if r.stage == ctx.prog.stage else 0.0,
            ctx.solo.get(r.stage),
            sizes_from,
            timeout,
            timeout + REQUEUE_GRACE_HEARTBEATS * hb,
        )
        cost = Cost(held_s=float(r.held_s), idle_worker_hours=ctx.idle(r.stage, float(r.expected_end), float(r.end)))
        out.append(causes.straggler(r, view, hb, th, ctx.steps, cost))
    return out


def _solo_tails(ctx: Context, found: list[Finding]) -> list[Finding]:
    """Stages whose status lines show one shard alone in flight for longer than `alone_shards`
    typical runs, that no shard-level warning explains (a coordinator-only log, or a shard to watch)."""
    if ctx.gone:
        return found
    shards, th, hb = ctx.shards, ctx.th, ctx.hb
    explained = {f.stage for f in found if f.stage and f.severity != INFO}
    out = list(found)
    for stage, al in ctx.solo.items():
        if (
            al is None
            or stage in explained
            or not al.shard_s > 0
            or al.seconds < th.alone_shards * al.shard_s
            or al.seconds < th.min_held_heartbeats * al.line_period(hb)
        ):
            continue
        seen = shards["running"].to_numpy(dtype=bool) | shards["done"].to_numpy(dtype=bool) if len(shards) else []
        mine = (
            shards[seen & (shards["stage"] == stage) & (shards["end"] >= al.end - 2 * al.line_period(hb))]
            if len(shards)
            else shards
        )
        one = mine.iloc[0] if len(mine) == 1 else None
        shard = int(one["shard"]) if one is not None else None
        worker = one["worker"] if one is not None and isinstance(one["worker"], str) else None
        cost = Cost(held_s=al.seconds, idle_worker_hours=ctx.idle(stage, al.start, al.end))
        solo = causes.solo_tail(stage, al, shard, worker, hb, th, ctx.steps, cost)
        watched = (
            [f for f in out if (f.stage, f.shard) == (stage, shard) and f.kind in causes.STRAGGLER_KINDS]
            if shard is not None
            else []
        )
        # The shard's own finding is one to watch (info): one finding per shard, a warning as the
        # coordinator's lines alone would give (a worker's log must not take it away), its facts after.
        if watched:
            out = [f for f in out if f not in watched]
            more = [ln for f in watched for ln in f.evidence if causes.SILENT_HOLDER not in ln]
            more = [ln for ln in more if ln not in solo.evidence]
            solo = replace(solo, evidence=(*solo.evidence, *more))
        out.append(solo)
    return out


def _frozen_stage(ctx: Context, found: list[Finding]) -> list[Finding]:
    """No shard in flight moved items= and not one finished, with no straggler or crash loop to say why."""
    prog = ctx.prog
    if not ctx.frozen_s or ctx.gone:
        return found
    looping = {s for f in found if f.kind in CRASH_LOOP_KINDS and f.stage == prog.stage for s in f.all_shards}
    if looping and len(looping) >= prog.in_flight:  # the shards in flight are in a crash loop
        return found
    if any(f.stage == prog.stage for f in found if f.kind in causes.STRAGGLER_KINDS):
        return found
    still = progress.frozen_items_s(ctx.ev, prog, completions=True)
    if still < ctx.frozen_need:
        return found
    return [*found, causes.frozen_stage(prog, still, ctx.hb, ctx.steps)]


def _slow_workers(ctx: Context, found: list[Finding]) -> list[Finding]:
    named = {f.worker for f in found if f.kind in causes.STRAGGLER_KINDS and f.worker}
    return [*found, *speed.slow_workers(ctx.shards, ctx.stats, named, ctx.th)]


def _stalled(ctx: Context, found: list[Finding]) -> list[Finding]:
    stall = progress.stalled(ctx.ev, ctx.th.stall_s)
    return found if stall is None else [*found, stall]


def _counters(ctx: Context, found: list[Finding]) -> list[Finding]:
    run = counters.summarize(ctx.ev, ctx.shards, ctx.bounds)
    return [*found, *counters.findings(ctx.ev, ctx.steps, found, earlier=ctx.earlier, run=run)]


def _churn(ctx: Context, found: list[Finding]) -> list[Finding]:
    return [*found, *churn.findings(ctx.ev, ctx.steps, found)]


def _known(ctx: Context, found: list[Finding]) -> list[Finding]:
    return known.findings(ctx.ev, found, ctx.steps)


def _status_period(ev: Evidence, stage: str, hb: float) -> float:
    """The resolution of the stage's status-line `items=`: the period of its lines, or the heartbeat
    interval when the evidence states one and it is longer (workers report their counts on
    heartbeats); else the heartbeat interval."""
    period = progress.status_interval(ev, stage) if stage else np.nan
    stated = bool(ev.config.get("heartbeat_interval")) or len(ev.samples) > 1
    if not period > 0:
        return hb
    return max(float(period), hb) if stated else float(period)


def _crash_groups(ev: Evidence) -> list:
    from zephyr_debug.crashes.cluster import job_groups

    return job_groups(ev)


def _idle_hours(ev: Evidence):
    """`idle(stage, t0, t1)`: worker-hours of alive workers with nothing in flight for them
    (alive - in flight) in [t0, t1], from the stage's status series."""
    st = ev.status
    if not len(st):
        return lambda stage, t0, t1: 0.0
    ts = pd.to_numeric(st["ts"], errors="coerce").to_numpy(dtype=float)
    alive = pd.to_numeric(st["alive"], errors="coerce").to_numpy(dtype=float)
    busy = pd.to_numeric(st["in_flight"], errors="coerce").fillna(0).to_numpy(dtype=float)
    stage = st["stage"].to_numpy(dtype=object)

    def idle(name: str, t0: float, t1: float) -> float:
        if not (t1 > t0):
            return 0.0
        mine = np.flatnonzero((stage == name) & ~np.isnan(ts) & ~np.isnan(alive))
        if not len(mine):
            return 0.0
        t, free = ts[mine], np.clip(alive[mine] - busy[mine], 0, None)
        edges = np.clip(np.r_[t, t1], t0, t1)
        return float(np.sum(free * np.diff(edges)) / 3600)

    return idle


def _dead_holders(ctx: Context, found: list[Finding]) -> list[Finding]:
    """Running shards whose holder is failed, or silent past the heartbeat timeout: one per worker.
    Zephyr requeues them itself at the heartbeat timeout: information while that is on time (a
    preemption cut at the moment of its requeue), a warning once the requeue is overdue by
    `REQUEUE_GRACE_HEARTBEATS` (or the holder's death is not dated)."""
    ev, shards, steps = ctx.ev, ctx.shards, ctx.steps
    if ctx.gone or ev.state not in ("running", "interrupted"):
        return found
    timeout = liveness.heartbeat_timeout(ev)
    grace = REQUEUE_GRACE_HEARTBEATS * ctx.hb
    declared = {w: ts for ts, w, event in ev.worker_events if event == "heartbeat-timeout"}  # the last, per worker
    dead = shards[
        shards["running"].to_numpy(dtype=bool)
        & shards["holder_known"].to_numpy(dtype=bool)
        & ~shards["holder_alive"].to_numpy(dtype=bool)
    ]
    out = list(found)
    for worker, rows in dead.groupby("worker", observed=True):
        rows = rows[[(r.stage, int(r.shard)) not in ctx.covered for r in rows.itertuples()]]
        if not len(rows):
            continue
        r = rows.iloc[0]
        seen = r["holder_seen_ago"]
        # how long past the moment Zephyr should have requeued: its timeout line, else silence - timeout
        late = ev.now - declared[str(worker)] if str(worker) in declared else seen - timeout
        on_time = late == late and late <= grace
        out.append(
            Finding(
                kind="dead-holder",
                causes=("dead-holder",),
                severity=INFO if on_time else WARNING,
                stage=r["stage"],
                shard=int(r["shard"]),
                shards=tuple(int(s) for s in rows["shard"]),
                worker=str(worker),
                title=f"shard(s) {', '.join(str(int(s)) for s in rows['shard'])} of {r['stage']} held by "
                f"{r['holder_state']} worker {worker}" + (": Zephyr is requeueing it" if on_time else ""),
                evidence=(
                    f"holder {worker} is {r['holder_state']}"
                    + ("" if math.isnan(seen) else f", last seen {seen:.0f}s ago")
                    + ": Zephyr requeues the shard at the heartbeat timeout"
                    + (
                        f" ({timeout:.0f}s)"
                        if on_time
                        else f"; overdue by {late:.0f}s"
                        if late == late
                        else "; when it died is not in the evidence"
                    ),
                ),
                next=tuple(steps.for_workers("dead-holder")),
                elapsed_s=float(r["elapsed_s"]),
            )
        )
    return out


CRASH_LOOP_KINDS = ("crash-loop", "oom")  # a shard failing attempt after attempt: why it is in flight so long
ABORT_RULE_KINDS = ("crash-loop", "all-workers-dead")  # what Zephyr aborts on: a shard out of attempts, no workers


def abort_cause(ev: Evidence, found: list[Finding]) -> Finding | None:
    """The root-cause finding the abort line itself names: the shard it aborted on, or (`No alive
    workers`) the dead pool. None when the line names neither, or no finding is that cause."""
    if ev.state != "failed":
        return None
    shard = failures.aborting_shard(ev)
    no_workers = any(sign in (ev.fatal_error or "") for sign in liveness.NO_WORKERS_SIGNS)
    if shard is None and not no_workers:  # the abort's text is not in this evidence (Prometheus)
        rules = [f for f in found if f.severity == ERROR and f.kind in ABORT_RULE_KINDS]
        if len(rules) == 1:  # the one finding that is one of Zephyr's abort rules: what it stopped on
            return rules[0]
    return next(
        (
            f
            for f in found
            if f.severity == ERROR
            and (
                (shard is not None and f.kind != "all-workers-dead" and shard in f.all_shards)
                or (shard is None and no_workers and f.kind == "all-workers-dead")
            )
        ),
        None,
    )


def _aborted(ctx: Context, found: list[Finding]) -> list[Finding]:
    """The abort is the outcome of one root cause: that finding says so (`aborted_pipeline`);
    an `aborted` finding of its own only when no finding is the cause the abort line states."""
    ev, prog, steps = ctx.ev, ctx.prog, ctx.steps
    if ev.state != "failed":
        return found
    lines = (ev.fatal_error or "unknown reason").strip().splitlines()
    cause = abort_cause(ev, found)
    if cause is not None:
        said = any(e.startswith("aborted the pipeline") for e in cause.evidence)
        evidence = cause.evidence if said else (*cause.evidence, f"aborted the pipeline: {lines[0]}")
        marked = replace(cause, evidence=evidence, metrics=(*cause.metrics, ("aborted_pipeline", True)))
        return [marked if f is cause else f for f in found]
    shard = failures.aborting_shard(ev)
    return [
        *found,
        Finding(
            kind="aborted",
            causes=("aborted",),
            severity=ERROR,
            stage=prog.stage,
            title=f"job aborted in {prog.stage}: {lines[0]}",
            evidence=tuple(lines[1:4]),
            next=tuple(steps.for_failure("aborted", shard)),
            metrics=(("aborted_pipeline", True),),
        ),
    ]


# The order is the suppression order above: each finder sees what the ones before it found.
FINDERS: tuple[Finder, ...] = (
    _all_dead,
    _failures,
    _stragglers,
    _solo_tails,
    _frozen_stage,
    _dead_holders,
    _slow_workers,
    _aborted,
    _stalled,
    _counters,
    _churn,
    _known,
)


def _stage_rows(ev: Evidence, stats: pd.DataFrame, bounds: pd.DataFrame) -> tuple[StageRow, ...]:
    walls = bounds["wall_s"]
    names = [s.name for s in ev.stages] + [s for s in stats.index if s not in {x.name for x in ev.stages}]
    totals = {s.name: s.total for s in ev.stages}
    lines = ev.status.dropna(subset=["completed"]).groupby("stage", sort=False) if len(ev.status) else None
    completed = {str(k): int(v) for k, v in lines["completed"].max().items()} if lines is not None else {}
    in_flight = {str(k): int(v) for k, v in lines["in_flight"].last().fillna(0).items()} if lines is not None else {}
    unfinished = {s.name for s in ev.stages if s.end_ts is None}
    out = []
    for name in names:
        st = stats.loc[name] if name in stats.index else None

        def val(col: str, st=st):
            return None if st is None else st[col]

        out.append(
            StageRow(
                stage=name,
                total=int(val("total") or totals.get(name, 0)),
                done=max(int(val("done") or 0), completed.get(name, 0)),  # its status lines may know more
                running=max(int(val("running") or 0), in_flight.get(name, 0) if name in unfinished else 0),
                median_s=val("median_s"),
                p90_s=val("p90_s"),
                p99_s=val("p99_s"),
                cut_s=val("cut_s"),
                wall_s=walls.get(name),
            )
        )
    return tuple(out)
