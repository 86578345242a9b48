"""Counters and throughput per stage (`analyze.counters`, `zdebug counters`): unit rules on
built evidence, generated healthy jobs (no findings), real reference jobs with the
slow-stage and drop-records faults against earlier healthy runs of the same pipeline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_reference

from zephyr_debug.analyze import counters
from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.analyze.nextsteps import Steps
from zephyr_debug.model import ATTEMPT_COLUMNS, STATUS_COLUMNS, Evidence, StageInfo, frame
from zephyr_debug.reference import faults
from zephyr_debug.sources import earlier, load

STEPS = Steps("job", False)


def _ev(job="j", shards=20, drop=0.001, rare_on=(), stage="stage0-Map", rate=100.0) -> Evidence:
    rows = []
    for s in range(shards):
        items = 1000 + 10 * s
        user = {"dropped_records": round(items * drop), "records_in": items}
        if s in rare_on:
            user["decode_errors"] = 7
        elif rare_on:
            user["decode_errors"] = 0
        rows.append(
            {
                "stage": stage,
                "shard": s,
                "attempt": 0,
                "worker": f"w{s % 4}",
                "start_ts": 0.0,
                "end_ts": items / rate,
                "outcome": "done",
                "elapsed_s": items / rate,
                "items": items,
                "bytes": items * 50,
                "counters": user,
            }
        )
    ev = Evidence(job=job, source=job, now=100.0, state="succeeded")
    ev.stages = [StageInfo(stage, 0, shards, start_ts=0.0, end_ts=100.0)]
    ev.attempts = frame(rows, ATTEMPT_COLUMNS)
    return ev


def test_summary_totals_rates_per_item_and_spread():
    run = counters.summarize(_ev())
    st = run.stage("stage0-Map")
    items = st.counter(counters.ITEMS)
    assert items.total == sum(1000 + 10 * s for s in range(20))
    assert items.rate == pytest.approx(items.total / 100.0)
    assert st.shard_rate == pytest.approx(100.0)
    rec = st.counter("records_in")
    assert rec.per_item == pytest.approx(1.0) and rec.high == (19, 1190.0) and rec.low == (0, 1000.0)
    assert rec.median == pytest.approx(1095.0)


def test_per_item_change_and_throughput_drop_against_earlier_runs():
    earlier = [counters.summarize(_ev(job=f"e{i}")) for i in range(3)]
    assert counters.findings(_ev(job="now"), STEPS, earlier=earlier) == []  # the same pipeline, healthy
    found = counters.findings(_ev(job="now", drop=0.02), STEPS, earlier=earlier)
    assert [f.kind for f in found] == ["counter-per-item"]
    assert "dropped_records" in found[0].title and found[0].stage == "stage0-Map"
    assert dict(found[0].metrics)["ratio"] == pytest.approx(20, rel=0.1)
    slow = counters.findings(_ev(job="now", rate=20.0), STEPS, earlier=earlier)
    assert [f.kind for f in slow] == ["throughput-drop"] and dict(slow[0].metrics)["ratio"] == pytest.approx(0.2)
    assert counters.findings(_ev(job="now", rate=50.0), STEPS, earlier=earlier) == []  # x0.5: under the rule


def test_counter_on_few_shards_names_them():
    found = counters.findings(_ev(rare_on=(7,)), STEPS, earlier=[])
    assert [(f.kind, f.shards) for f in found] == [("counter-few-shards", (7,))]
    assert counters.findings(_ev(rare_on=tuple(range(10))), STEPS, earlier=[]) == []


def _status(stage_rates: list[float], in_flight=8) -> pd.DataFrame:
    rows, items = [], 0.0
    for i, r in enumerate(stage_rates):
        items += r * 5 * in_flight
        rows.append(
            {
                "ts": 5.0 * i,
                "stage": "stage0-Map",
                "completed": i,
                "total": 999,
                "in_flight": in_flight,
                "queue_depth": 100,
                "alive": in_flight,
                "registered": in_flight,
                "dead": 0,
                "items": items,
            }
        )
    rows.append({**rows[-1], "ts": rows[-1]["ts"] + 5, "queue_depth": 0, "in_flight": 1, "items": items + 1})
    return frame(rows, STATUS_COLUMNS)


def test_cliff_inside_a_stage_not_the_tail():
    ev = Evidence(job="j", source="j", now=200.0, state="running")
    ev.status = _status([10.0] * 10 + [2.0] * 8)
    found = counters.cliffs(ev, STEPS)
    assert [f.kind for f in found] == ["throughput-cliff"]
    assert dict(found[0].metrics)["ratio"] == pytest.approx(0.2)
    ev.status = _status([10.0, 12.0, 8.0, 11.0, 9.0, 10.5] * 3)  # noisy but steady; tail row at the end
    assert counters.cliffs(ev, STEPS) == []


def test_stage_fault_specs():
    f = faults.parse("drop-records:1:0.05")
    assert (f.kind, f.stage, f.factor) == ("drop-records", 1, 0.05)
    f = faults.parse("slow-stage:0:x4")
    assert (f.kind, f.stage, f.factor) == ("slow-stage", 0, 4.0)
    assert faults.parse("slow-stage:1").factor == 10.0
    with pytest.raises(Exception, match="bad option"):
        faults.parse("skew-shard:1:0.05")  # a bare number is a rate for stage faults only


def test_healthy_generated_jobs_have_no_counter_findings(tmp_path):
    from benchmarks.prodjobs import BY_NAME, generate

    for name in ("healthy-50", "healthy-multistage"):
        for job in generate(tmp_path, BY_NAME[name], variants=("full", "coord")):
            ev = load(str(job / "evidence"))
            assert counters.findings(ev, STEPS, earlier=[counters.summarize(ev)]) == [], job
            assert counters.findings(ev, STEPS, earlier=[]) == [], job


@pytest.mark.slow
def test_reference_stage_faults_against_earlier_runs(tmp_path):
    """Two healthy runs, then drop-records in stage 0 and slow-stage in stage 1: each is found by
    the analysis (diagnose) against the job store's earlier runs; the healthy third run is clean."""
    root = tmp_path / "jobs"
    runs = {
        name: run_reference(root, spec, workers=3, shards=8)
        for name, spec in (
            ("h1", ()),
            ("h2", ()),
            ("h3", ()),
            ("drop", ("drop-records:0:0.05",)),
            ("slow", ("slow-stage:1:x10",)),
        )
    }

    def counter_findings(r):
        ev = load(str(r.job_dir))  # the earlier runs come from the job store, as the commands pass them
        return [(f.kind, f.stage) for f in analyze(ev, earlier=earlier.runs(ev)).findings if f.kind in counters.KINDS]

    kinds = {name: counter_findings(r) for name, r in runs.items()}
    assert kinds["h3"] == []
    assert kinds["drop"] == [("counter-per-item", "stage0-Map")]
    assert kinds["slow"] == [("throughput-drop", "stage1-Map → Write")]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "zephyr_debug.cli",
            "counters",
            str(runs["drop"].job_dir),
            "--compare",
            str(runs["h1"].job_dir),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    assert data["compared_with"] == [runs["h1"].execution_id]
    drops = [c for c in data["comparisons"] if c["counter"] == "dropped_records" and c["stage"] == "stage0-Map"]
    assert drops and drops[0]["ratio"] > 20
    stage0 = data["stages"][0]
    assert {c["name"] for c in stage0["counters"]} >= {"zephyr/item_count", "dropped_records", "records_in"}
    text = subprocess.run(
        [sys.executable, "-m", "zephyr_debug.cli", "counters", str(runs["slow"].job_dir)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "throughput-drop" in text
    assert max(len(line) for line in text.splitlines() if "next: " not in line) <= 80  # commands stay whole
    final = (Path(runs["drop"].job_dir) / "coordinator.log").read_text()
    assert "Final counters: {" in final and "'dropped_records'" in final
