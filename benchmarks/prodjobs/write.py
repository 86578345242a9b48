"""A simulated run -> the evidence files of one variant: `job.log` (coordinator and worker
lines interleaved) or `coordinator.log`, `get_status.json` (the JobStatus repr in a JSON
string, as `iris actor call … get_status` prints it) and `list-tasks.json` (Iris tasks).
Every Zephyr line comes from `zephyr_debug.zephyrlog`, the one place lines are defined.
"""

from __future__ import annotations

import bisect
import json
import random
import time
from pathlib import Path

from benchmarks.prodjobs.scenarios import COORD, FORMS, STATUS
from benchmarks.prodjobs.simulate import KILLED_AFTER_S, START_TS, STATUS_EVERY_S, Attempt, Run
from zephyr_debug import zephyrlog as zl
from zephyr_debug.model import MAX_SHARD_FAILURES, MAX_SHARD_INFRA_FAILURES

EXTRA = {"heavy_import": "JAX version 0.8.0 available."}  # a library's line, not Zephyr's
RAY_ACTOR = "(tokenized/nemotron_cc/hq_actual_41c5a4e4 pid=49163, ip=10.128.0.167) "
COORD_URL = "http://10.164.1.18:30000"
LATE_RETRY_S = 30.0  # marin#4079: a late worker retries the coordinator this often
ITEM_BYTES = 350.0
GLOG_THREADS = {"coord": 140415056467649, "worker": 140415056467648, "spam": 140415056467650}
LEVEL_LETTER = {"DEBUG": "D", "INFO": "I", "WARNING": "W", "ERROR": "E"}

# Task error tracebacks (the user code frames differ per error).
_ZEPHYR_FRAMES = (
    '  File "/app/.venv/lib/python3.11/site-packages/zephyr/execution.py", line 1440, in _poll_loop\n'
    "    result, task_counters = self._execute_shard(task, config, stage_runner)\n"
    '  File "/app/.venv/lib/python3.11/site-packages/zephyr/runners.py", line 340, in execute\n'
    "    result = _run_stage_with_ctx(task, chunk_prefix, execution_id, ctx)\n"
)
ERRORS = {
    "transient": (
        '  File "/app/pipelines/fetch.py", line 88, in read_batch\n    return resp.read()\n',
        "ConnectionResetError: [Errno 104] Connection reset by peer",
    ),
    "crash": (
        '  File "/app/pipelines/dedupe.py", line 142, in parse_record\n    raise ValueError(msg)\n',
        "ValueError: bad record {shard}:{n}: schema mismatch (field 'ts' is a string)",
    ),
    "bug": (
        '  File "/app/pipelines/enrich.py", line 57, in enrich\n    lang = LANGS[doc["lang"]]\n',
        "KeyError: '{key}'",
    ),
    "oom": (
        (
            '  File "/app/.venv/lib/python3.11/site-packages/zephyr/runners.py", line 512, in _wait_child\n'
            "    raise MemoryError(msg)\n"
        ),
        "MemoryError: " + zl.OOM_ERROR,
    ),
}


def traceback_text(error: str, shard: int, n: int) -> tuple[str, str]:
    """(traceback block, its last line) of a task error."""
    frames, last = ERRORS[error]
    last = last.format(shard=shard, n=n, key=f"lang-{(shard * 7919) % 997:03x}")
    return "Traceback (most recent call last):\n" + _ZEPHYR_FRAMES + frames + last, last


class _Lines:
    """Log lines as (ts, side, level, logger, text, block): side is coord | worker | spam."""

    def __init__(self):
        self.rows: list[tuple] = []

    def add(
        self, ts: float, side: str, level: str, text: str, logger: str = "zephyr.execution", block: str | None = None
    ) -> None:
        self.rows.append((ts, len(self.rows), side, level, logger, text, block))


def write(run: Run, variant: str, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    lines = _lines(run, variant)
    name = "coordinator.log" if variant == COORD else "job.log"
    files = [out / name]
    _render(run, lines, files[0], worker_lines=variant != COORD)
    if variant == STATUS:
        files.append(out / "get_status.json")
        files[-1].write_text(json.dumps(status_repr(run)) + "\n", encoding="utf-8")
        files.append(out / "list-tasks.json")
        files[-1].write_text(json.dumps(list_tasks(run), indent=1) + "\n", encoding="utf-8")
    return files


# -- lines ------------------------------------------------------------------------------------
def _lines(run: Run, variant: str) -> _Lines:
    sc, ex, ids = run.scenario, run.exec_id, run.worker_ids
    exec_status, sep, exec_failures = FORMS[sc.form]
    fail_prefix = f"[{ex}] " if exec_failures else ""
    L = _Lines()
    L.add(START_TS + 0.3, "coord", "WARNING", zl.ALL_DEAD.format())  # before any worker registers: harmless
    for registered, life in enumerate(sorted(run.workers, key=lambda w: w.registered), 1):
        L.add(life.registered, "coord", "INFO", zl.REGISTERED.format(worker=ids[life.index], n=registered))
        for back in life.returns:
            L.add(back, "coord", "INFO", zl.REREGISTERING.format(worker=ids[life.index]))
    for life in run.workers:
        for died, found in zip(life.died, life.deaths, strict=True):
            L.add(found, "coord", "WARNING", zl.HEARTBEAT_TIMEOUT.format(worker=ids[life.index], secs=found - died))
    if sc.form == "ray":
        L.add(
            START_TS + 0.1,
            "coord",
            "INFO",
            zl.WORKER_GROUP.format(n=sc.workers, max=sc.workers, shards=run.stages[0].shards),
        )
    _execution_lines(run, L, exec_status, sep, fail_prefix)
    _end_lines(run, L, variant, fail_prefix)
    _known_mode_lines(run, L, variant, exec_status, sep, fail_prefix)
    return L


def _execution_lines(run: Run, L: _Lines, exec_status: bool, sep: str, fail_prefix: str) -> None:
    for st in run.stages:
        L.add(
            st.start,
            "coord",
            "INFO",
            zl.STAGE_START.format(exec=run.exec_id, stage=st.name, ops=_ops(run.scenario, st.index), n=st.shards),
        )
        _status_lines(run, st, L, exec_status, sep)
    for a in run.attempts:
        _attempt_lines(run, a, L, fail_prefix)


def _known_mode_lines(run: Run, L: _Lines, variant: str, exec_status: bool, sep: str, fail_prefix: str) -> None:
    """The lines of issue 17's modes that a single simulated execution does not print."""
    sc, ids = run.scenario, run.worker_ids
    if sc.hang_s and run.all_dead_ts is not None:  # marin#3598: every 5 s while it waits
        t = run.all_dead_ts + 0.5 + STATUS_EVERY_S
        while t < run.end:
            L.add(t, "coord", "WARNING", zl.ALL_DEAD.format())
            t += STATUS_EVERY_S
    for life in run.workers:
        if life.process_alive:  # marin#3041: what the worker printed while unpickling its first task
            L.add(life.registered + 1.0, "worker", "INFO", EXTRA["heavy_import"], logger="datasets")
    twin = run.twin
    if twin is None:
        pass
    elif twin.exec_id == run.exec_id:  # marin#3459: the driver's retry, then the same execution again
        if variant != COORD:
            coord = f"/alice/{ids[0].split('-p0-')[0]}-p0-a0-coord"
            L.add(
                twin.stages[0].start - 2.3,
                "coord",
                "WARNING",
                zl.RPC_RETRY.format(
                    op=f"{coord}/{coord.rsplit('/', 1)[1]}-0",
                    method="run_pipeline",
                    n=1,
                    max=5,
                    delay=0.11,
                    error="Request timed out",
                ),
                logger="iris.client",
            )
        _execution_lines(twin, L, exec_status, sep, fail_prefix)
    else:  # marin#3705 / #4199: a retry's coordinator; its first workers are killed at once
        for registered, life in enumerate(sorted(twin.workers, key=lambda w: w.registered), 1):
            first = life.registered - 150.0
            w = twin.worker_ids[life.index]
            L.add(first, "coord", "INFO", zl.REGISTERED.format(worker=w, n=registered))
            L.add(first + KILLED_AFTER_S + 120.0, "coord", "WARNING", zl.HEARTBEAT_TIMEOUT.format(worker=w, secs=120.0))
            L.add(life.registered, "coord", "INFO", zl.REREGISTERING.format(worker=w))
        _execution_lines(twin, L, exec_status, sep, fail_prefix)
    after = next((f for f in sc.faults if f.kind == "after-exit"), None)
    if after is not None:  # marin#4079: worker tasks launched after the coordinator exited
        group = ids[0].rsplit("-", 1)[0]
        for k in range(after.count):
            t = run.coord_end + 5.0 + k * LATE_RETRY_S / after.count
            while t < run.end:
                L.add(
                    t,
                    "worker",
                    "ERROR",
                    zl.CONNECT_ERROR.format(worker=f"{group}-{sc.workers + k}:0", url=COORD_URL),
                    logger="zephyr.execution",
                )
                t += LATE_RETRY_S


def _ops(sc, stage: int) -> str:
    return "reduce" if sc.stage_plan()[stage][1] == "reduce" else "map_worker"


def _attempt_lines(run: Run, a: Attempt, L: _Lines, fail_prefix: str) -> None:
    sc, st, w = run.scenario, run.stages[a.stage], run.worker_ids[a.worker]
    L.add(a.start, "worker", "INFO", zl.EXECUTING.format(worker=w, stage=st.name, shard=a.shard, attempt=a.attempt))
    L.add(
        a.start + 0.05,
        "worker",
        "INFO",
        zl.SHARD_START.format(exec=run.exec_id, shard=a.shard, total=st.shards, stage=st.name),
    )
    if sc.stage_plan()[a.stage][1] == "reduce":
        files = run.stages[a.stage - 1].shards if a.stage else 1
        L.add(
            a.start + 0.2,
            "worker",
            "INFO",
            zl.SCATTER_READER.format(
                shard=a.shard,
                files=files,
                chunks=files * 2,
                rows=max(1, round(st.items[a.shard] * 0.05)),
                item_bytes=ITEM_BYTES,
            ),
            logger="zephyr.shuffle",
        )
    if a.outcome == "done":
        L.add(a.end - 0.01, "worker", "INFO", zl.SHARD_COMPLETE.format(shard=a.shard))
        L.add(a.end, "worker", "INFO", zl.SHARD_DONE.format(worker=w, shard=a.shard, secs=a.end - a.start))
    elif a.outcome == "task":
        tasks, _, _ = a.requeue or (MAX_SHARD_FAILURES, 0, 0)
        block, _ = traceback_text(a.error, a.shard, tasks)
        L.add(a.end, "worker", "ERROR", zl.WORKER_ERROR.format(worker=w, shard=a.shard), block=block)
        if a.requeue is not None:
            L.add(
                a.end + 0.01,
                "coord",
                "WARNING",
                fail_prefix + zl.TASK_REQUEUE.format(shard=a.shard, worker=w, n=tasks, max=MAX_SHARD_FAILURES),
            )
    elif (
        a.outcome == "infra"
        and a.requeue is not None
        and not any(f.kind == "preempt-count" and f.shard == a.shard for f in sc.faults)
    ):  # older Zephyr: no such line
        tasks, infra, gen = a.requeue
        L.add(
            a.end + 0.01,
            "coord",
            "WARNING",
            fail_prefix
            + zl.INFRA_REQUEUE.format(
                shard=a.shard,
                worker=w,
                generation=gen,
                task=tasks,
                task_max=MAX_SHARD_FAILURES,
                infra=infra,
                infra_max=MAX_SHARD_INFRA_FAILURES,
            ),
        )


def _end_lines(run: Run, L: _Lines, variant: str, fail_prefix: str) -> None:
    ab, ids = run.abort, run.worker_ids
    if run.all_dead_ts is not None:
        L.add(run.all_dead_ts + 0.5, "coord", "WARNING", zl.ALL_DEAD.format())
    if ab is not None:
        fatal = fatal_error(run)
        if ab["kind"] in ("task", "preempt"):
            L.add(
                ab["ts"] + 0.01,
                "coord",
                "ERROR",
                fail_prefix
                + zl.TASK_ABORT.format(shard=ab["shard"], n=ab["n"], max=MAX_SHARD_FAILURES, worker=ids[ab["worker"]]),
            )
        elif ab["kind"] == "infra":
            L.add(
                ab["ts"] + 0.01,
                "coord",
                "ERROR",
                fail_prefix
                + zl.INFRA_ABORT.format(
                    shard=ab["shard"], infra=ab["n"], infra_max=MAX_SHARD_INFRA_FAILURES, worker=ids[ab["worker"]]
                ),
            )
        if variant != COORD:  # the driver's (fray's) line: not in the coordinator job's own log
            first, _, rest = fatal.partition("\n")
            L.add(
                ab["ts"] + 0.2,
                "coord",
                "WARNING",
                zl.PIPELINE_FAILED.format(error=first),
                logger="fray.local_backend",
                block=rest or None,
            )
    if run.state != "running":
        items = sum(a.items for a in run.attempts if a.outcome == "done")
        counters = {"zephyr/item_count": int(items), "zephyr/bytes_processed": int(items * ITEM_BYTES)}
        end = run.coord_end or run.end
        L.add(end - 0.5, "coord", "INFO", zl.SHUTDOWN.format())
        L.add(end - 0.4, "coord", "INFO", zl.FINAL_COUNTERS.format(counters=repr(counters)))


def fatal_error(run: Run) -> str:
    ab, ids = run.abort, run.worker_ids
    if ab["kind"] == "preempt":  # older Zephyr: the preemptions counted as failures; there is no task error
        return zl.FATAL_TASK.format(
            shard=ab["shard"], n=ab["n"], max=MAX_SHARD_FAILURES, worker=ids[ab["worker"]], error="None"
        )
    if ab["kind"] == "task":
        last = next(a for a in reversed(run.attempts) if a.outcome == "task" and a.shard == ab["shard"])
        block, _ = traceback_text(last.error, last.shard, ab["n"])
        return zl.FATAL_TASK.format(
            shard=ab["shard"], n=ab["n"], max=MAX_SHARD_FAILURES, worker=ids[ab["worker"]], error=block
        )
    if ab["kind"] == "infra":
        return zl.FATAL_INFRA.format(
            shard=ab["shard"], n=ab["n"], max=MAX_SHARD_INFRA_FAILURES, worker=ids[ab["worker"]]
        )
    return zl.FATAL_NO_WORKERS.format(idle=ab["idle"], elapsed=ab["elapsed"], registered=ab["n"])


def _status_lines(run: Run, st, L: _Lines, exec_status: bool, sep: str) -> None:
    """Zephyr's 5-second status line (+ retried histogram) and `tasks completed` lines of a stage."""
    sc, ex = run.scenario, run.exec_id
    mine = [a for a in run.attempts if a.stage == st.index]
    done_ends = sorted(a.end for a in mine if a.outcome == "done")
    for i, end in enumerate(done_ends, 1):
        L.add(end + 0.02, "coord", "INFO", zl.TASKS_COMPLETED.format(stage=st.name, completed=i, total=st.shards))
    starts = sorted(a.start for a in mine)
    ends = sorted(a.end for a in mine if a.end is not None)
    fails = sorted(a.end for a in mine if a.outcome in ("task", "infra") and a.requeue is not None)
    stop = st.end if st.end is not None else run.end
    reduce = sc.stage_plan()[st.index][1] == "reduce"
    cap = sorted(st.items)[len(st.items) // 2] * 1.5 if reduce else float("inf")
    by_start = sorted(mine, key=lambda a: a.start)
    done_items = sorted((a.end, min(a.items, cap)) for a in mine if a.outcome == "done")
    cum = [0.0]
    for _, v in done_items:
        cum.append(cum[-1] + v)
    workers = _worker_counts(run)
    status_fmt = (
        zl.STATUS_WORKERS_ONLY
        if sc.form == "ray"
        else zl.STATUS.fmt
        if exec_status
        else zl.STATUS.fmt.removeprefix("[{exec}] ")
    )
    throughput_fmt = sep + zl.THROUGHPUT[1:]
    active: list[Attempt] = []
    nxt, t, first = 0, st.start, True
    spam_rnd = random.Random(f"{sc.name}/{st.index}/spam")
    while t < stop:
        while nxt < len(by_start) and by_start[nxt].start <= t:
            active.append(by_start[nxt])
            nxt += 1
        active = [a for a in active if a.end is None or a.end > t]
        completed = bisect.bisect_right(done_ends, t)
        in_flight = bisect.bisect_right(starts, t) - bisect.bisect_right(ends, t)
        queued = st.shards - completed - in_flight
        alive, registered, dead = workers(t)
        line = status_fmt.format(
            exec=ex,
            stage=st.name,
            completed=completed,
            total=st.shards,
            in_flight=in_flight,
            queued=queued,
            alive=alive,
            registered=registered,
            dead=dead,
        )
        if sc.counters and not first:
            items = cum[bisect.bisect_right(done_items, (t, float("inf")))] + sum(_partial(a, t, cap) for a in active)
            elapsed = t - st.start
            line += throughput_fmt.format(
                items=zl.human_count(round(items)),
                item_rate=zl.human_count(round(items / elapsed, 1)),
                bytes=zl.human_bytes(items * ITEM_BYTES),
                byte_rate=zl.human_bytes(items * ITEM_BYTES / elapsed),
            )
        L.add(t, "coord", "INFO", line)
        retried = bisect.bisect_right(fails, t)
        if retried:
            counts = _retried_histogram([a for a in mine if a.requeue is not None and a.end <= t])
            L.add(t + 0.001, "coord", "WARNING", zl.RETRIED.format(exec=ex, counts=counts))
        if queued == 0 and alive > in_flight and sc.spam_per_s:
            for k in range(int(sc.spam_per_s * STATUS_EVERY_S)):
                L.add(
                    t + k / sc.spam_per_s,
                    "spam",
                    "DEBUG",
                    zl.PULL_TASK_OPERATION.format(
                        op=f"{spam_rnd.getrandbits(128):032x}", actor=f"{run.worker_ids[0].split('-p0-')[0]}-p0-coord"
                    ),
                    logger="iris.actor.server",
                )
        first = False
        t += STATUS_EVERY_S


def _partial(a: Attempt, t: float, cap: float) -> float:
    """Items an in-flight attempt has counted by `t`: linear progress, frozen when stuck or dead,
    at most `cap` (a reduce stage counts outputs per key, so a hot shard counts what its peers do)."""
    stop = a.frozen_at or a.died or a.end
    return min(a.items, cap) * max(0.0, min(t, stop) - a.start) / max(stop - a.start, 1e-9)


def _retried_histogram(failed: list[Attempt]) -> str:
    """`{attempts: shard count}` over shards that were retried."""
    per_shard: dict[int, int] = {}
    for a in failed:
        per_shard[a.shard] = max(per_shard.get(a.shard, 0), a.requeue[2])
    hist: dict[int, int] = {}
    for n in per_shard.values():
        hist[n] = hist.get(n, 0) + 1
    return repr(dict(sorted(hist.items())))


def _worker_counts(run: Run):
    """`counts(t)` -> (alive, registered, dead) as the coordinator counts them at time t."""
    events = []
    for life in run.workers:
        events.append((life.registered, 1, 1, 0))
        if life.shutdown is not None:
            events.append((life.shutdown, 0, -1, 1))
        for i, found in enumerate(life.deaths):
            events.append((found, 0, -1, 1))
            if i < len(life.returns):
                events.append((life.returns[i], 0, 1, -1))
    events.sort()
    times = [e[0] for e in events]
    cum = [(0, 0, 0)]
    for _, reg, alive, dead in events:
        r, a, d = cum[-1]
        cum.append((r + reg, a + alive, d + dead))

    def counts(t: float) -> tuple[int, int, int]:
        r, a, d = cum[bisect.bisect_right(times, t)]
        return a, r, d

    return counts


# -- rendering --------------------------------------------------------------------------------
def _render(run: Run, L: _Lines, path: Path, worker_lines: bool) -> None:
    sc = run.scenario
    first_done = min((a.end for a in run.attempts if a.outcome == "done"), default=float("inf"))
    group = run.worker_ids[0].rsplit("-", 1)[0]
    with open(path, "w", encoding="utf-8") as out:
        for ts, _, side, level, logger, text, block in sorted(L.rows, key=lambda r: (r[0], r[1])):
            if (side == "worker" and not worker_lines) or ts > run.end:
                continue
            style = sc.prefix
            if style in ("mixed", "iris"):
                style = "glog" if ts > first_done else "python"
            if style == "ray":
                head = f"{RAY_ACTOR}{zl.timestamp(ts)} {level} execution.py:1028 "
            elif style == "python":
                head = f"{zl.timestamp(ts)} {level} {logger}: "
            else:
                head = (
                    f"{LEVEL_LETTER[level]}{time.strftime('%Y%m%d %H:%M:%S', time.gmtime(ts))} "
                    f"{GLOG_THREADS[side]} {logger} "
                )
            if sc.prefix == "iris":
                task = f"/alice/{group}/0" if side == "worker" else f"/alice/{group.split('-p0-')[0]}-p0-coord/0"
                head = f"[{time.strftime('%H:%M:%S', time.gmtime(ts))}] task={task} | {head}"
            out.write(head + text + "\n")
            if block:
                out.write(block.rstrip("\n") + "\n")


# -- get_status and list-tasks ----------------------------------------------------------------
def worker_state(run: Run, index: int, t: float) -> str | None:
    life = run.workers[index]
    if t < life.registered:
        return None
    if life.shutdown is not None and life.shutdown <= t:
        return "dead"
    for i, found in enumerate(life.deaths):
        if found <= t and (i >= len(life.returns) or life.returns[i] > t):
            return "failed"
    busy = any(a.worker == index and a.start <= t and (a.end is None or a.end > t) for a in run.attempts)
    return "busy" if busy else "ready"


def status_repr(run: Run) -> str:
    """The JobStatus repr at the capture time (what `iris actor call … get_status` prints, as a string)."""
    t = run.end - 0.5
    st = run.stages[-1]
    mine = [a for a in run.attempts if a.stage == st.index]
    completed = sum(1 for a in mine if a.outcome == "done" and a.end <= t)
    in_flight = sum(1 for a in mine if a.start <= t and (a.end is None or a.end > t))
    retries = sum(1 for a in mine if a.requeue is not None and a.end <= t)
    workers = {}
    for life in run.workers:
        state = worker_state(run, life.index, t)
        if state is not None:
            last = max([x for x in (life.registered, *life.returns) if x <= t], default=life.registered)
            seen = round(t - max(last, t - 2.5 if state != "failed" else last), 1)
            if state == "failed":
                seen = round(t - life.died[-1], 1)
            workers[run.worker_ids[life.index]] = {"state": state, "last_seen_ago": seen}
    fatal = fatal_error(run) if run.abort else None
    return (
        f"JobStatus(stage={st.name!r}, completed={completed}, total={st.shards}, retries={retries}, "
        f"in_flight={in_flight}, queue_depth={st.shards - completed - in_flight}, "
        f"done={run.state != 'running'}, fatal_error={fatal!r}, workers={workers!r})"
    )


def list_tasks(run: Run) -> dict:
    """Iris `list-tasks` of the worker job, with each task's resource usage (as the workers report it)."""
    rnd = random.Random(f"{run.scenario.name}/tasks")
    group = run.worker_ids[0].rsplit("-", 1)[0]
    tasks = []
    for life in run.workers:
        gone = len(life.deaths) > len(life.returns) and not life.process_alive
        oom = life.oom_killed
        error = "Container was OOM killed by the kernel" if oom else ("Worker lost (preempted)" if life.deaths else "")
        attempts = [
            {
                "attempt_id": k,
                "state": "TASK_STATE_FAILED" if oom else "TASK_STATE_PREEMPTED",
                "exit_code": 137 if oom else -1,
                "error": error,
            }
            for k in range(len(life.deaths))
        ]
        memory = rnd.lognormvariate(7.8, 0.2)
        tasks.append(
            {
                "task_id": f"/alice/{group}/{life.index}",
                "state": ("TASK_STATE_FAILED" if oom else "TASK_STATE_WORKER_FAILED")
                if gone
                else "TASK_STATE_SUCCEEDED"
                if life.shutdown is not None
                else "TASK_STATE_RUNNING",
                "worker_id": f"iris-w-{life.index}",
                "worker_address": f"10.0.{life.index // 250}.{life.index % 250}:10001",
                "exit_code": (137 if oom else -1) if gone else 0,
                "error": error if gone else "",
                "started_at": {"epoch_ms": int((life.returns[-1] if life.returns else life.registered) * 1000)},
                "current_attempt_id": len(life.deaths),
                "attempts": attempts,
                "resource_usage": {
                    "memory_mb": str(0 if gone else int(memory)),
                    "disk_mb": str(int(rnd.uniform(800, 2400))),
                    "cpu_millicores": 0 if gone else int(rnd.uniform(600, 990)),
                    "memory_peak_mb": str(16384 if oom else int(memory * 1.3)),
                    "process_count": 1,
                },
            }
        )
    return {"tasks": tasks}
