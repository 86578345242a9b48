"""The scenarios: job shapes and the faults injected into them (data only).

Each fault's ground truth per evidence variant is decided in `truth.py`; the reasoning for
each scenario is in its `why`. To add a failure mode (e.g. issue 17's), add a `Fault` kind
here, its behaviour in `simulate.py` (or its lines in `write.py`) and its truth rule in
`truth.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

# Evidence variants: (a) job log with coordinator + worker lines, (b) coordinator log only,
# (c) (a) + get_status + Iris list-tasks.
FULL, COORD, STATUS = "full", "coord", "full+status"
VARIANTS = (FULL, COORD, STATUS)

# Line forms: (status line has `[exec] `, separator before `items=`, failure lines have `[exec] `).
FORMS = {
    "pypi": (True, ";", False),
    "upstream": (True, ".", True),
    "old": (False, ";", False),
    "ray": (False, ";", False),
}  # ray: the oldest status form, `…, 488 workers` (no alive/dead counts)
# Line prefixes: python = `2026-12-02 21:59:16,743 INFO zephyr.execution: `; glog = `I20261202 …`;
# mixed = python until the first shard is done, then glog (the PyPI release); iris = `[hh:mm:ss] task=… | ` + mixed.
# ray = `(actor pid=N, ip=A) 2026-02-20 01:50:35,139 INFO execution.py:1028 ` (Ray-era releases).
PREFIXES = ("python", "glog", "mixed", "iris", "ray")


@dataclass(frozen=True)
class Fault:
    kind: str  # size-skew | cost-skew | slow-worker | stuck | dead-holder | infra-crash | crash | oom | bug |
    #            transient | all-dead; issue 17 (KNOWN_SCENARIOS): oom-killed | shutdown-last | dispatch-stall |
    #            deser-heartbeat | duplicate | stale-coordinator | after-exit | preempt-count
    stage: int = 0
    shard: int | None = None
    shards: tuple[int, ...] = ()  # bug: every shard it breaks
    worker: int | None = None  # slow-worker: None = the first worker whose shards hold the stage up
    factor: float = 1.0  # size-skew / cost-skew / slow-worker multiplier
    count: int = 1  # transient: failed attempts before it succeeds
    secs: float = 0.0  # stuck: frozen this long at capture; infra-crash: time to OOM per attempt
    at: float = 0.0  # all-dead: share of the expected stage time when the pool dies
    stay_dead: float = 0.0  # infra-crash: share of killed workers that never come back


@dataclass(frozen=True)
class Scenario:
    name: str
    shards: int
    workers: int
    why: str  # the ground truth's reasoning (what an expert concludes from each variant)
    stages: tuple[str, ...] = ("map",)  # map | reduce (a reduce stage has 1/4 the shards and ScatterReader lines)
    median_s: float = 48.0
    sigma: float = 0.22  # lognormal sigma of run time (0.22: p99 ~ 80 s at a 48 s median)
    items_median: float = 2000.0
    items_sigma: float = 0.35
    counters: bool = True  # status lines carry `items=…` (stages without counters print none)
    form: str = "pypi"
    prefix: str = "mixed"
    preempt: float = 0.004  # background preemptions per attempt (they recover: not findings)
    spam_per_s: float = 2.0  # pull_task DEBUG lines per second while workers idle
    faults: tuple[Fault, ...] = ()
    variants: tuple[str, ...] = VARIANTS
    hang_s: float = 0.0  # > 0: with no worker alive the coordinator waits (no abort); captured this long after
    healthy: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "healthy", all(f.kind == "transient" for f in self.faults))

    def stage_plan(self) -> list[tuple[str, str, int]]:
        """(label, stage type, shards) per stage."""
        if self.stages == ("map",):
            return [("stage0-Map → Write", "map", self.shards)]
        out = []
        for i, kind in enumerate(self.stages):
            name = "Map → Scatter" if kind == "map" else "Reduce → Write"
            out.append((f"stage{i}-{name}", kind, self.shards if kind == "map" else max(self.shards // 4, 1)))
        return out

    def fault(self, kind: str) -> Fault:
        return next(f for f in self.faults if f.kind == kind)

    def with_slow_worker(self, worker: int) -> Scenario:
        return replace(
            self, faults=tuple(replace(f, worker=worker) if f.kind == "slow-worker" else f for f in self.faults)
        )


def _late(shards: int, workers: int) -> int:
    """A shard dequeued in the stage's last wave: a 12x one then holds the stage up."""
    return shards - max(workers // 2, 1)


SCENARIOS: tuple[Scenario, ...] = (
    # -- healthy: natural lognormal spread, recovered preemptions, spam: 0 findings in every variant --
    Scenario("healthy-50", 50, 8, "healthy: 50 shards on 8 workers, sigma 0.22", prefix="python"),
    Scenario(
        "healthy-800",
        800,
        64,
        "healthy: the issue's 800-shard stage (48 s median, p99 ~80 s), no item counters in the status lines",
        counters=False,
    ),
    Scenario(
        "healthy-800-wide",
        800,
        64,
        "healthy: wide spread (sigma 0.5: the slowest of 800 is ~4x the median by chance alone)",
        sigma=0.5,
        form="old",
    ),
    Scenario("healthy-5000", 5000, 400, "healthy: 5,000 shards, 400 workers", prefix="glog"),
    Scenario(
        "healthy-5000-wide",
        5000,
        400,
        "healthy: 5,000 shards, sigma 0.5 (max ~6x the median by chance)",
        sigma=0.5,
        form="upstream",
    ),
    Scenario(
        "healthy-multistage",
        800,
        128,
        "healthy: map then reduce (shard ids restart at 0), Iris prefixes",
        stages=("map", "reduce"),
        prefix="iris",
        form="upstream",
    ),
    Scenario(
        "recovered-transient",
        800,
        64,
        "healthy: 5 shards fail once (task error) early and then succeed: `recovered` information, not a crash loop",
        faults=tuple(Fault("transient", shard=s) for s in (40, 90, 150, 210, 260)),
    ),
    Scenario(
        "retried-last",
        800,
        64,
        "healthy: a shard of the last wave fails once, goes to the back of "
        "the queue and finishes last with a normal run time: not slow, `recovered` only",
        faults=(Fault("transient", shard=800 - 64),),
    ),
    # -- faults ---------------------------------------------------------------------------
    Scenario(
        "size-skew",
        800,
        64,
        "data-skew where the status line's items keep rising at the normal "
        "per-shard rate while the 12x shard is alone in flight (it is big, not slow)",
        faults=(Fault("size-skew", shard=_late(800, 64), factor=12),),
    ),
    Scenario(
        "size-skew-nocounters",
        800,
        64,
        "undetermined: a 12x shard but no items in any line, so size "
        "skew, per-record cost and a stall cannot be told apart",
        counters=False,
        faults=(Fault("size-skew", shard=_late(800, 64), factor=12),),
    ),
    Scenario(
        "size-skew-reduce",
        800,
        64,
        "reduce stage hot shard (12x rows): data-skew where the worker's "
        "ScatterReader line shows max_chunk_rows 12x its peers; coordinator-only: undetermined (items "
        "count reducer outputs, flat either way)",
        stages=("map", "reduce"),
        form="upstream",
        faults=(Fault("size-skew", stage=1, shard=_late(200, 64), factor=12),),
    ),
    Scenario(
        "cost-skew",
        800,
        64,
        "per-record cost: normal items, 12x time on a worker normal elsewhere: "
        "data-skew where worker lines show the worker's other shards; coordinator-only: undetermined "
        "(a low rate, but no holder named)",
        faults=(Fault("cost-skew", shard=_late(800, 64), factor=12),),
    ),
    Scenario(
        "slow-worker",
        800,
        64,
        "one worker runs every shard x6: slow-worker for its shards that hold "
        "the stage up, where worker lines show its other shards slow; coordinator-only: undetermined",
        faults=(Fault("slow-worker", factor=6),),
        prefix="glog",
    ),
    Scenario(
        "stuck",
        800,
        64,
        "a shard freezes (items flat) while heartbeats continue: stuck in every "
        "variant (status line items= frozen while it is the only one in flight, no heartbeat timeout)",
        faults=(Fault("stuck", shard=400, secs=1800),),
    ),
    Scenario(
        "dead-holder",
        800,
        64,
        "the holder of a last-wave shard dies: heartbeat timeout, infra "
        "requeue, the shard reruns and finishes ~3 min late: dead-holder in every variant",
        faults=(Fault("dead-holder", shard=799),),
    ),
    Scenario(
        "infra-crash",
        800,
        64,
        "one shard OOM-kills every (inline) worker that pulls it: 19 infra "
        "requeues then the deterministic-crasher abort: crash-loop (+ oom where Iris says OOMKilled)",
        faults=(Fault("infra-crash", shard=321, secs=240, stay_dead=0.3),),
    ),
    Scenario(
        "infra-crash-5000",
        5000,
        400,
        "the seed's 4999/5000 job: one shard kills its worker for ~25 "
        "min each time, 400 workers idle for hours: crash-loop (+ oom where Iris says OOMKilled), aborted",
        faults=(Fault("infra-crash", shard=4321, secs=1500, stay_dead=0.3),),
        spam_per_s=5.0,
    ),
    Scenario(
        "task-crash",
        800,
        64,
        "a shard raises on every attempt: 3 task errors then abort: crash-loop",
        faults=(Fault("crash", shard=500),),
    ),
    Scenario(
        "subprocess-oom",
        800,
        64,
        "SubprocessRunner child SIGKILLed (MemoryError) 3 times: oom + "
        "crash-loop where the error text is in the evidence; coordinator-only: crash-loop",
        faults=(Fault("oom", shard=610),),
        form="upstream",
    ),
    Scenario(
        "all-dead",
        800,
        64,
        "every worker dies at 40% of the stage and none comes back: "
        "all-workers-dead and the no-workers abort (the dead holders are its evidence, not findings)",
        faults=(Fault("all-dead", at=0.4),),
    ),
    Scenario(
        "one-bug",
        800,
        64,
        "15 shards hit the same KeyError (different keys): one root cause, each "
        "of the 15 shards is a crash-loop shard; aborted",
        faults=(Fault("bug", shards=tuple(range(20, 320, 20))),),
    ),
)

# Issue 17: the failure modes of marin-community/marin's tracker (analyze/known.py), one scenario each
# at production size. Kept apart from SCENARIOS (the diagnosis benchmark's set); `make bench` scores
# the known-mode ids over both (benchmarks/bench_known.py).
KNOWN_SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "oomkilled-workers",
        800,
        64,
        "marin#3009: 3 workers OOM-killed mid-stage; the coordinator logs only "
        "heartbeat timeouts, Iris list-tasks says OOM killed / exit 137 (full+status only); the shards recover",
        faults=(Fault("oom-killed", count=3),),
    ),
    Scenario(
        "all-dead-waiting",
        800,
        64,
        "marin#3598: the pool dies at 40% and the coordinator waits on "
        "'All workers are dead/failed' for 2 h (no_workers_timeout 6 h), no abort",
        hang_s=7200,
        faults=(Fault("all-dead", at=0.4),),
    ),
    Scenario(
        "last-stage-shutdown",
        854,
        128,
        "marin#4200: last stage, idle workers SHUTDOWN once the queue is "
        "empty while the last shard runs; its holder hangs: 853/854, 1/128 alive, 127 dead for 2 h",
        faults=(Fault("shutdown-last", shard=853, secs=7200),),
    ),
    Scenario(
        "dispatch-stall",
        4839,
        488,
        "marin#2943: 0/4839 complete, 0 in-flight, 4839 queued, 488 workers "
        "for 3 h (Ray-prefixed lines, the oldest status form)",
        form="ray",
        prefix="ray",
        counters=False,
        faults=(Fault("dispatch-stall", secs=3 * 3600.0),),
    ),
    Scenario(
        "deser-heartbeat",
        800,
        64,
        "marin#3041: every worker's first task takes >30 s to unpickle, the "
        "heartbeat thread dies, all 64 are marked dead ~150 s after the stage starts while their Iris "
        "tasks keep RUNNING; the coordinator then waits",
        hang_s=3600,
        faults=(Fault("deser-heartbeat"),),
    ),
    Scenario(
        "duplicate-execution",
        800,
        64,
        "marin#3459: run_pipeline's RPC times out and is retried: a second "
        "execution of the same pipeline starts 5 min later on the same coordinator and pool",
        faults=(Fault("duplicate", at=300.0),),
    ),
    Scenario(
        "stale-coordinator",
        800,
        64,
        "marin#3705/#4199: the first coordinator's workers die and it keeps "
        "waiting (0/64 alive) while a retry's coordinator runs; the retry's first workers were killed "
        "~0.3 s after creation",
        hang_s=7200,
        faults=(Fault("stale-coordinator", at=0.4),),
    ),
    Scenario(
        "workers-after-exit",
        800,
        64,
        "marin#4079: the pipeline finished, then 48 late worker tasks fail "
        "with 'ConnectError … No route to host' for an hour (worker lines only)",
        faults=(Fault("after-exit", count=48, secs=3600.0),),
    ),
    Scenario(
        "preempt-abort",
        800,
        64,
        "marin#4990: an older Zephyr counts preemptions against "
        "MAX_SHARD_FAILURES: shard 700's holder is preempted 3 times and the pipeline aborts as if it failed",
        form="old",
        faults=(Fault("preempt-count", shard=700),),
    ),
)
BY_NAME = {sc.name: sc for sc in SCENARIOS + KNOWN_SCENARIOS}
