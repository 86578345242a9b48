"""`zdebug diagnose`: one finding per root cause, ranked by severity and cost, each with a
playbook and next commands that run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from zephyr_debug import playbooks
from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.analyze.nextsteps import _playbooks
from zephyr_debug.findings import CAUSES, JOB_KINDS, SEVERITIES
from zephyr_debug.sources import load


def run(*args: str, code: int = 0) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "zephyr_debug.cli", "diagnose", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == code, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_healthy_job_has_no_findings(reference_job):
    result = reference_job(workers=2, shards=4)
    d = run(str(result.job_dir))
    assert d["healthy"] is True and d["findings"] == [] and d["state"] == "succeeded"
    assert d["schema_version"] >= 2 and d["headline"].startswith("Succeeded")


@pytest.mark.slow
def test_aborted_job_one_finding_per_root_cause(reference_job):
    result = reference_job("crash-loop:2", workers=2, shards=4, stages=1)
    d = run(str(result.job_dir))
    kinds = [f["kind"] for f in d["findings"]]
    assert kinds == ["crash-loop"], kinds  # the abort is its outcome, not a second finding; no "crash group" either
    loop = next(f for f in d["findings"] if f["kind"] == "crash-loop")
    assert loop["shards"] == [2] and "ArrowInvalid" in loop["title"] and loop["fingerprint"]
    assert loop["metrics"]["aborted_pipeline"] is True
    assert any("Shard 2 failed 3 times" in line for line in loop["evidence"])
    assert d["state"] == "failed" and d["headline"].startswith("Aborted in") and loop["title"] in d["headline"]
    ranks = [SEVERITIES.index(f["severity"]) for f in d["findings"]]
    assert ranks == sorted(ranks)
    books = {b.name for b in playbooks.all_playbooks()}
    for f in d["findings"]:
        named = [step.split()[-1] for step in f["next"] if step.startswith("zdebug playbook ")]
        assert named and set(named) <= books
    assert run(str(result.job_dir), "--exit-status", code=1)["state"] == "failed"


def test_every_kind_the_analysis_emits_has_a_playbook():
    mapped = _playbooks()
    missing = [c for c in [*CAUSES, *JOB_KINDS] if c not in mapped and c != "recovered"]
    assert not missing, missing


@pytest.mark.slow
def test_analysis_is_pure_over_evidence(reference_job):
    ev = load(str(reference_job(workers=2, shards=4).job_dir))
    before = (len(ev.attempts), len(ev.crashes), list(ev.warnings))
    assert analyze(ev).healthy is True
    assert (len(ev.attempts), len(ev.crashes), list(ev.warnings)) == before
