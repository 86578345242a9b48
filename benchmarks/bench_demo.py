"""The demo under load (issue 27 item 7): `zdebug demo` with CPU burners beside it names its default
faults and nothing else at warning or error, run after run.

The truth comes from the demo's own fault specs: the skewed shard is `data-skew` on its stage;
every warning naming the slow worker is `slow-worker` (the skewed shard run on the slow worker is
both, in either order); the one-shot failures (exception, OOM,
segfault, killed worker) are absorbed by retries (`recovered`, information). Anything else at
warning or error is a wrong finding.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from zephyr_debug.commands.demo import DEFAULT_FAULTS
from zephyr_debug.reference.faults import parse
from zephyr_debug.zephyrlog import STAGE_INDEX_RE

SEVERE = ("warning", "error")
ZDEBUG = [str(Path(sys.executable).with_name("zdebug"))]  # the installed entry point
BURNERS = 6  # CPU-bound processes beside the demo on a 2-core machine
RUNS = 10


def wrong(findings: list[dict], specs: list[str] = DEFAULT_FAULTS) -> list[str]:
    """What the demo's findings got wrong against its faults: a fault not named, or a severe
    finding no fault explains."""
    faults = [parse(s) for s in specs]
    skewed = {(f.stage, f.target) for f in faults if f.kind == "skew-shard"}
    slow = {f"-workers-{f.target}" for f in faults if f.kind == "slow-worker"}
    out: list[str] = []
    named: set = set()
    for f in findings:
        if f["severity"] not in SEVERE:
            continue
        index = STAGE_INDEX_RE.match(f.get("stage") or "")
        at = (int(index.group(1)) if index else -1, f.get("shard"))
        worker = f.get("worker") or ""
        causes = {f["kind"], *(f.get("causes") or [])}  # a skewed shard on the slow worker: both
        on_slow = [w for w in slow if worker.endswith(w)]
        right = set()
        if "data-skew" in causes and at in skewed:
            right.add(("skew", at))
        if "slow-worker" in causes and on_slow:
            right.add(("slow", on_slow[0]))
        named |= right
        claimed = ("data-skew" in causes) + ("slow-worker" in causes)  # each must be a fault's
        if not right or len(right) < claimed:
            out.append(f"wrong: {f['severity']} {f['kind']} stage {f.get('stage')} shard {f.get('shard')} {worker}")
    out += [f"not named: data-skew on stage {s} shard {n}" for s, n in skewed if ("skew", (s, n)) not in named]
    out += [f"not named: slow worker {w}" for w in slow if ("slow", w) not in named]
    if any(f.kind in ("exception", "oom", "segfault", "kill-worker") for f in faults) and not any(
        f["kind"] == "recovered" for f in findings
    ):
        out.append("not named: the failures the retries absorbed (recovered)")
    return out


def _burn() -> None:
    while True:
        pass


@contextmanager
def burners(n: int) -> Iterator[None]:
    """`n` real CPU-bound processes for the duration."""
    procs = [multiprocessing.get_context("spawn").Process(target=_burn, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
            p.join()


def demo_findings(home: Path) -> list[dict]:
    """Run `zdebug demo` in job store `home`, then `diagnose --json` its job: the findings."""
    env = dict(os.environ, ZDEBUG_HOME=str(home))
    ran = subprocess.run([*ZDEBUG, "demo", "--json", "--no-show"], env=env, capture_output=True, text=True, check=True)
    job = json.loads(ran.stdout)["dir"]
    out = subprocess.run([*ZDEBUG, "diagnose", job, "--json"], env=env, capture_output=True, text=True)
    return json.loads(out.stdout)["findings"]


def run(quick: bool = False) -> dict:
    runs = 1 if quick else RUNS
    right = 0
    with tempfile.TemporaryDirectory() as tmp, burners(BURNERS):
        for i in range(runs):
            problems = wrong(demo_findings(Path(tmp) / str(i)))
            right += not problems
            for p in problems:
                print(f"demo run {i}: {p}", file=sys.stderr)
    return {
        f"demo right with {BURNERS} CPU burners": {
            "value": right,
            "unit": "runs",
            "baseline": "runs",
            "baseline_value": runs,
            "ratio": right / runs,
            "target": "1.0",
            "meets": right == runs,
        }
    }
