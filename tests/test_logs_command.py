"""`zdebug logs JOB --shard N [--stage S] [--attempt K]` (#30 item 5): from a finding to the
shard's own lines, over real reference jobs and real processes."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_contract import valid

ZDEBUG = [sys.executable, "-m", "zephyr_debug.cli"]
TIME = re.compile(r": (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
OTHER_SHARD = re.compile(r"\b[Ss]hard (\d+)\b")


def zdebug(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ZDEBUG_HOME": str(home), "COLUMNS": "80"}
    return subprocess.run([*ZDEBUG, *args], capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def crashed(reference_job, jobs_root):
    return reference_job("crash-loop:2", workers=2, shards=4, stages=1), jobs_root.parent


def test_one_attempt_from_every_source_in_time_order(crashed):
    result, home = crashed
    proc = zdebug("logs", result.execution_id, "--shard", "2", "--attempt", "0", home=home)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "# shard 2 of stage0-Map, attempt 0: failed (task)" and lines[1].startswith("#   on zephyr-")
    body = [line for line in lines if not line.startswith("# ")]
    sources = {line.split(":", 1)[0] for line in body}
    assert "coordinator.log" in sources and any(s.startswith("workers/") for s in sources)
    text = "\n".join(body)
    assert "Executing stage stage0-Map shard 2 (attempt 0)" in text and "Traceback" in text
    assert re.search(r"Shard 2 failed on worker \S+", text)
    assert "(attempt 1)" not in text and "(attempt 2)" not in text
    assert all(int(n) == 2 for n in OTHER_SHARD.findall(text))  # no neighbouring shard's line
    times = [m.group(1) for line in body if (m := TIME.search(line))]
    assert len(times) >= 3 and times == sorted(times)


def test_json_lines_are_the_files_own_lines(crashed):
    result, home = crashed
    proc = zdebug("logs", str(result.job_dir), "--shard", "2", "--json", home=home)
    data = valid("logs", json.loads(proc.stdout))
    assert [a["attempt"] for a in data["attempts"]] == [0, 1, 2]  # every attempt, as Zephyr numbers them
    assert data["lines"]
    for line in data["lines"]:
        raw = (result.job_dir / line["source"]).read_text().splitlines()[line["line"] - 1]
        assert raw == line["text"]
    timed = [x["ts"] for x in data["lines"] if x["ts"] is not None]
    assert timed == sorted(timed)


@pytest.mark.slow
def test_bad_options_are_one_line_errors(crashed):
    result, home = crashed
    for args, needle in (
        (["--shard", "2", "--attempt", "9"], "has attempts 0, 1, 2"),
        (["--shard", "99"], "shard 99"),
        (["--shard", "2", "--stage", "nosuch"], "no such stage"),
    ):
        proc = zdebug("logs", result.execution_id, *args, home=home)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and needle in proc.stderr


def test_logs_alone_and_a_stage_prefix(reference_job, jobs_root, tmp_path):
    job = reference_job(workers=2, shards=4).job_dir
    logs = tmp_path / "logs"
    logs.mkdir()
    for f in [job / "coordinator.log", *(job / "workers").glob("*.log")]:
        shutil.copy(f, logs)
    proc = zdebug("logs", str(logs), "--shard", "0", "--stage", "stage1", home=jobs_root.parent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# shard 0 of stage1-Map")
    assert "Executing stage stage1-Map → Write shard 0 (attempt 0)" in proc.stdout
    assert "stage0-Map shard" not in proc.stdout


def test_a_finding_links_to_the_shard_logs(crashed):
    result, home = crashed
    found = json.loads(zdebug("diagnose", result.execution_id, "--json", home=home).stdout)["findings"]
    steps = [s for f in found if f.get("shard") == 2 for s in f["next"] if s.startswith("zdebug logs ")]
    assert steps, found
    proc = zdebug(*shlex.split(steps[0])[1:], home=home)  # pasteable
    assert proc.returncode == 0 and "Shard 2 failed" in proc.stdout
