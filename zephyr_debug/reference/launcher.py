"""Runs a reference job: coordinator + HTTP server in this process, workers as OS processes.

The launcher also plays the roles that surround a real pipeline: the cluster (respawning
killed workers under the same id, so they re-register), the kernel's OOM killer (a
watchdog SIGKILLs any worker-tree process whose RSS passes `memory_limit_mb`, and logs it
to `kernel.log` like dmesg), and the fault injector for process-level faults.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import cast

import psutil

from zephyr_debug import jobstore
from zephyr_debug.model import JobStatus, safe_name
from zephyr_debug.reference import logfmt, telemetry
from zephyr_debug.reference.coordinator import Coordinator, CoordinatorConfig, StageSpec
from zephyr_debug.reference.faults import Fault
from zephyr_debug.reference.proctree import process_tree
from zephyr_debug.reference.server import LOOPBACK, CoordinatorServer

SHUTDOWN_GRACE_S = 10.0  # a finished job's workers: time to see `shutdown` and exit before SIGKILL


def default_stages(shards: int = 16, rows: int = 20_000) -> list[StageSpec]:
    work = {"rows": rows, "chunk_rows": max(rows // 10, 1), "chunk_seconds": 0.05}
    return [StageSpec("Map", shards, work), StageSpec("Map → Write", max(shards // 4, 1), work)]


@dataclass
class JobConfig:
    name: str | None = None
    workers: int = 4
    runner: str = "subprocess"  # or "inline"
    stages: list[StageSpec] = field(default_factory=default_stages)
    faults: list[Fault] = field(default_factory=list)
    coordinator: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    memory_limit_mb: int = 768
    respawn: bool = True  # restart SIGKILLed workers under the same id
    respawn_delay_s: float = 1.0
    deadline_s: float | None = 600.0  # then the job is stopped and marked interrupted
    linger_s: float = 0.0  # keep serving /status and /metrics this long after the end (scrapers see it)
    root: Path | None = None  # jobs root; default $ZDEBUG_HOME/jobs
    host: str = LOOPBACK
    port: int = 0
    finelog: str | None = None  # write Zephyr's zephyr.worker / zephyr.stage rows to this finelog server


@dataclass
class JobResult:
    execution_id: str
    job_dir: Path
    state: str  # succeeded | failed | interrupted
    fatal_error: str | None
    status: JobStatus


class _WorkerProc:
    def __init__(self, worker_id: str, index: int):
        self.id, self.index = worker_id, index
        self.proc: subprocess.Popen | None = None
        self.respawn_at: float | None = None


class Job:
    """One running reference job. `start()`, then `wait()` (or use `run_job`)."""

    def __init__(self, config: JobConfig):
        self.config = config
        self.execution_id = jobstore.new_execution_id(config.name)
        self.job_dir = (config.root or jobstore.jobs_root()) / self.execution_id
        self.events = jobstore.EventLog(self.job_dir / jobstore.EVENTS)
        if config.finelog:  # the coordinator's events become zephyr.stage rows
            # StageRows stands in for the EventLog it wraps (__getattr__ passes the rest through).
            self.events = cast(jobstore.EventLog, telemetry.StageRows(self.events, config.finelog, self.execution_id))
        (self.job_dir / "workers").mkdir(exist_ok=True)
        self.kernel_log = logfmt.LineLog(self.job_dir / "kernel.log", "kernel")
        self.coordinator = Coordinator(
            self.execution_id,
            config.stages,
            config.coordinator,
            self.events,
            logfmt.LineLog(self.job_dir / jobstore.COORDINATOR_LOG, "zephyr.execution"),
        )
        self.server: CoordinatorServer | None = None
        hex8 = self.execution_id.rsplit("-", 1)[-1]
        self.workers = [_WorkerProc(f"zephyr-{hex8}-p0-workers-{i}", i) for i in range(config.workers)]
        self.state: str | None = None
        self._fired: set[Fault] = set()
        self._stop = threading.Event()
        self._stop_requested = threading.Event()

    @property
    def url(self) -> str:
        return self.server.url if self.server else ""

    def serve(self) -> Job:
        """Bring the coordinator's HTTP API up, no workers yet: a scraper can attach first."""
        if self.server:
            return self
        cfg = self.config
        info = {
            "execution_id": self.execution_id,
            "job_dir": str(self.job_dir.resolve()),
            "runner": cfg.runner,
            "workers": cfg.workers,
            "memory_limit_mb": cfg.memory_limit_mb,
            "faults": [str(f) for f in cfg.faults],
            "config": asdict(cfg.coordinator),
            "stages": [{"ops": s.ops, "shards": s.shards} for s in cfg.stages],
        }
        self.server = CoordinatorServer(self.coordinator, info, cfg.host, cfg.port)
        self.events.write(
            "job_start", **info, url=self.server.url, pid=os.getpid(), fault_specs=[f.to_dict() for f in cfg.faults]
        )
        return self

    def start(self) -> Job:
        """Serve (if not yet) and launch the workers."""
        self.serve()
        self.coordinator.begin()
        for worker in self.workers:
            self._spawn(worker)
        threading.Thread(target=self._watchdog, daemon=True, name="oom-watchdog").start()
        return self

    def _spawn(self, worker: _WorkerProc) -> None:
        cfg = self.config
        wcfg = {
            "worker_id": worker.id,
            "index": worker.index,
            "url": self.url,
            "job_dir": str(self.job_dir),
            "runner": cfg.runner,
            "faults": [f.to_dict() for f in cfg.faults],
            "heartbeat_interval": cfg.coordinator.heartbeat_interval,
            "finelog": cfg.finelog,
            "execution_id": self.execution_id,
        }
        stderr = open(self.job_dir / "workers" / f"{safe_name(worker.id)}.stderr", "ab")
        with stderr:
            worker.proc = subprocess.Popen(
                [sys.executable, "-m", "zephyr_debug.reference.worker", json.dumps(wcfg)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )
        worker.respawn_at = None
        self.events.write("worker_spawned", worker=worker.id, pid=worker.proc.pid, index=worker.index)

    # -- the loop ----------------------------------------------------------------------
    def wait(self, poll_s: float = 0.05, on_tick=None) -> JobResult:
        """Drive the job to its end; `on_tick(coordinator)` is called every poll."""
        deadline = time.time() + self.config.deadline_s if self.config.deadline_s else None
        try:
            while not self.coordinator.done:
                self.coordinator.tick()
                self._reap_and_respawn()
                self._inject_process_faults()
                if on_tick:
                    on_tick(self.coordinator)
                if self._stop_requested.is_set() or (deadline and time.time() > deadline) or self.events.error:
                    self.state = "interrupted"
                    break
                time.sleep(poll_s)
        finally:
            self._shutdown()
        if self.events.error:  # the job store could not be written (disk full): the run is not usable
            raise self.events.error
        status = self.coordinator.get_status()
        assert self.state is not None  # _shutdown sets it
        return JobResult(self.execution_id, self.job_dir, self.state, status.fatal_error, status)

    def stop(self) -> None:
        """Ask `wait()` to end the job now (it ends as interrupted)."""
        self._stop_requested.set()

    def _reap_and_respawn(self) -> None:
        now = time.time()
        for worker in self.workers:
            proc = worker.proc
            if proc is not None and proc.poll() is not None:
                self.events.write("worker_exit", worker=worker.id, pid=proc.pid, returncode=proc.returncode)
                worker.proc = None
                if proc.returncode < 0 and self.config.respawn:
                    worker.respawn_at = now + self.config.respawn_delay_s
            if worker.proc is None and worker.respawn_at is not None and now >= worker.respawn_at:
                self._spawn(worker)

    def _inject_process_faults(self) -> None:
        """kill-all-workers: SIGKILL every worker once the target shard is running.
        (kill-worker is done by the shard code itself, mid-shard: see shardwork.)"""
        for fault in self.config.faults:
            if fault.kind != "kill-all-workers" or fault in self._fired:
                continue
            shard = self.coordinator.shards.get(fault.target)
            if self.coordinator.stage_index == fault.stage and shard is not None and shard.holder:
                self.config.respawn = False
                self._fire(fault, [w for w in self.workers if w.proc])

    def _fire(self, fault: Fault, victims: list[_WorkerProc]) -> None:
        self._fired.add(fault)
        for worker in victims:
            assert worker.proc is not None  # victims are running workers
            self.events.write(
                "fault_injected", fault=str(fault), worker=worker.id, pid=worker.proc.pid, signal="SIGKILL"
            )
            _kill_group(worker.proc.pid)

    def _watchdog(self) -> None:
        """The kernel's OOM killer, for the worker process trees."""
        limit = self.config.memory_limit_mb << 20
        while not self._stop.wait(0.05):
            for worker in self.workers:
                proc = worker.proc
                if proc is None:
                    continue
                try:
                    tree = [psutil.Process(pid) for pid in process_tree(proc.pid)]
                    for p in tree:
                        mem = p.memory_info()
                        if mem.rss > limit:
                            name = p.name()  # before the kill: a killed process may be reaped at once
                            p.send_signal(signal.SIGKILL)
                            self.kernel_log.error(
                                f"Out of memory: Killed process {p.pid} ({name}) total-vm:{mem.vms >> 10}kB, "
                                f"anon-rss:{mem.rss >> 10}kB, limit:{limit >> 10}kB"
                            )
                            self.events.write(
                                "oom_kill",
                                worker=worker.id,
                                pid=p.pid,
                                rss_bytes=mem.rss,
                                limit_bytes=limit,
                                is_worker=p.pid == proc.pid,
                            )
                except psutil.Error:
                    continue

    def _shutdown(self) -> None:
        # A finished job's workers are told to shut down and exit; an interrupted one's would run on.
        grace = time.time() + (0 if self.state == "interrupted" else SHUTDOWN_GRACE_S)
        while time.time() < grace and any(w.proc and w.proc.poll() is None for w in self.workers):
            self.coordinator.tick()
            time.sleep(0.05)
        for worker in self.workers:
            if worker.proc and worker.proc.poll() is None:
                _kill_group(worker.proc.pid)
                worker.proc.wait()
        self._stop.set()
        status = self.coordinator.get_status()
        if self.state is None:
            self.state = "failed" if status.fatal_error else "succeeded"
        self.events.write(
            "job_end",
            state=self.state,
            fatal_error=status.fatal_error,
            completed=status.completed,
            total=status.total,
            stage=status.stage,
        )
        if self.server:
            time.sleep(self.config.linger_s)
            self.server.close()
        self.events.close()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def run_job(config: JobConfig) -> JobResult:
    """Run a reference job to its end (success, abort or deadline)."""
    return Job(config).start().wait()
