"""Every playbook's commands really run against a reference job with the matching fault,
and their output names the finding the playbook promises."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import replace

import pytest
from conftest import FAST, fast_stages

from zephyr_debug import playbooks
from zephyr_debug.dashboards.local import LocalPrometheus
from zephyr_debug.reference import Job, JobConfig, parse_fault

BOOKS = playbooks.all_playbooks()
PATTERNS = {
    "straggler",
    "hung",
    "worker-death",
    "oom",
    "all-workers-dead",
    "stall",
    "task-error",
    "crash-flood",
    "profil",
    "prometheus",
}


def job_options(book: playbooks.Playbook) -> dict:
    """The playbook's run_reference options; a `coordinator` table overrides the test timings."""
    options = dict(book.job)
    options["coordinator"] = replace(FAST, **options.get("coordinator", {}))
    return options


def run_command(line: str, substitutions: dict[str, str], env: dict) -> subprocess.CompletedProcess:
    for key, value in substitutions.items():
        line = line.replace(key, value)
    argv = shlex.split(line)
    return subprocess.run(
        [sys.executable, "-m", "zephyr_debug.cli", *argv[1:]], capture_output=True, text=True, timeout=120, env=env
    )


def run_commands(book: playbooks.Playbook, substitutions: dict[str, str], env: dict) -> str:
    """Run the playbook's commands in order; each must exit 0 without a traceback."""
    output = []
    for line in book.commands:
        proc = run_command(line, substitutions, env)
        assert "Traceback" not in proc.stderr, f"{line}\n{proc.stderr}"
        assert proc.returncode == 0, f"{book.path}: `{line}` exited {proc.returncode}: {proc.stderr}"
        output.append(proc.stdout + proc.stderr)
    return "\n".join(output)


def assert_promises(book: playbooks.Playbook, text: str) -> None:
    for promise in book.expect:
        assert promise in text, f"{book.path}: output does not name {promise!r}"


def test_there_is_a_playbook_for_each_failure_pattern():
    names = " ".join(b.name for b in BOOKS)
    assert all(p in names for p in PATTERNS), sorted(p for p in PATTERNS if p not in names)
    for book in BOOKS:
        assert book.commands, f"{book.path}: no zdebug commands"
        assert book.expect, f"{book.path}: promises nothing"
        for heading in ("## Symptoms", "## Run", "## Read the output", "## Fix", "## In production"):
            assert heading in book.body, f"{book.path}: missing {heading!r}"


@pytest.mark.slow
@pytest.mark.parametrize("book", [b for b in BOOKS if not b.live], ids=lambda b: b.name)
def test_playbook_commands_run_and_find_what_they_promise(book, reference_job, jobs_root):
    result = reference_job(*book.faults, **job_options(book))
    env = {**os.environ, "ZDEBUG_HOME": str(jobs_root.parent)}
    assert_promises(book, run_commands(book, {"$JOB": str(result.job_dir)}, env))


@pytest.mark.slow
@pytest.mark.parametrize("book", [b for b in BOOKS if b.live], ids=lambda b: b.name)
def test_live_playbook_commands_run_against_a_running_job(book, tmp_path, monkeypatch):
    options = job_options(book)
    shards, workers = options.pop("shards", 6), options.pop("workers", 2)
    config = JobConfig(
        workers=workers,
        runner=options.pop("runner", "inline"),
        stages=fast_stages(shards, options.pop("rows", 4000), stages=1),
        faults=[parse_fault(f) for f in book.faults],
        root=tmp_path,
        deadline_s=90,
        **options,
    )
    monkeypatch.setenv("ZDEBUG_HOME", str(tmp_path.parent))  # where the job notes its coordinator, zdebug looks
    env = dict(os.environ)
    with ExitStack() as stack:
        job = Job(config).serve()
        substitutions = {"$JOB": str(job.job_dir), "$URL": job.url, "$RUN": job.execution_id}
        if book.prometheus:
            prom = stack.enter_context(LocalPrometheus(tmp_path / "prometheus"))
            prom.add_target(job.url)
            prom.wait_scraped(job.url)
            substitutions["$PROM"] = prom.url
        job.start()
        waiter = threading.Thread(target=job.wait, daemon=True)
        waiter.start()
        stack.callback(waiter.join, 60)
        stack.callback(job.stop)
        wait_for_tail(job, book.settle_s)
        text = run_commands(book, substitutions, env)
    assert_promises(book, text)


def wait_for_tail(job: Job, settle_s: float) -> None:
    """Until every shard has started (or, every worker held, nothing has moved for `settle_s`: no
    shard would start), then `settle_s` longer so the held ones age past their peers."""
    deadline = time.time() + 30
    seen, since = None, time.time()
    while time.time() < deadline:
        status = job.coordinator.get_status()
        if status.queue_depth == 0:
            break
        now = (status.completed, status.in_flight, status.queue_depth)
        if now != seen:
            seen, since = now, time.time()
        elif time.time() - since >= settle_s:
            break
        time.sleep(0.2)
    time.sleep(settle_s)
