"""One JSON contract (#30 item 1) and a finished job read from its logs alone (item 2).

Real outputs of real `zdebug` processes over real reference jobs, validated against the JSON
Schemas in docs/schemas/ (what users are told to rely on).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from referencing import Registry, Resource

SCHEMAS = Path(__file__).parent.parent / "docs" / "schemas"
ZDEBUG = [sys.executable, "-m", "zephyr_debug.cli"]


def run(*args: str, home: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"ZDEBUG_HOME": str(home)} if home else {})}
    return subprocess.run([*ZDEBUG, *args], capture_output=True, text=True, timeout=120, env=env)


def schema(name: str) -> tuple[dict, Registry]:
    docs = {p.name: json.loads(p.read_text()) for p in SCHEMAS.glob("*.json")}
    registry = Registry().with_resources((n, Resource.from_contents(d)) for n, d in docs.items())
    return docs[f"{name}.json"], registry


def valid(name: str, data: dict) -> dict:
    body, registry = schema(name)
    jsonschema.Draft202012Validator(body, registry=registry).validate(data)
    return data


def out(name: str, *args: str, home: Path | None = None) -> dict:
    proc = run(*args, "--json", home=home)
    assert proc.returncode == 0, proc.stderr
    return valid(name, json.loads(proc.stdout))


def test_every_schema_is_a_valid_schema():
    names = {p.stem for p in SCHEMAS.glob("*.json")}
    assert {"status", "diagnose", "stragglers", "workers", "jobs", "playbook", "error", "logs"} <= names
    for name in names:
        jsonschema.Draft202012Validator.check_schema(schema(name)[0])


@pytest.mark.slow
def test_every_command_json_matches_its_schema(reference_job, jobs_root):
    job = str(reference_job("crash-loop:2", workers=2, shards=4, stages=1).job_dir)
    home = jobs_root.parent
    for name in ("status", "diagnose", "stragglers", "workers", "counters", "crashes"):
        data = out(name, name, job, home=home)
        assert isinstance(data["schema_version"], int)
    assert out("jobs", "jobs", home=home)["jobs"]
    assert out("playbook", "playbook", home=home)["playbooks"]
    assert out("playbook", "playbook", "oom", home=home)["markdown"]
    snap = out("watch", "watch", job, "--once", home=home)
    assert snap["status"]["job"] == snap["job"]


@pytest.mark.slow
def test_workers_is_one_shape_in_status_and_diagnose(reference_job, jobs_root):
    job = str(reference_job(workers=2, shards=4).job_dir)
    status = out("status", "status", job)
    diagnose = out("diagnose", "diagnose", job)
    for data in (status, diagnose):
        assert [w["worker"] for w in data["workers"]] == sorted(w["worker"] for w in data["workers"])
        assert data["pool"]["finished"] == 2 and data["pool"]["dead"] == 0 and data["pool"]["alive"] == 0
    assert status["workers"] == diagnose["workers"] and status["pool"] == diagnose["pool"]


@pytest.mark.slow
def test_errors_under_json_are_json_on_stdout(tmp_path):
    for args in (("status", "no-such-job"), ("diagnose", str(tmp_path / "missing")), ("jobs",)):
        proc = run(*args, "--json", home=tmp_path if args[0] != "jobs" else tmp_path / "x")
        if args[0] == "jobs":  # an empty store is no error
            assert proc.returncode == 0 and valid("jobs", json.loads(proc.stdout))["jobs"] == []
            continue
        err = valid("error", json.loads(proc.stdout))
        assert err["exit_code"] == proc.returncode == 3 and args[1] in err["error"]
        assert proc.stderr.strip() == f"zdebug: error: {err['error']}"
    proc = run("status", "no-such-job", home=tmp_path)  # without --json: stdout stays empty
    assert proc.returncode == 3 and proc.stdout == ""


@pytest.fixture
def logs_only(reference_job, tmp_path) -> Path:
    """A finished two-stage reference job as its logs alone: coordinator.log and the worker logs."""
    job = reference_job(workers=2, shards=4).job_dir
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(job / "coordinator.log", logs)
    for log in (job / "workers").glob("*.log"):
        shutil.copy(log, logs)
    return logs


def test_a_finished_job_read_from_its_logs_alone_is_finished(logs_only):
    text = (logs_only / "coordinator.log").read_text()
    assert "[coordinator.shutdown] Final counters" in text  # what ends it
    status = out("status", "status", str(logs_only))
    assert status["state"] == "succeeded" and status["done"] is True
    assert status["completed"] == status["total"] and status["stage"].startswith("stage1")
    assert status["pool"]["finished"] == 2 and status["pool"]["alive"] == 0
    line = run("status", str(logs_only)).stdout
    assert "running" not in line and "workers 2 finished" in line and " dead" not in line


def test_a_succeeded_job_dir_says_finished_not_dead(reference_job):
    job = reference_job(workers=2, shards=4).job_dir
    line = run("status", str(job)).stdout
    assert "succeeded" in line and "workers 2 finished" in line and "dead" not in line
