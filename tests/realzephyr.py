"""Run one small REAL marin-zephyr pipeline (fray local backend) as `python realzephyr.py SCENARIO OUTDIR`.

Logs go to stderr (the caller captures them as OUTDIR/coordinator.log, like a pulled task log); a
thread polls the in-process coordinator actor and writes OUTDIR/status.txt (the JobStatus repr
inside a JSON string, as `iris actor call … get_status` prints it) and OUTDIR/counters.json.
Scenarios: tail (a slow and a skewed shard), raise (a shard raising on every attempt), sigkill and
segv (SubprocessRunner shards killed by SIGKILL / segfaulting on every attempt).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

ROWS, ROW_S = 4, 0.05
SLOW_SHARD, SKEW_SHARD, FACTOR = 3, 6, 110  # both take ~FACTOR x a normal shard (> 4 heartbeats of 5 s)


def work(x: int, slow: bool) -> int:
    time.sleep(ROW_S * (FACTOR if slow else 1))
    return x * 2


def tail_pipeline(Dataset):
    """Shard 3: ROWS rows, each FACTOR x slower; shard 6: FACTOR x more rows at the normal rate."""
    spec = [(i, ROWS * FACTOR if i == SKEW_SHARD else ROWS) for i in range(8)]
    return (
        Dataset.from_list(spec)
        .flat_map(lambda s: [(s[0], r) for r in range(s[1])])
        .map(lambda p: work(p[1], p[0] == SLOW_SHARD))
    )


def raise_every_time(x: int) -> int:
    if x == 2:
        raise ValueError(f"bad record {x}: schema mismatch")
    return x


def sigkill(x: int) -> int:
    if x == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return x


def segv(x: int) -> int:
    if x == 1:
        ctypes.string_at(0)
    return x


class StatusPoller(threading.Thread):
    """Reads get_status/get_counters from the coordinator actor living in this process."""

    def __init__(self, out: Path):
        super().__init__(daemon=True)
        self.out, self.stop = out, threading.Event()

    def run(self) -> None:
        from fray import local_backend

        while not self.stop.wait(0.2):
            for actor in list(local_backend._local_actor_registry.values()):
                if type(actor).__name__ == "ZephyrCoordinator":
                    status = actor.get_status()
                    if status.total and not status.done:  # keep the last snapshot of a running stage
                        (self.out / "status.txt").write_text(json.dumps(repr(status)) + "\n")
                        (self.out / "counters.json").write_text(json.dumps(actor.get_counters()) + "\n")


def main(scenario: str, out: Path) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from zephyr import Dataset, ZephyrContext
    from zephyr.runners import SubprocessRunner

    out.mkdir(parents=True, exist_ok=True)
    poller = StatusPoller(out)
    poller.start()
    if scenario == "tail":
        ctx, ds = ZephyrContext(max_workers=3), tail_pipeline(Dataset)
    else:
        fn = {"raise": raise_every_time, "sigkill": sigkill, "segv": segv}[scenario]
        factory = None if scenario == "raise" else (lambda n: SubprocessRunner(num_workers=n))
        ctx = ZephyrContext(max_workers=2, stage_runner_factory=factory, max_execution_retries=0)
        ds = Dataset.from_list(list(range(4))).map(fn)
    try:
        ctx.execute(ds)
    except Exception as exc:  # the abort is the point of these scenarios
        print(f"pipeline failed: {type(exc).__name__}", file=sys.stderr)
    finally:
        poller.stop.set()
        poller.join()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
