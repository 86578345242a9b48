"""Faults on the real reference pipeline: workers SIGKILLed mid-shard over and over, the
coordinator (launcher) SIGKILLed, a job store that cannot be written."""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import requests
from conftest import FAST, fast_stages
from test_fuzz_corpus import FORMS, check, run_inprocess

from zephyr_debug import jobstore
from zephyr_debug.reference import Job, JobConfig

ROOT = Path(__file__).parent.parent
ZDEBUG = [sys.executable, "-m", "zephyr_debug.cli"]


def events(job_dir: Path, type_: str) -> list[dict]:
    return [e for e in jobstore.read_events(job_dir / jobstore.EVENTS) if e["type"] == type_]


def _kill_group(pid: int) -> bool:
    try:
        os.killpg(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_workers_killed_mid_shard_again_and_again_lose_and_double_nothing(tmp_path):
    rows, shards = 3000, 12
    config = JobConfig(
        workers=3,
        runner="inline",
        stages=fast_stages(shards, rows, chunk_seconds=0.1),
        coordinator=FAST,
        root=tmp_path,
        deadline_s=240,
        respawn=True,
        respawn_delay_s=0.3,
    )
    job = Job(config).start()
    waiter = threading.Thread(target=job.wait, daemon=True)
    waiter.start()
    rnd = random.Random(5)
    kills: list[tuple[str, int, int]] = []
    try:
        while waiter.is_alive() and len(kills) < 6:
            time.sleep(rnd.uniform(0.3, 0.8))
            try:
                workers = requests.get(job.url + "/workers", timeout=5).json()
            except requests.ConnectionError:  # the job ended meanwhile
                break
            busy = [
                (wid, w)
                for wid, w in workers.items()
                if w["state"] == "active" and w.get("shard") is not None and w.get("items")
            ]
            procs = {w.id: w.proc for w in job.workers if w.proc and w.proc.poll() is None}
            busy = [(wid, w) for wid, w in busy if wid in procs and procs[wid].pid == w["pid"]]
            if busy:
                wid, w = rnd.choice(busy)
                if _kill_group(w["pid"]):  # the worker's process group: mid-shard, like a preempted VM
                    kills.append((wid, w["pid"], w["shard"]))
    finally:
        waiter.join(240)
    assert not waiter.is_alive() and job.state == "succeeded", job.coordinator.get_status()
    assert len(kills) >= 3, kills

    job_dir = job.job_dir
    done = Counter((e["stage"], e["shard"]) for e in events(job_dir, "shard_done"))
    starts = {e["stage"]: (e["index"], e["total"]) for e in events(job_dir, "stage_start")}
    expected = {(stage, i) for stage, (_, total) in starts.items() for i in range(total)}
    assert set(done) == expected and set(done.values()) == {1}  # every shard exactly once
    infra = [e for e in events(job_dir, "shard_failed") if e["kind"] == "infra"]
    killed = [e for e in events(job_dir, "worker_exit") if e["returncode"] == -signal.SIGKILL]
    assert len(killed) == len(kills) and len(infra) >= len(kills) - 1  # a kill racing the report may not lose a shard

    # The results: one Parquet file per successful attempt, and the counted rows add up.
    total_rows = 0
    for e in events(job_dir, "shard_done"):
        index = starts[e["stage"]][0]
        out = (
            job_dir
            / "scratch"
            / e["worker"].replace(":", "_")
            / f"stage{index}-shard{e['shard']:05d}-a{e['attempt']}.parquet"
        )
        assert pq.read_metadata(out).num_rows > 0
        total_rows += e["items"]
    assert total_rows == sum(total for _, total in starts.values()) * rows
    assert job.coordinator.get_counters()["zephyr/item_count"] == total_rows

    # zdebug sees the same story.
    s = json.loads(run_inprocess(["status", str(job_dir), "--json"])[1])
    assert s["state"] == "succeeded" and s["completed"] == s["total"]


@pytest.fixture(scope="module")
def killed_job(tmp_path_factory) -> Path:
    """A job whose launcher (coordinator) was SIGKILLed mid-stage, with some shards done."""
    root = tmp_path_factory.mktemp("killed")
    script = (
        "import sys; from pathlib import Path; sys.path.insert(0, 'tests'); from conftest import run_reference;"
        f"run_reference(Path({str(root)!r}), ('hang:3',), workers=2, shards=8, stages=1)"
    )
    launcher = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    job_dir = None
    try:
        deadline = time.time() + 90
        while time.time() < deadline and job_dir is None:
            time.sleep(0.2)
            dirs = jobstore.list_jobs(root)
            if dirs and len(events(dirs[0], "shard_done")) >= 3:
                job_dir = dirs[0]
    finally:
        launcher.kill()
        launcher.wait()
    assert job_dir is not None, "the job never got going"
    for e in events(job_dir, "worker_spawned"):  # the orphaned workers (they would exit on their own)
        _kill_group(e["pid"])
    return job_dir


@pytest.mark.slow
@pytest.mark.parametrize("form", [f for f in FORMS if "{}" in f], ids=lambda f: " ".join(f))
def test_after_the_coordinator_is_killed_every_command_reads_the_job_as_interrupted(form, killed_job):
    argv = [str(killed_job) if a == "{}" else a for a in form]
    code, out, err = run_inprocess([*argv, "--json"])
    assert check(argv, code, out, err) is None
    if code != 0:  # commands that need a live job say why they cannot act, in one line
        assert any(
            word in err
            for word in (
                "not running",
                "interrupted",
                "not a pid",
                "no shard in flight",
                "cannot read",
                "no such playbook",
                "no playbook",
            )
        ), err
        return
    data = json.loads(out)
    states = _values(data, "state")
    job_states = states & {"running", "succeeded", "failed", "interrupted"}
    assert "running" not in job_states and "succeeded" not in job_states, (form, states)
    assert "interrupted" in json.dumps(data) or not job_states, (form, states)


def _values(data, key: str) -> set:
    """Every value of `key` anywhere in a JSON document."""
    found = set()
    if isinstance(data, dict):
        for k, v in data.items():
            if k == key and isinstance(v, str):
                found.add(v)
            found |= _values(v, key)
    elif isinstance(data, list):
        for v in data:
            found |= _values(v, key)
    return found


def _limited(max_bytes: int):
    """preexec_fn: files may not grow past max_bytes (EFBIG, like a full disk), SIGXFSZ ignored."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    return apply


def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode != 0, proc.stdout[-500:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("zdebug: error: ")]
    assert len(errors) == 1 and proc.stderr.rstrip().endswith(errors[0]), proc.stderr[-2000:]
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


DEMO = [
    "demo",
    "--workers",
    "2",
    "--shards",
    "4",
    "--rows",
    "2000",
    "--runner",
    "inline",
    "--no-faults",
    "--heartbeat",
    "0.2",
    "--heartbeat-timeout",
    "2",
    "--deadline",
    "60",
    "--no-show",
]


@pytest.mark.parametrize("home", ["a-file", "/dev/full"])
def test_unwritable_job_store_is_a_one_line_error(home, tmp_path):
    if home == "a-file":
        home = tmp_path / "a-file"
        home.write_text("not a dir")
    proc = subprocess.run(
        [*ZDEBUG, *DEMO],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ZDEBUG_HOME": str(home)},
        cwd=tmp_path,
    )
    _one_line_error(proc, str(home), "cannot write job store")


@pytest.mark.slow
def test_disk_full_while_the_job_runs_is_a_one_line_error_and_leaves_no_workers(tmp_path):
    """The event log hits the file size limit mid-job (EFBIG, as a full disk gives ENOSPC)."""
    proc = subprocess.Popen(
        [*ZDEBUG, *DEMO],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ZDEBUG_HOME": str(tmp_path)},
        preexec_fn=_limited(6_000),
        start_new_session=True,
    )
    out, err = proc.communicate(timeout=150)
    error = _one_line_error(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), "events.jsonl")
    assert "File too large" in error or "No space" in error, error
    job_dir = jobstore.list_jobs(tmp_path / "jobs")[0]
    time.sleep(1.0)
    alive = [e["pid"] for e in events(job_dir, "worker_spawned") if _alive(e["pid"])]
    for pid in alive:
        _kill_group(pid)
    assert not alive, "workers outlived the failed launcher"
    # What was written still reads.
    s = json.loads(run_inprocess(["status", str(job_dir), "--json"])[1])
    assert s["state"] == "interrupted"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
