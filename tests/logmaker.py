"""Random but well-formed Zephyr job logs (every line from `zephyrlog`'s writer formats), and
`evidence_diff`: every difference between two `model.Evidence`.

`make_job(Knobs(...))` simulates a small job (stages, workers, shards; task errors with their
tracebacks, infra requeues, aborts) and returns its files' text: one job log, or a coordinator
log plus worker logs (a worker moves to the next log after an infra failure). Lines carry mixed
prefixes (Python logging mostly, glog, Iris, none), pull_task spam and lines no reader folds and,
at a rate `odd`, what a real log holds now and then: a done line with no Executing, a line
written twice, the clock going backwards, a date that is not one, six-digit milliseconds, a
completed count lower than the last, integers too long for int64, durations with more digits
than a float holds. `write_job` may also cut each file near both ends.
"""

from __future__ import annotations

import calendar
import dataclasses
import math
import random
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from zephyr_debug import zephyrlog as zl
from zephyr_debug.model import MAX_SHARD_FAILURES, Evidence

EXEC = "mk-20261202-235900-0a1b2c3d"
START = float(calendar.timegm((2026, 12, 2, 21, 59, 16)))
NEAR_MIDNIGHT = float(calendar.timegm((2026, 12, 2, 23, 59, 40)))  # dates change inside the log
INFRA_MAX = 3  # infra failures of a shard in flight before the abort (the PyPI release's limit)
MAX_REPORTED = 4  # differing items / rows reported per field before "… and N more"


@dataclass(frozen=True)
class Knobs:
    """What one generated job looks like (hypothesis draws these; `seed` draws the rest)."""

    seed: int = 0
    stages: int = 2
    shards: int = 20
    workers: int = 4
    worker_files: int = 0  # 0: one job.log; else coordinator.log + this many worker logs
    task_errors: float = 0.05  # per attempt
    infra: float = 0.03  # per attempt
    abort: str = ""  # "task" / "infra": the last stage's first shard fails until the job aborts
    odd: float = 0.0  # rate of the odd lines (module docstring)
    foreign: float = 0.1  # share of lines with a glog / Iris / no prefix
    spam: float = 0.1  # pull_task DEBUG lines per event
    midnight: bool = False  # start a few seconds before midnight
    shutdown: bool = True
    cut: bool = False  # files cut at a random byte near both ends (a capture of a log being written)


def make_job(k: Knobs) -> dict[str, str]:
    """File name -> text of one generated job."""
    return _Job(k).run()


def write_job(k: Knobs, directory: Path) -> list[Path]:
    """The job's files under `directory`, in an order drawn from the seed (coordinator log not
    always first)."""
    rnd = random.Random(k.seed + 1)
    paths = []
    for name, text in make_job(k).items():
        data = text.encode("utf-8")
        if k.cut:
            data = data[rnd.randrange(min(len(data), 200) + 1) : len(data) - rnd.randrange(min(len(data), 200) + 1)]
        path = directory / name
        path.write_bytes(data)
        paths.append(path)
    rnd.shuffle(paths)
    return paths


def worker_id(i: int) -> str:
    return f"zephyr-mk-p0-workers-a0-{i}:0"


class _Job:
    def __init__(self, k: Knobs):
        self.k, self.rnd = k, random.Random(k.seed)
        self.ts = NEAR_MIDNIGHT if k.midnight else START
        self.files: dict[str, list[str]] = {"coordinator.log" if k.worker_files else "job.log": []}
        for f in range(k.worker_files):
            self.files[f"worker-{f}.log"] = []
        self.moved: dict[int, int] = {}  # worker -> how many worker logs it moved on (after an infra failure)

    # -- lines ---------------------------------------------------------------------------------
    def _file(self, side: str, worker: int | None) -> str:
        names = list(self.files)
        if side == "worker" and self.k.worker_files and worker is not None:
            return names[1 + (worker + self.moved.get(worker, 0)) % self.k.worker_files]
        return names[0]

    def _prefix(self, level: str, logger: str) -> str:
        rnd, ts = self.rnd, self.ts
        if rnd.random() < self.k.odd / 4:
            return rnd.choice(
                [
                    f"2026-13-45 {time.strftime('%H:%M:%S', time.gmtime(ts))},000 {level} {logger}: ",
                    f"{zl.timestamp(ts)}{rnd.randrange(1000):03d} {level} {logger}: ",  # six-digit ms
                ]
            )
        if rnd.random() >= self.k.foreign:
            return f"{zl.timestamp(ts)} {level} {logger}: "
        clock = time.strftime("%H:%M:%S", time.gmtime(ts))
        glog = (
            f"{level[0]}{time.strftime('%Y%m%d', time.gmtime(ts))} {clock}.{int(ts * 1e6) % 1000000:06d} 1404 {logger} "
        )
        iris = f"[{clock}] task=/alice/mk/0 | "
        return rnd.choice([glog, iris, iris + f"{zl.timestamp(ts)} {level} {logger}: ", ""])

    def emit(self, side: str, text: str, level: str = "INFO", worker: int | None = None, block: str = "") -> None:
        logger = "zephyr.worker" if side == "worker" else self.rnd.choice(["zephyr.execution", "zephyr-coord.x"])
        line = self._prefix(level, logger) + text + "\n" + block
        lines = self.files[self._file(side, worker)]
        lines.append(line)
        rnd = self.rnd
        if rnd.random() < self.k.odd:  # the same line twice (Executing twice, done twice, ...)
            lines.append(line)
        if rnd.random() < self.k.odd / 2:  # the clock goes backwards
            self.ts -= rnd.uniform(0.5, 30.0)
        if rnd.random() < self.k.spam:
            op = f"{rnd.getrandbits(32):08x}"
            self.files[self._file("worker", worker)].append(
                self._prefix("DEBUG", "iris.actor") + zl.PULL_TASK_OPERATION.format(op=op, actor="coord") + "\n"
            )
        if rnd.random() < self.k.foreign / 4:  # a line no reader folds
            self.files[self._file(side, worker)].append(
                self._prefix(level, logger) + rnd.choice(["JAX version 0.8.0 available.", "loading shard"]) + "\n"
            )

    def tick(self, mean: float = 0.3) -> None:
        self.ts += self.rnd.expovariate(1 / mean)

    # -- the job -------------------------------------------------------------------------------
    def run(self) -> dict[str, str]:
        k = self.k
        self.emit("coord", zl.PIPELINE.format(exec=EXEC))
        self.emit("coord", zl.ALL_DEAD.format(), "WARNING")
        for w in range(k.workers):
            self.tick(0.05)
            self.emit("coord", zl.REGISTERED.format(worker=worker_id(w), n=w + 1))
        aborted = False
        for s in range(k.stages):
            name = self.rnd.choice([f"stage{s}-Map → Write", f"stage{s}-Reduce", f"stage{s}-Map"])
            aborted = self.stage(name, abort=k.abort if s == k.stages - 1 else "")
            if aborted:
                break
        if k.shutdown or aborted:
            counters = {f"zephyr/user/counter_{i}": self.rnd.randrange(10**9) for i in range(self.rnd.randrange(60))}
            self.emit("coord", zl.FINAL_COUNTERS.format(counters=counters))  # a long line
            self.emit("coord", zl.SHUTDOWN.format())
        return {name: "".join(lines) for name, lines in self.files.items()}

    def stage(self, stage: str, abort: str) -> bool:
        """One stage; True when it aborted the job."""
        k, rnd = self.k, self.rnd
        self.tick()
        self.emit("coord", zl.STAGE_START.format(exec=EXEC, stage=stage, ops="map", n=k.shards))
        queue = deque(range(k.shards))
        free, running = list(range(k.workers)), {}
        attempts, errors, done, items = {}, {}, 0, 0
        while queue or running:
            while queue and free:
                w, shard = free.pop(rnd.randrange(len(free))), queue.popleft()
                running[w] = shard
                self.tick(0.05)
                a = attempts.get(shard, 0)
                self.emit(
                    "worker", zl.EXECUTING.format(worker=worker_id(w), stage=stage, shard=shard, attempt=a), worker=w
                )
                if rnd.random() < 0.2:  # lines Zephyr prints that no reader folds
                    line = zl.SHARD_START.format(exec=EXEC, shard=shard, total=k.shards, stage=stage)
                    self.emit("worker", line, worker=w)
            w = rnd.choice(list(running))
            shard = running.pop(w)
            self.tick()
            outcome = rnd.random()
            if abort and shard == 0:
                outcome = 0.0 if abort == "task" else k.task_errors
            if outcome < k.task_errors:
                errors[shard] = errors.get(shard, 0) + 1
                if self._task_error(w, shard, errors[shard]):
                    return True
                attempts[shard] = attempts.get(shard, 0) + 1
                queue.append(shard)
                free.append(w)
            elif outcome < k.task_errors + k.infra:
                attempts[shard] = attempts.get(shard, 0) + 1
                if self._infra(w, shard, attempts[shard], errors.get(shard, 0), abort and shard == 0):
                    return True
                queue.append(shard)
                free.append(w)
            else:
                secs = rnd.uniform(0.5, 90.0)
                if rnd.random() < k.odd / 4:
                    secs = rnd.uniform(1e14, 9e14)  # 17 significant digits in `%.2f`
                self.emit("worker", zl.SHARD_DONE.format(worker=worker_id(w), shard=shard, secs=secs), worker=w)
                done += 1
                items += rnd.randrange(900, 1100)
                free.append(w)
            if rnd.random() < k.odd:  # a done line no Executing line opened
                ghost = rnd.randrange(k.shards + 3)
                self.emit("worker", zl.SHARD_DONE.format(worker=worker_id(w), shard=ghost, secs=1.0), worker=w)
            self._status(stage, done, len(running), len(queue), items)
            if rnd.random() < 0.05:
                counts = "{" + ", ".join(f"{a}: {n}" for a, n in sorted(_histogram(attempts).items())) + "}"
                self.emit("coord", zl.RETRIED.format(exec=EXEC, counts=counts))
        if rnd.random() < 0.5:
            self.emit("coord", zl.TASKS_COMPLETED.format(stage=stage, completed=done, total=k.shards))
        return False

    def _status(self, stage: str, done: int, in_flight: int, queued: int, items: int) -> None:
        k, rnd = self.k, self.rnd
        fields = dict(
            exec=EXEC,
            stage=stage,
            completed=done,
            total=k.shards,
            in_flight=in_flight,
            queued=queued,
            alive=k.workers,
            registered=k.workers,
            dead=0,
        )
        if rnd.random() < k.odd / 4:
            fields["completed"] = rnd.choice([10**19 + 7, 123456789012345678])  # past / at int64's digits
        elif rnd.random() < k.odd / 2:
            fields["completed"] = max(done - rnd.randrange(1, 4), 0)  # an older count, printed late
        form = rnd.random()
        if form < 0.15:  # the oldest form: `…, N workers`
            text = zl.STATUS_WORKERS_ONLY.format(**fields)
        else:
            text = zl.STATUS.format(**fields)
            if form < 0.35:  # older: no `[exec] `
                text = text.split("] ", 1)[1]
        if rnd.random() < 0.7:
            tail = zl.THROUGHPUT.format(
                items=zl.human_count(items),
                item_rate=f"{rnd.uniform(1, 99):.1f}",
                bytes=zl.human_bytes(items * 350.0),
                byte_rate=zl.human_bytes(rnd.uniform(1, 1e6)),
            )
            text += tail if rnd.random() < 0.5 else "." + tail[1:]
        self.emit("coord", text)

    def _task_error(self, w: int, shard: int, n: int) -> bool:
        """A worker's error (with its traceback) and the coordinator's requeue; True: the abort."""
        rnd = self.rnd
        last = rnd.choice(
            [f"ValueError: bad record in shard {shard}", "MemoryError: " + zl.OOM_ERROR.format(shard=shard)]
        )
        block = (
            "Traceback (most recent call last):\n"
            '  File "/app/zephyr/execution.py", line 812, in run_shard\n'
            "    result = fn(shard)\n"
            f"{last}\n"
        )
        self.emit("worker", zl.WORKER_ERROR.format(worker=worker_id(w), shard=shard), "ERROR", w, block)
        self.tick(0.05)
        exec_ = f"[{EXEC}] " if rnd.random() < 0.5 else ""
        if n >= MAX_SHARD_FAILURES:
            text = zl.TASK_ABORT.format(shard=shard, n=n, max=MAX_SHARD_FAILURES, worker=worker_id(w))
        else:
            text = zl.TASK_REQUEUE.format(shard=shard, worker=worker_id(w), n=n, max=MAX_SHARD_FAILURES)
        self.emit("coord", exec_ + text, "WARNING")
        return n >= MAX_SHARD_FAILURES

    def _infra(self, w: int, shard: int, generation: int, task_errors: int, fatal: bool) -> bool:
        """A heartbeat timeout, the infra requeue, the worker back; True: the infra abort (a
        `fatal` shard's third)."""
        rnd = self.rnd
        self.tick(2.0)
        self.emit("coord", zl.HEARTBEAT_TIMEOUT.format(worker=worker_id(w), secs=rnd.uniform(120, 140)), "WARNING")
        text = zl.INFRA_REQUEUE.format(
            shard=shard,
            worker=worker_id(w),
            generation=generation,
            task=task_errors,
            task_max=MAX_SHARD_FAILURES,
            infra=generation,
            infra_max=INFRA_MAX,
        )
        if fatal and generation >= INFRA_MAX:
            text = zl.INFRA_ABORT.format(shard=shard, infra=generation, infra_max=INFRA_MAX, worker=worker_id(w))
        self.emit("coord", text, "WARNING")
        self.tick(0.5)
        self.emit("coord", zl.REGISTERED.format(worker=worker_id(w), n=self.k.workers))
        self.moved[w] = self.moved.get(w, 0) + 1
        return fatal and generation >= INFRA_MAX


def _histogram(attempts: dict[int, int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for a in attempts.values():
        out[a + 1] = out.get(a + 1, 0) + 1
    return out


# -- evidence_diff ---------------------------------------------------------------------------
def evidence_diff(a: Evidence, b: Evidence) -> list[str]:
    """Every difference between two Evidence, one line each (`field[i].sub: a != b`); [] = equal.
    Frames are compared cell by cell: None and NaN are both missing, 3 equals 3.0 (a dtype
    that differs is no difference where the values are equal)."""
    out: list[str] = []
    for f in dataclasses.fields(Evidence):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, pd.DataFrame) and isinstance(y, pd.DataFrame):
            out += _frame_diff(f.name, x, y)
        else:
            out += _value_diff(f.name, x, y)
    return out


def _missing(v) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and math.isnan(v)) or v is pd.NA or v is pd.NaT


def _value_diff(path: str, x, y) -> list[str]:
    if _missing(x) and _missing(y):
        return []
    if dataclasses.is_dataclass(x) and type(x) is type(y):
        return [
            d
            for f in dataclasses.fields(x)
            for d in _value_diff(f"{path}.{f.name}", getattr(x, f.name), getattr(y, f.name))
        ]
    if isinstance(x, dict) and isinstance(y, dict):
        out = [f"{path}: key {k!r} only in {'a' if k in x else 'b'}" for k in x.keys() ^ y.keys()]
        if list(x) != list(y) and not out:
            out.append(f"{path}: key order {list(x)} != {list(y)}")
        return out + _capped(path, [_value_diff(f"{path}[{k!r}]", x[k], y[k]) for k in x if k in y])
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        out = [] if len(x) == len(y) else [f"{path}: {len(x)} items != {len(y)}"]
        return out + _capped(
            path, [_value_diff(f"{path}[{i}]", u, v) for i, (u, v) in enumerate(zip(x, y, strict=False))]
        )
    if _missing(x) or _missing(y) or (type(x) is not type(y) and not _numbers(x, y)) or x != y:
        return [f"{path}: {x!r} != {y!r}"]
    return []


def _numbers(x, y) -> bool:
    kinds = (int, float, np.integer, np.floating)
    return isinstance(x, kinds) and isinstance(y, kinds) and not isinstance(x, bool) and not isinstance(y, bool)


def _capped(path: str, diffs: list[list[str]]) -> list[str]:
    """The first MAX_REPORTED non-empty item diffs, then how many more items differ."""
    found = [d for d in diffs if d]
    out = [line for d in found[:MAX_REPORTED] for line in d]
    if len(found) > MAX_REPORTED:
        out.append(f"{path}: … and {len(found) - MAX_REPORTED} more items differ")
    return out


def _frame_diff(name: str, x: pd.DataFrame, y: pd.DataFrame) -> list[str]:
    out = []
    if list(x.columns) != list(y.columns):
        out.append(f"{name}: columns {list(x.columns)} != {list(y.columns)}")
    if len(x) != len(y):
        out.append(f"{name}: {len(x)} rows != {len(y)}")
    if len(x) == len(y) and not x.index.equals(y.index):
        out.append(f"{name}: index differs")
    n = min(len(x), len(y))
    for col in [c for c in x.columns if c in y.columns]:
        u, v = x[col].iloc[:n], y[col].iloc[:n]
        if u.reset_index(drop=True).equals(v.reset_index(drop=True)):
            continue
        rows = [i for i, (p, q) in enumerate(zip(u.tolist(), v.tolist(), strict=True)) if _value_diff("", p, q)]
        out += [f"{name}[{i}].{col}: {u.iloc[i]!r} != {v.iloc[i]!r}" for i in rows[:MAX_REPORTED]]
        if len(rows) > MAX_REPORTED:
            out.append(f"{name}.{col}: … and {len(rows) - MAX_REPORTED} more rows differ")
    return out
