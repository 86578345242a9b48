"""`zdebug demo / jobs / status` as a user runs them: real processes, real exit codes."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from conftest import FAST, fast_stages
from test_contract import valid

from zephyr_debug import jobstore
from zephyr_debug.reference import Job, JobConfig, parse_fault

ZDEBUG = [sys.executable, "-m", "zephyr_debug.cli"]


def zdebug(*args: str, home: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"ZDEBUG_HOME": str(home)} if home else {})}
    return subprocess.run([*ZDEBUG, *args], capture_output=True, text=True, timeout=timeout, env=env)


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zdebug: error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0]


@pytest.mark.slow
def test_status_json_of_a_finished_job(reference_job, jobs_root):
    result = reference_job("crash-loop:2", workers=2, shards=4, stages=1)
    proc = zdebug("status", result.execution_id[:18], "--json", home=jobs_root.parent)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    for key in ("stage", "completed", "total", "retries", "in_flight", "queue_depth", "done", "fatal_error", "workers"):
        assert key in s
    assert s["state"] == "failed" and s["done"] is True
    assert s["fatal_error"].startswith("Shard 2 failed 3 times (max 3)")
    assert "Shard 2 failed 3 times" in s["diagnosis"]
    assert any(step.startswith("zdebug crashes ") for step in s["next"])


@pytest.mark.slow
def test_jobs_lists_runs_and_status_renders_a_table(reference_job, jobs_root):
    result = reference_job(workers=2, shards=4)
    listed = json.loads(zdebug("jobs", "--json", home=jobs_root.parent).stdout)
    assert result.execution_id in {j["job"] for j in listed["jobs"]}
    proc = zdebug("status", str(result.job_dir), home=jobs_root.parent)
    assert proc.returncode == 0 and "succeeded" in proc.stdout and "Diagnosis:" in proc.stdout


@pytest.mark.slow
def test_bad_targets_are_one_line_errors(tmp_path):
    assert_one_line_error(zdebug("status", "no-such-job", home=tmp_path), "no-such-job")
    assert_one_line_error(zdebug("status", "http://127.0.0.1:9", home=tmp_path), "unreachable")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_error(zdebug("status", str(empty), home=tmp_path), str(empty))


@pytest.mark.slow
def test_live_coordinator_url_status_and_metrics(tmp_path):
    config = JobConfig(
        workers=2,
        runner="inline",
        stages=fast_stages(4, 4000, stages=1),
        faults=[parse_fault("hang:1:secs=6")],
        coordinator=FAST,
        root=tmp_path,
        deadline_s=60,
    )
    job = Job(config).start()
    waiter = threading.Thread(target=job.wait, daemon=True)
    waiter.start()
    try:
        deadline = time.time() + 30
        while time.time() < deadline and not job.coordinator.get_status().in_flight:
            time.sleep(0.1)
        proc = zdebug("status", job.url, "--json")
        assert proc.returncode == 0, proc.stderr
        s = json.loads(proc.stdout)
        assert s["state"] == "running" and s["total"] == 4 and s["done"] is False
        assert {w["worker"] for w in s["workers"]} == {w.id for w in job.workers}  # a list, one entry each
        metrics = requests.get(job.url + "/metrics", timeout=5).text
        assert f'progress_time_seconds{{run="{job.execution_id}"}}' in metrics
        assert "zephyr_shards_in_flight" in metrics and "zephyr_queue_depth" in metrics
        raw = requests.get(job.url + "/status", timeout=5).json()
        assert raw["stage"] == "stage0-Map" and all("last_seen_ago" in w for w in raw["workers"].values())
        assert_one_line_error(zdebug("logs", job.url, "--shard", "1"))  # a URL has no log file to scan
    finally:
        waiter.join(60)
    assert job.state == "succeeded"


@pytest.mark.slow
def test_killed_coordinator_reads_as_interrupted(tmp_path):
    script = (
        "import sys; from pathlib import Path; sys.path.insert(0, 'tests');"
        "from conftest import run_reference;"
        f"run_reference(Path({str(tmp_path)!r}), ('hang:0',), workers=2, shards=4, stages=1)"
    )
    launcher = subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).parent.parent)
    try:
        deadline = time.time() + 60
        job_dir = None
        while time.time() < deadline:
            dirs = jobstore.list_jobs(tmp_path)
            if dirs and b'"type":"assign"' in (dirs[0] / jobstore.EVENTS).read_bytes():
                job_dir = dirs[0]
                break
            time.sleep(0.2)
        assert job_dir is not None
        assert json.loads(zdebug("status", str(job_dir), "--json").stdout)["state"] == "running"
    finally:
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
    s = json.loads(zdebug("status", str(job_dir), "--json").stdout)
    assert s["state"] == "interrupted" and s["done"] is False
    assert s["headline"].startswith("Interrupted")  # judged at its last record, like a finished job


@pytest.mark.slow
def test_demo_runs_a_small_job_and_leaves_a_job_dir(tmp_path):
    proc = zdebug(
        "demo",
        "--workers",
        "2",
        "--shards",
        "4",
        "--rows",
        "2000",
        "--runner",
        "inline",
        "--fault",
        "exception:1",
        "--json",
        home=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["state"] == "succeeded" and out["faults"] == ["exception:1"]
    assert (Path(out["dir"]) / "crashes").is_dir()
    assert out["url"].startswith("http://127.0.0.1:")
    assert [c.split()[1] for c in out["next"]] == ["diagnose", "report", "watch"]
    once = zdebug(*shlex.split(out["next"][2])[1:], home=tmp_path)  # as pasted: `zdebug watch ID --once`
    assert once.returncode == 0 and out["job"] in once.stdout and "Ctrl-C" not in once.stdout, once.stderr
    assert_one_line_error(zdebug("demo", "--fault", "bogus:1", home=tmp_path), "unknown kind")


# --- CLI conventions (issue 20): start-up, help, version, completion, job store, exit codes ---

HEAVY = ("pandas", "numpy", "plotly", "pyarrow", "requests", "psutil", "prometheus_api_client")


def test_importing_the_cli_pulls_in_no_heavy_library():
    code = (
        "import json, sys; import zephyr_debug.cli; "
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def _commands() -> list[list[str]]:
    from zephyr_debug import cli

    return [[name] for name in cli.COMMANDS if name != "profile"] + [["profile", "record"], ["profile", "summarize"]]


@pytest.mark.slow
def test_every_help_has_examples_real_metavars_and_fits_80_columns(tmp_path):
    env = {**os.environ, "COLUMNS": "80", "ZDEBUG_HOME": str(tmp_path)}
    root = subprocess.run([*ZDEBUG, "--help"], capture_output=True, text=True, timeout=60, env=env)
    assert root.returncode == 0
    for form in (
        "iris://",
        "finelog://HOST:PORT/EXEC",
        "http://HOST:PORT",
        "prometheus+http://",
        "latest",
        "--install-completion",
        "--version",
    ):
        assert form in root.stdout
    for args in _commands():
        proc = subprocess.run([*ZDEBUG, *args, "--help"], capture_output=True, text=True, timeout=60, env=env)
        assert proc.returncode == 0, (args, proc.stderr)
        text = proc.stdout
        assert "Examples:" in text and "  zdebug " in text.split("Examples:")[1], args
        assert not re.search(r"<(bool|int|float|str|text|path|list)\b", text, re.I), (args, text)
        assert all(len(line) <= 80 for line in text.splitlines()), args
        if "JOB" in text.split("Options:")[0]:
            assert "see `zdebug --help`" in " ".join(text.split()), args


def test_version_and_completion():
    from zephyr_debug import __version__

    proc = subprocess.run([*ZDEBUG, "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == f"zdebug {__version__}"
    env = {**os.environ, "_ZDEBUG_COMPLETE": "complete_bash", "COMP_WORDS": "zdebug strag", "COMP_CWORD": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; sys.argv[0] = 'zdebug'; from zephyr_debug.cli import main; main()"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.stdout.split() == ["stragglers"], proc.stdout + proc.stderr


def _jobs_root(env: dict, cwd: Path) -> str:
    proc = subprocess.run([*ZDEBUG, "jobs", "--json"], capture_output=True, text=True, timeout=60, env=env, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["root"]


def test_job_store_is_under_xdg_state_home_from_any_directory(tmp_path):
    base = {k: v for k, v in os.environ.items() if k not in ("ZDEBUG_HOME", "XDG_STATE_HOME")}
    base["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state = tmp_path / "state"
    assert _jobs_root({**base, "XDG_STATE_HOME": str(state)}, elsewhere) == str(state / "zdebug" / "jobs")
    assert _jobs_root({**base, "HOME": str(tmp_path)}, elsewhere) == str(tmp_path / ".local/state/zdebug/jobs")
    relative = Path(_jobs_root({**base, "XDG_STATE_HOME": str(state), "ZDEBUG_HOME": ".zdebug"}, elsewhere))
    assert relative == Path(".zdebug/jobs")  # a checkout's own store, relative to where zdebug runs


@pytest.mark.slow
def test_exit_codes(reference_job, jobs_root, tmp_path):
    home = jobs_root.parent
    assert zdebug("status", "--run", "x", home=home).returncode == 2  # usage (zdebug's own check)
    assert zdebug("status", "--no-such-option", home=home).returncode == 2  # usage (the parser's)
    assert zdebug("status", "no-such-job", home=home).returncode == 3
    assert zdebug("status", "http://127.0.0.1:9", home=home).returncode == 3
    empty = tmp_path / "empty"
    empty.mkdir()
    assert zdebug("status", "latest", home=empty).returncode == 3  # an empty store has no latest
    failed = reference_job("crash-loop:2", workers=2, shards=4, stages=1)
    assert zdebug("status", str(failed.job_dir), home=home).returncode == 0  # without --exit-status
    assert zdebug("status", str(failed.job_dir), "--exit-status", home=home).returncode == 1
    assert zdebug("diagnose", str(failed.job_dir), "--exit-status", "--json", home=home).returncode == 1
    ok = reference_job(workers=2, shards=4)
    assert zdebug("status", str(ok.job_dir), "--exit-status", home=home).returncode == 0


def test_exit_status_helper():
    from zephyr_debug.commands.common import exit_status

    assert [exit_status(s, False) for s in ("succeeded", "running", "failed", "interrupted")] == [0, 0, 1, 1]
    assert exit_status("succeeded", True) == 1


def test_dashboards_writes_what_the_package_ships(tmp_path):
    from zephyr_debug.dashboards.__main__ import PACKAGED
    from zephyr_debug.dashboards.__main__ import main as generate

    repo = Path(__file__).resolve().parent.parent
    assert generate(["--check", str(repo / "dashboards")]) == 0, "run `make dashboards`"  # the packaged copies too
    out = tmp_path / "out"
    proc = zdebug("dashboards", str(out), "--json", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = valid("dashboards", json.loads(proc.stdout))
    assert len(written["files"]) == 5
    for name in ("zephyr-pipeline.json", "alerts.yml", "alerts_test.yml", "provisioning/dashboards/zephyr.yml"):
        assert (out / name).read_bytes() == (PACKAGED / name).read_bytes() == (repo / "dashboards" / name).read_bytes()
    assert json.loads((out / "zephyr-pipeline.json").read_text())["uid"] == "zephyr-pipeline"
    text = zdebug("dashboards", str(out), home=tmp_path).stdout
    assert f"import {out / 'zephyr-pipeline.json'}" in text
    assert_one_line_error(zdebug("dashboards", str(out / "alerts.yml"), home=tmp_path), "not a directory")


def test_generating_dashboards_without_the_extra_is_one_line(tmp_path):
    """`python -S`: no site-packages, so no pyyaml nor grafana-foundation-sdk (a core install)."""
    repo = Path(__file__).resolve().parent.parent
    code = f"import sys, runpy; sys.path.insert(0, {str(repo)!r}); sys.argv[1:] = [{str(tmp_path)!r}]; "
    code += "runpy.run_module('zephyr_debug.dashboards', run_name='__main__')"
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "zephyr-debug[dashboards]" in lines[0] and "zdebug dashboards DIR" in lines[0]
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_the_wheel_holds_the_dashboards(tmp_path):
    import zipfile

    repo = Path(__file__).resolve().parent.parent
    build = [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(tmp_path), str(repo)]
    subprocess.run(build, capture_output=True, check=True, timeout=300)
    names = set(zipfile.ZipFile(next(tmp_path.glob("zephyr_debug-*.whl"))).namelist())
    shipped = {f"zephyr_debug/dashboards/files/{n}" for n in ("zephyr-pipeline.json", "alerts.yml", "alerts_test.yml")}
    assert shipped <= names and "zephyr_debug/commands/dashboards.py" in names


def test_shell_completion_offers_job_ids_and_playbook_names(tmp_path):
    """Bash completion as the shell asks for it (`_ZDEBUG_COMPLETE`): the store's ids, newest first."""
    from zephyr_debug.jobstore import EVENTS

    for i, name in enumerate(["20261201-010101-aaaa0001", "20261202-010101-bbbb0002"]):
        (tmp_path / "jobs" / name).mkdir(parents=True)
        (tmp_path / "jobs" / name / EVENTS).write_text("")
        os.utime(tmp_path / "jobs" / name / EVENTS, (1e9 + i, 1e9 + i))

    def complete(line: str) -> list[str]:
        env = {**os.environ, "ZDEBUG_HOME": str(tmp_path), "_ZDEBUG_COMPLETE": "complete_bash"}
        env |= {"COMP_WORDS": line, "COMP_CWORD": str(len(line.split(" ")) - 1)}
        zdebug = str(Path(sys.executable).with_name("zdebug"))
        return subprocess.run([zdebug], env=env, capture_output=True, text=True, check=True).stdout.split()

    assert complete("zdebug diagnose ") == ["latest", "20261202-010101-bbbb0002", "20261201-010101-aaaa0001"]
    assert complete("zdebug status 20261201") == ["20261201-010101-aaaa0001"]
    assert complete("zdebug playbook st") == ["stall-alert", "straggler-tail"]
