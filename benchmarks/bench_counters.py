"""Counter, throughput and churn findings (issue 22): precision and recall of the kinds
`analyze.counters` and `analyze.churn` add, over

- generated production-shaped jobs (`benchmarks/prodjobs`, quick set, `full` and `coord`):
  every scenario as it is (none injects a counter fault: any finding is false), and each
  healthy one compared with itself (natural variance only: none expected); then two faults
  made from each healthy job: every shard 10x slower against the original (`throughput-drop`),
  and items at a fifth of the rate over the last 40% of the stage outside its tail (the part
  the rule reads: `throughput-cliff`);
- real reference jobs (real coordinator and worker processes) in one fresh job store: healthy
  runs, then `drop-records:0:0.05`, `slow-stage:1:x10`, `kill-worker:1:times=4`, analysed as
  the commands do, against the earlier runs of their pipeline there (`sources.earlier`).
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from benchmarks.prodjobs import SCENARIOS, generate
from zephyr_debug import jobstore
from zephyr_debug.analyze import churn, counters
from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.analyze.nextsteps import Steps
from zephyr_debug.sources import earlier as history
from zephyr_debug.sources import load

TARGET = 0.95
QUICK_MAX_SHARDS = 1000
MINE = (*counters.KINDS, "flapping-worker", "requeue-burst")


def _got(found) -> set[tuple]:
    return {(f.kind, f.stage if f.kind != "flapping-worker" else f.worker) for f in found if f.kind in MINE}


def _rules(ev, earlier) -> set[tuple]:
    steps = Steps(ev.job, False)
    return _got(counters.findings(ev, steps, earlier=earlier) + churn.findings(ev, steps))


def _slower(ev):
    a = ev.attempts.assign(elapsed_s=pd.to_numeric(ev.attempts["elapsed_s"], errors="coerce") * 10)
    return replace(ev, attempts=a)


def _cliff(ev, stage: str):
    st = ev.status.copy()
    rows = st.index[st["stage"] == stage]
    ts = pd.to_numeric(st.loc[rows, "ts"], errors="coerce")
    busy = ts[pd.to_numeric(st.loc[rows, "queue_depth"], errors="coerce") > 0]  # the tail is not read
    cut = busy.min() + (busy.max() - busy.min()) * 0.6
    items = pd.to_numeric(st.loc[rows, "items"], errors="coerce")
    base = items[ts <= cut].max()
    st.loc[rows, "items"] = items.where(ts <= cut, base + (items - base) / 5)
    return replace(ev, status=st)


def generated(outdir: Path, quick: bool) -> list[tuple[str, set, set]]:
    cases = []
    for sc in SCENARIOS:
        if quick and sc.shards > QUICK_MAX_SHARDS:
            continue
        for job in generate(outdir, sc, variants=("full", "coord")):
            ev = load(str(job / "evidence"))
            name = job.name
            cases.append((name, set(), _got(analyze(ev).findings)))  # as a user gets it: other findings known
            if not sc.healthy:
                continue
            me = counters.summarize(ev)
            cases.append((name + " vs itself", set(), _rules(ev, [me])))
            shard_stages = [s.stage for s in me.stages if s.shard_rate]
            if shard_stages:
                cases.append(
                    (name + " x10 slower", {("throughput-drop", s) for s in shard_stages}, _rules(_slower(ev), [me]))
                )
            stages = [
                s
                for s in dict.fromkeys(ev.status["stage"])
                if "items" in ev.status
                and pd.to_numeric(ev.status.loc[ev.status["stage"] == s, "items"], errors="coerce").notna().sum() > 30
            ]
            if stages:
                cases.append((name + " cliff", {("throughput-cliff", stages[0])}, _rules(_cliff(ev, stages[0]), [])))
    return cases


def real(root: Path, quick: bool) -> list[tuple[str, set, set]]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import run_reference

    plan = [
        ("healthy", (), set()),
        ("healthy", (), set()),
        ("healthy", (), set()),
        ("drop-records:0:0.05", ("drop-records:0:0.05",), {("counter-per-item", "stage0-Map")}),
        ("slow-stage:1:x10", ("slow-stage:1:x10",), {("throughput-drop", "stage1-Map → Write")}),
        ("kill-worker:1:times=4", ("kill-worker:1:times=4",), {("flapping-worker", "workers-1")}),
    ]
    if not quick:
        plan += [
            ("healthy", (), set()),
            ("slow-stage:0:x10", ("slow-stage:0:x10",), {("throughput-drop", "stage0-Map")}),
        ]
    cases = []
    for name, faults, want in plan:
        job_dir = run_reference(root, faults, workers=3, shards=8).job_dir
        flaps = ("flapping-worker", "workers-1") in want
        if flaps and (n := kills(job_dir, "workers-1")) < churn.ChurnRules().flap_count:
            print(f"  reference {name}: SIGKILLed {n} times only (its requeued shard went to another worker)")
            want = set()
        ev = load(str(job_dir))
        got = {
            (k, s.rsplit("-p0-", 1)[-1] if k == "flapping-worker" else s)
            for k, s in _got(analyze(ev, earlier=history.runs(ev)).findings)
        }
        cases.append((f"reference {name}", want, got))
    return cases


def kills(job_dir: Path, worker: str) -> int:
    """How often the launcher saw `worker` (an id suffix) SIGKILLed: `kill-worker:W:times=N` fires
    again only when W, respawned, gets another shard of its stage (mostly its own requeued one;
    an idle worker can claim that first), so it fires N times or fewer."""
    return sum(
        e.get("type") == "worker_exit" and str(e.get("worker")).endswith(worker) and e.get("returncode") == -9
        for e in jobstore.read_events(job_dir / jobstore.EVENTS)
    )


def _entry(value, unit: str, target: str, meets: bool) -> dict:
    return {
        "value": value,
        "unit": unit,
        "baseline": "issue 22 target",
        "baseline_value": None,
        "ratio": None,
        "target": target,
        "meets": meets,
    }


def run(quick: bool = False) -> dict:
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="zdebug-counters-") as tmp:
        cases = generated(Path(tmp) / "gen", quick) + real(Path(tmp) / "jobs", quick)
    tp = sum(len(w & g) for _, w, g in cases)
    fp = sum(len(g - w) for _, w, g in cases)
    fn = sum(len(w - g) for _, w, g in cases)
    healthy_fp = sum(len(g) for _, w, g in cases if not w)
    for name, want, got in cases:
        if want != got:
            print(f"  {name}: expected {sorted(want)}, got {sorted(got)}")
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    print(
        f"counters/churn: {len(cases)} cases, tp {tp} fp {fp} fn {fn}, precision {precision:.2f}, "
        f"recall {recall:.2f}, {healthy_fp} findings on fault-free cases ({time.time() - t0:.0f} s)"
    )
    n = f"{sum(1 for _, w, _ in cases if w)} faulty of {len(cases)} cases"
    return {
        "counters_precision": _entry(round(precision, 3), n, f">= {TARGET}", precision >= TARGET),
        "counters_recall": _entry(round(recall, 3), n, f">= {TARGET}", recall >= TARGET),
        "counters_false_findings_healthy": _entry(healthy_fp, "findings on fault-free cases", "0", healthy_fp == 0),
    }


if __name__ == "__main__":
    run(quick="--quick" in sys.argv)
