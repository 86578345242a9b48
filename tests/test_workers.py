"""`zdebug workers`: ranking, field spellings, robust outlier marks."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from zephyr_debug.analyze.workers import rank, robust_z
from zephyr_debug.cli import app
from zephyr_debug.errors import UsageError
from zephyr_debug.model import Evidence


def evidence(rows: list[dict]) -> Evidence:
    return Evidence(job="j", source="test", now=0.0, state="running", workers=pd.DataFrame(rows))


def fleet(n: int = 10) -> list[dict]:
    return [
        {
            "worker": f"w{i}",
            "state": "active",
            "last_seen_ago": 1.0,
            "memory_mb": 100 + i,
            "memory_peak_mb": 120 + i,
            "disk_mb": 50.0,
            "cpu": 40 + i,
        }
        for i in range(n)
    ]


def test_sorted_as_asked_with_the_outlier_marked():
    rows = fleet()
    rows[3].update(memory_mb=900, memory_peak_mb=950)
    rows[7].update(disk_mb=5000)
    report = rank(evidence(rows), "memory")
    assert [w["worker"] for w in report.workers][:2] == ["w3", "w9"]
    marks = {w["worker"]: w["outliers"] for w in report.workers if w["outliers"]}
    assert marks == {"w3": ["memory_mb", "memory_peak_mb"], "w7": ["disk_mb"]}
    assert rank(evidence(rows), "disk").workers[0]["worker"] == "w7"
    assert [w["cpu"] for w in rank(evidence(rows), "cpu").workers] == sorted((r["cpu"] for r in rows), reverse=True)


def test_older_and_iris_field_spellings_and_string_numbers():
    rows = [
        {"worker": "old", "state": "busy", "memoryMb": "300", "diskMb": "10", "cpuPercent": 90},
        {
            "worker": "iris",
            "state": "active",
            "memory_mb": "168",
            "memory_peak_mb": "170",
            "disk_mb": "23597",
            "cpu_millicores": 600,
        },
        {"worker": "blank", "state": "failed"},
    ]
    by = {w["worker"]: w for w in rank(evidence(rows), "memory").workers}
    assert (by["old"]["memory_mb"], by["old"]["disk_mb"], by["old"]["cpu"]) == (300, 10, 90)
    assert (by["iris"]["memory_mb"], by["iris"]["disk_mb"], by["iris"]["cpu"]) == (168, 23597, 60)
    assert [w["worker"] for w in rank(evidence(rows), "memory").workers] == ["old", "iris", "blank"]
    assert by["blank"]["memory_mb"] != by["blank"]["memory_mb"] and not by["blank"]["alive"]  # NaN, sorted last


def test_uniform_fleet_has_no_outliers_and_mad_zero_falls_back():
    assert rank(evidence(fleet()), "memory").outliers == 0
    same = pd.Series([100.0] * 9 + [400.0])  # MAD = 0: mean absolute deviation takes over
    assert robust_z(same).iloc[-1] > 3.5 and robust_z(same).iloc[0] == 0
    assert (robust_z(pd.Series([5.0] * 4)) == 0).all()


def test_unknown_sort_key_is_refused():
    with pytest.raises(UsageError):
        rank(evidence(fleet()), "gpu")
    result = CliRunner().invoke(app, ["workers", "whatever", "--sort", "gpu"])
    assert result.exit_code != 0 and "gpu" in result.output


@pytest.mark.slow
def test_reference_job_workers_json(reference_job):
    result = reference_job(workers=2, shards=4)
    out = CliRunner().invoke(app, ["workers", str(result.job_dir), "--json", "--sort", "memory"])
    workers = json.loads(out.stdout)["workers"]
    assert len(workers) == 2 and all(w["memory_mb"] > 10 for w in workers)
    assert [w["memory_mb"] for w in workers] == sorted((w["memory_mb"] for w in workers), reverse=True)
    assert sum(w["shards_done"] for w in workers) == 5  # 4 + 1 shards over two stages
    assert {"worker", "state", "memory_mb", "memory_peak_mb", "disk_mb", "cpu", "last_seen_ago", "shards_held"} <= set(
        workers[0]
    )
