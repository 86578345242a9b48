"""Which known failure mode (analyze/known.py, issue 17) an expert names from each variant's
evidence: `known_truth(run, variant)` -> sorted list of "marin#NNNN" ids (truth.json `known`)."""

from __future__ import annotations

from benchmarks.prodjobs.scenarios import FULL, STATUS
from benchmarks.prodjobs.simulate import Run

# fault kind -> (known id, the variants whose evidence shows it; None = every variant)
KNOWN_FAULTS: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "infra-crash": ("marin#4575", None),  # the infra requeue lines name the shard and its count
    "oom-killed": ("marin#3009", (STATUS,)),  # the OOM reason is only on the Iris task (list-tasks)
    "shutdown-last": ("marin#4200", None),  # the status line's dead count rising without heartbeat timeouts
    "dispatch-stall": ("marin#2943", None),
    "deser-heartbeat": ("marin#3041", None),  # the whole pool's heartbeat timeouts right after the stage start
    "duplicate": ("marin#3459", None),  # the stage's start line twice (the driver's retry line: not in coord)
    "stale-coordinator": ("marin#3705", None),  # two executions' status lines, the old one with 0 alive
    "after-exit": ("marin#4079", (FULL, STATUS)),  # the late workers' own lines only
    "preempt-count": ("marin#4990", None),
}


def known_truth(run: Run, variant: str) -> list[str]:
    sc = run.scenario
    out = set()
    for f in sc.faults:
        if f.kind in KNOWN_FAULTS:
            known, variants = KNOWN_FAULTS[f.kind]
            if variants is None or variant in variants:
                out.add(known)
        elif f.kind == "all-dead" and sc.hang_s:  # waits past no_workers_timeout instead of aborting
            out.add("marin#3598")
    return sorted(out)
