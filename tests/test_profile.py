"""`zdebug profile` / `zdebug dump` on real reference workers, sampled by the real py-spy."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonschema
import pytest
from conftest import FAST
from test_cli_foundation import assert_one_line_error, zdebug
from typer.testing import CliRunner

from zephyr_debug.cli import app
from zephyr_debug.errors import ZdebugError
from zephyr_debug.profile import pyspy, speedscope
from zephyr_debug.profile.target import resolve
from zephyr_debug.reference import Job, JobConfig, StageSpec, parse_fault, shardwork
from zephyr_debug.sources.live import fetch

SCHEMA = json.loads(speedscope.SCHEMA_PATH.read_text())
SHARDWORK = Path(shardwork.__file__).resolve()
pytestmark = pytest.mark.slow


def start_job(root: Path, runner: str, faults: list[str], shards: int) -> Job:
    """A live job: shard 0 burns CPU, the others sleep per chunk (I/O pacing). Tests abort it."""
    work = {"rows": 2000, "chunk_rows": 200, "chunk_seconds": 0.5}  # I/O-bound even on a loaded machine
    config = JobConfig(
        workers=3,
        runner=runner,
        stages=[StageSpec("Map", shards, work)],
        coordinator=FAST,
        faults=[parse_fault(f) for f in faults],
        root=root,
        deadline_s=600,
    )
    job = Job(config).start()
    threading.Thread(target=job.wait, daemon=True).start()
    return job


def holders(job: Job, shards: set[int], timeout: float = 30) -> dict[int, str]:
    """{shard: worker} once every shard in `shards` and one other shard are held."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        held = {w["shard"]: wid for wid, w in fetch(job.url, "/workers").items() if w.get("shard") is not None}
        others = [s for s in held if s not in shards]
        if shards <= held.keys() and others:
            return {**{s: held[s] for s in shards}, -1: held[others[0]]}
        time.sleep(0.1)
    pytest.fail(f"workers never held shards {shards}")


def stop(job: Job) -> None:
    """Abort the job; the launcher then shuts its workers down (the hung one is killed)."""
    job.coordinator._abort("stopped by the test")


@pytest.fixture(scope="module")
def inline_job(jobs_root):
    """Inline runner: shard 0 CPU-bound for minutes (slow-shard x400), shard 1 hangs, the rest I/O-paced."""
    job = start_job(jobs_root, "inline", ["slow-shard:0:x400", "hang:1"], shards=400)
    held = holders(job, {0, 1})
    yield job, held
    stop(job)


def cli_json(*args: str) -> dict:
    """`zdebug ARGS --json` run in-process (no interpreter start-up on a loaded machine)."""
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, (result.exception, result.output)
    return json.loads(result.stdout)


def profile(job: Job, worker: str, *extra: str) -> dict:
    return cli_json("profile", worker, "--job", str(job.job_dir), "--duration", "3", *extra)


def sleep_line() -> int:
    """The line of run_shard's time.sleep (the I/O part of a shard)."""
    lines = SHARDWORK.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if "time.sleep(pace" in line)


@pytest.fixture(scope="module")
def profiles(inline_job):
    """3 s profiles of the CPU-bound and of an I/O-bound worker."""
    job, held = inline_job
    return profile(job, held[0]), profile(job, held[-1])


def test_cpu_and_io_workers_get_different_verdicts(inline_job, profiles):
    job, held = inline_job
    cpu, io = profiles
    assert cpu["verdict"] == "user", cpu["shares"]
    assert cpu["hot_frame"]["function"] in ("_score_record", "_expensive_records")
    assert cpu["hot_frame"]["file"].endswith("shardwork.py")
    assert io["verdict"] == "waiting", io["shares"]
    assert io["waiting_at"]["function"] == "run_shard" and io["waiting_at"]["line"] == sleep_line()
    assert cpu["shares"]["user"] > io["shares"]["user"] and io["shares"]["waiting"] > cpu["shares"]["waiting"]
    # the heartbeat thread runs no in-app code: left out of the shares
    for out in (cpu, io):
        assert [t["in_verdict"] for t in out["threads"] if "heartbeat" in t["thread"]] == [False]
    assert [cpu["target"]["worker"], io["target"]["worker"]] == [held[0], held[-1]]
    for out in (cpu, io):
        assert Path(out["file"]).parent == job.job_dir / "profiles"
        jsonschema.validate(json.loads(Path(out["file"]).read_text()), SCHEMA)


def test_summarize_a_file_and_an_iris_reply(profiles, tmp_path):
    cpu, _ = profiles
    again = cli_json("profile", "summarize", cpu["file"])
    assert again["verdict"] == cpu["verdict"] and again["hot_frame"]["where"] == cpu["hot_frame"]["where"]
    reply = tmp_path / "iris.json"
    reply.write_text(
        json.dumps({"profile_data": base64.b64encode(Path(cpu["file"]).read_bytes()).decode(), "error": ""})
    )
    got = cli_json("profile", "summarize", str(reply), "-o", str(tmp_path / "d.json"))
    assert got["verdict"] == cpu["verdict"] and got["samples"] == cpu["samples"]
    jsonschema.validate(json.loads((tmp_path / "d.json").read_text()), SCHEMA)
    (tmp_path / "err.json").write_text(json.dumps({"profile_data": "", "error": "py-spy not found"}))
    assert_one_line_error(zdebug("profile", "summarize", str(tmp_path / "err.json")), "py-spy not found")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ZdebugError, match="not JSON"):
        speedscope.load(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text('{"traceEvents": []}')
    with pytest.raises(ZdebugError, match="not a speedscope file"):
        speedscope.load(tmp_path / "other.json")


def test_gil_share_of_the_cpu_worker(inline_job, tmp_path):
    job, held = inline_job
    out = profile(job, held[0], "--gil", "-o", str(tmp_path / "gil.speedscope.json"))
    assert out["gil_only"] and 0.5 < out["gil_share"] <= 1.0, out["gil_share"]
    assert out["hot_frame"]["file"].endswith("shardwork.py")
    jsonschema.validate(json.loads((tmp_path / "gil.speedscope.json").read_text()), SCHEMA)


def test_dump_of_a_hung_worker_shows_the_waiting_frame(inline_job):
    job, held = inline_job
    while fetch(job.url, "/workers")[held[1]].get("items", 0) < 1000:  # the hang fires half-way
        time.sleep(0.2)
    time.sleep(0.5)
    threads = cli_json("dump", held[1], "--job", str(job.job_dir))["threads"]
    main = next(t for t in threads if t["name"] == "MainThread")
    assert main["state"] == "waiting" and "_wait_for_remote" in main["in_app_frame"]
    assert main["sits_in"].startswith("threading.py:") and "wait" in main["sits_in"]
    assert [f["function"] for f in main["frames"] if f["in_app"]][:2] == ["_wait_for_remote", "_midway_faults"]
    text = CliRunner().invoke(app, ["dump", held[1], "--job", str(job.job_dir)]).stdout
    assert "sits in: threading.py" in text and "shardwork.py" in text and "_wait_for_remote" in text
    pid = cli_json("dump", held[1], "--job", str(job.job_dir))["pid"]
    saved = Path(job.job_dir) / "saved"
    saved.mkdir()
    for form, flags in {"text": [], "locals": ["--locals"], "json": ["--json"]}.items():
        dump = subprocess.run([pyspy.executable(), "dump", "--pid", str(pid), *flags], capture_output=True, text=True)
        assert dump.returncode == 0, dump.stderr
        (saved / f"{form}.txt").write_text(dump.stdout)
    pasted = (saved / "locals.txt").read_text().replace("\n", "\r\n").replace("    ", "  ")  # re-indented, CRLF
    (saved / "pasted.md").write_text("the worker:\n```\n" + pasted + "```\n")
    for name in ("text.txt", "locals.txt", "json.txt", "pasted.md"):
        got = cli_json("dump", str(saved / name))
        read = next(t for t in got["threads"] if t["name"] == "MainThread")
        assert got["pid"] == pid and len(got["threads"]) == len(threads), name
        assert [f["function"] for f in read["frames"]] == [f["function"] for f in main["frames"]], name
        assert read["state"] == "waiting" and "_wait_for_remote" in read["in_app_frame"], name
    (saved / "other.txt").write_text("not a dump\n")
    assert_one_line_error(zdebug("dump", str(saved / "other.txt")), "other.txt:1: not a py-spy dump")


def test_straggler_is_the_longest_running_shard(inline_job):
    job, held = inline_job
    out = cli_json("dump", "--straggler", str(job.job_dir))
    assert out["shard"] in (0, 1) and out["worker"] == held[out["shard"]] and out["why"]
    assert out["shard_elapsed_s"] > 0 and f"shard {out['shard']} running" in out["target"]
    assert out["pid"] == fetch(job.url, "/workers")[out["worker"]]["pid"]


def test_raw_pyspy_output_needs_the_fix_to_validate(inline_job, tmp_path):
    job, held = inline_job
    pid = fetch(job.url, "/workers")[held[-1]]["pid"]
    rec = pyspy.record(pid, tmp_path / "raw.json", duration_s=1, rate=50)
    raw = json.loads(rec.path.read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(raw, SCHEMA)
    jsonschema.validate(speedscope.fix(raw), SCHEMA)


def test_subprocess_runner_profiles_the_shard_child(jobs_root):
    job = start_job(jobs_root, "subprocess", ["slow-shard:0:x400"], shards=6)
    try:
        worker = holders(job, {0})[0]
        pid = fetch(job.url, "/workers")[worker]["pid"]
        deadline = time.time() + 60  # the child first imports pandas: wait until it hashes records
        while not any(
            f["name"] == "_expensive_records" for t in pyspy.dump(pid, subprocesses=True) for f in t["frames"]
        ):
            assert time.time() < deadline, "the shard child never reached _expensive_records"
            time.sleep(0.5)
        out = profile(job, worker)
        assert out["subprocesses"] is True
        pids = {t["thread"].split()[1] for t in out["threads"] if t["in_verdict"]}
        assert pids and str(out["target"]["pid"]) not in pids  # the verdict is about the shard child
        assert out["verdict"] == "user", out["shares"]
        assert out["hot_frame"]["function"] in ("_score_record", "_expensive_records")
        jsonschema.validate(json.loads(Path(out["file"]).read_text()), SCHEMA)
    finally:
        stop(job)


# -- one-line errors ------------------------------------------------------------------------------


def test_errors_are_one_line(tmp_path, monkeypatch):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert_one_line_error(zdebug("profile", str(gone.pid), "--duration", "1"), f"pid {gone.pid}: no such process")
    short = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2)"])
    with pytest.raises(ZdebugError, match=f"pid {short.pid}: process exited during sampling"):
        pyspy.record(short.pid, tmp_path / "p.json", duration_s=6)
    short.wait()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(ZdebugError, match="not a Python process"):
            pyspy.dump(sleeper.pid)
    finally:
        sleeper.kill()
    with pytest.raises(ZdebugError, match="needs --job"):
        resolve("some-worker")
    monkeypatch.setenv("ZDEBUG_PYSPY", str(tmp_path / "no-py-spy"))
    with pytest.raises(ZdebugError, match="py-spy missing"):
        pyspy.dump(os.getpid())


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_permission_denied_when_not_allowed_to_ptrace():
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)
        proc = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                sys.executable,
                "-m",
                "zephyr_debug.cli",
                "dump",
                str(target.pid),
            ],
            capture_output=True,
            text=True,
            cwd="/",
            timeout=60,
            env={**os.environ, "ZDEBUG_HOME": "/tmp"},
        )
        assert_one_line_error(proc, f"pid {target.pid}: permission denied (ptrace)")
    finally:
        target.kill()
