"""`zdebug watch` / `stragglers` / `workers` / `status` against a LIVE reference coordinator."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import signal
import sys
import threading
import time

import pytest
from conftest import FAST, fast_stages
from typer.testing import CliRunner

from benchmarks.bench_early import CAPTURES
from zephyr_debug.cli import app
from zephyr_debug.reference import Job, JobConfig, parse_fault

pytestmark = pytest.mark.slow


def start_job(root, hang: str, deadline_s: float) -> tuple[Job, threading.Thread, dict]:
    """A 6-shard job with the `hang` fault, driven by a thread: (job, its waiter, env for zdebug)."""
    config = JobConfig(
        workers=2,
        runner="inline",
        stages=fast_stages(6, 4000, stages=1),
        coordinator=FAST,
        faults=[parse_fault(hang)],
        root=root,
        deadline_s=deadline_s,
    )
    job = Job(config).start()
    waiter = threading.Thread(target=job.wait, daemon=True)
    waiter.start()
    return job, waiter, {**os.environ, "ZDEBUG_HOME": str(root.parent), "COLUMNS": "160"}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A running job whose shard 1 hangs forever; yields (job, env) once shard 1 is the only one left."""
    job, waiter, env = start_job(tmp_path_factory.mktemp("watch-home") / "jobs", "hang:1", 150)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and job.coordinator.get_status().completed < 5:
            time.sleep(0.2)
        time.sleep(3)  # shard 1 sits at its hang for well over 8 heartbeats
        yield job, env
    finally:
        job.stop()
        waiter.join(60)


def zdebug(env, *args) -> str:
    """The CLI in-process (typer's runner): same code path as the console script, minus the start-up."""
    result = CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_live_stragglers_status_and_workers(live):
    job, env = live
    report = json.loads(zdebug(env, "stragglers", job.url, "--json"))
    [f] = report["findings"]
    assert (f["shard"], f["cause"]) == (1, "stuck")
    assert f["next"][0] == f"zdebug dump {f['worker']} --job {job.url}"  # the evidence as the user named it
    assert report["tail"] and report["tail"][-1]["ongoing"] and 1 in report["tail"][-1]["shards"]
    status = json.loads(zdebug(env, "status", job.url, "--json"))
    assert "shard 1 of stage0-Map: stuck" in status["diagnosis"] and f["next"][0] in status["next"]
    assert status["stragglers"][0]["shard"] == 1
    workers = json.loads(zdebug(env, "workers", job.url, "--json", "--sort", "cpu"))["workers"]
    holder = next(w for w in workers if w["worker"] == f["worker"])
    assert holder["shards_held"] == [1] and holder["state"] == "active"


def test_watch_once_json_snapshot(live):
    job, env = live
    snap = json.loads(zdebug(env, "watch", job.url, "--once", "--json"))
    assert snap["job"] == job.execution_id and snap["status"]["state"] == "running"
    assert [f["shard"] for f in snap["stragglers"]["findings"]] == [1]
    assert len(snap["workers"]["workers"]) == 2
    screen = zdebug(env, "watch", job.url, "--once")
    assert job.execution_id in screen and "stuck" in screen and "next: zdebug dump" in screen


def watch_on_a_terminal(url: str, env: dict) -> tuple[int, int]:
    """`zdebug watch URL` on a pty (rich Live draws as on a real terminal): (pid, fd)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(sys.executable, [sys.executable, "-m", "zephyr_debug.cli", "watch", url, "--interval", "0.5"], env)
    return pid, fd


def read_until(pid: int, fd: int, done, seconds: float) -> tuple[str, int | None]:
    """Reads the screen until `done(text)` or the process exits; (text, exit status or None)."""
    screen, deadline = b"", time.time() + seconds
    while time.time() < deadline:
        if select.select([fd], [], [], 0.2)[0]:
            with contextlib.suppress(OSError):
                screen += os.read(fd, 65536)
        finished, status = os.waitpid(pid, os.WNOHANG)
        if finished:
            return screen.decode(errors="replace"), status
        if done(screen.decode(errors="replace")):
            return screen.decode(errors="replace"), None
    return screen.decode(errors="replace"), None


def test_watch_refreshes_on_a_terminal_and_quits_on_ctrl_c(live):
    job, env = live
    status = None
    pid, fd = watch_on_a_terminal(job.url, env)
    try:
        text, status = read_until(pid, fd, lambda t: t.count(job.execution_id) >= 2, 40)  # a frame + a refresh
        assert status is None, text[-2000:]
        os.kill(pid, signal.SIGINT)
        rest, status = read_until(pid, fd, lambda t: False, 20)
        assert status is not None, "zdebug watch did not exit on Ctrl-C"
    finally:
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    text += rest
    assert text.count(job.execution_id) >= 2 and "\x1b[" in text  # rich drew and redrew on the terminal
    assert os.waitstatus_to_exitcode(status) == 0 and "Traceback" not in text
    assert "stopped watching" in text


def test_watch_follows_a_job_to_its_end_and_exits(tmp_path):
    job, waiter, env = start_job(tmp_path / "jobs", "hang:1:secs=1.5", 90)
    status = None
    pid, fd = watch_on_a_terminal(job.url, env)
    try:
        text, status = read_until(pid, fd, lambda t: False, 90)  # until it exits by itself
    finally:
        job.stop()
        waiter.join(60)
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    assert status is not None and os.waitstatus_to_exitcode(status) == 0, text[-2000:]
    assert "running" in text and "succeeded" in text  # live frames, then the end (from the job store)


KEPT = "showing the last good read"


def _words(screen: str) -> str:
    """The screen's words in order: no escape sequences, a wrapped line joined."""
    return " ".join(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen).split())


@pytest.mark.parametrize("target", ["dir", "file"])
def test_watch_keeps_the_last_read_while_a_local_log_is_rewritten(tmp_path, target):
    """A log rewritten in place (logrotate's copytruncate, a copy over it) reads empty for a moment:
    `watch` of it says so once and keeps the last good read; the log back, it goes on to the end."""
    log = (CAPTURES / "healthy" / "coordinator.log").read_bytes()
    lines = log.splitlines(keepends=True)
    here = tmp_path / "job"
    here.mkdir()
    path = here / "coordinator.log"
    path.write_bytes(b"".join(lines[: len(lines) // 2]))  # running
    pid, fd = watch_on_a_terminal(str(here if target == "dir" else path), {**os.environ, "COLUMNS": "80"})
    status = None
    try:
        text, status = read_until(pid, fd, lambda t: "running" in t, 60)  # its first read is drawn
        assert status is None and "running" in text, text[-2000:]
        path.write_bytes(b"")
        text, status = read_until(pid, fd, lambda t: KEPT in _words(t), 60)
        assert status is None and KEPT in _words(text), text[-2000:]
        more, status = read_until(pid, fd, lambda t: False, 1.5)  # refreshes of the empty file
        assert status is None, (text + more)[-2000:]
        path.write_bytes(log)  # the whole log: the job ended
        rest, status = read_until(pid, fd, lambda t: False, 60)
        text += more + rest
    finally:
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    assert status is not None and os.waitstatus_to_exitcode(status) == 0, text[-2000:]
    assert _words(text).count(KEPT) == 1, text[-2000:]
    assert "succeeded" in text, text[-2000:]
