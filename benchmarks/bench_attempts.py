"""Many attempts of one shard (issue "Hostile and odd input, round two", item 5): a log holding
one execution's lines many times, and one shard failing over and over. The fold's look-ups of a
shard's attempts are O(1) (compact.AttemptTable indexes a shard past DEEP attempts), so the cost
per copy / per attempt stays flat: the ratio of the large case's per-unit time to the small
one's, measured in the same run, is the figure (1.0 = linear)."""

from __future__ import annotations

import shutil
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
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out
