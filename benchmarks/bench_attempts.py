"""Many attempts of one shard (issue "Hostile and odd input, round two", item 5): a log holding
one execution's lines many times, and one shard failing over and over. The fold's look-ups of a
shard's attempts are O(1) (compact.AttemptTable indexes a shard past DEEP attempts), so the cost
per copy / per attempt stays flat: the ratio of the large case's per-unit time to the small
one's, measured in the same run, is the figure (1.0 = linear).

Item 6: one line of hundreds of MB inside a job's log is skipped (logtext.MAX_LINE_BYTES), so the
load costs about a read of the file: its time against `wc -l` over the same file, and its peak
memory (in a child process) against the same load without the line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from zephyr_debug import zephyrlog
from zephyr_debug.sources import logtext

TARGET = 2.0  # per-unit cost at 10x the size within 2x of the small case's


def _timed_load(path: Path) -> float:
    t = time.perf_counter()
    logtext.load([path], "bench")
    return time.perf_counter() - t


def _one_shard_failing(path: Path, attempts: int) -> None:
    start = 1_796_200_000.0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(zephyrlog.timestamp(start) + " INFO zephyr.execution: [x] Starting stage s0 (map) with 1 tasks\n")
        for k in range(attempts):
            ts = zephyrlog.timestamp(start + k)
            w = f"zephyr-b-p0-workers-a0-{k % 50}:0"
            fh.write(f"{ts} INFO zephyr.execution: [{w}] Executing stage s0 shard 0 (attempt {k})\n")
            fh.write(
                f"{ts} WARNING zephyr.execution: Shard 0 requeued from worker {w} due to infra failure "
                f"(preemption/heartbeat). Total generation: {k + 1}, task errors so far: 0/3, "
                f"infra-while-in-flight: {k + 1}/100000.\n"
            )


def run(quick: bool = False) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from logmaker import Knobs, make_job

    work = Path(tempfile.mkdtemp(prefix="zdebug-bench-attempts-"))
    out = {}
    try:
        (text,) = make_job(Knobs(seed=3, stages=1, shards=20, workers=3, task_errors=0.1, foreign=0.0)).values()
        small, large = (10, 100) if quick else (100, 1000)
        times = {}
        for copies in (small, large):
            path = work / f"copies-{copies}.log"
            path.write_text(text * copies, encoding="utf-8")
            times[copies] = _timed_load(path) / copies
        out["attempts_repeated_execution"] = {
            "value": times[large] * 1e3,
            "unit": f"ms per copy at {large} copies",
            "baseline": f"ms per copy at {small}",
            "baseline_value": times[small] * 1e3,
            "ratio": times[large] / times[small],
            "target": f"<= {TARGET:g}x (linear)",
            "meets": times[large] / times[small] <= TARGET,
        }
        few, many = (100, 1000) if quick else (1000, 10_000)
        per = {}
        for n in (few, many):
            path = work / f"attempts-{n}.log"
            _one_shard_failing(path, n)
            per[n] = _timed_load(path) / n
        out["attempts_one_shard"] = {
            "value": per[many] * 1e6,
            "unit": f"us per attempt at {many:,} attempts of one shard",
            "baseline": f"us per attempt at {few:,}",
            "baseline_value": per[few] * 1e6,
            "ratio": per[many] / per[few],
            "target": f"<= {TARGET:g}x (linear)",
            "meets": per[many] / per[few] <= TARGET,
        }
        out.update(_long_line(work, text, (32 if quick else 256) << 20))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


LOAD_IN_CHILD = (
    "import json, resource, sys, time; from pathlib import Path; from zephyr_debug.sources import logtext; "
    "t = time.perf_counter(); ev = logtext.load([Path(sys.argv[1])], 'bench'); took = time.perf_counter() - t; "
    "print(json.dumps([took, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10, ev.warnings]))"
)


def _long_line(work: Path, text: str, size: int) -> dict:
    plain, long = work / "plain.log", work / "long.log"
    plain.write_text(text, encoding="utf-8")
    lines = text.splitlines(keepends=True)
    with open(long, "w", encoding="utf-8") as fh:
        fh.writelines(lines[: len(lines) // 2])
        fh.write(zephyrlog.timestamp(1_796_200_000.0) + " INFO zephyr.execution: ")
        for _ in range(size >> 20):
            fh.write("x" * (1 << 20))
        fh.write("\n")
        fh.writelines(lines[len(lines) // 2 :])
    root = str(Path(__file__).resolve().parents[1])
    runs = {}
    for name, path in (("plain", plain), ("long", long)):
        argv = [sys.executable, "-c", LOAD_IN_CHILD, str(path)]
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=root)
        if proc.returncode != 0:
            raise RuntimeError(f"loading {path.name} failed: {proc.stderr.strip()[-300:]}")
        runs[name] = json.loads(proc.stdout)
    t = time.perf_counter()
    subprocess.run(["wc", "-l", str(long)], capture_output=True, check=True)
    wc = time.perf_counter() - t
    took, rss, warnings = runs["long"]
    return {
        "long_line_load": {
            "value": took,
            "unit": f"s to load a job log holding one {size >> 20} MB line",
            "baseline": "s of wc -l over the same file",
            "baseline_value": wc,
            "ratio": took / wc,
            "target": "report only",
            "meets": any("skipped 1 line" in w for w in warnings),
        },
        "long_line_peak_rss": {
            "value": rss,
            "unit": "MB peak RSS of that load",
            "baseline": "MB peak RSS without the line",
            "baseline_value": runs["plain"][1],
            "ratio": rss / runs["plain"][1],
            "target": "< baseline + 64 MB (the line is never held)",
            "meets": rss < runs["plain"][1] + 64,
        },
    }
