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
from dataclasses import dataclass, field

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
    abort: dict | None = None  # {"kind": task|infra|no_workers, "shard", "stage", "worker", "n", "ts"}
    all_dead_ts: float | None = None


def simulate(sc: Scenario, seed: int) -> Run:
    return _Sim(sc, seed).run()


class _Sim:
    def __init__(self, sc: Scenario, seed: int):
        self.sc, self.rnd = sc, random.Random(f"{sc.name}/{seed}")
        tag = self.rnd.getrandbits(32)
        self.exec_id = f"{sc.name}-20261202-215916-{tag:08x}"
        group = f"zephyr--{tag:08x}-p0-workers-a0"
        self.worker_ids = [f"{group}-{i}:0" for i in range(sc.workers)]
        self.lives = [WorkerLife(i, START_TS + self.rnd.uniform(0, REGISTER_SPREAD_S)) for i in range(sc.workers)]
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
        t = START_TS + 2.0
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
        return Run(self.sc, self.exec_id, self.worker_ids, self.stages, self.attempts, self.lives, end, state,
                   self.abort, self.all_dead_ts)

    def _capture(self, state: str) -> float:
        if state == "failed":
            return self.abort["ts"] + 1.0
        if state == "running":  # a stuck shard: captured `secs` after it froze
            stuck = next(a for a in self.attempts if a.outcome == "running")
            return max(stuck.frozen_at + self.sc.fault("stuck").secs,
                       max(a.end for a in self.attempts if a.end is not None) + 60.0)
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
        for w, at in enumerate(self.alive_at):
            if at is not None:
                push(max(at, st.start), "free", w)
        expected = n / max(self.sc.workers, 1) * self.sc.median_s
        kill_all = self._faults(st.index, "all-dead")
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
                    self.abort = {"kind": "task", "stage": st.index, "shard": a.shard, "worker": a.worker,
                                  "n": task_fail[a.shard], "ts": ts}
                    return "failed"
                a.requeue = (task_fail[a.shard], infra_fail[a.shard], task_fail[a.shard] + infra_fail[a.shard])
                queue.append(a.shard)
                push(ts + PULL_GAP_S, "free", a.worker)
                self._wake(idle, ts, push)
            elif kind == "infra":
                a = data[0]
                infra_fail[a.shard] += 1
                self._death(a.worker, a.died, ts, data[1], push)
                if infra_fail[a.shard] >= MAX_SHARD_INFRA_FAILURES:  # the abort line, no requeue line
                    self.abort = {"kind": "infra", "stage": st.index, "shard": a.shard, "worker": a.worker,
                                  "n": infra_fail[a.shard], "ts": ts}
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
            elif kind == "no_workers":
                self.abort = {"kind": "no_workers", "stage": st.index, "shard": None, "worker": None,
                              "n": len(self.lives), "ts": ts, "idle": ts - self.all_dead_ts,
                              "elapsed": ts - START_TS}
                return "failed"
            elif kind == "stuck":
                stuck_running = True
            if stuck_running and completed == n - 1 and not queue:
                return "running"
        raise AssertionError(f"{self.sc.name}: stage {st.name} ran out of events")  # a scenario bug

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
        holder = by_kind.get("dead-holder")
        preempt = (not by_kind and ts - st.start < PREEMPT_BEFORE * expected and rnd.random() < sc.preempt)
        if crasher or (holder and attempt == 0) or preempt:
            life = crasher.secs * math.exp(rnd.gauss(0, 0.3)) if crasher else dur * rnd.uniform(0.3, 0.9)
            a.died = ts + life
            a.end = a.died + HEARTBEAT_TIMEOUT_S + rnd.uniform(0.5, 4.5)
            a.outcome, a.items = "infra", st.items[shard] * min(life / dur, 0.95)
            self.lives[w].oom_killed |= bool(crasher)
            comes_back = not (crasher and rnd.random() < crasher.stay_dead)
            push(a.end, "infra", a, comes_back)
            return
        if "stuck" in by_kind:
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
            push(ts + NO_WORKERS_TIMEOUT_S + self.rnd.uniform(0, 1), "no_workers")
