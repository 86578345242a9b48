"""Folds parsed Zephyr log events (in log order) into an Evidence: status series, stages,
shard attempts, worker states, crashes, abort reason. Shared by every log-text source."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable

from zephyr_debug.model import (
    ATTEMPT_COLUMNS,
    INFRA,
    STATUS_COLUMNS,
    TASK,
    WORKER_COLUMNS,
    ConnectError,
    Crash,
    Evidence,
    LogFact,
    LogFacts,
    RpcRetry,
    StageInfo,
    StageStart,
    StatusExec,
    WorkerGroup,
    frame,
)
from zephyr_debug.sources.compact import AttemptRow, AttemptTable, StatusSeries
from zephyr_debug.sources.jobstatus import parse_literal
from zephyr_debug.zephyrlog import (
    COARSEST_S,
    FAILURE_KINDS,
    FATAL_INFRA,
    FATAL_TASK,
    RETURNCODE_RE,
    STAGE_INDEX_RE,
    human_bytes_number,
    human_number,
    readable,
)

RETRIED_RE = re.compile(r"(\d+): (\d+)")
# Status-line columns <- the zephyrlog.STATUS group that fills them.
STATUS_FIELDS = (
    ("completed", "completed"),
    ("total", "total"),
    ("in_flight", "in_flight"),
    ("queue_depth", "queued"),
    ("alive", "alive"),
    ("registered", "registered"),
    ("dead", "dead"),
)


class Timeline:
    def __init__(self, job: str, source: str):
        self.reset(job, source)

    def reset(self, job: str, source: str) -> None:
        """Nothing folded yet: the state before the first line of `job`'s evidence."""
        self.job, self.source = job, source
        self.events = 0
        self.timed = 0  # events with a time
        self.bad = 0
        self.notes: list[str] = []  # warnings found while scanning (log spam, ...)
        self.status = StatusSeries()  # downsampled per stage; [-1] is the newest row
        self.stages: dict[str, StageInfo] = {}
        self.attempts = AttemptTable()  # (stage, shard, attempt) -> row; recent(stage, shard)
        self.holding: dict[str, tuple] = {}  # worker -> key of the attempt it runs
        self.workers: dict[str, dict] = {}
        self.crashes: list[Crash] = []
        self.counters: dict[str, float] = {}
        self.fatal: str | None = None
        self.fatal_detail: str | None = None
        self.shutdown = False
        self.progress: float | None = None
        self.last_ts: float | None = None
        self.all_dead: list[float] = []
        self.registered_any = False
        self.worker_events: list[tuple[float, str, str]] = []
        self.source_now = source
        self.facts = LogFacts()
        self.handlers: dict[str, Callable[..., None]] = {}  # message name -> its on_<name> method
        self.runs: list[str] = []  # execution ids in the order their pipelines started
        self.earlier_runs: list[str] = []  # executions that ended before the one read began (not read)

    # -- events --------------------------------------------------------------------------
    def event(self, name: str, ts: float | None, g: dict, source: str, line: int | None, block: str | None) -> None:
        if not readable(name, g):  # a shard number past int64, a `done in 1.2.3s`
            self.bad += 1
            return
        self.seen(ts, source)
        handler = self.handlers.get(name)
        if handler is None:
            handler = self.handlers[name] = getattr(self, "on_" + name)
        handler(ts, g, source, line, block)

    def seen(self, ts: float | None, source: str) -> None:
        """Any event line: counted, its source and time noted."""
        self.events += 1
        self.timed += ts is not None
        self.source_now = source
        if ts is not None and (self.last_ts is None or ts > self.last_ts):
            self.last_ts = ts

    def seen_rows(self, n: int, newest: float, source: str) -> None:
        """`seen` for n timed event lines at once (the bulk fold), `newest` the latest time."""
        self.events += n
        self.timed += n
        self.source_now = source
        if self.last_ts is None or newest > self.last_ts:
            self.last_ts = newest

    def held(self, worker: str) -> tuple | None:
        """The (stage, shard, attempt) key of the attempt `worker` runs, from its Executing line."""
        return self.holding.get(worker)

    def hold(self, worker: str, key: tuple | None) -> None:
        """`worker` runs attempt `key` (an Executing line), or nothing (None: done, failed, lost)."""
        if key is None:
            self.holding.pop(worker, None)
        else:
            self.holding[worker] = key

    def seen_elsewhere(self, worker: str, source: str) -> bool:
        """Whether `worker`'s state so far came from a source other than `source`."""
        w = self.workers.get(worker)
        return w is not None and w.get("source") != source and w["last_seen"] is not None

    def named(self, exec_: str | None) -> None:
        """A status line's execution id names the job."""
        if exec_ is not None:
            self.job = exec_

    def progressed(self, ts: float | None, *, at_least: bool = False) -> None:
        """The job made progress at `ts` (a done line, a completion count); `at_least`: never
        earlier than the progress known (a status line's rising count)."""
        if ts is not None:
            self.progress = max(self.progress or ts, ts) if at_least else ts

    def on_status(self, ts, g, *_):
        row = {col: int(g[key]) if key in g else None for col, key in STATUS_FIELDS}
        if row["registered"] is None and "workers" in g:  # older form: `…, 488 workers`
            row["registered"] = int(g["workers"])
        self.status_line(
            ts, g["stage"], g.get("exec"), row, human_number(g.get("items")), human_bytes_number(g.get("bytes"))
        )

    def status_line(
        self, ts, stage: str, exec_: str | None, row: dict, items: float | None, size: float | None = None
    ) -> None:
        """A status line: `row` holds its STATUS_FIELDS columns (None where it has none)."""
        self.named(exec_)
        self.stage(stage, row["total"] or 0)
        self.fact(StatusExec(ts, exec_, row["alive"]), runs=True)
        last = self.status[-1] if self.status else None
        if last is not None and last["stage"] == stage and row["completed"] > last["completed"]:
            self.progressed(ts, at_least=True)  # completions a coordinator-only log shows no other way
        self.status.append({"ts": ts, "stage": stage, "retries": None, "items": items, "bytes": size, **row})

    def on_tasks_completed(self, ts, g, *_):
        stage, completed, total = g["stage"], int(g["completed"]), int(g["total"])
        info = self.stage(stage, total)
        if completed:
            self.progressed(ts)
        if completed == total and total and info.end_ts is None:
            info.end_ts = ts

    def on_stage_start(self, ts, g, *_):
        if "exec" in g:
            self.job = g["exec"]
        for info in self.stages.values():
            if info.end_ts is None and info.name != g["stage"]:
                info.end_ts = ts
        info = self.stage(g["stage"], int(g["n"]))
        self.fact(StageStart(ts, g.get("exec"), g["stage"]))
        info.start_ts = ts if info.start_ts is None else info.start_ts
        self.progress = ts

    def on_executing(self, ts, g, *_):
        self.executing(ts, g["worker"], g["stage"], int(g["shard"]), int(g["attempt"]))

    def executing(self, ts, worker: str, stage: str, shard: int, attempt: int) -> None:
        self.stage(stage, 0)
        key = (stage, shard, attempt)
        row = self.attempts.get(key) or self.attempts.add(key)
        row.update(worker=worker, start_ts=ts, outcome="running")
        self.hold(worker, key)
        self.worker(worker, ts, state="busy", shard=shard)

    def on_done(self, ts, g, *_):
        self.done(ts, g["worker"], int(g["shard"]), float(g["secs"]))

    def done(self, ts, worker: str, shard: int, secs: float) -> None:
        row = self._attempt(worker, shard, ts)
        start, end = row.get("start_ts"), ts
        if start is not None and ts is not None and ts < start + secs < ts + COARSEST_S:
            end = start + secs  # a whole-second prefix: its start and `done in` place the end finer
        row.update(end_ts=end, elapsed_s=secs, outcome="done")
        if start is None and ts is not None:
            row["start_ts"] = ts - secs
        self.hold(worker, None)
        self.worker(worker, ts, state="ready", shard=None)
        self.progressed(ts)

    def on_worker_error(self, ts, g, source, line, block):
        worker, shard = g["worker"], int(g["shard"])
        row = self._attempt(worker, shard, ts)
        text = block or ""
        failure = next((f for rx, f in FAILURE_KINDS if rx.search(text)), None)
        last = [ln.strip() for ln in text.splitlines() if ln.strip()]
        row.update(
            end_ts=ts,
            outcome="failed",
            kind=TASK,
            failure=failure or "exception",
            error=_error_line(last),
            returncode=_returncode(text),
        )
        if row.get("start_ts") is not None and ts is not None:
            row["elapsed_s"] = ts - row["start_ts"]
        self.hold(worker, None)
        self.worker(worker, ts, state="ready", shard=None)
        self.crashes.append(
            Crash(
                text=text,
                source=source,
                line=line,
                stage=row["stage"],
                shard=shard,
                attempt=row.get("attempt"),
                worker=worker,
                kind=failure or TASK,
                ts=ts,
            )
        )

    def on_task_requeue(self, ts, g, *_):
        shard, worker, n = int(g["shard"]), g["worker"], int(g["n"])
        row = self._reported(worker, shard) or self._attempt(worker, shard, ts, attempt=n - 1)
        row["_reported"] = True
        if row.get("outcome") != "failed":
            row.update(end_ts=ts, outcome="failed", kind=TASK, error=row.get("error") or "task error")
        self.hold(worker, None)

    def on_task_abort(self, ts, g, source, line, block):
        shard, n, worker = int(g["shard"]), int(g["n"]), g["worker"]
        self.on_task_requeue(ts, g, source, line, block)
        self.fatal = self.fatal or FATAL_TASK.split("\n", 1)[0].format(shard=shard, n=n, max=g["max"], worker=worker)

    def on_infra_requeue(self, ts, g, source, line, _block):
        shard, worker, generation = int(g["shard"]), g["worker"], int(g["generation"])
        row = self._infra_failure(
            ts, shard, worker, f"requeued from worker {worker}", f"{g['infra']}/{g['infra_max']}", source, line
        )
        row["generation"] = generation

    def _infra_failure(self, ts, shard: int, worker: str, what: str, count: str, source, line) -> AttemptRow:
        row = self._attempt(worker, shard, ts, attempt=None)
        if row.get("start_ts") is None:  # no Executing line (coordinator log): held since the last requeue
            row["start_ts"] = self._since(row)
        reason = self.workers.get(worker, {}).get("reason") or "preemption/heartbeat"
        error = f"{what} due to infra failure ({reason}); infra failures while in flight {count}"
        row.update(end_ts=ts, outcome="failed", kind=INFRA, error=error, reason=reason)
        if row.get("start_ts") is not None and ts is not None:
            row["elapsed_s"] = ts - row["start_ts"]
        self.hold(worker, None)
        self.worker(worker, ts, state="failed", shard=None)
        self.crashes.append(
            Crash(
                text=f"Shard {shard} {error}",
                source=source,
                line=line,
                stage=row["stage"],
                shard=shard,
                attempt=row.get("attempt"),
                worker=worker,
                kind=INFRA,
                ts=ts,
            )
        )
        return row

    def on_infra_abort(self, ts, g, source, line, _block):
        shard, n, worker = int(g["shard"]), int(g["infra"]), g["worker"]
        self._infra_failure(ts, shard, worker, f"crashed worker {worker}", f"{n}/{g['infra_max']}", source, line)
        self.fatal = self.fatal or FATAL_INFRA.format(shard=shard, n=n, max=g["infra_max"], worker=worker)

    def on_scatter_reader(self, ts, g, *_):
        """A reduce shard's input size (its `items` count outputs, one per key)."""
        key = next((k for w, k in self.holding.items() if k[1] == int(g["shard"])), None)
        if key is not None:
            self.attempts[key].update(input_chunks=int(g["chunks"]), max_chunk_rows=int(g["rows"]))

    def on_registered(self, ts, g, *_):
        self.registered_any = True
        self.worker(g["worker"], ts, state="ready", shard=None, reason=None)
        self._churn(ts, g["worker"], "registered")

    def on_reregistering(self, ts, g, *_):
        self.worker(g["worker"], ts, state="ready", shard=None, reason="re-registered")
        self._churn(ts, g["worker"], "reregistered")

    def on_heartbeat_timeout(self, ts, g, *_):
        worker, ago = g["worker"], float(g["secs"])
        w = self.worker(worker, None, state="failed", reason=f"heartbeat timeout after {ago:.1f}s")
        if ts is not None:
            w["last_seen"] = max(w.get("last_seen") or -math.inf, ts - ago)
        self._churn(ts, worker, "heartbeat-timeout")

    def on_stale(self, ts, g, *_):
        row = self.attempts.get((self._current_stage(), int(g["shard"]), int(g["attempt"])))
        if row is not None and row.get("outcome") == "running":
            row["outcome"] = "stale"

    def on_all_dead(self, ts, *_):
        known = self.registered_any or (self.status and self.status[-1]["registered"])
        if known and ts is not None:  # printed once at start-up, before any worker registers: harmless
            self.all_dead.append(ts)

    def on_no_workers(self, ts, g, *_):
        self.fatal = self.fatal or "ZephyrWorkerError: " + g["text"].strip()

    def on_retried(self, ts, g, *_):
        if self.status:  # {attempts: shard count}
            self.status[-1]["retries"] = sum(int(a) * int(n) for a, n in RETRIED_RE.findall(g["counts"]))

    def on_aborted(self, ts, g, *_):
        self.fatal = self.fatal or g["text"].strip()

    def on_pipeline_failed(self, ts, g, source, line, block):
        text = (block or g["text"]).split("failed: ", 1)[-1].strip()
        self.fatal_detail = text
        self.fatal = self.fatal or text.splitlines()[0]

    def on_counters(self, ts, g, *_):
        value = parse_literal(g["counters"])
        if isinstance(value, dict):
            self.counters = {str(k): float(v) for k, v in value.items() if isinstance(v, (int, float))}
        self.shutdown = True  # `[coordinator.shutdown] Final counters` is printed by the shutdown alone

    def on_shutdown(self, ts, *_):
        self.shutdown = True

    def on_pipeline(self, ts, g, *_):
        ex = g["exec"]
        if self.runs and self.runs[-1] != ex and (self.shutdown or self.fatal is not None):
            self._next_execution()  # an earlier run ended before this one began: a job of its own
        if not self.runs or self.runs[-1] != ex:
            self.runs.append(ex)
        self.job = ex

    def _next_execution(self) -> None:
        """Starts the fold afresh for the next execution; the ended one is named in a warning."""
        first = min((i.start_ts for i in self.stages.values() if i.start_ts is not None), default=None)
        ended = "failed" if self.fatal is not None else "ended"
        span = f"{_when(first)} to {_when(self.last_ts)}, " if first is not None and self.last_ts else ""
        earlier = [*self.earlier_runs, f"{self.job} ({span}{ended})"]
        kept = {k: getattr(self, k) for k in ("events", "timed", "bad", "notes", "source_now", "last_ts")}
        self.reset(self.job, self.source)
        self.__dict__.update(kept)
        self.earlier_runs = earlier

    def on_rpc_retry(self, ts, g, *_):
        self.fact(RpcRetry(ts, g["op"], g["method"], int(g["n"]), int(g["max"]), g.get("error", "")))

    def on_connect_error(self, ts, g, *_):
        self.fact(ConnectError(ts, g.get("worker")))

    def on_worker_group(self, ts, g, *_):
        self.fact(WorkerGroup(ts, int(g["n"]), int(g["max"]), int(g["shards"])))

    # -- helpers -------------------------------------------------------------------------
    def fact(self, fact: LogFact, runs: bool = False) -> None:
        """One line's fact for Evidence.log_facts (`LogFacts.add`); an untimed line has none."""
        if fact.ts is not None:
            self.facts.add(fact, runs)

    def _churn(self, ts, worker: str, event: str) -> None:
        if ts is not None:
            self.worker_events.append((ts, worker, event))

    def stage(self, name: str, total: int) -> StageInfo:
        """The stage `name`, made on first sight; a non-zero `total` sets its shard count."""
        info = self.stages.get(name)
        if info is None:
            m = STAGE_INDEX_RE.match(name)
            info = self.stages[name] = StageInfo(name, int(m.group(1)) if m else len(self.stages), total)
        if total:
            info.total = total
        return info

    def _current_stage(self) -> str:
        if not self.stages:
            return "stage0"
        return max(self.stages.values(), key=lambda s: (s.start_ts or -math.inf, s.index)).name

    def _attempt(self, worker: str, shard: int, ts, attempt: int | None = None) -> AttemptRow:
        """The attempt of `shard` that `worker` holds (from its Executing line), else a new row."""
        key = self.held(worker)
        if key is not None and key[1] == shard:
            return self.attempts[key]
        stage = self._current_stage()
        for row in self.attempts.recent(stage, shard):  # newest first
            if row.get("worker") == worker and row.get("outcome") == "running":
                return row
        if attempt is None or (stage, shard, attempt) in self.attempts:
            attempt = self.attempts.top_attempt(stage, shard) + 1
        return self.attempts.add((stage, shard, attempt), worker=worker, outcome="running")

    def _since(self, row: AttemptRow) -> float | None:
        """When a shard that no Executing line shows started: the end of its previous attempt (a
        requeued shard in a tail is handed out at once), else its stage's start."""
        before = [r for r in self.attempts.recent(row["stage"], row["shard"]) if r["attempt"] < row["attempt"]]
        if before:
            return max(before, key=lambda r: r["attempt"]).get("end_ts")
        info = self.stages.get(row["stage"])
        return info.start_ts if info else None

    def _reported(self, worker: str, shard: int) -> AttemptRow | None:
        """The failed attempt (by its worker's error line) that a coordinator failure line confirms."""
        for row in sorted(self.attempts.recent(self._current_stage(), shard), key=lambda r: -r["attempt"]):
            if row.get("worker") == worker and row.get("outcome") == "failed" and not row.get("_reported"):
                return row
        return None

    def worker(self, worker: str, ts, **fields) -> dict:
        """Worker `worker`'s row, seen at `ts` with `fields` set (an older line of another file
        does not roll its state back)."""
        w = self.workers.setdefault(worker, {"worker": worker, "state": "ready", "last_seen": None, "shard": None})
        if ts is not None:
            if w["last_seen"] is not None and ts < w["last_seen"] - 1.0 and w.get("source") != self.source_now:
                return w  # an older line from another file: do not roll the state back
            w["last_seen"] = max(ts, w["last_seen"] or ts)
        w["source"] = self.source_now
        w.update(fields)
        return w

    # -- result --------------------------------------------------------------------------
    def finish(self) -> Evidence:
        now = self.last_ts if self.last_ts is not None else 0.0
        last = self.status[-1] if self.status else None
        self._stage_ends()
        # Zephyr logs no final `n/n tasks completed`: a shutdown after the last status line is an abort
        # only when no worker was left for the work that line still showed.
        if (
            self.shutdown
            and not self.fatal
            and last is not None
            and last["completed"] < last["total"]
            and self.stages.get(last["stage"], StageInfo("", 0, 0)).end_ts is None
            and last["alive"] == 0
            and (last["queue_depth"] or 0) + (last["in_flight"] or 0) > 0
        ):
            self.fatal = (
                f"the coordinator shut down with {last['total'] - last['completed']} of {last['total']} "
                f"shards of {last['stage']} unfinished (the abort reason is not in this log)"
            )
        state = "failed" if self.fatal else ("succeeded" if self.shutdown else "running")
        if state == "succeeded":
            for info in self.stages.values():
                if info.end_ts is None:
                    info.end_ts = now
        ev = Evidence(job=self.job, source=self.source, now=now, state=state)
        ev.heartbeat_ages = False
        ev.stages = sorted(self.stages.values(), key=lambda s: s.index)
        ev.status = self.status.frame(STATUS_COLUMNS)
        self._open_tail_attempts(ev)
        ev.attempts = self.attempts.frame(ATTEMPT_COLUMNS)
        ev.workers = frame(
            [
                {
                    "worker": w["worker"],
                    "state": w["state"],
                    "shard": w["shard"],
                    "last_seen_ago": None if w["last_seen"] is None else round(now - w["last_seen"], 3),
                }
                for w in self.workers.values()
            ],
            WORKER_COLUMNS,
        )
        ev.crashes = self.crashes
        ev.worker_events = sorted(self.worker_events)
        ev.counters = self.counters
        ev.log_facts = self.facts
        ev.fatal_error = (
            self.fatal_detail
            if self.fatal_detail and self.fatal and self.fatal.split(",")[0] in self.fatal_detail
            else self.fatal
        )
        ev.progress_time = self.progress
        ev.config = {"all_dead_ts": self.all_dead} if self.all_dead else {}
        ev.config["status_lines"] = len(self.status)  # ev.status keeps a downsampled share of them
        if self.bad:
            ev.warnings.append(f"skipped {self.bad} unparseable lines")
        if self.earlier_runs:
            ev.warnings.append(
                f"the evidence holds {len(self.earlier_runs) + 1} runs one after the other; read the newest, "
                f"{self.job}; not read: {'; '.join(self.earlier_runs)} (give each run's lines alone to read it)"
            )
        beside = [ex for ex in dict.fromkeys(self.runs) if ex != self.job]
        if beside:  # coverage says what that leaves unknown
            ev.config["runs_at_once"] = [*beside, self.job]
        ev.warnings += self.notes
        return ev

    def _stage_ends(self) -> None:
        """A stage whose every shard logged `done in` ended with its last one (the release prints no
        final `n/n tasks completed`)."""
        for info in self.stages.values():
            if info.end_ts is not None or not info.total:
                continue
            ends = self.attempts.done_ends(info.name)
            if len(ends) >= info.total:
                info.end_ts = float(ends.max())

    def _open_tail_attempts(self, ev: Evidence) -> None:
        """A coordinator-only log never names the new holder of a requeued shard: when the last
        status still shows shards in flight, a requeued shard with no later attempt is running
        where the status lines prove it (`_still_in_flight`)."""
        if ev.state != "running" or not self.status or not self.status[-1]["in_flight"]:
            return
        stage, table = self.status[-1]["stage"], self.attempts
        for shard in sorted({table.shard[i] for i in table.rows_where("kind", INFRA)}):  # few: infra failures
            row = table.get((stage, shard, table.top_attempt(stage, shard)))  # its newest attempt in the stage
            if (
                row is not None
                and row.get("outcome") == "failed"
                and row.get("kind") == INFRA
                and _still_in_flight(ev.status, stage, row.get("end_ts"))
            ):
                self.attempts.add(
                    (stage, shard, row["attempt"] + 1), worker=None, start_ts=row.get("end_ts"), outcome="running"
                )


def _still_in_flight(status, stage: str, requeued) -> bool:
    """Whether a shard requeued at `requeued` must still be in flight, the log naming none of its
    completions: its stage's queue was empty then (a requeued shard in a tail is handed out at
    once, and nothing else is) and no shard of the stage has completed since. Otherwise it may
    have finished unseen (a preempted shard requeued mid-stage, 800 completions before the tail)."""
    import numpy as np
    import pandas as pd

    mine = status[(status["stage"] == stage).to_numpy(dtype=bool)]
    ts = pd.to_numeric(mine["ts"], errors="coerce").to_numpy(dtype=float)
    before = np.flatnonzero(ts <= requeued) if requeued is not None else np.empty(0, np.int64)
    if not len(before):
        return False
    then, now = mine.iloc[before[-1]], mine.iloc[-1]
    return then["queue_depth"] == 0 and now["completed"] == then["completed"]


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def _error_line(lines: list[str]) -> str | None:
    """The exception line of a traceback (the last line that looks like `Type: message`)."""
    for line in reversed(lines):
        if re.match(r"^[\w.]+(Error|Exception|Exit|Interrupt)\b", line):
            return line
    return lines[-1] if lines else None


def _returncode(text: str) -> int | None:
    m = RETURNCODE_RE.search(text)
    return int(m.group(1) or m.group(2)) if m else None
