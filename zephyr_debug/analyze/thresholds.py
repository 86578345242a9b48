"""The straggler and cause knobs (the flags of `zdebug stragglers` set them); each known failure
mode's own limits sit beside its rule in `known.py`."""

from __future__ import annotations

from dataclasses import dataclass

from zephyr_debug.model import STALL_THRESHOLD_S

GAP_HEARTBEATS = 3.0  # a gap of this many heartbeat intervals between samples: the worker died and came back
MIN_ROBUST_PEERS = 8  # below this many finished peers the robust spread is not trusted: floors decide alone
MAD_TO_SIGMA = 1.4826  # MAD x this = standard deviation of a normal distribution
MIN_WORKER_SHARDS = 1  # other finished shards a worker needs before its speed is known
# Scale: a stage is judged on its own clock. Its tick is this share of its median run time, never
# finer than the resolution of its timestamps (1 s glog prefixes, 1 ms Python logging: the smallest
# gap between its shards' end times); the heartbeat interval counts only where heartbeats are the
# evidence (item samples, liveness), Zephyr's timeouts only where Zephyr acts on them.
TICK_SHARE = 0.1
REQUEUE_GRACE_HEARTBEATS = 2.0  # a dead holder's shard not requeued this long past Zephyr's timeout: a problem
FROZEN_LINES = 3  # status lines in a row with the same items= while a shard runs alone: frozen


@dataclass(frozen=True)
class Thresholds:
    """When a shard is an outlier that holds its stage up, and what decides its cause."""

    # -- is it an outlier? (all must hold)
    outlier_z: float = 3.5  # log run time above median + z x robust sigma (MAD) of its stage's finished peers
    false_rate: float = 0.01  # ... and z raised so a healthy stage of n shards expects this many false outliers
    multiplier: float = 1.5  # ... and above this x the peers' median (Flink's slow-task rule): a floor
    min_finished: float = 0.75  # a running stage is judged once this share finished (Spark's speculation gate)
    # (the two below count the stage's ticks, `TICK_SHARE`; their names are the CLI's, kept)
    min_excess_heartbeats: float = 4.0  # ... and the cut is at least this many ticks above the median
    min_held_heartbeats: float = 1.0  # ... and it kept its stage open at least this many ticks past the rest
    alone_shards: float = 2.0  # a coordinator-only log: one shard alone in flight this many typical runs = a straggler
    # -- causes
    stuck_heartbeats: int = 8  # no new items for this many heartbeat intervals (status lines, from a log)
    #                           while the holder lives = stuck
    skew_items: float = 1.5  # size (items / input chunks) >= this x the stage median = bigger input
    normal_rate: float = 0.67  # rate >= this x the stage median rate = normal speed
    slow_worker_speed: float = 0.67  # a worker whose other shards run at <= this x the stage speed is slow
    skew_cpu: float = 1.25  # CPU >= this x the stage median on an unknown worker = expensive records
    memory_near: float = 0.9  # RSS >= this x the memory limit counts as OOM evidence
    repeated_failures: int = 2  # failed attempts of an unfinished shard that make a crash loop
    stall_s: float = STALL_THRESHOLD_S  # no progress this long = stalled (Zephyr's alert: 45 min)
