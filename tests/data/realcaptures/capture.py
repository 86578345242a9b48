"""Capture real marin-zephyr runs (fray local backend) with natural variance, as test evidence.

`python tests/data/realcaptures/capture.py [SCENARIO …]` (default: all) runs each scenario in a
child process (`capture.py --run SCENARIO OUT`) whose stderr, as a user would pull it, becomes
OUT/coordinator.log; tests/realzephyr.StatusPoller writes status.txt (the last get_status of a
running stage) and counters.json; the parent then writes OUT/truth.json. Nothing is edited after
the run. Shards sleep: item counts and per-record times are lognormal from a seeded RNG, so the
spread is natural and the machine adds its own noise.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # tests/: realzephyr's StatusPoller

STUCK_S = 40.0  # the stuck shard blocks this long on its first record
DROP_EVERY, DROP_EVERY_FAULTY = 20, 2  # a shard drops every N-th record; the faulty shard x10 as many
SKEW = 12  # the skewed shard holds SKEW x the median item count
ITEMS_SIGMA, COST_SIGMA, JITTER_SIGMA = 0.35, 0.2, 0.3  # lognormal: records per shard, cost per shard, per record


@dataclass(frozen=True)
class Scenario:
    """One capture: the workload, the injected fault and what an expert concludes from its log."""

    name: str
    shards: int
    workers: int
    seed: int
    item_s: float  # median time per record
    items: int = 20  # median records per shard
    items_sigma: float = ITEMS_SIGMA
    reduce_s: float = 0.0  # > 0: a group_by stage follows, its reducer takes this per record
    fault: str = ""  # skew | stuck | raise | flaky | sigkill | hotkey (in the reduce stage) | drop
    shard: int | None = None  # the faulty shard
    context: dict = field(default_factory=dict)  # extra ZephyrContext arguments
    expect: tuple = ()  # (shard, cause) pairs the evidence supports
    job: tuple = ()  # job-level causes
    info: tuple = ()  # (shard, kind) information, not faults

    def truth(self, stage: str) -> dict:
        out = {"scenario": self.name, "healthy": not (self.expect or self.job),
               "expect": [{"stage": stage, "shard": s, "cause": c} for s, c in self.expect],
               "job": list(self.job),
               "info": [{"stage": stage, "shard": s, "kind": k} for s, k in self.info]}
        if self.fault == "drop":  # the user counters' totals, from the plan (not from the log)
            recs = [r for spec in plan(self) for r in records(spec)]
            out["counters"] = {"records_in": len(recs),
                               "dropped_records": sum(dropped(r, self.shard) for r in recs)}
        return out


SCENARIOS = {s.name: s for s in [
    # Natural spread only: log run time sd ~0.4 (wider than the 48 s median / 80 s p99 stage).
    Scenario("healthy", shards=30, workers=6, seed=11, item_s=0.5),
    # The same with sigma 0.5 on item counts (log run time sd ~0.6): the slowest shard runs 4.6x the median.
    Scenario("healthy-wide", shards=30, workers=6, seed=11, item_s=0.5, items_sigma=0.5),
    # Shard 33 holds 12x the records at the normal per-record cost; it runs late, in the tail. The
    # status lines' items= rise at the stage's usual rate while it is alone in flight.
    Scenario("skew", shards=40, workers=4, seed=23, item_s=0.15, fault="skew", shard=33,
             expect=((33, "data-skew"),)),
    # Shard 31 blocks 40 s on its first record; heartbeats continue, items= stays frozen.
    Scenario("stuck", shards=40, workers=4, seed=37, item_s=0.15, fault="stuck", shard=31,
             expect=((31, "stuck"),)),
    # Shard 12 raises on every attempt: abort after 3 task errors.
    Scenario("crashloop", shards=40, workers=4, seed=41, item_s=0.1, fault="raise", shard=12,
             context={"max_execution_retries": 0}, expect=((12, "crash-loop"),)),
    # Shard 9 raises on its first attempt only: the retry succeeds, the job is healthy.
    Scenario("recovered", shards=30, workers=4, seed=53, item_s=0.1, fault="flaky", shard=9,
             info=((9, "recovered"),)),
    # SubprocessRunner: shard 5's child is SIGKILLed on every attempt (MemoryError, abort after 3).
    Scenario("oom", shards=30, workers=3, seed=61, item_s=0.05, items=10, fault="sigkill", shard=5,
             context={"max_execution_retries": 0}, expect=((5, "oom"), (5, "crash-loop"))),
    # Heartbeat timeout (1 s) below the heartbeat interval (5 s) on long shards: every worker is marked
    # failed while busy, then `No alive workers for …` aborts the pipeline.
    Scenario("alldead", shards=30, workers=3, seed=71, item_s=0.6, fault="", context={
        "heartbeat_timeout": 1.0, "no_workers_timeout": 8.0, "max_execution_retries": 0},
        job=("all-workers-dead",)),
    # User counters: every record counts records_in; shards drop every 20th record (dropped_records),
    # shard 22 every 2nd (x10 per item). The log's `Final counters` and get_counters are job-wide
    # sums with no stage or shard: no per-shard evidence, so no finding (healthy).
    Scenario("counters", shards=30, workers=4, seed=97, item_s=0.05, fault="drop", shard=22),
    # Map, then group_by: one hot key routes SKEW x a reduce shard's records to reduce shard 27. In the
    # reduce stage items= counts reducer outputs (flat while the hot key is reduced); the size evidence
    # is that shard's `ScatterReader for shard 27: … max_chunk_rows=…` line.
    Scenario("hotkey", shards=30, workers=4, seed=83, item_s=0.02, reduce_s=0.1, fault="hotkey", shard=27,
             expect=((27, "data-skew"),)),
]}


def plan(sc: Scenario) -> list[tuple[int, list[float], list[float]]]:
    """Per shard: its record times (lognormal count, per-shard cost and per-record jitter) and those
    of its hot-key records."""
    rng = random.Random(sc.seed)
    spec = []
    for shard in range(sc.shards):
        n = max(1, round(rng.lognormvariate(math.log(sc.items), sc.items_sigma)))
        cost = rng.lognormvariate(math.log(sc.item_s), COST_SIGMA)
        if sc.fault == "skew" and shard == sc.shard:
            n, cost = SKEW * sc.items, sc.item_s  # far more records at the normal cost
        spec.append((shard, [cost * rng.lognormvariate(0, JITTER_SIGMA) for _ in range(n)],
                     [sc.item_s] * round(SKEW * sc.items / sc.shards) if sc.fault == "hotkey" else []))
    return spec


def records(spec: tuple[int, list[float], list[float]]) -> list[tuple[int, int, float]]:
    """(shard, index, seconds) of a shard's records; hot-key records have negative indices."""
    shard, times, hot = spec
    return [(shard, i, t) for i, t in enumerate(times)] + [(shard, -1 - i, t) for i, t in enumerate(hot)]


def hot_key(sc: Scenario) -> str:
    """The first `hot-K` that Zephyr's shuffle routes to reduce shard `sc.shard`."""
    from zephyr.shard_keys import deterministic_hash

    return next(f"hot-{k}" for k in range(10_000) if deterministic_hash(f"hot-{k}") % sc.shards == sc.shard)


def reduce_group(key: str, records, seconds: float) -> tuple[str, int]:
    n = 0
    for _ in records:
        time.sleep(seconds)
        n += 1
    return key, n


_failed_once: set[int] = set()  # the flaky shard's first attempt (workers are threads of this process)


def dropped(item: tuple[int, int, float], faulty: int | None) -> bool:
    """Whether the `drop` scenario drops this record."""
    shard, i, _ = item
    return i % (DROP_EVERY_FAULTY if shard == faulty else DROP_EVERY) == 0


def record(item: tuple[int, int, float], fault: str, faulty: int | None) -> int:
    shard, i, seconds = item
    if fault == "drop":
        from zephyr import counters

        counters.increment("records_in", 1)
        if dropped(item, faulty):
            counters.increment("dropped_records", 1)
    if shard == faulty and i == 3:
        if fault == "raise":
            raise ValueError(f"bad record {shard}:{i}: schema mismatch (field 'ts' is a string)")
        if fault == "flaky" and shard not in _failed_once:
            _failed_once.add(shard)
            raise ConnectionError(f"transient read error on record {shard}:{i}: connection reset by peer")
    if shard == faulty and i == 1 and fault == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if shard == faulty and i == 0 and fault == "stuck":
        time.sleep(STUCK_S)
    time.sleep(seconds)
    return i


def run(sc: Scenario, out: Path) -> None:
    """The child: one real pipeline, logs on stderr."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from realzephyr import StatusPoller
    from zephyr import Dataset, ZephyrContext
    from zephyr.runners import SubprocessRunner

    fault, faulty = sc.fault, sc.shard
    ds = Dataset.from_list(plan(sc)).flat_map(records)
    if sc.reduce_s:
        hot, seconds = hot_key(sc), sc.reduce_s
        ds = (ds.map(lambda item: (hot if item[1] < 0 else f"{item[0]}:{item[1]}", record(item, fault, faulty)))
              .group_by(key=lambda kv: kv[0], reducer=lambda key, group: reduce_group(key, group, seconds),
                        num_output_shards=sc.shards))
    else:
        ds = ds.map(lambda item: record(item, fault, faulty))
    factory = (lambda n: SubprocessRunner(num_workers=n)) if fault == "sigkill" else None
    ctx = ZephyrContext(max_workers=sc.workers, stage_runner_factory=factory, **sc.context)
    poller = StatusPoller(out)
    poller.start()
    try:
        ctx.execute(ds)
    except Exception as exc:  # the abort is what some scenarios capture
        print(f"pipeline failed: {type(exc).__name__}", file=sys.stderr)
    finally:
        poller.stop.set()
        poller.join()


def capture(sc: Scenario, out: Path) -> float:
    """Run `sc` in a child process into `out`; write truth.json; return the wall time."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        old.unlink()
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as marin, open(out / "coordinator.log", "wb") as log:
        subprocess.run([sys.executable, __file__, "--run", sc.name, str(out)], stdout=log,
                       stderr=subprocess.STDOUT, env={**os.environ, "MARIN_PREFIX": marin},
                       check=True, timeout=300)
    wall = time.monotonic() - start
    status = json.loads((out / "status.txt").read_text())
    stage = status.split("stage='", 1)[1].split("'", 1)[0]
    (out / "truth.json").write_text(json.dumps(sc.truth(stage), indent=1, ensure_ascii=False) + "\n")
    return wall


def main(argv: list[str]) -> None:
    if argv[:1] == ["--run"]:
        run(SCENARIOS[argv[1]], Path(argv[2]))
        return
    for name in argv or SCENARIOS:
        wall = capture(SCENARIOS[name], HERE / name)
        print(f"{name}: {wall:.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
