"""Shard runners: inline (in the worker process) and subprocess (a child per shard).

Both return an `Outcome`. The subprocess runner turns a child killed by SIGKILL into
Zephyr's MemoryError and any other non-zero exit into its RuntimeError, raised and caught
in the worker so the stored text is a real traceback; the child's peak RSS comes from
`wait4`, so an OOM kill has evidence even without a faulthandler dump.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from zephyr_debug import zephyrlog
from zephyr_debug.reference import logfmt
from zephyr_debug.reference.faults import Fault
from zephyr_debug.reference.shardwork import Progress, run_shard


@dataclass
class Outcome:
    ok: bool
    elapsed_s: float
    result: dict | None = None
    error: str | None = None  # the full traceback / crash text
    failure: str | None = None  # exception | oom | segv | exit
    returncode: int | None = None
    peak_rss_bytes: int | None = None


class InlineRunner:
    """Runs the shard in the worker process: a crash or OOM kill takes the worker down."""

    name = "inline"

    def __init__(self, faults: list[Fault], scratch: Path, worker_index: int, log: logfmt.LineLog):
        self.faults, self.scratch, self.worker_index = faults, scratch, worker_index

    def run(self, task: dict, progress: Progress) -> Outcome:
        start = time.monotonic()
        try:
            result = run_shard(task, self.faults, self.scratch, progress, self.worker_index)
        except Exception:
            return Outcome(False, time.monotonic() - start, error=traceback.format_exc(), failure="exception")
        return Outcome(True, time.monotonic() - start, result=result)


class SubprocessRunner:
    """Runs each shard in `python -u -X faulthandler`; its stderr goes into the worker log."""

    name = "subprocess"

    def __init__(self, faults: list[Fault], scratch: Path, worker_index: int, log: logfmt.LineLog):
        self.faults, self.scratch, self.worker_index, self.log = faults, scratch, worker_index, log
        self.child_pid: int | None = None

    def run(self, task: dict, progress: Progress) -> Outcome:
        start = time.monotonic()
        stderr_path = self.log.path.with_suffix(f".shard{task['shard']}-a{task['attempt']}.stderr")
        job = {
            "task": task,
            "faults": [f.to_dict() for f in self.faults],
            "scratch": str(self.scratch),
            "worker_index": self.worker_index,
        }
        with open(stderr_path, "wb") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-u", "-X", "faulthandler", "-m", "zephyr_debug.reference.shardwork"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        self.child_pid = proc.pid
        assert proc.stdin is not None and proc.stdout is not None  # both are PIPEs
        proc.stdin.write(json.dumps(job))
        proc.stdin.close()
        result, error = None, None
        for line in proc.stdout:
            tag, _, rest = line.rstrip("\n").partition(" ")
            if tag == "P":
                items, nbytes = rest.split()
                progress(int(items), int(nbytes))
            elif tag == "R":
                result = json.loads(rest)
            elif tag == "E":
                error = json.loads(rest)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        self.child_pid = None
        peak = usage.ru_maxrss * 1024
        elapsed = time.monotonic() - start
        stderr_text = stderr_path.read_text(errors="replace")
        if stderr_text:
            self.log.raw(stderr_text)
        if code == 0 and result is not None:
            return Outcome(True, elapsed, result=result, returncode=code, peak_rss_bytes=peak)
        if error is not None:
            return Outcome(False, elapsed, error=error, failure="exception", returncode=code, peak_rss_bytes=peak)
        failure = "oom" if code == -signal.SIGKILL else "segv" if code == -signal.SIGSEGV else "exit"
        text = _raised_text(task["shard"], code)
        if failure != "oom" and stderr_text:
            text = stderr_text.rstrip() + "\n\n" + text
        return Outcome(False, elapsed, error=text, failure=failure, returncode=code, peak_rss_bytes=peak)


def _raise_for_exit(shard: int, code: int) -> None:
    if code == -signal.SIGKILL:
        raise MemoryError(zephyrlog.OOM_ERROR.format(shard=shard))
    raise RuntimeError(zephyrlog.EXIT_ERROR.format(shard=shard, code=code))


def _raised_text(shard: int, code: int) -> str:
    """The traceback of Zephyr's MemoryError / RuntimeError, really raised here."""
    try:
        _raise_for_exit(shard, code)
    except (MemoryError, RuntimeError):
        return traceback.format_exc()
    raise AssertionError("unreachable")


RUNNERS: dict[str, type[InlineRunner | SubprocessRunner]] = {"inline": InlineRunner, "subprocess": SubprocessRunner}
