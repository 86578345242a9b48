"""`zdebug diagnose`: ranked findings, each with a playbook and the next command."""

from __future__ import annotations

import json
import subprocess
import sys

from zephyr_debug import playbooks
from zephyr_debug.analyze.diagnose import SEVERITY, diagnose
from zephyr_debug.sources import load


def run(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "zephyr_debug.cli", "diagnose", *args, "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_healthy_job_has_no_findings(reference_job):
    result = reference_job(workers=2, shards=4)
    d = run(str(result.job_dir))
    assert d["healthy"] is True and d["findings"] == [] and d["state"] == "succeeded"


def test_aborted_job_ranks_the_abort_first_and_names_playbooks(reference_job):
    result = reference_job("crash-loop:2", workers=2, shards=4, stages=1)
    d = run(str(result.job_dir))
    first = d["findings"][0]
    assert first["cause"] == "aborted" and "Shard 2 failed 3 times" in first["title"]
    ranks = [SEVERITY.index(f["cause"]) for f in d["findings"]]
    assert ranks == sorted(ranks)
    crash = next(f for f in d["findings"] if f["cause"] == "crash-group")
    assert crash["count"] == 3 and "ArrowInvalid" in crash["title"]
    assert any("deterministic" in line for line in crash["evidence"])
    books = {b.name for b in playbooks.all_playbooks()}
    for f in d["findings"]:
        assert f["playbook"] in books and f"zdebug playbook {f['playbook']}" in f["next"]


def test_every_cause_the_analyzers_emit_has_a_playbook():
    from zephyr_debug.analyze.stragglers import CAUSES

    mapped = playbooks.for_cause()
    missing = [c for c in [*CAUSES, *SEVERITY] if c not in mapped]
    assert not missing, missing


def test_diagnose_is_pure_over_evidence(reference_job):
    ev = load(str(reference_job(workers=2, shards=4).job_dir))
    assert diagnose(ev, [])["healthy"] is True
