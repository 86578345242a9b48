"""A small real Zephyr pipeline for the Iris integration test, run in an Iris task as
`python -m iris_pipeline` (PYTHONPATH = this dir): 6 shards on 2 workers; shard 4 sleeps
ZDEBUG_TEST_SLOW_S busy on a third of a core (the straggler); shard 2 raises on its first two attempts (a crash group of
two identical tracebacks), then succeeds. Attempts are counted with files in ZDEBUG_TEST_MARKS."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

SLOW_SHARD, CRASH_SHARD, CRASHES = 4, 2, 2


def work(shard: int) -> int:
    marks = Path(os.environ["ZDEBUG_TEST_MARKS"])
    if shard == CRASH_SHARD:
        seen = len(list(marks.glob("crash-*")))
        if seen < CRASHES:
            (marks / f"crash-{seen}").touch()
            raise ValueError(f"bad record in shard {shard}: schema mismatch")
    if shard == SLOW_SHARD:
        grind(float(os.environ["ZDEBUG_TEST_SLOW_S"]))
    else:
        time.sleep(0.5)
    return shard * 2


def grind(seconds: float) -> None:
    """Busy a third of a core for `seconds`: a CPU-bound straggler that a profile can see
    (py-spy skips idle threads, so a sleeping shard would leave no samples)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        spin = time.monotonic() + 0.02
        while time.monotonic() < spin:
            pass
        time.sleep(0.04)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from zephyr import Dataset, ZephyrContext

    ctx = ZephyrContext(max_workers=2, name="zdebug-test", max_execution_retries=0)
    print("results:", ctx.execute(Dataset.from_list(list(range(6))).map(work)).results, flush=True)


if __name__ == "__main__":
    main()
