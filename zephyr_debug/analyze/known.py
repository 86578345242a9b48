"""Known failure modes of Zephyr (marin-community/marin's tracker), recognized from the evidence.

One small rule per mode; each returns a `Match` or None. A match names the existing finding it
explains (`attach`: kinds, and the shards it is about): that finding gets `known="marin#NNNN"`,
the proving lines and the fix (one finding per root cause); with no such finding the match is a
finding of its own (`kind`). Rules run in `RULES` order and a finding carries one known mode (a
later match for an already-explained finding is the same root cause and is dropped).
Thresholds are the constants below; docs/known-modes.md lists the modes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pandas as pd

from zephyr_debug.analyze.liveness import OOM_EXIT, heartbeat_timeout, oom_killed_workers, zephyr_id
from zephyr_debug.analyze.nextsteps import Steps
from zephyr_debug.findings import ERROR, INFO, WARNING, Cost, Finding
from zephyr_debug.model import MAX_SHARD_FAILURES, NO_WORKERS_TIMEOUT_S, Evidence
from zephyr_debug.zephyrlog import ABORT_SHARD_RE

PLAYBOOK = "zdebug playbook known-modes"
FAIL_LOOP_INFRA = 3  # infra failures of one unfinished shard: a fail loop (#4575)
SHUTDOWN_SHARE = 0.9  # dead share of the pool after the last stage's queue emptied (#4200) ...
SHUTDOWN_TIMEOUT_SHARE = 0.5  # ... with heartbeat timeouts for fewer than this share of them
MIN_POOL = 4  # pool-wide rules need at least this many registered workers
DISPATCH_STALL_S = 10 * 60.0  # queued work, live workers, nothing in flight this long (#2943)
DESER_WINDOW_S = 10 * 60.0  # heartbeat timeouts this soon after a stage start (#3041) ...
DESER_POOL_SHARE = 0.9  # ... of at least this share of the pool ...
DESER_DONE_SHARE = 0.01  # ... before this share of the stage completed
STALE_OVERLAP_S = 60.0  # an older execution still printing status this long after a newer one began (#3705)
KILLED_WITHIN_S = 5.0  # a worker last seen this soon after registering was killed at birth (#4199)
AFTER_EXIT_GRACE_S = 30.0  # worker lines this long after the coordinator's last status line (#4079) ...
AFTER_EXIT_SPAN_S = 5 * 60.0  # ... spanning at least this long
PREEMPT_MATCH_S = 30.0  # a heartbeat timeout of the aborting worker this close to a TASK abort (#4990)
MAX_NAMED = 5  # workers named in an evidence line


@dataclass(frozen=True)
class Match:
    known: str  # "marin#NNNN"
    kind: str  # the finding kind when no existing finding is explained
    title: str
    evidence: tuple[str, ...]
    fix: str  # the fix or workaround, with the upstream issue
    attach: tuple[str, ...] = ()  # kinds of the existing finding this explains
    shards: tuple[int, ...] = ()  # ... and overlapping these shards (none: any finding of those kinds)
    stage: str | None = None
    severity: str = ERROR
    cost: Cost = field(default_factory=Cost)


def findings(ev: Evidence, found: list[Finding], steps: Steps) -> list[Finding]:
    """`found` with the known modes applied: explained findings replaced, new ones appended."""
    out = list(found)
    for rule in RULES:
        m = rule(ev, out)
        if m is None:
            continue
        i = next(
            (
                i
                for i, f in enumerate(out)
                if f.kind in m.attach
                and f.severity != INFO
                and (
                    not m.shards
                    or set(m.shards) & set(f.all_shards)
                    or (not f.all_shards and m.stage is not None and f.stage == m.stage)
                )
            ),
            None,
        )
        if i is None:
            out.append(
                Finding(
                    kind=m.kind,
                    causes=(m.kind,),
                    severity=m.severity,
                    stage=m.stage,
                    known=m.known,
                    title=f"{m.title} ({m.known})",
                    evidence=m.evidence + (f"fix: {m.fix}",),
                    next=tuple(dict.fromkeys((*_first(steps, m), PLAYBOOK))),
                    cost=m.cost,
                    playbook="known-modes",
                )
            )
        elif out[i].known is None:
            f = out[i]
            cost = Cost(
                *(
                    max(getattr(f.cost, k), getattr(m.cost, k))
                    for k in ("held_s", "idle_worker_hours", "burned_worker_hours")
                )
            )
            out[i] = replace(
                f,
                known=m.known,
                evidence=f.evidence + m.evidence + (f"fix: {m.fix}",),
                next=tuple(dict.fromkeys((*f.next, PLAYBOOK))),
                cost=cost,
            )
    return out


def _first(steps: Steps, m: Match) -> list[str]:
    return [f"zdebug workers {steps.job} --sort memory"] if m.kind in POOL_KINDS else [f"zdebug report {steps.job}"]


# -- shard modes ------------------------------------------------------------------------------
def fail_loop(ev: Evidence, found: list[Finding]) -> Match | None:
    """#4575: one shard kills every worker that pulls it (infra failures in flight) while the rest wait."""
    f = next(
        (f for f in found if f.kind == "crash-loop" and dict(f.metrics).get("infra_failures", 0) >= FAIL_LOOP_INFRA),
        None,
    )
    if f is None:
        return None
    n = dict(f.metrics)["infra_failures"]
    lines = [
        f"marin#4575: shard {f.shard} was in flight during {n} worker losses (a deterministic native "
        "crash / OOM in its own code), the stage cannot finish without it"
    ]
    oom = oom_killed_workers(ev) & _holders(ev, f.stage, f.all_shards)
    if oom:
        lines.append(
            f"Iris: {len(oom)} of its workers were OOM-killed (exit {OOM_EXIT} / 'OOM killed'): " + _names(oom)
        )
    return Match(
        "marin#4575",
        "fail-loop",
        f"shard {f.shard} in a fail loop",
        tuple(lines),
        "Zephyr aborts once a shard was in flight during MAX_SHARD_INFRA_FAILURES (20) infra failures "
        "(the #4575 fix); find the shard's input (its `[shard N/T]` / reader lines), split or skip "
        "it, or give the workers more memory",
        attach=("crash-loop",),
        shards=f.all_shards,
    )


def oom_behind_heartbeat(ev: Evidence, found: list[Finding]) -> Match | None:
    """#3009: workers the coordinator saw only as heartbeat timeouts were OOM-killed (Iris task error)."""
    timed_out = {w for _, w, e in ev.worker_events if e == "heartbeat-timeout"}
    loops = [f for f in found if f.kind == "crash-loop"]
    looping = set().union(*(_holders(ev, f.stage, f.all_shards) for f in loops)) if loops else set()
    oom = (oom_killed_workers(ev) & timed_out) - looping
    if not oom:
        return None
    a = ev.attempts
    lost = a[a["worker"].isin(oom) & (a["kind"] == "infra")]
    shards = tuple(sorted(int(s) for s in lost["shard"].dropna().unique()))
    lines = (
        f"marin#3009: {len(oom)} worker(s) the coordinator logged only as 'failed to heartbeat within "
        f"timeout' were OOM-killed (Iris task: exit {OOM_EXIT} / OOM killed): {_names(oom)}",
        f"their shard(s) {', '.join(map(str, shards[:12])) or 'none'} were requeued as infra failures",
    )
    burned = float(pd.to_numeric(lost["elapsed_s"], errors="coerce").fillna(0).sum()) / 3600
    return Match(
        "marin#3009",
        "oom-behind-heartbeat",
        f"{len(oom)} worker(s) OOM-killed behind heartbeat timeouts",
        lines,
        "give the workers more memory or run fewer shards per worker; the reason is in "
        "`iris job list --json` (the task's error field), which #3009 asks the coordinator to log",
        attach=("crash-loop", "dead-holder", "requeue-burst"),
        shards=shards,
        severity=WARNING,
        cost=Cost(burned_worker_hours=burned),
    )


# -- pool modes -------------------------------------------------------------------------------
def deser_heartbeat(ev: Evidence, found: list[Finding]) -> Match | None:
    """#3041: the whole pool marked dead right after a stage started, before anything completed."""
    pool = _pool_size(ev)
    for st in ev.stages:
        if st.start_ts is None or pool < MIN_POOL:
            continue
        early = {
            w: t for t, w, e in ev.worker_events if e == "heartbeat-timeout" and 0 <= t - st.start_ts <= DESER_WINDOW_S
        }
        if len(early) < DESER_POOL_SHARE * pool:
            continue
        last = max(early.values())
        rows = ev.status[(ev.status["stage"] == st.name) & (pd.to_numeric(ev.status["ts"]) <= last)]
        done = int(pd.to_numeric(rows["completed"], errors="coerce").max()) if len(rows) else 0
        if done > DESER_DONE_SHARE * max(st.total, 1):
            continue
        running = _iris_running(ev, set(early))
        lines = [
            f"marin#3041: {len(early)} of {pool} workers failed to heartbeat within {last - st.start_ts:.0f}s "
            f"of {st.name} starting, with {done}/{st.total} complete: they died pulling their first task"
        ]
        if running:
            lines.append(
                f"Iris: {running} of their tasks are still RUNNING: the processes live, only the "
                "heartbeat thread died (pull_task's 30 s timeout while unpickling heavy imports)"
            )
        return Match(
            "marin#3041",
            "heartbeat-killed",
            "every worker's heartbeat died as the stage started",
            tuple(lines),
            "the #3041 fix (2026-02-25) polls the pull_task future instead of a hard 30 s "
            "timeout: upgrade Zephyr; meanwhile import heavy modules (datasets, jax) at worker start, "
            "not in the pickled task",
            attach=("all-workers-dead",),
            stage=st.name,
        )
    return None


def stale_coordinator(ev: Evidence, found: list[Finding]) -> Match | None:
    """#3705 / #4199: an older execution's coordinator still running (no live workers) beside a newer one."""
    runs: dict[str, list] = {}
    for ts, ex, alive in ev.log_facts.status_exec:
        if ex is not None:
            runs.setdefault(ex, []).append((ts, alive))
    if len(runs) < 2:
        return None
    old, new = sorted(runs, key=lambda ex: runs[ex][0][0])[:2]
    stale_last, stale_alive = runs[old][-1]
    if stale_last - runs[new][0][0] < STALE_OVERLAP_S or stale_alive:
        return None
    lines = [
        f"marin#3705: two coordinators print status for this pipeline: {old} (0 workers alive, still "
        f"waiting {stale_last - runs[new][0][0]:.0f}s after {new} began) and {new}"
    ]
    killed = _killed_at_birth(ev)
    if killed:
        lines.append(
            f"marin#4199: {len(killed)} worker(s) were lost within {KILLED_WITHIN_S:.0f}s of registering "
            f"(the stale coordinator's shutdown kills the new attempt's workers): {_names(killed)}"
        )
    return Match(
        "marin#3705",
        "stale-coordinator",
        f"stale coordinator {old} left running",
        tuple(lines),
        f"kill the stale coordinator job (`iris job kill …{old[-8:]}…-coord`); upgrades: worker jobs "
        "scoped per attempt (#4199), coordinator as a job with child workers (#3861)",
        attach=("all-workers-dead",),
        severity=WARNING,
    )


def all_dead_waiting(ev: Evidence, found: list[Finding]) -> Match | None:
    """#3598: no worker alive and the coordinator keeps waiting past its own no_workers_timeout."""
    waits = ev.config.get("all_dead_ts") or []
    if ev.state != "running" or len(waits) < 2 or waits[-1] - waits[0] <= NO_WORKERS_TIMEOUT_S:
        return None
    if not any(f.kind == "all-workers-dead" for f in found):
        return None
    minutes = (waits[-1] - waits[0]) / 60
    lines = [
        f"marin#3598: 'All workers are dead/failed. Waiting for workers to recover...' {len(waits)} times "
        f"over {minutes:.0f} min, no abort: this coordinator waits the pool's no_workers_timeout (6 h)"
    ]
    oom = oom_killed_workers(ev)
    if oom:
        lines.append(f"Iris: {len(oom)} worker task(s) OOM-killed: {_names(oom)}")
    return Match(
        "marin#3598",
        "all-dead-waiting",
        "the coordinator waits forever on a dead pool",
        tuple(lines),
        "the #3600 fix aborts as soon as the worker job terminated: upgrade Zephyr; now kill the job "
        "(`iris job kill`), fix why every worker died (OOM: more memory per worker) and rerun",
        attach=("all-workers-dead",),
    )


def last_stage_shutdown(ev: Evidence, found: list[Finding]) -> Match | None:
    """#4200: the last stage's idle workers were told SHUTDOWN while a shard still ran; nobody is left."""
    st = ev.status
    if not len(st) or ev.state != "running":
        return None
    last = st.iloc[-1]
    mine = st[st["stage"] == last["stage"]]
    if not len(mine):  # a status row without a stage name
        return None
    num = {
        c: pd.to_numeric(mine[c], errors="coerce")
        for c in ("queue_depth", "in_flight", "dead", "registered", "completed", "total")
    }
    registered, dead = num["registered"].iloc[-1], num["dead"].iloc[-1]
    if (
        pd.isna(dead)
        or not registered >= MIN_POOL
        or dead < SHUTDOWN_SHARE * registered
        or num["completed"].iloc[-1] >= num["total"].iloc[-1]
    ):
        return None
    empty = mine[(num["queue_depth"] == 0).to_numpy()]
    if not len(empty):
        return None
    since = float(empty["ts"].iloc[0])
    rose = dead - float(num["dead"][(num["queue_depth"] == 0)].iloc[0])
    timeouts = {w for t, w, e in ev.worker_events if e == "heartbeat-timeout" and t >= since}
    if rose < SHUTDOWN_SHARE * registered - 1 or len(timeouts) >= SHUTDOWN_TIMEOUT_SHARE * rose:
        return None
    a = ev.attempts
    open_ = a[(a["stage"] == last["stage"]) & (a["outcome"] == "running")]
    shards = tuple(sorted(int(s) for s in open_["shard"].dropna().unique()))
    lines = (
        f"marin#4200: {int(rose)} of {int(registered)} workers went dead after {last['stage']}'s queue "
        f"emptied, {len(timeouts)} of them by heartbeat timeout: the rest were told SHUTDOWN while "
        f"{int(num['in_flight'].iloc[-1] + num['queue_depth'].iloc[-1])} shard(s) were unfinished",
        f"last status: {int(num['completed'].iloc[-1])}/{int(num['total'].iloc[-1])} complete, "
        f"{int(registered - dead)}/{int(registered)} workers alive: a requeued shard has no worker left",
    )
    return Match(
        "marin#4200",
        "last-stage-shutdown",
        f"{last['stage']}: idle workers shut down while a shard runs",
        lines,
        "the #4205 fix sends SHUTDOWN only when the queue and in-flight are both empty: upgrade "
        "Zephyr; now restart the job (or kill the hung holder so it is rerun)",
        attach=("stuck", "undetermined", "data-skew", "slow-worker", "dead-holder", "all-workers-dead", "crash-loop"),
        shards=shards,
        stage=str(last["stage"]),
    )


def dispatch_stall(ev: Evidence, found: list[Finding]) -> Match | None:
    """#2943: work queued, workers counted, nothing in flight and nothing completing, for long."""
    st = ev.status
    if not len(st) or ev.state not in ("running", "interrupted"):
        return None
    num = {
        c: pd.to_numeric(st[c], errors="coerce").to_numpy()
        for c in ("ts", "queue_depth", "in_flight", "alive", "registered", "completed")
    }
    workers = [a if a == a else r for a, r in zip(num["alive"], num["registered"], strict=True)]
    k = len(st)
    while (
        k > 0
        and num["queue_depth"][k - 1] > 0
        and num["in_flight"][k - 1] == 0
        and workers[k - 1] > 0
        and num["completed"][k - 1] == num["completed"][-1]
        and st["stage"].iloc[k - 1] == st["stage"].iloc[-1]
    ):
        k -= 1
    if (
        k == len(st)
        or num["ts"][-1] - num["ts"][k] < DISPATCH_STALL_S
        or any(t >= num["ts"][k] for t in ev.config.get("all_dead_ts") or [])
    ):  # a dead pool is not this
        return None
    hours = (num["ts"][-1] - num["ts"][k]) / 3600
    last = st.iloc[-1]
    lines = [
        f"marin#2943: {int(last['completed'])}/{int(last['total'])} complete, 0 in-flight, "
        f"{int(last['queue_depth'])} queued with {int(workers[-1])} workers for {hours:.1f} h: nothing is "
        "handed out"
    ]
    for _, n, most, shards in ev.log_facts.worker_group[-1:]:
        lines.append(f"'Starting worker group: {n} workers (max_workers={most}, num_shards={shards})'")
    return Match(
        "marin#2943",
        "dispatch-stall",
        f"{last['stage']}: work queued, workers idle, nothing runs",
        tuple(lines),
        "#2943: the workers were gone (preempted Ray actors never reconstructed) while the "
        "status line still counted their handles; newer Zephyr counts alive workers and fray restarts "
        "preempted actors: restart the job, check `zdebug workers`",
        attach=("stalled",),
        stage=str(last["stage"]),
        cost=Cost(idle_worker_hours=hours * float(workers[-1])),
    )


# -- job modes --------------------------------------------------------------------------------
def duplicate_execution(ev: Evidence, found: list[Finding]) -> Match | None:
    """#3459: the same execution's stage started twice on one coordinator (run_pipeline retried)."""
    seen: dict[tuple, float] = {}
    again = None
    for ts, ex, stage in ev.log_facts.stage_start:
        if (ex, stage) in seen and again is None:
            again = (ts, ex, stage, seen[(ex, stage)])
        seen.setdefault((ex, stage), ts)
    if again is None:
        return None
    ts, ex, stage, first = again
    lines = [
        f"marin#3459: {stage} of {ex or 'this execution'} started twice ({ts - first:.0f}s apart): two "
        "executions run interleaved on one coordinator and worker pool"
    ]
    retries = [r for r in ev.log_facts.rpc_retry if r.method == "run_pipeline" and r.ts <= ts]
    for t, op, _, n, most, error in retries[-1:]:
        lines.append(
            f"{ts - t:.0f}s before: 'Operation …{op[-40:]}.run_pipeline failed (attempt {n}/{most}), retrying: {error}'"
        )
    return Match(
        "marin#3459",
        "duplicate-execution",
        f"pipeline executed twice on one coordinator ({stage})",
        tuple(lines),
        "open upstream (#3459): kill the job and rerun once; outputs written twice may "
        "be duplicated or clobbered, check them",
        stage=stage,
    )


def workers_after_exit(ev: Evidence, found: list[Finding]) -> Match | None:
    """#4079: worker tasks still failing to reach a coordinator that already exited."""
    lines_seen = ev.log_facts.status_exec
    if not lines_seen:
        return None
    end = lines_seen[-1].ts  # the coordinator's last status line (not a later get_status)
    late = [e for e in ev.log_facts.connect_error if e.ts > end + AFTER_EXIT_GRACE_S]
    if len(late) < 2 or late[-1].ts - late[0].ts < AFTER_EXIT_SPAN_S:
        return None
    workers = {e.worker for e in late if e.worker}
    span = late[-1].ts - late[0].ts
    lines = (
        f"marin#4079: {len(late)} 'ConnectError … No route to host' lines from {len(workers) or 'unnamed'} "
        f"worker(s) during {span / 60:.0f} min after the coordinator's last status line",
        "the worker job keeps running (Iris RUNNING) with no coordinator to pull from",
    )
    return Match(
        "marin#4079",
        "workers-after-exit",
        "workers launched after the coordinator exited",
        lines,
        "kill the worker job (`iris job kill`); upstream #4079: workers are launched after the "
        "coordinator exited and retry until their own timeout",
        severity=WARNING,
        cost=Cost(idle_worker_hours=max(len(workers), 1) * span / 3600),
    )


def preempt_abort(ev: Evidence, found: list[Finding]) -> Match | None:
    """#4990: a TASK abort whose last 'failure' was its worker's heartbeat timeout, with no task error."""
    fatal = ev.fatal_error or ""
    m = ABORT_SHARD_RE.search(fatal)
    if ev.state != "failed" or m is None or not m.group("task"):
        return None
    shard = int(m.group("shard"))
    a = ev.attempts
    failed = a[(a["shard"] == shard) & (a["outcome"] == "failed")].sort_values("end_ts")
    if not len(failed) or any(c.shard == shard and c.kind != "infra" for c in ev.crashes):
        return None
    worker, t = failed["worker"].iloc[-1], float(failed["end_ts"].iloc[-1])
    if not any(
        w == worker and e == "heartbeat-timeout" and -PREEMPT_MATCH_S <= t - ts <= PREEMPT_MATCH_S
        for ts, w, e in ev.worker_events
    ):
        return None
    lines = (
        f"marin#4990: shard {shard} was aborted as failed {MAX_SHARD_FAILURES} times, but its last holder "
        f"{worker} failed to heartbeat (a preemption) and no task error was logged for it: this Zephyr "
        "counts preemptions against MAX_SHARD_FAILURES",
    )
    return Match(
        "marin#4990",
        "preemptions-counted",
        f"shard {shard}: preemptions counted as task failures",
        lines,
        "Zephyr with #4990 (merged 2026-04-21) counts preemptions as INFRA failures (limit 20, "
        "MAX_SHARD_INFRA_FAILURES): upgrade and rerun; the shard itself may be fine",
        attach=("crash-loop", "aborted"),
        shards=(shard,),
    )


# -- helpers ----------------------------------------------------------------------------------
def _iris_running(ev: Evidence, workers: set[str]) -> int:
    w = ev.workers
    if "iris_worker" not in w:
        return 0
    tasks = w[w["iris_worker"].notna()]
    return sum(
        zephyr_id(str(t)) in workers and s == "busy" for t, s in zip(tasks["worker"], tasks["state"], strict=True)
    )


def _holders(ev: Evidence, stage: str | None, shards: tuple[int, ...]) -> set[str]:
    a = ev.attempts
    return {str(w) for w in a.loc[(a["stage"] == stage) & a["shard"].isin(shards), "worker"].dropna()}


def _killed_at_birth(ev: Evidence) -> set[str]:
    born: dict[str, float] = {}
    killed = set()
    limit = heartbeat_timeout(ev) + KILLED_WITHIN_S
    for ts, w, e in ev.worker_events:
        if e == "registered":
            born[w] = ts
        elif e == "heartbeat-timeout" and w in born and ts - born.pop(w) <= limit:
            killed.add(w)
    return killed


def _pool_size(ev: Evidence) -> int:
    reg = pd.to_numeric(ev.status["registered"], errors="coerce").max() if len(ev.status) else float("nan")
    return int(reg) if reg == reg else len({w for _, w, e in ev.worker_events if e == "registered"})


def _names(workers: set[str]) -> str:
    names = sorted(workers)
    return ", ".join(names[:MAX_NAMED]) + (f" (+{len(names) - MAX_NAMED})" if len(names) > MAX_NAMED else "")


POOL_KINDS = (
    "oom-behind-heartbeat",
    "heartbeat-killed",
    "all-dead-waiting",
    "last-stage-shutdown",
    "dispatch-stall",
    "stale-coordinator",
)
# Order matters: a more specific root cause claims a finding first.
RULES = (
    fail_loop,
    preempt_abort,
    oom_behind_heartbeat,
    deser_heartbeat,
    stale_coordinator,
    all_dead_waiting,
    last_stage_shutdown,
    dispatch_stall,
    duplicate_execution,
    workers_after_exit,
)
KNOWN_IDS = (
    "marin#4575",
    "marin#3009",
    "marin#3598",
    "marin#4200",
    "marin#2943",
    "marin#3041",
    "marin#3459",
    "marin#3705",
    "marin#4079",
    "marin#4990",
)
