"""The real marin-zephyr library (fray local backend): its logs and get_status, read by zdebug.

One session fixture runs four small real pipelines at once (tests/realzephyr.py) and keeps each
one's output in a fixture dir: coordinator.log (stdout+stderr), status.txt (the get_status repr in a
JSON string), counters.json. The commands are run as a user would, through the `zdebug` CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from realzephyr import FACTOR, ROWS

from zephyr_debug.sources import load
from zephyr_debug.sources.jobstatus import parse

pytestmark = [pytest.mark.zephyr, pytest.mark.slow, pytest.mark.alone]

SCENARIOS = ("tail", "raise", "sigkill", "segv")
DRIVER = Path(__file__).with_name("realzephyr.py")
ZDEBUG = Path(sys.executable).with_name("zdebug")


@pytest.fixture(scope="session")
def real(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("realzephyr")
    env = {**os.environ, "MARIN_PREFIX": str(root / "marin")}
    procs = {}
    for name in SCENARIOS:
        out = root / name
        out.mkdir()
        log = open(out / "coordinator.log", "wb")
        procs[name] = (
            subprocess.Popen(
                [sys.executable, str(DRIVER), name, str(out)], stdout=log, stderr=subprocess.STDOUT, env=env
            ),
            log,
        )
    for proc, log in procs.values():
        proc.wait(timeout=400)
        log.close()
    return {name: root / name for name in SCENARIOS}


def zdebug(*args: str) -> dict:
    done = subprocess.run([str(ZDEBUG), *args, "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


def line_at(path: str) -> str:
    file, line = path.rsplit(":", 1)
    return Path(file).read_text().splitlines()[int(line) - 1]


def test_tail_status_and_shard_durations(real):
    status = zdebug("status", str(real["tail"]))
    assert status["state"] == "succeeded" and status["stage"] == "stage0-Map" and status["total"] == 8
    ev = load(str(real["tail"]))
    done = ev.attempts[ev.attempts["outcome"] == "done"].set_index("shard")["elapsed_s"]
    assert sorted(done.index) == list(range(8))
    normal = done.drop([3, 6]).median()
    assert done[3] > 20 * normal and done[6] > 20 * normal  # the slow and the skewed shard
    assert len(ev.status) >= 2 and (ev.status["total"] == 8).all()
    assert ev.counters.get("zephyr/item_count") == ROWS * 7 + ROWS * FACTOR


def test_tail_stragglers_and_workers(real):
    report = zdebug("stragglers", str(real["tail"]))
    assert {f["shard"] for f in report["findings"]} == {3, 6}
    holders = {f["shard"]: f["worker"] for f in report["findings"]}
    workers = {w["worker"] for w in zdebug("workers", str(real["tail"]))["workers"]}
    assert set(holders.values()) <= workers and len(workers) == 3


def test_get_status_repr_from_a_running_stage(real):
    text = (real["tail"] / "status.txt").read_text()
    assert text.startswith('"JobStatus(')
    status = parse(text, "status.txt")
    assert status.stage == "stage0-Map" and status.total == 8 and not status.done
    log_workers = set(load(str(real["tail"] / "coordinator.log")).workers["worker"])
    assert set(status.workers) <= log_workers
    assert {w["state"] for w in status.workers.values()} <= {"ready", "busy", "failed", "dead"}


def test_task_error_on_every_attempt_aborts(real):
    status = zdebug("status", str(real["raise"]))
    assert status["state"] == "failed"
    assert status["fatal_error"].startswith("Shard 2 failed 3 times (max 3)")
    ev = load(str(real["raise"]))
    failed = ev.attempts[(ev.attempts["shard"] == 2) & (ev.attempts["outcome"] == "failed")]
    assert sorted(failed["attempt"]) == [0, 1, 2] and set(failed["kind"]) == {"task"}
    assert failed["error"].str.contains("ValueError: bad record 2").all()
    crashes = [c for c in ev.crashes if c.shard == 2]
    assert len(crashes) == 3
    for crash in crashes:
        assert "error on shard 2" in line_at(crash.location) and "Traceback" in crash.text
    assert_crash_group(real["raise"], "task", "ValueError", 2)


def assert_crash_group(job: Path, kind: str, exception: str, shard: int) -> None:
    groups = zdebug("crashes", str(job), "--dedupe")["groups"]
    group = next(g for g in groups if g["kind"] == kind)
    assert group["exception"] == exception and group["shards"] == [shard] and group["count"] == 3
    assert all(m.startswith(str(job / "coordinator.log") + ":") for m in group["members"])


@pytest.mark.parametrize(
    "scenario,kind,code,marker,exception",
    [
        ("sigkill", "oom", -9, "killed by SIGKILL", "MemoryError"),
        ("segv", "segv", -11, "Fatal Python error: Segmentation fault", "SIGSEGV"),
    ],
)
def test_subprocess_shard_deaths(real, scenario, kind, code, marker, exception):
    status = zdebug("status", str(real[scenario]))
    assert status["state"] == "failed" and "Shard 1 failed 3 times" in status["fatal_error"]
    ev = load(str(real[scenario]))
    failed = ev.attempts[(ev.attempts["shard"] == 1) & (ev.attempts["outcome"] == "failed")]
    assert len(failed) == 3 and set(failed["failure"]) == {kind} and set(failed["returncode"]) == {code}
    crashes = [c for c in ev.crashes if c.shard == 1]
    assert len(crashes) == 3 and all(c.kind == kind and marker in c.text for c in crashes)
    report = zdebug("stragglers", str(real[scenario]))
    causes = {f["shard"]: f["causes"] for f in report["findings"]}
    assert "crash-loop" in causes[1]
    assert_crash_group(real[scenario], kind, exception, 1)
