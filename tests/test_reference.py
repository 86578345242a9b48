"""The reference pipeline really runs and really fails: end-to-end on real processes."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
from conftest import FAST

from zephyr_debug import jobstore, zephyrlog
from zephyr_debug.reference import CoordinatorConfig
from zephyr_debug.reference.proctree import process_tree
from zephyr_debug.sources import load

pytestmark = pytest.mark.slow

PREFIX = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING|ERROR) zephyr\.execution: "
STATUS_RE = re.compile(
    PREFIX + r"\[(?P<exec>[\w-]+)\] \[(?P<stage>stage\d+-[^\]]+)\] (?P<done>\d+)/(?P<total>\d+) "
    r"complete, \d+ in-flight, \d+ queued, \d+/\d+ workers alive, \d+ dead"
    r"(; items=\S+ \(\S+/s\), bytes_processed=\S+ \S+ \(\S+ \S+/s\))?$"
)


def events(job_dir: Path, type_: str | None = None) -> list[dict]:
    evs = list(jobstore.read_events(job_dir / jobstore.EVENTS))
    return [e for e in evs if type_ is None or e["type"] == type_]


def coordinator_log(job_dir: Path) -> str:
    return (job_dir / jobstore.COORDINATOR_LOG).read_text()


def test_every_shard_completes_exactly_once_when_workers_are_killed(reference_job):
    result = reference_job("kill-worker:0", "kill-worker:1", workers=3, shards=8)
    assert result.state == "succeeded" and result.fatal_error is None
    done = Counter((e["stage"], e["shard"]) for e in events(result.job_dir, "shard_done"))
    starts = {e["stage"]: e["total"] for e in events(result.job_dir, "stage_start")}
    expected = {(stage, i) for stage, total in starts.items() for i in range(total)}
    assert set(done) == expected and set(done.values()) == {1}
    infra = [e for e in events(result.job_dir, "shard_failed") if e["kind"] == "infra"]
    assert len(infra) == 2
    log = coordinator_log(result.job_dir)
    assert "re-registering (likely reconstructed), updating handle" in log
    assert re.search(
        r"Shard \d+ requeued from worker \S+ due to infra failure \(preemption/heartbeat\)\. "
        r"Total generation: 1, task errors so far: 0/3, infra-while-in-flight: 1/20\.",
        log,
    )
    exits = [e for e in events(result.job_dir, "worker_exit") if e["returncode"] == -9]
    assert len(exits) == 2


def test_status_lines_use_zephyrs_exact_format(reference_job):
    result = reference_job(workers=2, shards=4)
    lines = [ln for ln in coordinator_log(result.job_dir).splitlines() if "complete, " in ln]
    assert lines and all(STATUS_RE.match(ln) for ln in lines), lines[:3]
    first_of_stage = {}
    for ln in lines:
        first_of_stage.setdefault(STATUS_RE.match(ln)["stage"], ln)
    assert all("; items=" not in ln for ln in first_of_stage.values())  # a stage's first line has no throughput
    assert any("; items=" in ln for ln in lines)
    assert re.search(
        PREFIX + r"\[[\w-]+\] Starting stage stage0-Map \(Map\) with 4 tasks$", coordinator_log(result.job_dir), re.M
    )
    assert jobstore.looks_like_execution_id(result.execution_id)
    worker_log = next((result.job_dir / "workers").glob("*.log")).read_text()
    assert re.search(r"\] Executing stage stage0-Map shard \d+ \(attempt 0\)", worker_log)
    assert re.search(r"\] Shard \d+ done in \d+\.\d\ds", worker_log)


def test_subprocess_runner_turns_sigkill_into_memoryerror_and_keeps_segfault_dumps(reference_job):
    result = reference_job(
        "oom:1", "segfault:2", "exception:3", runner="subprocess", workers=3, shards=6, memory_limit_mb=300
    )
    assert result.state == "succeeded"
    failed = {e["shard"]: e for e in events(result.job_dir, "shard_failed")}
    assert {s: failed[s]["kind"] for s in (1, 2, 3)} == {1: "task", 2: "task", 3: "task"}

    oom = failed[1]
    assert oom["returncode"] == -9 and oom["failure"] == "oom"
    assert oom["peak_rss_bytes"] > 300 << 20  # the child's own peak, from wait4
    oom_text = Path(oom["crash_file"]).read_text()
    assert (
        "MemoryError: Subprocess for shard 1 was killed by SIGKILL (returncode -9); "
        "most likely OOM-killed by the kernel."
    ) in oom_text
    assert "Traceback (most recent call last):" in oom_text
    assert "Out of memory: Killed process" in (result.job_dir / "kernel.log").read_text()
    assert events(result.job_dir, "oom_kill")[0]["rss_bytes"] > 300 << 20

    segv = failed[2]
    assert segv["returncode"] == -11 and segv["failure"] == "segv"
    segv_text = Path(segv["crash_file"]).read_text()
    assert "Fatal Python error: Segmentation fault" in segv_text
    assert re.search(r"(Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):", segv_text)
    assert "_native_decode" in segv_text
    assert (
        "RuntimeError: Subprocess for shard 2 exited with code -11; see worker stderr above for the "
        "faulthandler traceback."
    ) in segv_text

    exc_text = Path(failed[3]["crash_file"]).read_text()
    assert "KeyError: 'user_id'" in exc_text
    assert "The above exception was the direct cause of the following exception:" in exc_text
    assert "ValueError: bad record at row" in exc_text
    log = coordinator_log(result.job_dir)
    for shard in (1, 2, 3):
        assert f"Shard {shard} failed on worker " in log and "(task error 1/3), re-queuing." in log


def test_crash_loop_aborts_after_three_task_failures(reference_job):
    result = reference_job("crash-loop:2", workers=2, shards=4, stages=1)
    assert result.state == "failed"
    assert result.fatal_error.startswith("Shard 2 failed 3 times (max 3), last failure on worker zephyr-")
    assert "\nLast error:\n" in result.fatal_error and "ArrowInvalid" in result.fatal_error
    log = coordinator_log(result.job_dir)
    assert re.search(r"Shard 2 has failed 3 times \(max 3\), last failure on worker \S+, aborting pipeline\.", log)
    assert "Coordinator aborted: Shard 2 failed 3 times" in log
    attempts = [e["attempt"] for e in events(result.job_dir, "shard_failed") if e["shard"] == 2]
    assert attempts == [0, 1, 2]
    assert events(result.job_dir, "abort")[0]["fatal_error"] == result.fatal_error


def test_inline_oom_kills_the_worker_and_loops_as_infra_until_the_limit(reference_job):
    coordinator = CoordinatorConfig(
        heartbeat_interval=0.2,
        heartbeat_timeout=4.0,
        status_interval=0.25,
        no_workers_timeout=5.0,
        max_infra_failures=3,
    )
    result = reference_job(
        "oom:1:always", workers=2, shards=3, stages=1, memory_limit_mb=300, coordinator=coordinator, respawn_delay_s=0.2
    )
    assert result.state == "failed"
    assert result.fatal_error.startswith("Shard 1 crashed its worker 3 times (max 3 infra failures while in flight)")
    infra = [e for e in events(result.job_dir, "shard_failed") if e["shard"] == 1]
    assert [e["kind"] for e in infra] == ["infra"] * 3
    kills = events(result.job_dir, "oom_kill")
    assert len(kills) >= 3 and all(k["is_worker"] for k in kills)  # inline: the worker itself is killed
    log = coordinator_log(result.job_dir)
    assert re.search(
        r"Shard 1 has been in flight during 3 infra failures \(max 3\); treating as a deterministic "
        r"crasher \(likely native SIGSEGV / OOM in shard code\) and aborting pipeline\. "
        r"Last failure on worker \S+\.",
        log,
    )


def test_heartbeat_timeout_requeues_the_held_shard(reference_job):
    result = reference_job("kill-worker:0", workers=2, shards=4, stages=1, respawn_delay_s=6.0)
    assert result.state == "succeeded"
    log = coordinator_log(result.job_dir)
    assert re.search(r"Zephyr worker \S+-workers-0 failed to heartbeat within timeout \(\d+\.\ds\)", log)
    infra = [e for e in events(result.job_dir, "shard_failed") if e["kind"] == "infra"]
    assert [e["reason"] for e in infra] == ["heartbeat timeout"]
    states = [e for e in events(result.job_dir, "worker_state") if e["state"] == "failed"]
    assert states and states[0]["reason"] == "heartbeat timeout"


def test_all_workers_dead_is_visible_and_aborts(reference_job):
    result = reference_job("kill-all-workers:1", workers=2, shards=6, stages=1)
    assert result.state == "failed"
    assert result.fatal_error.startswith("ZephyrWorkerError: No alive workers for ")
    log = coordinator_log(result.job_dir)
    assert zephyrlog.ALL_DEAD.format() in log
    assert "requeued but no live worker remains" in log  # a stranded shard is never silent
    kills = events(result.job_dir, "fault_injected")
    assert len(kills) == 2 and all(e["signal"] == "SIGKILL" for e in kills)
    assert events(result.job_dir, "stranded")


def test_job_dir_loads_back_into_evidence(reference_job):
    result = reference_job("kill-worker:0", "kill-worker:1", workers=3, shards=8)
    ev = load(str(result.job_dir))
    assert ev.job == result.execution_id and ev.state == "succeeded"
    assert [s.name for s in ev.stages] == ["stage0-Map", "stage1-Map → Write"]
    done = ev.attempts[ev.attempts["outcome"] == "done"]
    assert len(done) == 8 + 2 and done["elapsed_s"].gt(0).all() and done["items"].eq(4000).all()
    assert (ev.attempts["kind"] == "infra").sum() == 2
    assert len(ev.samples) > 10 and ev.samples["rss_bytes"].gt(0).all()
    assert set(ev.workers["state"]) == {"done"}
    assert {c.kind for c in ev.crashes} == {"infra"}
    assert ev.config["heartbeat_timeout"] == FAST.heartbeat_timeout


def test_truncated_event_log_is_tolerated(reference_job, tmp_path):
    result = reference_job(workers=2, shards=4)
    copy = tmp_path / result.execution_id
    copy.mkdir()
    raw = (result.job_dir / jobstore.EVENTS).read_bytes()
    cut = raw[: raw.rfind(b"job_end") + 3]  # the killed coordinator's last, half-written line
    (copy / jobstore.EVENTS).write_bytes(cut)
    ev = load(str(copy))
    assert ev.state == "interrupted"  # no job_end, and the launcher is not running there
    assert len(ev.warnings) == 1 and "skipped 1 unparseable line" in ev.warnings[0]
    assert len(ev.attempts) == 4 + 1  # 4 shards, then 1


def test_events_are_one_json_object_per_line(reference_job):
    result = reference_job(workers=2, shards=4)
    lines = (result.job_dir / jobstore.EVENTS).read_text().splitlines()
    parsed = [json.loads(line) for line in lines]
    assert all(isinstance(e["ts"], float) and e["type"] for e in parsed)
    assert parsed[0]["type"] == "job_start" and parsed[-1]["type"] == "job_end"
    types = {e["type"] for e in parsed}
    assert {"stage_start", "assign", "heartbeat", "shard_done", "status", "stage_end", "worker_registered"} <= types


def test_crash_files_recorded_relative_to_the_cwd_are_found(reference_job, tmp_path, monkeypatch):
    result = reference_job("exception:1", workers=2, shards=4, stages=1)
    copy = tmp_path / "moved" / result.execution_id
    shutil.copytree(result.job_dir, copy)
    lines = (copy / jobstore.EVENTS).read_text().splitlines()
    relative = f".zdebug/jobs/{result.execution_id}/crashes/"
    rewritten = [re.sub(r'"crash_file":"[^"]*/crashes/', f'"crash_file":"{relative}', ln) for ln in lines]
    (copy / jobstore.EVENTS).write_text("\n".join(rewritten) + "\n")
    monkeypatch.chdir(tmp_path)
    crash = next(c for c in load(str(copy)).crashes if c.shard == 1)
    assert crash.source == str((copy / "crashes" / "stage0-1-0.txt").resolve())
    assert "ValueError: bad record" in crash.text


def test_a_timed_hang_blocks_once_for_its_length(reference_job):
    result = reference_job("hang:1:secs=2", workers=2, shards=4, stages=1)
    done = {e["shard"]: e["elapsed_s"] for e in events(result.job_dir, "shard_done")}
    others = max(v for k, v in done.items() if k != 1)
    assert 2.0 <= done[1] < 2.0 + others + 2.0  # one 2 s hang, not one per remaining chunk


def test_inline_oom_attempts_read_back_as_oom(reference_job):
    coordinator = CoordinatorConfig(
        heartbeat_interval=0.2,
        heartbeat_timeout=4.0,
        status_interval=0.25,
        no_workers_timeout=5.0,
        max_infra_failures=3,
    )
    result = reference_job(
        "oom:1:always", workers=2, shards=3, stages=1, memory_limit_mb=300, coordinator=coordinator, respawn_delay_s=0.2
    )
    failed = load(str(result.job_dir)).attempts.query("outcome == 'failed'")
    assert list(failed["shard"]) == [1, 1, 1]
    assert set(failed["kind"]) == {"infra"} and set(failed["failure"]) == {"oom"}


def test_the_oom_watchdog_sees_children_a_thread_started(tmp_path):
    """The watchdog's process tree (from /proc's per-thread children lists) holds what psutil's
    walk of every process finds, grandchildren and children a worker's thread spawned included."""
    code = (
        "import subprocess, threading, time\n"
        "threading.Thread(target=lambda: subprocess.run(['sleep', '30'])).start()\n"
        "subprocess.Popen(['bash', '-c', 'sleep 30 & wait'])\n"
        "time.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        want = {proc.pid}
        for _ in range(100):  # until its 3 descendants run (a hang guard, not a timing)
            want = {proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))}
            if len(want) == 4:
                break
            time.sleep(0.05)
        assert len(want) == 4
        assert set(process_tree(proc.pid)) == want
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert process_tree(proc.pid) == [proc.pid]  # gone: itself, which psutil then reports gone
