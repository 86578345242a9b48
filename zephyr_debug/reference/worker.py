"""A reference worker process: register, heartbeat, loop on pull_task, report.

Started by the launcher as `python -m zephyr_debug.reference.worker '<json config>'`.
Each heartbeat carries a resource sample of the worker's process tree (RSS, peak RSS,
CPU %, scratch-dir bytes) and the progress of the shard it is running.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import threading
import time
from pathlib import Path

import psutil
import requests

from zephyr_debug import zephyrlog
from zephyr_debug.model import safe_name
from zephyr_debug.reference import logfmt, telemetry
from zephyr_debug.reference.faults import from_dicts
from zephyr_debug.reference.proctree import process_tree
from zephyr_debug.reference.runners import RUNNERS

MAX_HEARTBEAT_FAILURES = 5
BACKOFF_S = 0.1


class Worker:
    def __init__(self, cfg: dict):
        self.id = cfg["worker_id"]
        self.url = cfg["url"]
        job_dir = Path(cfg["job_dir"])
        self.log = logfmt.LineLog(job_dir / "workers" / f"{safe_name(self.id)}.log", "zephyr.worker")
        self._fault_fh = open(self.log.path, "a")  # faulthandler needs a real file descriptor
        faulthandler.enable(self._fault_fh)
        self.scratch = job_dir / "scratch" / safe_name(self.id)
        self.crash_dir = job_dir / "crashes"
        self.runner = RUNNERS[cfg.get("runner", "inline")](
            from_dicts(cfg.get("faults", [])), self.scratch, cfg.get("index", 0), self.log
        )
        self.interval = float(cfg.get("heartbeat_interval", 5.0))
        self.http = requests.Session()
        self._lock = threading.Lock()
        self.current: dict | None = None  # {"stage", "shard", "items", "bytes"}
        self._proc = psutil.Process()
        self._children: dict[int, psutil.Process] = {}
        self._peak_rss = 0
        self._stop = threading.Event()
        self.telemetry = telemetry.ShardRows(cfg.get("finelog"), cfg.get("execution_id", ""), self.log)
        self.token: str | None = None  # handed out by each registration; every later call carries it

    def call(self, path: str, **body) -> dict:
        reply = self.http.post(self.url + path, json={"worker": self.id, "token": self.token, **body}, timeout=30)
        reply.raise_for_status()
        return reply.json()

    def register(self) -> None:
        self.token = self.call("/register", pid=os.getpid())["token"]

    # -- heartbeat -------------------------------------------------------------------
    def sample(self) -> dict:
        procs = [self._proc]
        try:
            for pid in process_tree(self._proc.pid)[1:]:
                if pid not in self._children:  # kept: cpu_percent measures from the previous call
                    self._children[pid] = psutil.Process(pid)
                procs.append(self._children[pid])
        except psutil.Error:
            pass
        rss = cpu = 0.0
        for proc in procs:
            try:
                rss += proc.memory_info().rss
                cpu += proc.cpu_percent(None)
            except psutil.Error:
                continue
        self._peak_rss = max(self._peak_rss, int(rss))
        sample = {
            "pid": os.getpid(),
            "rss_bytes": int(rss),
            "rss_peak_bytes": self._peak_rss,
            "cpu_pct": round(cpu, 1),
            "disk_bytes": _dir_bytes(self.scratch),
        }
        with self._lock:
            if self.current:
                sample.update(shard=self.current["shard"], items=self.current["items"], bytes=self.current["bytes"])
        return sample

    def _heartbeat_loop(self) -> None:
        failures = 0
        while not self._stop.wait(self.interval):
            try:
                sample = self.sample()
                self.telemetry.running(sample)
                reply = self.call("/heartbeat", sample=sample)
                failures = 0
                if reply.get("status") == "unknown_worker":
                    self.register()
            except requests.RequestException as exc:
                failures += 1
                self.log.warning(
                    zephyrlog.HEARTBEAT_FAILED.format(worker=self.id, n=failures, max=MAX_HEARTBEAT_FAILURES, error=exc)
                )
                if failures >= MAX_HEARTBEAT_FAILURES:
                    os._exit(3)  # the coordinator is gone

    # -- main loop -------------------------------------------------------------------
    def run(self) -> int:
        self.register()
        threading.Thread(target=self._heartbeat_loop, daemon=True, name="heartbeat").start()
        while True:
            reply = self.call("/pull_task")
            status = reply["status"]
            if status == "shutdown":
                self._stop.set()
                return 0
            if status == "unknown_worker":
                self.register()
            elif status == "run_task":
                self.run_task(reply["task"])
            else:
                time.sleep(BACKOFF_S)

    def run_task(self, task: dict) -> None:
        shard, attempt = task["shard"], task["attempt"]
        self.log.info(zephyrlog.EXECUTING.format(worker=self.id, stage=task["stage"], shard=shard, attempt=attempt))
        current = {"stage": task["stage"], "shard": shard, "items": 0, "bytes": 0}
        with self._lock:
            self.current = current
        self.telemetry.start(task["stage"], shard)

        def progress(items: int, nbytes: int) -> None:
            with self._lock:
                current.update(items=items, bytes=nbytes)

        outcome = self.runner.run(task, progress)
        with self._lock:
            self.current = None
        result = outcome.result if outcome.ok else None  # the runners set it on every ok outcome
        done = current if result is None else result
        key = {"stage_index": task["stage_index"], "shard": shard, "attempt": attempt}
        extra = {
            "returncode": outcome.returncode,
            "peak_rss_bytes": outcome.peak_rss_bytes,
            "runner": self.runner.name,
            **self.telemetry.end(outcome.ok, done["items"], done["bytes"], outcome.peak_rss_bytes),
        }
        if result is not None:
            self.log.info(zephyrlog.SHARD_DONE.format(worker=self.id, shard=shard, secs=outcome.elapsed_s))
            self.call(
                "/report_result",
                **key,
                elapsed_s=outcome.elapsed_s,
                items=result["items"],
                bytes=result["bytes"],
                counters=result.get("counters"),
                **extra,
            )
            return
        error = outcome.error
        assert error is not None  # the runners set it on every failed outcome
        self.log.error(zephyrlog.WORKER_ERROR.format(worker=self.id, shard=shard))
        self.log.raw(error)
        crash = self.crash_dir / f"stage{task['stage_index']}-{shard}-{attempt}.txt"
        crash.parent.mkdir(parents=True, exist_ok=True)
        crash.write_text(error)
        self.call(
            "/report_error",
            **key,
            error=error,
            crash_file=str(crash),
            failure=outcome.failure,
            elapsed_s=round(outcome.elapsed_s, 4),
            **extra,
        )


def _dir_bytes(path: Path) -> int:
    total = 0
    try:
        for entry in os.scandir(path):
            if entry.is_file(follow_symlinks=False):
                total += entry.stat().st_size
    except OSError:
        pass
    return total


def main() -> int:
    worker = Worker(json.loads(sys.argv[1]))
    try:
        return worker.run()
    except requests.RequestException as exc:
        worker.log.error(f"[{worker.id}] coordinator unreachable: {exc}")
        return 3
    finally:
        worker.telemetry.close()


if __name__ == "__main__":
    sys.exit(main())
