"""Drive the real py-spy: `record --format speedscope` and `dump --json`, errors as one line.

py-spy is found via `$ZDEBUG_PYSPY`, then PATH, then next to this interpreter (the venv).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from zephyr_debug.errors import ZdebugError
from zephyr_debug.render.output import progress

# py-spy's own wording (lower-cased) -> our one-line error; `{pid}` is filled in.
ERRORS = [
    (
        "permission denied",
        "pid {pid}: permission denied (ptrace): run as root or as the process owner with"
        " CAP_SYS_PTRACE (and kernel.yama.ptrace_scope=0)",
    ),
    (
        "operation not permitted",
        "pid {pid}: permission denied (ptrace): run as root or as the process owner"
        " with CAP_SYS_PTRACE (and kernel.yama.ptrace_scope=0)",
    ),
    ("failed to find python version", "pid {pid}: not a Python process (py-spy found no interpreter in it)"),
    ("failed to get process executable name", "pid {pid}: no such process"),
    ("no such process", "pid {pid}: no such process"),
]
EXITED = "stopped sampling because process exited"
SLACK_S = 30.0  # py-spy's start-up and file writing, on top of the sampling time


@dataclass
class Recording:
    path: Path
    pid: int
    duration_s: float  # wall time sampled
    rate: int
    gil: bool
    idle: bool
    subprocesses: bool


def executable() -> str:
    chosen = os.environ.get("ZDEBUG_PYSPY")
    candidates = [chosen] if chosen else [shutil.which("py-spy"), str(Path(sys.executable).with_name("py-spy"))]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and Path(candidate).is_file():
            return candidate
    where = f"ZDEBUG_PYSPY={chosen}" if chosen else "PATH and the venv"
    raise ZdebugError(f"py-spy missing: not found in {where} (pip install py-spy, or set ZDEBUG_PYSPY)", 3)


def check_pid(pid: int) -> None:
    if pid <= 0 or not psutil.pid_exists(pid):
        raise ZdebugError(f"pid {pid}: no such process")


def _fail(pid: int, output: str, returncode: int) -> ZdebugError:
    lowered = output.lower()
    for needle, message in ERRORS:
        if needle in lowered:
            return ZdebugError(message.format(pid=pid))
    lines = [line for line in output.splitlines() if line.strip() and not line.startswith(("py-spy>", " "))]
    return ZdebugError(f"pid {pid}: py-spy failed (exit {returncode}): {lines[0] if lines else 'no output'}")


def record(
    pid: int,
    out: Path,
    *,
    duration_s: int = 10,
    rate: int = 100,
    gil: bool = False,
    idle: bool = True,
    subprocesses: bool = False,
    nonblocking: bool = True,
) -> Recording:
    """Sample `pid` for `duration_s` into a speedscope file at `out` (py-spy's own output, unfixed).

    `nonblocking` (default) reads the stacks without pausing the process: pausing it 100 times a
    second cost a busy host's worker far more than the 5 % budget (benchmarks/bench_profile.py)."""
    exe = executable()
    check_pid(pid)
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        exe,
        "record",
        "--pid",
        str(pid),
        "--format",
        "speedscope",
        "--output",
        str(out),
        "--duration",
        str(duration_s),
        "--rate",
        str(rate),
    ]
    cmd += ["--gil"] * gil + ["--idle"] * idle + ["--subprocesses"] * subprocesses + ["--nonblocking"] * nonblocking
    start = time.monotonic()
    with (
        tempfile.TemporaryFile("w+") as log,
        progress(f"py-spy: sampling pid {pid} for {duration_s}s", total=duration_s) as advance,
    ):
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
        while proc.poll() is None:
            if time.monotonic() - start > duration_s + SLACK_S:
                proc.kill()
                raise ZdebugError(f"pid {pid}: py-spy did not finish within {duration_s + SLACK_S:.0f}s")
            time.sleep(0.25)
            advance(0.25)
        elapsed = time.monotonic() - start
        log.seek(0)
        output = log.read()
    if proc.returncode != 0 or not out.is_file():
        raise _fail(pid, output, proc.returncode)
    if EXITED in output.lower():
        raise ZdebugError(
            f"pid {pid}: process exited during sampling (after {elapsed:.1f}s of {duration_s}s;"
            f" partial profile in {out})"
        )
    return Recording(out, pid, min(elapsed, duration_s), rate, gil, idle, subprocesses)


def dump(pid: int, *, subprocesses: bool = False) -> list[dict]:
    """`py-spy dump --json` of `pid` (and its Python descendants): one dict per thread
    (pid, thread_name, os_thread_id, active, owns_gil, frames innermost first)."""
    exe = executable()
    check_pid(pid)
    threads = _dump_one(exe, pid)
    if subprocesses:  # py-spy's --json output ignores --subprocesses: dump each child
        for child in psutil.Process(pid).children(recursive=True):
            try:
                threads += _dump_one(exe, child.pid)
            except ZdebugError:
                continue  # not Python, or gone meanwhile
    return threads


def _dump_one(exe: str, pid: int) -> list[dict]:
    proc = subprocess.run([exe, "dump", "--pid", str(pid), "--json"], capture_output=True, text=True, timeout=SLACK_S)
    if proc.returncode != 0:
        raise _fail(pid, proc.stdout + proc.stderr, proc.returncode)
    return _dump_threads(pid, proc.stdout)


def _dump_threads(pid: int, text: str) -> list[dict]:
    try:
        threads = json.loads(text)
    except ValueError:
        raise ZdebugError(f"pid {pid}: py-spy dump printed no JSON ({text[:60]!r})") from None
    if not isinstance(threads, list):
        raise ZdebugError(f"pid {pid}: py-spy dump printed {type(threads).__name__}, not a thread list")
    return threads
