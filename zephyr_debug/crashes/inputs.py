"""Where crashes come from: a job's evidence (+ its worker logs and kernel.log), a log file,
stdin, or a directory of crash files. Files are streamed line by line."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from zephyr_debug import jobstore
from zephyr_debug.crashes.parse import RECORD, Stats, coalesce, decode_lines, record_ts, split
from zephyr_debug.errors import EvidenceError
from zephyr_debug.model import Crash, Evidence

FAULT_PREFIXES = ("Fatal Python error", "Current thread", "Thread 0x")
OOM_KILL = re.compile(r"Killed process (\d+)")  # the kernel's (and the reference watchdog's) kill line
CRASH_FILE_GLOBS = ("*.txt", "*.log")


def stream(path: str, stats: Stats) -> Iterator[Crash]:
    """Crash reports in one file, or in stdin when `path` is `-`."""
    if path == "-":
        yield from coalesce(split(decode_lines(sys.stdin.buffer, stats), "<stdin>", stats))
        return
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot read ({exc.strerror})") from None
    with fh:
        yield from coalesce(split(decode_lines(fh, stats), path, stats))


def directory(root: Path, stats: Stats) -> Iterator[Crash]:
    """Every `*.txt` / `*.log` file under `root`; a file holding one report is cited by name alone
    and dated by its modification time."""
    files = sorted({p for pattern in CRASH_FILE_GLOBS for p in root.rglob(pattern) if p.is_file()})
    if not files:
        raise EvidenceError(f"{root}: no *.txt or *.log files and no events.jsonl")
    for path in files:
        found = list(stream(str(path), stats)) if path.suffix == ".txt" else None
        if found is None:
            yield from stream(str(path), stats)
            continue
        if len(found) == 1:
            found[0].line = None
            found[0].ts = found[0].ts or path.stat().st_mtime  # a crash file is written when it happens
        yield from found


def job(ev: Evidence, stats: Stats) -> list[Crash]:
    """The job's crashes: one per failed attempt (copies: `ev.crashes` is left as it is). A worker
    killed with no crash file gets the faulthandler dump its log holds (inline runner SIGSEGV);
    an OOM or a worker loss gets the kernel's kill line of its process (tree)."""
    crashes = [_first_report(c) for c in ev.crashes]
    job_dir = Path(ev.source)
    if not job_dir.is_dir() or not jobstore.is_job_dir(job_dir):
        return crashes
    by_run = {(c.worker, c.shard, c.attempt): c for c in crashes}
    for log in sorted(job_dir.glob("workers/*.log")):
        for dump in stream(str(log), stats):
            if not dump.text.startswith(FAULT_PREFIXES):
                continue
            crash = by_run.get((dump.worker, dump.shard, dump.attempt))
            if crash is None:
                crashes.append(dump)
            elif crash.kind == "infra":
                crash.text, crash.source, crash.line, crash.kind = dump.text, dump.source, dump.line, "segv"
    _oom_kills(job_dir, crashes)
    return crashes


def _first_report(crash: Crash) -> Crash:
    """A copy of `crash`; a loader's crash text may run on past its report (log lines, the next
    crash): the copy keeps the first."""
    if crash.text.count("\n") > 1:
        first = next(coalesce(split(crash.text.splitlines(), crash.source)), None)
        if first is not None:
            return replace(crash, text=first.text)
    return replace(crash)


def kill_line(text: str) -> str | None:
    """The kernel's OOM kill line at the head of a crash text (put there by `job`), if any."""
    head = text.split("\n", 1)[0]
    return head if OOM_KILL.search(head) else None


def _oom_kills(job_dir: Path, crashes: list[Crash]) -> None:
    """An OOM (subprocess runner) or infra loss (inline runner) right after the kernel (the OOM
    watchdog) killed a process of that worker is an OOM, shown with the kill line."""
    kernel_log = job_dir / "kernel.log"
    if not kernel_log.is_file():
        return
    kills = []
    for line in kernel_log.read_text(errors="replace").splitlines():
        if kill := OOM_KILL.search(line):
            record = RECORD.match(line)
            kills.append((int(kill.group(1)), record_ts(record), (record["message"] if record else line).strip()))
    if not kills:
        return
    pids = {
        e["pid"]: e["worker"]
        for e in jobstore.read_events(job_dir / jobstore.EVENTS)
        if e["type"] in ("worker_registered", "oom_kill") and "pid" in e
    }
    for pid, ts, line in kills:
        lost = [
            c
            for c in crashes
            if c.kind in ("infra", "oom")
            and c.worker == pids.get(pid)
            and (ts is None or c.ts is None or c.ts >= ts - 1)
            and kill_line(c.text) is None
        ]
        if lost:
            first = min(lost, key=lambda c: c.ts or 0)
            first.kind = "oom"
            first.text = f"{line}\n{first.text}"
