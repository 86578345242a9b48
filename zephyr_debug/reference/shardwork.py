"""The shard code: real pandas/pyarrow work writing Parquet, with injected faults.

Runs inline in a worker, or as a child (`python -u -X faulthandler -m
zephyr_debug.reference.shardwork`) reading its job from stdin and writing
`P <items> <bytes>` progress lines, then `R <json>` (result) or `E <json>` (traceback).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from zephyr_debug.reference.faults import KINDS, Fault, from_dicts

Progress = Callable[[int, int], None]
OOM_STEP_BYTES = 32 << 20
USER_COUNTERS = ("records_in", "dropped_records", "valid_records")  # zephyr.counters.increment names
OOM_SAFETY_CAP_BYTES = 6 << 30  # never let a missing watchdog take the machine down


def run_shard(task: dict, faults: list[Fault], scratch: Path, progress: Progress, worker_index: int) -> dict:
    """Process one shard in chunks; returns {"items", "bytes", "output", "counters"} (user counters)."""
    work = task["work"]
    stage, shard, attempt = task["stage_index"], task["shard"], task["attempt"]
    rows = int(work.get("rows", 20_000))
    chunk_rows = int(work.get("chunk_rows", 2_000))
    pace = float(work.get("chunk_seconds", 0.05))
    fired = {f.kind: f for f in faults if f.hits(stage, shard, attempt)}
    slow = max([f.factor for f in faults if f.kind == "slow-worker" and f.target == worker_index] or [1.0])
    kill = [f for f in faults if f.kind == "kill-worker" and f.target == worker_index and f.stage == stage]
    staged = {f.kind: f.factor for f in faults if KINDS[f.kind][0] == "stage" and f.target == stage}
    counters = dict.fromkeys(USER_COUNTERS, 0)
    if "skew-shard" in fired:
        rows = int(rows * fired["skew-shard"].factor)
    rng = np.random.default_rng(1000 * stage + shard)
    outputs, items, nbytes = [], 0, 0
    for start in range(0, rows, chunk_rows):
        began = time.perf_counter()
        frame = _make_chunk(rng, min(chunk_rows, rows - start), start)
        if start <= rows // 2 < start + chunk_rows:  # the chunk holding the midpoint: once
            _midway_faults(fired, frame, shard)
            if kill:
                _kill_own_worker(scratch, kill[0])
        dropped = _dropped(frame, staged.get("drop-records", 0.0))
        counters["records_in"] += len(frame)
        counters["dropped_records"] += int(dropped.sum())
        counters["valid_records"] += int((~dropped).sum())
        outputs.append(_transform(frame[~dropped]))
        if "slow-shard" in fired:
            _expensive_records(frame["text"], pace * (fired["slow-shard"].factor - 1))
        time.sleep(pace)  # the I/O part of the shard (reading the input split)
        stretch = slow * staged.get("slow-stage", 1.0)  # a slow worker or stage: CPU and I/O alike
        if stretch > 1:  # so the factor holds however busy the machine makes the CPU part
            time.sleep((stretch - 1) * (time.perf_counter() - began))
        items += len(frame)
        nbytes += int(frame.memory_usage(deep=True).sum())
        progress(items, nbytes)
    scratch.mkdir(parents=True, exist_ok=True)
    out = scratch / f"stage{stage}-shard{shard:05d}-a{attempt}.parquet"
    pq.write_table(pa.Table.from_pandas(pd.concat(outputs), preserve_index=False), out)
    return {"items": items, "bytes": nbytes, "output": str(out), "counters": counters}


def _make_chunk(rng: np.random.Generator, n: int, offset: int) -> pd.DataFrame:
    keys = rng.integers(0, 64, n)
    return pd.DataFrame(
        {
            "row": np.arange(offset, offset + n),
            "key": keys,
            "value": rng.normal(size=n),
            "text": pd.Series(keys).map(lambda k: f"user-{k:04d}-" + "x" * int(k % 17)),
        }
    )


def _dropped(frame: pd.DataFrame, rate: float) -> pd.Series:
    """Records the shard drops: out-of-range values (about 0.13% naturally), plus a
    deterministic `rate` share of rows with the drop-records fault."""
    natural = frame["value"].abs() > 3.2
    if not rate:
        return natural
    return natural | ((frame["row"] * 2654435761) % 10_000 < rate * 10_000)


def _transform(frame: pd.DataFrame) -> pd.DataFrame:
    grouped = frame.groupby("key", as_index=False).agg(n=("row", "size"), mean=("value", "mean"))
    grouped["score"] = grouped["mean"].rolling(4, min_periods=1).sum()
    return grouped


def _midway_faults(fired: dict[str, Fault], frame: pd.DataFrame, shard: int) -> None:
    if "exception" in fired:
        _validate_records(frame, shard)
    if "crash-loop" in fired:
        _cast_columns(frame)
    if "oom" in fired:
        _load_whole_split()
    if "segfault" in fired:
        _native_decode()
    if "hang" in fired:
        _wait_for_remote(fired["hang"].seconds)


def _expensive_records(texts: pd.Series, seconds: float) -> None:
    """CPU-bound per-record work (a pure-Python hash) for about `seconds`."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for text in texts[:200].tolist():  # plain str: the time goes to the hash, not pandas iteration
            _score_record(text)


def _score_record(text: str) -> int:
    h = 0
    for ch in text:
        h = (h * 31 + ord(ch)) & 0xFFFFFFFF
    return h


def _lookup_user(record: dict) -> str:
    return record["user_id"]


def _validate_records(frame: pd.DataFrame, shard: int) -> None:
    """A user exception with a chained cause: a KeyError wrapped in a ValueError."""
    row = int(frame["row"].iloc[0])
    try:
        _lookup_user({"row": row, "key": int(frame["key"].iloc[0])})
    except KeyError as exc:
        raise ValueError(f"bad record at row {row} in shard {shard}: missing field") from exc


def _cast_columns(frame: pd.DataFrame) -> None:
    """Deterministic bad data: pyarrow refuses to cast text to int64, on every attempt."""
    pa.array(frame["text"].tolist(), type=pa.int64())


def _load_whole_split() -> None:
    """Reads 'the whole split into memory': grows RSS until the OOM watchdog kills us."""
    blocks: list[np.ndarray] = []
    while len(blocks) * OOM_STEP_BYTES < OOM_SAFETY_CAP_BYTES:
        blocks.append(np.ones(OOM_STEP_BYTES, dtype=np.uint8))
        time.sleep(0.02)
    raise MemoryError("reference OOM fault exceeded its safety cap without being killed")


def _native_decode() -> None:
    """A native crash: reads address 0 (a real SIGSEGV)."""
    ctypes.string_at(0)


def _kill_own_worker(scratch: Path, fault: Fault) -> None:
    """SIGKILL the worker's whole process group (worker + shard child), `times` times per fault
    (once by default): markers in the scratch dir keep the respawned worker from doing it again."""
    markers = [
        scratch / (f".fault-{fault.kind}-{fault.target}" + (f"-{n}" if n else "")) for n in range(fault.times or 1)
    ]
    marker = next((m for m in markers if not m.exists()), None)
    if marker is None:
        return
    scratch.mkdir(parents=True, exist_ok=True)
    marker.touch()
    os.killpg(os.getpgid(0), signal.SIGKILL)


def _wait_for_remote(seconds: float | None) -> None:
    """Blocks with no progress, like a call to a service that never answers."""
    threading.Event().wait(seconds)


def _child_main() -> int:
    job = json.loads(sys.stdin.read())

    def progress(items: int, nbytes: int) -> None:
        print(f"P {items} {nbytes}", flush=True)

    try:
        result = run_shard(job["task"], from_dicts(job["faults"]), Path(job["scratch"]), progress, job["worker_index"])
    except Exception:
        print("E " + json.dumps(traceback.format_exc()), flush=True)
        return 1
    print("R " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
