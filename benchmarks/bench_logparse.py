"""Timeline rebuild from a large coordinator log vs `grep -c 'complete, '` on the same file.

The generated log is the 12 h tail of the public 3,000-worker incident: 5,000 shards, 4,999 done in
the first hour, then `4999/5000 complete, 1 in-flight, 0 queued, 3000/3180 workers alive, 180 dead`
every 5 s while one shard is requeued on infra failures (heartbeat timeouts), with pull_task spam
from the idle workers filling the rest. Line prefixes mix Python logging, glog-like and Iris forms.
Size: `ZDEBUG_BENCH_LOG_MB` (default 1024; `--quick` 64).
"""

from __future__ import annotations

import os
import random
import resource
import subprocess
import tempfile
import time
from pathlib import Path

from zephyr_debug.sources import logtext

EXEC = "20261202-090000-1a2b3c4d"
STAGE = "stage0-Map → Write"
SHARDS, WORKERS, ALIVE = 5000, 3180, 3000
HOURS = 12
TICK_S = 5.0
STUCK = 4321
TARGET = 0.25


def _prefix(ts: float, form: int, level: str = "INFO") -> str:
    t = time.gmtime(ts)
    if form == 0:
        return f"{time.strftime('%Y-%m-%d %H:%M:%S', t)},{int(ts * 1000) % 1000:03d} {level} zephyr.execution: "
    if form == 1:
        return f"{level[0]}{time.strftime('%Y%m%d %H:%M:%S', t)} 140415056467648 zephyr.execution "
    glog = f"{level[0]}{time.strftime('%Y%m%d %H:%M:%S', t)} 1404 zephyr.execution "
    return f"{time.strftime('[%H:%M:%S]', t)} task=/root/job/0 | {glog}"


def _worker(i: int) -> str:
    return f"zephyr--c205e3c7-p0-workers-a0-{i}:0"


def generate(path: Path, size: int, seed: int = 7) -> dict:
    """Writes the log; returns what a correct parse must find."""
    rnd = random.Random(seed)
    start = 1_796_200_000.0
    ticks = int(HOURS * 3600 / TICK_S)
    spam_line_bytes = 130
    expected = {"status": 0, "requeues": 0, "done": 0}
    with open(path, "w", encoding="utf-8") as out:
        out.write(_prefix(start, 0) + f"[{EXEC}] Starting stage {STAGE} (map_worker) with {SHARDS} tasks\n")
        for w in range(WORKERS):
            out.write(_prefix(start, 0) + f"Worker {_worker(w)} registered, total: {w + 1}\n")
        completed = 0
        for tick in range(ticks):
            ts = start + tick * TICK_S
            form = (tick // 97) % 3
            p = _prefix(ts, form)
            lines = []
            if completed < SHARDS - 1:  # the first hour: shards finish
                for _ in range(min(7, SHARDS - 1 - completed)):
                    shard = completed if completed < STUCK else completed + 1
                    w = _worker(rnd.randrange(ALIVE))
                    lines.append(p + f"[{w}] Executing stage {STAGE} shard {shard} (attempt 0)")
                    lines.append(p + f"[{w}] Shard {shard} done in {rnd.uniform(20, 90):.2f}s")
                    completed += 1
                    expected["done"] += 1
                    lines.append(p + f"[{STAGE}] {completed}/{SHARDS} tasks completed")
            if tick % 360 == 180:  # every 30 min the holder of the stuck shard dies
                w = _worker(rnd.randrange(ALIVE))
                n = expected["requeues"] + 1
                lines.append(
                    _prefix(ts, form, "WARNING") + f"Zephyr worker {w} failed to heartbeat within timeout (121.3s)"
                )
                lines.append(
                    _prefix(ts, form, "WARNING") + f"Shard {STUCK} requeued from worker {w} due to infra "
                    f"failure (preemption/heartbeat). Total generation: {n + 1}, task errors so far: 0/3, "
                    f"infra-while-in-flight: {n}/20."
                )
                expected["requeues"] = n
            lines.append(
                p + f"[{EXEC}] [{STAGE}] {completed}/{SHARDS} complete, {1 if completed < SHARDS else 0} "
                f"in-flight, {max(SHARDS - completed - 1, 0)} queued, {ALIVE}/{WORKERS} workers alive, "
                f"{WORKERS - ALIVE} dead; items=1.09M (25.2/s), bytes_processed=3.41 GiB (82.1 KiB/s)"
            )
            expected["status"] += 1
            if expected["requeues"]:
                lines.append(
                    _prefix(ts, form, "WARNING") + f"[{EXEC}] Shards retried (attempts: shard count): "
                    f"{{{expected['requeues']}: 1}}"
                )
            text = "\n".join(lines) + "\n"
            out.write(text)
            budget = (size - out.tell()) / max(ticks - tick, 1)
            spam = max(int(budget / spam_line_bytes), 0)
            if spam:
                wp = _prefix(ts, form, "WARNING")
                out.write(
                    "".join(
                        f"{wp}[{_worker(rnd.randrange(WORKERS))}] Waiting for coordinator pull_task "
                        f"response ({rnd.randrange(10, 300)}s)\n"
                        for _ in range(spam)
                    )
                )
    return expected


def _timed(fn) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of this process and its finished children, result)."""

    def cpu() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    t, c = time.perf_counter(), cpu()
    result = fn()
    return time.perf_counter() - t, cpu() - c, result


def measure(path: Path) -> dict:
    """Best of a few runs each: grep, the timeline rebuild (default path: grep -F for the event
    lines), and the pure-Python scan in one process (the fallback without grep)."""
    grep = lambda: int(
        subprocess.run(
            ["grep", "-c", "complete, ", str(path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    _timed(grep)  # page cache warm-up
    grep_runs = [_timed(grep) for _ in range(3)]
    parse_runs = [_timed(lambda: logtext.load([path], path.stem)) for _ in range(2)]
    one_runs = [_timed(lambda: logtext.scan_range(str(path), 0, path.stat().st_size)) for _ in range(2)]
    return {
        "bytes": path.stat().st_size,
        "grep_s": min(r[0] for r in grep_runs),
        "grep_cpu_s": min(r[1] for r in grep_runs),
        "grep_count": grep_runs[0][2],
        "parse_s": min(r[0] for r in parse_runs),
        "scan_cpu_s": min(r[1] for r in one_runs),
        "evidence": parse_runs[0][2],
    }


def _entry(value: float, baseline: float, unit: str) -> dict:
    value, baseline = round(value, 1), round(baseline, 1)
    ratio = round(value / baseline, 6)
    return {
        "value": value,
        "unit": unit,
        "baseline": "grep -c 'complete, '",
        "baseline_value": baseline,
        "ratio": ratio,
        "target": f">= {TARGET}",
        "meets": ratio >= TARGET,
    }


def run(quick: bool = False) -> dict:
    mb = int(os.environ.get("ZDEBUG_BENCH_LOG_MB", 64 if quick else 1024))
    with tempfile.TemporaryDirectory(prefix="zdebug-bench-") as tmp:
        path = Path(tmp) / "coordinator.log"
        generate(path, mb << 20)
        r = measure(path)
    size, rows = r["bytes"], len(r["evidence"].status)
    return {
        "logparse_timeline_throughput": _entry(
            size / r["parse_s"] / 1e6,
            size / r["grep_s"] / 1e6,
            f"MB/s wall ({size >> 20} MiB log, {rows} status rows; grep -F finds the event lines)",
        ),
        "logparse_scan_cpu_throughput": _entry(
            size / r["scan_cpu_s"] / 1e6,
            size / r["grep_cpu_s"] / 1e6,
            "MB/s per CPU second of the pure-Python scan, the fallback without grep (one process; "
            "grep's CPU time as baseline)",
        ),
    }
