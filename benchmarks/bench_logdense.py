"""Event-dense coordinator + worker log (no spam): peak RSS and throughput of the timeline rebuild.

The generated log is what a long job with 100k+ shards writes: stages of `SHARDS` shards run by
`WORKERS` workers, each shard an `Executing … shard` line, a `done in` line and a status line
(`n/N complete, … items=…`), a task-error requeue every `REQUEUE_EVERY` shards (then a second
attempt), and a tail per stage (queue empty, shards finishing one by one; the last stage's final
shard stuck with its item count frozen). Every line comes from `zephyrlog`'s writer formats.
Size: `ZDEBUG_BENCH_DENSE_MB` (default 1024; `--quick` 48, whole stages: ~93 MiB). The load runs in a child process so
that its peak RSS (`ru_maxrss`) is the rebuild's alone. Baselines measured in the same run: `grep -c`
for the three dense lines' words over the same file, and the per-line fold (`dense=False`) on a
PER_LINE_MB slice next to the bulk fold on the same slice.
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

from zephyr_debug import zephyrlog

EXEC = "20261202-090000-5e6f7a8b"
SHARDS, WORKERS = 100_000, 1_000
REQUEUE_EVERY = 997
STUCK_S = 1_800.0  # the last stage's final shard: items frozen this long
TICK_S = 0.05  # coordinator time between two shard completions
STAGE_BYTES_PER_SHARD = 490  # what a stage writes per shard (three lines)
RSS_TARGET_MB = 1024
SPEED_TARGET = 50.0  # MB/s
PER_LINE_MB = 64  # the slice both folds read for the bulk / per-line ratio
BULK_SPEEDUP_TARGET = 3.0  # on the slice (start-up and the frames weigh more than on 1 GiB: ~8x there)


def _worker(i: int) -> str:
    return f"zephyr-dense-p0-workers-a0-{i}:0"


def generate(path: Path, size: int, seed: int = 11, shards: int = SHARDS, workers: int = WORKERS) -> dict:
    """Writes stages of `shards` shards until the file holds `size` bytes; returns what a correct
    parse must find."""
    rnd = random.Random(seed)
    ts = 1_796_200_000.0
    exp = {"stages": 0, "status": 0, "done": 0, "requeues": 0, "lines": 0}
    stamp = zephyrlog.timestamp
    with open(path, "w", encoding="utf-8") as out:

        def emit(lines: list[str]) -> None:
            out.write("".join(lines))
            exp["lines"] += len(lines)

        emit(
            [f"{stamp(ts)} INFO zephyr.execution: " + zephyrlog.PIPELINE.format(exec=EXEC) + "\n"]
            + [
                f"{stamp(ts)} INFO zephyr.execution: " + zephyrlog.REGISTERED.format(worker=_worker(w), n=w + 1) + "\n"
                for w in range(workers)
            ]
        )
        while out.tell() < size:
            index = exp["stages"]
            stage = f"stage{index}-Map → Write"
            last = out.tell() + shards * STAGE_BYTES_PER_SHARD >= size  # the final stage ends stuck
            ts = _stage(emit, rnd, stage, ts, last, exp, shards, workers)
            exp["stages"] += 1
    exp["bytes"] = path.stat().st_size
    return exp


def _stage(emit, rnd: random.Random, stage: str, ts: float, last: bool, exp: dict, shards: int, workers: int) -> float:
    """One stage: every shard executed and done (requeues among them), a status line per
    completion, then its tail (queue empty, one completion every 2 s). Returns its end time."""
    fmt, stamp = zephyrlog, zephyrlog.timestamp
    co, wo = " INFO zephyr.execution: ", " INFO zephyr.worker: "
    emit([stamp(ts) + co + fmt.STAGE_START.format(exec=EXEC, stage=stage, ops="map_worker", n=shards) + "\n"])
    items, completed, lines = 0, 0, []
    queued, running, free = deque(range(shards)), [], list(range(workers))
    attempts: dict[int, int] = {}
    stuck = shards - 1 if last else -1

    def status() -> None:
        lines.append(
            stamp(ts)
            + co
            + fmt.STATUS.format(
                exec=EXEC,
                stage=stage,
                completed=completed,
                total=shards,
                in_flight=len(running),
                queued=len(queued),
                alive=workers,
                registered=workers,
                dead=0,
            )
            + fmt.THROUGHPUT.format(
                items=fmt.human_count(items), item_rate="25.2", bytes="3.41 GiB", byte_rate="82.1 KiB"
            )
            + "\n"
        )
        exp["status"] += 1

    while queued or running:
        while queued and free:
            shard, w = queued.popleft(), free.pop()
            running.append((shard, attempts.get(shard, 0), w))
            lines.append(
                stamp(ts)
                + wo
                + fmt.EXECUTING.format(worker=_worker(w), stage=stage, shard=shard, attempt=attempts.get(shard, 0))
                + "\n"
            )
        if running[0][0] == stuck and len(running) == 1:  # the job ends here, its last shard stuck
            for _ in range(int(STUCK_S / 5)):
                ts += 5.0
                status()
            break
        pick = rnd.randrange(len(running))
        while running[pick][0] == stuck:
            pick = rnd.randrange(len(running))
        shard, attempt, w = running.pop(pick)
        free.append(w)
        ts += TICK_S if queued else 2.0
        if shard % REQUEUE_EVERY == 1 and attempt == 0:
            lines.append(
                stamp(ts)
                + " WARNING zephyr.execution: "
                + fmt.TASK_REQUEUE.format(shard=shard, worker=_worker(w), n=1, max=3)
                + "\n"
            )
            attempts[shard] = 1
            queued.append(shard)
            exp["requeues"] += 1
        else:
            lines.append(
                stamp(ts) + wo + fmt.SHARD_DONE.format(worker=_worker(w), shard=shard, secs=rnd.uniform(20, 90)) + "\n"
            )
            completed += 1
            items += rnd.randrange(900, 1100)
            exp["done"] += 1
        status()
        if len(lines) >= 4096:
            emit(lines)
            lines = []
    emit(lines)
    return ts


def _child(path: str, dense: bool = True) -> None:
    """In the child: load the log (`dense`: the bulk path), print timings, rows and peak RSS as JSON."""
    from zephyr_debug.sources import logtext

    t = time.perf_counter()
    ev = logtext.load([Path(path)], Path(path).stem, dense=dense)
    wall = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(
        json.dumps(
            {
                "wall_s": wall,
                "rss": max(rss, kids),
                "status_rows": len(ev.status),
                "attempts": len(ev.attempts),
                "done": int((ev.attempts["outcome"] == "done").sum()),
                "state": ev.state,
                "stages": len(ev.stages),
            }
        )
    )


def measure(path: Path, dense: bool = True, engine: str | None = None) -> dict:
    """One child-process load (after a page-cache warm-up read); `engine`: the bulk parse's
    (denseparse.ENGINE_ENV: `arrow`, `re`), else its default."""
    from zephyr_debug.sources.denseparse import ENGINE_ENV

    with open(path, "rb") as fh:
        while fh.read(1 << 24):
            pass
    env = {k: v for k, v in os.environ.items() if k != ENGINE_ENV} | ({ENGINE_ENV: engine} if engine else {})
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_logdense", str(path), *([] if dense else ["--per-line"])],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _grep_s(path: Path) -> float:
    """Wall seconds of `grep -c` for the dense lines' words (the same run's baseline)."""
    t = time.perf_counter()
    from zephyr_debug.sources.logtext import DENSE_WORDS

    words = [a for w in DENSE_WORDS for a in ("-e", w.decode())]
    subprocess.run(["grep", "-c", "-F", *words, str(path)], capture_output=True, check=False)
    return time.perf_counter() - t


def run(quick: bool = False) -> dict:
    mb = int(os.environ.get("ZDEBUG_BENCH_DENSE_MB", 48 if quick else 1024))
    with tempfile.TemporaryDirectory(prefix="zdebug-bench-") as tmp:
        path, part = Path(tmp) / "coordinator.log", Path(tmp) / "part.log"
        exp = generate(path, mb << 20)
        r = measure(path)
        grep_s = _grep_s(path)
        by_re = measure(path, engine="re")  # the re.split parse on the same file (the compiled one's baseline)
        generate(part, min(mb, PER_LINE_MB) << 20)  # the per-line fold on a slice (it runs ~8 MB/s)
        bulk, per_line = measure(part), measure(part, dense=False)
    size = exp["bytes"]
    speed, rss_mb = size / r["wall_s"] / 1e6, r["rss"] / (1 << 20)
    what = (
        f"{size >> 20} MiB, {exp['lines'] / 1e6:.1f}M event lines, {r['attempts']:,} attempts, "
        f"{exp['status']:,} status lines -> {r['status_rows']:,} rows"
    )
    return {
        "logdense_throughput": {
            "value": round(speed, 1),
            "unit": f"MB/s wall ({what})",
            "baseline": "target",
            "baseline_value": SPEED_TARGET,
            "ratio": round(speed / SPEED_TARGET, 3),
            "target": f">= {SPEED_TARGET:g} MB/s",
            "meets": speed >= SPEED_TARGET,
        },
        "logdense_vs_grep": {
            "value": round(r["wall_s"], 2),
            "unit": "s wall to load the dense log (grep -c for its three words on the same file: baseline)",
            "baseline": "grep -c -F",
            "baseline_value": round(grep_s, 2),
            "ratio": round(grep_s / r["wall_s"], 3),
            "target": "report only",
            "meets": True,
        },
        "logdense_compiled_vs_re": {
            "value": round(r["wall_s"], 2),
            "unit": "s wall to load the dense log, compiled bulk parse (densearrow; re.split parse: baseline)",
            "baseline": "re.split bulk parse",
            "baseline_value": round(by_re["wall_s"], 2),
            "ratio": round(by_re["wall_s"] / r["wall_s"], 3),
            "target": "report only",
            "meets": True,
        },
        "logdense_bulk_vs_per_line": {
            "value": round(bulk["wall_s"], 2),
            "unit": f"s wall, bulk fold of a {min(mb, PER_LINE_MB)} MiB slice (per-line fold: baseline)",
            "baseline": "per-line fold",
            "baseline_value": round(per_line["wall_s"], 2),
            "ratio": round(per_line["wall_s"] / bulk["wall_s"], 3),
            "target": f">= {BULK_SPEEDUP_TARGET:g}x",
            "meets": per_line["wall_s"] >= BULK_SPEEDUP_TARGET * bulk["wall_s"],
        },
        "logdense_peak_rss": {
            "value": round(rss_mb, 1),
            "unit": "MB peak RSS of the child process",
            "baseline": "target",
            "baseline_value": RSS_TARGET_MB,
            "ratio": round(rss_mb / RSS_TARGET_MB, 3),
            "target": f"< {RSS_TARGET_MB} MB",
            "meets": rss_mb < RSS_TARGET_MB,
        },
    }


if __name__ == "__main__":
    _child(sys.argv[1], dense="--per-line" not in sys.argv)
