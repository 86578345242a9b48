"""Known failure modes (issue 17): each is found on its generated production-shaped evidence, on
the finding it explains, with the upstream issue and its fix; none matches a healthy job or
another mode's evidence; the older line forms they need are read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.bench_known import known_of
from benchmarks.prodjobs import BY_NAME, KNOWN_SCENARIOS, SCENARIOS, generate
from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.sources import load

SWEEP_MAX_SHARDS = 1000  # the 5,000-shard jobs: `make bench` (bench_known)
# scenario -> (variant, known id, kind of the finding that carries it)
MODES = {
    "infra-crash": ("coord", "marin#4575", "crash-loop"),
    "oomkilled-workers": ("full+status", "marin#3009", "oom-behind-heartbeat"),
    "all-dead-waiting": ("coord", "marin#3598", "all-workers-dead"),
    "last-stage-shutdown": ("full", "marin#4200", "stuck"),
    "dispatch-stall": ("coord", "marin#2943", "stalled"),
    "deser-heartbeat": ("full+status", "marin#3041", "all-workers-dead"),
    "duplicate-execution": ("full", "marin#3459", "duplicate-execution"),
    "stale-coordinator": ("full", "marin#3705", "stale-coordinator"),
    "workers-after-exit": ("full", "marin#4079", "workers-after-exit"),
    "preempt-abort": ("coord", "marin#4990", "crash-loop"),
}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("known")
    others = [sc for sc in SCENARIOS if sc.shards <= SWEEP_MAX_SHARDS]  # full+status holds the full log
    dirs = [job for sc in others for job in generate(out, sc, variants=("coord", "full+status"))]
    return {job.name: job for job in dirs + [job for sc in KNOWN_SCENARIOS for job in generate(out, sc)]}


@pytest.mark.slow
@pytest.mark.parametrize("scenario", sorted(MODES))
def test_each_mode_is_found_on_its_evidence(jobs, scenario):
    variant, known, kind = MODES[scenario]
    analysis = analyze(load(str(jobs[f"{scenario}.{variant}"] / "evidence")))
    carriers = [f for f in analysis.findings if f.known == known]
    assert len(carriers) == 1, [(f.kind, f.known) for f in analysis.findings]
    f = carriers[0]
    assert f.kind == kind and f.severity != "info"
    assert any(line.startswith(known) or f"{known}:" in line for line in f.evidence), f.evidence
    assert any(line.startswith("fix: ") and "#" in line for line in f.evidence), f.evidence
    assert "zdebug playbook known-modes" in f.next
    assert f.to_json()["known"] == known


@pytest.mark.slow
def test_no_mode_matches_a_healthy_job_or_another_mode(jobs):
    """Every generated job (healthy, the diagnosis faults, every other mode; each variant): the known
    ids found are exactly the ones its evidence shows (truth.json `known`)."""
    wrong = {}
    for name, job in jobs.items():
        expected = set(json.loads((job / "truth.json").read_text(encoding="utf-8"))["known"])
        found = known_of(job)
        if found != expected:
            wrong[name] = (sorted(expected), sorted(found))
    assert not wrong
    assert any(not json.loads((j / "truth.json").read_text())["known"] for j in jobs.values())  # healthy ones ran


def test_the_seed_fail_loop_keeps_one_finding_with_the_oom_join(jobs):
    """#4575 on the lead's crash-loop (not a second finding), with the Iris OOM kills of its holders."""
    analysis = analyze(load(str(jobs["infra-crash.full+status"] / "evidence")))
    loops = [f for f in analysis.findings if f.shard == 321]
    assert [f.known for f in loops] == ["marin#4575"]
    assert any("OOM-killed" in line for line in loops[0].evidence)


def test_older_line_forms_are_read(tmp_path):
    """Ray-prefixed lines, the status form without alive/dead, the driver's RPC retry line and the
    late workers' ConnectError line land in the evidence."""
    ray = (
        "(tokenized/nemotron_cc/hq_actual_41c5a4e4 pid=49163, ip=10.128.0.167) 2026-02-20 01:50:{s:02d},139 INFO "
        "execution.py:1028 "
    )
    lines = [
        ray.format(s=35) + "Starting worker group: 512 workers (max_workers=512, num_shards=1376)",
        ray.format(s=36) + "[stage0-Map → Write] 0/4839 complete, 0 in-flight, 4839 queued, 488 workers",
        "2026-02-20 01:50:37,108 - WARNING - Operation /rav/x/zephyr-a-p0-a0-coord/zephyr-a-p0-a0-coord-0."
        "run_pipeline failed (attempt 1/5), retrying in 0.11s: Request timed out",
        "I20260220 01:50:38 1404 zephyr.execution Worker zephyr--ab-p0-workers-a0-3:0 cannot reach the "
        "coordinator at http://10.0.0.1:30000: httpx.ConnectError: [Errno 113] No route to host",
    ]
    (tmp_path / "coordinator.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    ev = load(str(tmp_path / "coordinator.log"))
    row = ev.status.iloc[-1]
    assert (row["completed"], row["total"], row["queue_depth"], row["registered"]) == (0, 4839, 4839, 488)
    assert row["ts"] == pytest.approx(1771552236.139)
    facts = ev.log_facts
    assert [f[1:] for f in facts.worker_group] == [(512, 512, 1376)]
    assert facts.rpc_retry[0][2:5] == ("run_pipeline", 1, 5)
    assert facts.connect_error[0].worker == "zephyr--ab-p0-workers-a0-3:0"
    assert not ev.warnings


def test_known_modes_lead_the_report_of_the_dispatch_stall(jobs):
    """A job-level mode is ranked with the others by cost, and its idle worker-hours are said."""
    analysis = analyze(load(str(jobs["dispatch-stall.coord"] / "evidence")))
    top = analysis.findings[0]
    assert top.known == "marin#2943"
    assert top.cost.idle_worker_hours == pytest.approx(3 * 488, rel=0.05)
    assert BY_NAME["dispatch-stall"].workers == 488
