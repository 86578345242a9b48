"""Ground truth of a simulated run, per evidence variant: what an expert can conclude FROM
THAT VARIANT'S EVIDENCE (`truth.json`).

A straggler fault is a finding only when it held its stage up: its shard ended at least
`HOLD_MARGIN` median run times after every shard untouched by a fault (a shard that finished
while work was queued held nothing up). Failures, stalls and aborts are findings whatever
the peers say. The generator refuses a run where a straggler fault lands in the grey zone
(after the natural end, within the margin): the truth must be clear-cut.
"""

from __future__ import annotations

from benchmarks.prodjobs.scenarios import COORD, FULL, STATUS, Scenario
from benchmarks.prodjobs.simulate import Run

HOLD_MARGIN = 2.0  # median run times beyond the stage's natural end (p99 of sigma 0.22 is ~1.7)
STRAGGLER_FAULTS = ("size-skew", "cost-skew", "slow-worker", "dead-holder")
UNNAMED = ("data-skew", "undetermined", "slow-worker", "stuck")  # causes of shards a coordinator log does not name


class GreyZone(ValueError):
    """A straggler fault that neither clearly held its stage up nor clearly did not."""


def held_up(run: Run, stage: int) -> dict[int, bool]:
    """Shard -> did it hold the stage up, for the shards a straggler fault touched."""
    sc = run.scenario
    faulty = _straggler_shards(run, stage)
    ends = {}
    for a in run.attempts:
        if a.stage == stage and a.outcome == "done":
            ends[a.shard] = a.end
    natural = max((e for s, e in ends.items() if s not in faulty), default=run.stages[stage].start)
    out = {}
    for shard in faulty:
        end = ends.get(shard)
        if end is None:
            continue
        late = end - natural
        if 0 < late < HOLD_MARGIN * sc.median_s:
            raise GreyZone(f"{sc.name}: shard {shard} of stage {stage} ended {late:.0f}s after the natural end")
        out[shard] = late > 0
    return out


def _straggler_shards(run: Run, stage: int) -> set[int]:
    shards = set()
    for f in run.scenario.faults:
        if f.stage != stage or f.kind not in STRAGGLER_FAULTS:
            continue
        if f.kind == "slow-worker":
            shards |= {a.shard for a in run.attempts if a.stage == stage and a.worker == f.worker}
        else:
            shards.add(f.shard)
    return shards


def truth(run: Run, variant: str) -> dict:
    sc = run.scenario
    expect: list[dict] = []
    job: list[str] = []
    info: list[str] = []
    for f in sc.faults:
        if f.stage >= len(run.stages):
            continue
        stage = run.stages[f.stage]
        kind = sc.stage_plan()[f.stage][1]

        def add(shard, *causes, name=stage.name):
            # A coordinator-only log never names a shard that did not fail (no worker lines): a straggler
            # there is a finding about its stage.
            expect.extend(
                {"stage": name, "shard": None if variant == COORD and c in UNNAMED else shard, "cause": c}
                for c in causes
            )

        held = held_up(run, f.stage) if f.kind in STRAGGLER_FAULTS else {}
        if f.kind == "size-skew" and held.get(f.shard):
            # Size evidence: a reduce stage's ScatterReader line (worker lines only); in a map stage the
            # status line's items rising at the normal per-shard rate while it is alone in flight.
            # A reduce stage's items count outputs per key (flat): no size evidence there.
            sized = variant in (FULL, STATUS) if kind == "reduce" else sc.counters
            add(f.shard, "data-skew" if sized else "undetermined")
        elif f.kind == "cost-skew" and held.get(f.shard):
            # A low rate (items) on a worker that is normal elsewhere (worker lines): expensive records.
            add(f.shard, "data-skew" if sc.counters and variant != COORD else "undetermined")
        elif f.kind == "slow-worker":
            # The worker's other shards are slow too: only worker lines (done-in times per worker) show it.
            for shard, late in sorted(held.items()):
                if late:
                    add(shard, "slow-worker" if variant != COORD else "undetermined")
        elif f.kind == "stuck":
            # items= frozen while it is the only shard in flight and its holder keeps heartbeating.
            add(f.shard, "stuck" if sc.counters else "undetermined")
        elif f.kind == "dead-holder" and held.get(f.shard):
            # Heartbeat timeout + infra requeue name the shard and its dead holder in every variant.
            add(f.shard, "dead-holder")
            info.append("recovered")
        elif f.kind == "infra-crash":
            # 19 infra requeues + the deterministic-crasher abort; OOM only where Iris names it
            # (list-tasks: exit 137, "OOM killed"): an inline OOM leaves no trace in Zephyr's lines.
            add(f.shard, "crash-loop", *(["oom"] if variant == STATUS else []))
            job.append("aborted")
        elif f.kind == "crash":
            add(f.shard, "crash-loop")
            job.append("aborted")
        elif f.kind == "oom":
            # MemoryError (SIGKILL) text: worker tracebacks (full) or get_status fatal_error; the
            # coordinator's own lines only count task errors.
            add(f.shard, "crash-loop", *(["oom"] if variant != COORD else []))
            job.append("aborted")
        elif f.kind == "bug":
            # One root cause over every shard it broke (each failed at least once, none succeeded).
            failed = sorted({a.shard for a in run.attempts if a.stage == f.stage and a.error == "bug"})
            for shard in failed:
                add(shard, "crash-loop")
            job.append("aborted")
        elif f.kind == "all-dead":
            # The pool died: one job-level finding; the dead holders are its evidence. The no-workers
            # abort is raised to the driver (fray's `Actor method … failed` line), not logged by the coordinator.
            # The coordinator-only log lacks the abort text but shows the coordinator shutting down with
            # the stage unfinished: an abort all the same.
            job += ["all-workers-dead", "aborted"]
        elif f.kind == "transient":
            info.append("recovered")
    if any(a.outcome == "infra" for a in run.attempts) and run.state != "failed":
        info.append("recovered")  # background preemptions: retried and done
    return {
        "scenario": sc.name,
        "variant": variant,
        "shards": sum(s.shards for s in run.stages),
        "workers": sc.workers,
        "stages": [{"name": s.name, "shards": s.shards} for s in run.stages],
        "state": run.state,
        "healthy": not expect and not job,
        "expect": _unique(expect),
        "job": sorted(set(job)),
        "info": sorted(set(info)),
        "why": sc.why,
    }


def _unique(rows: list[dict]) -> list[dict]:
    seen, out = set(), []
    for r in rows:
        key = (r["stage"], r["shard"], r["cause"])
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def resolve(sc: Scenario, seed: int, simulate) -> Run:
    """The run of `sc`; a slow-worker fault without a worker gets the first worker (in a seeded
    order) whose shards clearly hold the stage up, with at least two shards on it."""
    if not any(f.kind == "slow-worker" and f.worker is None for f in sc.faults):
        run = simulate(sc, seed)
        for i in range(len(run.stages)):
            held_up(run, i)
        return run
    import random

    order = list(range(sc.workers))
    random.Random(f"{sc.name}/{seed}/slow").shuffle(order)
    for w in order:
        run = simulate(sc.with_slow_worker(w), seed)
        try:
            held = held_up(run, sc.fault("slow-worker").stage)
        except GreyZone:
            continue
        if len(held) >= 2 and any(held.values()):
            return run
    raise GreyZone(f"{sc.name}: no worker whose slow shards clearly hold the stage up")
