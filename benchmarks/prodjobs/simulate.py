"""A seeded event simulation of one Zephyr execution: workers pull shards from a FIFO queue,
run them for lognormal times, fail (task errors, worker deaths found by heartbeat timeout),
requeue failed shards at the back of the queue, and abort at Zephyr's limits.

The result (`Run`) is plain data: every attempt, worker registration / death, and the
abort. `write.py` turns it into the log lines, `get_status` and `list-tasks` of a variant.
"""

from __future__ import annotations

import calendar
import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field, replace

from benchmarks.prodjobs.scenarios import Fault, Scenario
from zephyr_debug.model import (
    HEARTBEAT_TIMEOUT_S,
    MAX_SHARD_FAILURES,
    MAX_SHARD_INFRA_FAILURES,
    NO_WORKERS_TIMEOUT_S,
)

START_TS = float(calendar.timegm((2026, 12, 2, 21, 59, 16)))  # every run starts here (UTC)
PULL_GAP_S = 0.05  # a worker's next pull after its report
STAGE_GAP_S = 1.0  # coordinator's pause between stages
REGISTER_SPREAD_S = 20.0  # workers come up over the first seconds
PREEMPT_BEFORE = 0.5  # background preemptions hit attempts started in the first half of a stage
STATUS_EVERY_S = 5.0
PULL_TIMEOUT_S = 30.0  # older workers: pull_task's hard timeout that killed the heartbeat (marin#3041)
KILLED_AFTER_S = 0.3  # marin#4199: the stale coordinator's shutdown killed new workers this soon


@dataclass
class Attempt:
    stage: int
    shard: int
    attempt: int
    worker: int
    start: float
    end: float | None  # None: still running at capture (stuck)
    outcome: str  # done | task | infra | running
    items: float  # items of a finished attempt (or processed so far)
    error: str | None = None  # task error text key: transient | crash | bug | oom
    died: float | None = None  # infra: when the worker really died (detection is `end`)
    frozen_at: float | None = None  # stuck: items stop rising at this time
    requeue: tuple[int, int, int] | None = None  # after this failure: (task errors, infra failures, generation)


@dataclass
class WorkerLife:
    index: int
    registered: float
    deaths: list[float] = field(default_factory=list)  # detection times (heartbeat timeout)
    died: list[float] = field(default_factory=list)  # real death times
    returns: list[float] = field(default_factory=list)  # re-registration times
    oom_killed: bool = False
    shutdown: float | None = None  # told SHUTDOWN by pull_task (marin#4200): dead without a heartbeat timeout
    process_alive: bool = False  # marked dead by Zephyr while its Iris task runs on (marin#3041)


@dataclass
class StageRun:
    index: int
    name: str
    ops: str
    shards: int
    start: float
    end: float | None = None
    items: list[float] = field(default_factory=list)  # per shard (true size)
    base: list[float] = field(default_factory=list)  # per shard run time before worker factors


@dataclass
class Run:
    scenario: Scenario
    exec_id: str
    worker_ids: list[str]
    stages: list[StageRun]
    attempts: list[Attempt]
    workers: list[WorkerLife]
    end: float  # capture time: the last line of the evidence
    state: str  # succeeded | failed | running
    abort: dict | None = None  # {"kind": task|infra|no_workers|preempt, "shard", "stage", "worker", "n", "ts"}
    all_dead_ts: float | None = None
    twin: Run | None = None  # a second execution in the same evidence (marin#3459 / #3705)
    coord_end: float | None = None  # the coordinator's last line when the evidence runs on after it (marin#4079)


def simulate(sc: Scenario, seed: int) -> Run:
    run = _Sim(sc, seed).run()
    for f in sc.faults:
        if f.kind == "duplicate":  # run_pipeline retried: the same execution again, same coordinator and pool
            run.twin = _Sim(replace(sc, faults=()), seed + 1, START_TS + f.at).run()
            run.twin.exec_id, run.twin.worker_ids, run.twin.workers = run.exec_id, run.worker_ids, run.workers
            run.end = max(run.end, run.twin.end)
        elif f.kind == "stale-coordinator":  # a retry's new execution while the old coordinator waits on
            run.twin = _Sim(replace(sc, faults=(), name=sc.name + "-retry"), seed + 1, run.all_dead_ts + 120.0).run()
            run.end = run.twin.stages[0].start + 600.0
        elif f.kind == "after-exit":
            run.coord_end, run.end = run.end, run.end + f.secs
    return run


class _Sim:
    def __init__(self, sc: Scenario, seed: int, start: float = START_TS):
        self.sc, self.rnd, self.start = sc, random.Random(f"{sc.name}/{seed}"), start
        tag = self.rnd.getrandbits(32)
        self.exec_id = f"{sc.name}-20261202-215916-{tag:08x}"
        group = f"zephyr--{tag:08x}-p0-workers-a0"
        self.worker_ids = [f"{group}-{i}:0" for i in range(sc.workers)]
        self.lives = [WorkerLife(i, start + self.rnd.uniform(0, REGISTER_SPREAD_S)) for i in range(sc.workers)]
        self.hang_end: float | None = None  # the coordinator waits (no abort) until the capture
        oom = next((f for f in sc.faults if f.kind == "oom-killed"), None)
        self.oom_workers = set(self.rnd.sample(range(sc.workers), oom.count)) if oom else set()
        self.attempts: list[Attempt] = []
        self.stages: list[StageRun] = []
        self.abort: dict | None = None
        self.all_dead_ts: float | None = None
        self.alive_at: list[float | None] = [life.registered for life in self.lives]  # None: dead for good

    # -- per-shard data -----------------------------------------------------------------
    def _shard_data(self, n: int) -> tuple[list[float], list[float]]:
        sc, items, base = self.sc, [], []
        rho = 0.7  # run time follows size, loosely
        for _ in range(n):
            z, e = self.rnd.gauss(0, 1), self.rnd.gauss(0, 1)
            items.append(sc.items_median * math.exp(sc.items_sigma * z))
            base.append(sc.median_s * math.exp(sc.sigma * (rho * z + math.sqrt(1 - rho * rho) * e)))
        return items, base

    def _faults(self, stage: int, kind: str) -> list[Fault]:
        return [f for f in self.sc.faults if f.kind == kind and f.stage == stage]

    # -- the run -------------------------------------------------------------------------
    def run(self) -> Run:
        t = self.start + 2.0
        state = "succeeded"
        for index, (name, ops, n) in enumerate(self.sc.stage_plan()):
            st = StageRun(index, name, ops, n, t)
            st.items, st.base = self._shard_data(n)
            for f in self._faults(index, "size-skew"):
                st.items[f.shard] *= f.factor
                st.base[f.shard] *= f.factor
            for f in self._faults(index, "cost-skew"):
                st.base[f.shard] *= f.factor
            self.stages.append(st)
            outcome = self._stage(st)
            if outcome != "done":
                state = outcome
                break
            t = st.end + STAGE_GAP_S
        end = self._capture(state)
        return Run(
            self.sc,
            self.exec_id,
            self.worker_ids,
            self.stages,
            self.attempts,
            self.lives,
            end,
            state,
            self.abort,
            self.all_dead_ts,
        )

    def _capture(self, state: str) -> float:
        if state == "failed":
            return self.abort["ts"] + 1.0
        if self.hang_end is not None:
            return self.hang_end
        if state == "running":  # a stuck shard: captured `secs` after it froze
            stuck = next(a for a in self.attempts if a.outcome == "running")
            fault = next(f for f in self.sc.faults if f.kind in ("stuck", "shutdown-last"))
            return max(stuck.frozen_at + fault.secs, max(a.end for a in self.attempts if a.end is not None) + 60.0)
        return self.stages[-1].end + 2.0

    def _stage(self, st: StageRun) -> str:
        """Runs one stage; returns done | failed | running (stuck forever)."""
        n = st.shards
        queue = deque(range(n))
        tries = [0] * n
        task_fail = [0] * n
        infra_fail = [0] * n
        events: list[tuple] = []
        seq = 0

        def push(ts: float, kind: str, *data) -> None:
            nonlocal seq
            seq += 1
            heapq.heappush(events, (ts, seq, kind, data))

        idle: list[int] = []
        stall = self._faults(st.index, "dispatch-stall")
        if stall:  # marin#2943: workers registered, work queued, nothing is ever handed out
            self.hang_end = st.start + stall[0].secs
            return "running"
        shutdown = bool(self._faults(st.index, "shutdown-last"))
        for w, at in enumerate(self.alive_at):
            if at is not None:
                push(max(at, st.start), "free", w)
        expected = n / max(self.sc.workers, 1) * self.sc.median_s
        kill_all = self._faults(st.index, "all-dead") + self._faults(st.index, "stale-coordinator")
        if kill_all:
            push(st.start + kill_all[0].at * expected, "kill_all")
        completed, stuck_running = 0, False
        while events:
            ts, _, kind, data = heapq.heappop(events)
            if kind == "free":
                w = data[0]
                if self.alive_at[w] is None or self.alive_at[w] > ts:
                    continue
                if not queue:
                    if shutdown:  # marin#4200: the last stage's idle workers are told SHUTDOWN
                        self.lives[w].shutdown, self.alive_at[w] = ts, None
                    else:
                        idle.append(w)
                    continue
                shard = queue.popleft()
                self._start(st, w, shard, tries[shard], ts, expected, push)
                tries[shard] += 1
            elif kind == "done":
                a: Attempt = data[0]
                if a.outcome != "done":  # its worker died first (a lost pool)
                    continue
                completed += 1
                push(ts + PULL_GAP_S, "free", a.worker)
                if completed == n:
                    st.end = ts
                    return "done"
            elif kind == "task":
                a = data[0]
                task_fail[a.shard] += 1
                if task_fail[a.shard] >= MAX_SHARD_FAILURES:
                    self.abort = {
                        "kind": "task",
                        "stage": st.index,
                        "shard": a.shard,
                        "worker": a.worker,
                        "n": task_fail[a.shard],
                        "ts": ts,
                    }
                    return "failed"
                a.requeue = (task_fail[a.shard], infra_fail[a.shard], task_fail[a.shard] + infra_fail[a.shard])
                queue.append(a.shard)
                push(ts + PULL_GAP_S, "free", a.worker)
                self._wake(idle, ts, push)
            elif kind == "infra":
                a = data[0]
                infra_fail[a.shard] += 1
                self._death(a.worker, a.died, ts, data[1], push)
                if self._preempt_counted(st, a.shard):  # marin#4990: older Zephyr counts it as a failure
                    task_fail[a.shard] += 1
                    if task_fail[a.shard] >= MAX_SHARD_FAILURES:
                        self.abort = {
                            "kind": "preempt",
                            "stage": st.index,
                            "shard": a.shard,
                            "worker": a.worker,
                            "n": task_fail[a.shard],
                            "ts": ts + 0.5,
                        }
                        return "failed"
                if infra_fail[a.shard] >= MAX_SHARD_INFRA_FAILURES:  # the abort line, no requeue line
                    self.abort = {
                        "kind": "infra",
                        "stage": st.index,
                        "shard": a.shard,
                        "worker": a.worker,
                        "n": infra_fail[a.shard],
                        "ts": ts,
                    }
                    return "failed"
                a.requeue = (task_fail[a.shard], infra_fail[a.shard], task_fail[a.shard] + infra_fail[a.shard])
                queue.append(a.shard)
                self._wake(idle, ts, push)
                self._no_alive(ts, push)
            elif kind == "kill_all":
                self._kill_all(st, ts, idle, push)
            elif kind == "idle_dead":  # an idle worker of a killed pool found dead
                self._death(data[0], data[1], ts, None, push)
                self._no_alive(ts, push)
            elif kind == "hang":
                return "running"
            elif kind == "no_workers":
                self.abort = {
                    "kind": "no_workers",
                    "stage": st.index,
                    "shard": None,
                    "worker": None,
                    "n": len(self.lives),
                    "ts": ts,
                    "idle": ts - self.all_dead_ts,
                    "elapsed": ts - START_TS,
                }
                return "failed"
            elif kind == "stuck":
                stuck_running = True
            if stuck_running and completed == n - 1 and not queue:
                return "running"
        raise AssertionError(f"{self.sc.name}: stage {st.name} ran out of events")  # a scenario bug

    def _preempt_counted(self, st: StageRun, shard: int) -> bool:
        return any(f.shard == shard for f in self._faults(st.index, "preempt-count"))

    def _wake(self, idle: list[int], ts: float, push) -> None:
        if idle:
            push(ts + PULL_GAP_S, "free", idle.pop(0))

    def _start(self, st: StageRun, w: int, shard: int, attempt: int, ts: float, expected: float, push) -> None:
        sc, rnd = self.sc, self.rnd
        dur = st.base[shard] * math.exp(rnd.gauss(0, 0.03))
        slow = [f for f in self._faults(st.index, "slow-worker") if f.worker == w]
        if slow:
            dur *= slow[0].factor
        by_kind = {f.kind: f for f in sc.faults if f.stage == st.index and (f.shard == shard or shard in f.shards)}
        a = Attempt(st.index, shard, attempt, w, ts, None, "running", st.items[shard])
        self.attempts.append(a)
        error = next((k for k in ("crash", "bug", "oom") if k in by_kind), None)
        if error is None and "transient" in by_kind and attempt < by_kind["transient"].count:
            error = "transient"
        if error is not None:
            a.end, a.outcome, a.error = ts + dur * rnd.uniform(0.1, 0.5), "task", error
            a.items = st.items[shard] * rnd.uniform(0.1, 0.5)
            push(a.end, "task", a)
            return
        crasher = by_kind.get("infra-crash")
        holder = by_kind.get("dead-holder") or by_kind.get("preempt-count")
        preempt = not by_kind and ts - st.start < PREEMPT_BEFORE * expected and rnd.random() < sc.preempt
        if self._faults(st.index, "deser-heartbeat") and attempt == 0 and ts - st.start < REGISTER_SPREAD_S + 5:
            # marin#3041: unpickling the task outlasts pull_task's timeout; the heartbeat thread dies with it
            a.died = ts + PULL_TIMEOUT_S
            a.end = a.died + HEARTBEAT_TIMEOUT_S + rnd.uniform(0.5, 4.5)
            a.outcome, a.items = "infra", 0.0
            self.lives[w].process_alive = True
            push(a.end, "infra", a, False)
            return
        oom_now = w in self.oom_workers and not self.lives[w].died and ts - st.start > 0.2 * expected
        if oom_now:  # marin#3009: an OOM kill the coordinator sees only as a heartbeat timeout
            self.lives[w].oom_killed = True
            crasher = None
        if crasher or (holder and (attempt == 0 or "preempt-count" in by_kind)) or preempt or oom_now:
            life = crasher.secs * math.exp(rnd.gauss(0, 0.3)) if crasher else dur * rnd.uniform(0.3, 0.9)
            a.died = ts + life
            a.end = a.died + HEARTBEAT_TIMEOUT_S + rnd.uniform(0.5, 4.5)
            a.outcome, a.items = "infra", st.items[shard] * min(life / dur, 0.95)
            self.lives[w].oom_killed |= bool(crasher)
            comes_back = not (crasher and rnd.random() < crasher.stay_dead) and not oom_now
            push(a.end, "infra", a, comes_back)
            return
        if "stuck" in by_kind or "shutdown-last" in by_kind:
            a.frozen_at = ts + dur * rnd.uniform(0.2, 0.6)
            a.items = st.items[shard] * (a.frozen_at - ts) / dur
            push(ts, "stuck")
            return
        a.end, a.outcome = ts + dur, "done"
        push(a.end, "done", a)

    def _death(self, w: int, died: float, detected: float, comes_back: bool | None, push) -> None:
        life = self.lives[w]
        life.died.append(died)
        life.deaths.append(detected)
        if comes_back:
            back = detected + self.rnd.uniform(5, 40)
            life.returns.append(back)
            self.alive_at[w] = back
            push(back, "free", w)
        else:
            self.alive_at[w] = None

    def _kill_all(self, st: StageRun, ts: float, idle: list[int], push) -> None:
        """Every worker dies at `ts` (the pool is lost); each is found dead by its heartbeat timeout."""
        for a in self.attempts:
            if a.stage == st.index and a.outcome == "done" and a.end > ts and a.start <= ts:
                a.outcome, a.died = "infra", ts
                a.items *= (ts - a.start) / (a.end - a.start)
                a.end = ts + HEARTBEAT_TIMEOUT_S + self.rnd.uniform(0.5, 4.5)
        holding = {a.worker: a for a in self.attempts if a.stage == st.index and a.outcome == "infra" and a.died == ts}
        for w, at in enumerate(self.alive_at):
            if at is None:
                continue
            if w in holding:
                push(holding[w].end, "infra", holding[w], False)
            else:
                push(ts + HEARTBEAT_TIMEOUT_S + self.rnd.uniform(0.5, 4.5), "idle_dead", w, ts)
            self.alive_at[w] = None
        idle.clear()

    def _no_alive(self, ts: float, push) -> None:
        """Zephyr's all-dead wait: no registered worker alive -> abort after the no-workers timeout."""
        if self.all_dead_ts is None and all(at is None for at in self.alive_at):
            self.all_dead_ts = ts
            if self.sc.hang_s:  # marin#3598: it waits for workers to recover (the pool's 6 h timeout)
                self.hang_end = ts + self.sc.hang_s
                push(self.hang_end, "hang")
            else:
                push(ts + NO_WORKERS_TIMEOUT_S + self.rnd.uniform(0, 1), "no_workers")
