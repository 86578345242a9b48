"""`zdebug crashes JOB --dedupe` against the earlier runs of the same pipeline in the job store:
each group is new, recurring or regressed (gone from the last run, back now). Real reference
jobs, one pipeline run three times with different faults."""

from __future__ import annotations

import io
import json
import sys

import pytest

from zephyr_debug import cli

pytestmark = pytest.mark.slow

PIPELINE = {"runner": "subprocess", "stages": 1, "shards": 5, "workers": 2}  # a pipeline no other test runs


def _zdebug(capsys, monkeypatch, *args: str) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["zdebug", *args])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    try:
        cli.main()
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    return code, capsys.readouterr().out


def test_groups_are_new_recurring_or_regressed_against_earlier_runs(reference_job, capsys, monkeypatch):
    first = reference_job("exception:3", "segfault:2", **PIPELINE)
    code, out = _zdebug(capsys, monkeypatch, "crashes", str(first.job_dir), "--dedupe", "--json")
    assert code == 0 and json.loads(out)["compared_with"] == []  # the pipeline's first run
    second = reference_job("exception:3", **PIPELINE)
    third = reference_job("exception:3", "segfault:2", "crash-loop:1", **PIPELINE)
    code, out = _zdebug(capsys, monkeypatch, "crashes", str(third.job_dir), "--dedupe", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["compared_with"] == [second.job_dir.name, first.job_dir.name]
    by_kind = {(g["kind"], g["exception"]): g for g in data["groups"]}
    assert by_kind["task", "KeyError"]["history"] == "recurring"
    segv = by_kind["segv", "SIGSEGV"]
    assert segv["history"] == "regressed" and segv["last_seen_in"] == first.job_dir.name
    loop = next(g for g in data["groups"] if 1 in g["shards"])
    assert loop["history"] == "new" and loop["last_seen_in"] is None
    code, text = _zdebug(capsys, monkeypatch, "crashes", str(third.job_dir), "--dedupe")
    words = " ".join(text.split())  # lines wrapped at the terminal's width, joined back
    assert "vs 2 earlier run(s) of this pipeline" in words and "1 new, 1 regressed, 1 recurring" in words
    assert f"gone from the last run, seen in {first.job_dir.name}" in words
    # --exit-status: 1 when something is new or back, 0 when every group was there last run
    assert _zdebug(capsys, monkeypatch, "crashes", str(third.job_dir), "--dedupe", "--exit-status")[0] == 1
    assert _zdebug(capsys, monkeypatch, "crashes", str(second.job_dir), "--dedupe", "--exit-status")[0] == 0
