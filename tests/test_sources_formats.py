"""Every real Zephyr/Iris output format (tests/data/formats, hand-written from the formats the
PyPI release and the docs print) read into Evidence, plus large generated logs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import bench_logparse
from zephyr_debug.errors import ZdebugError
from zephyr_debug.sources import load, logtext
from zephyr_debug.sources.jobstatus import LiteralError, parse, parse_literal
from zephyr_debug.zephyrlog import human_number

DATA = Path(__file__).parent / "data" / "formats"
ZDEBUG = Path(sys.executable).with_name("zdebug")


def ev_of(name: str):
    return load(str(DATA / name))


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(ZDEBUG), *args], capture_output=True, text=True, timeout=60)


def test_pypi_log_two_prefix_forms_in_one_file():
    ev = ev_of("coordinator_pypi.log")
    assert ev.job == "20261202-215916-1a2b3c4d" and ev.state == "running"
    s = ev.status
    assert list(s["completed"]) == [0, 1, 2] and set(s["stage"]) == {"stage0-Map → Write"}
    assert list(s["alive"]) == [2, 2, 1] and list(s["dead"]) == [0, 0, 1]
    assert s["items"].iloc[1] == 1090 and s["items"].iloc[2] == 1.2e6  # human-shortened numbers
    assert s["retries"].iloc[1] == 1
    assert s["ts"].iloc[2] - s["ts"].iloc[0] == pytest.approx(24.0)  # glog line vs Python logging line
    assert ev.warnings == ["skipped 1 unparseable lines"]  # the truncated status line
    a = ev.attempts.set_index(["shard", "attempt"])
    assert a.loc[(0, 0), "elapsed_s"] == 2.25 and a.loc[(0, 0), "outcome"] == "done"
    assert a.loc[(1, 0), "kind"] == "task" and a.loc[(1, 0), "error"] == "ValueError: bad record 17"
    assert a.loc[(3, 0), "kind"] == "infra" and "heartbeat timeout after 13.3s" in a.loc[(3, 0), "error"]
    assert a.loc[(1, 1), "outcome"] == "running"
    workers = ev.workers.set_index("worker")["state"]
    assert workers["zephyr--c205e3c7-p0-workers-a0-1:0"] == "failed"
    task_crash = next(c for c in ev.crashes if c.kind == "task")
    assert task_crash.location.endswith("coordinator_pypi.log:12")
    assert task_crash.text.splitlines()[-1] == "ValueError: bad record 17" and "Traceback" in task_crash.text


@pytest.mark.slow
def test_docs_form_stuck_tail_with_infra_requeues():
    """The 12 h `4999/5000 … 180 dead` tail: the evidence the straggler analyzer needs."""
    ev = ev_of("coordinator_docs_form.log")
    assert ev.now - ev.status["ts"].iloc[0] == 12 * 3600
    assert (ev.status["completed"] == 4999).all() and (ev.status["dead"] == 180).all()
    infra = ev.attempts[ev.attempts["kind"] == "infra"]
    assert list(infra["shard"]) == [4321, 4321]
    assert list(infra["worker"]) == ["zephyr-9f8e-p0-workers-7", "zephyr-9f8e-p0-workers-11"]
    assert list(infra["elapsed_s"]) == [3600, 6 * 3600]  # from the stage start, then from the requeue
    running = ev.attempts[ev.attempts["outcome"] == "running"]
    assert list(running["shard"]) == [4321] and running["start_ts"].iloc[0] == infra["end_ts"].iloc[-1]
    assert [c.location.rsplit(":", 1)[1] for c in ev.crashes] == ["4", "6"]
    status = json.loads(cli("status", str(DATA / "coordinator_docs_form.log"), "--json").stdout)
    assert status["tail"] and status["stalled"] and status["in_flight"] == 1
    assert (status["alive"], status["failed"]) == (3000, 180) and "No worker is alive" not in status["diagnosis"]
    report = json.loads(cli("stragglers", str(DATA / "coordinator_docs_form.log"), "--json").stdout)
    finding = next(f for f in report["findings"] if f["shard"] == 4321)
    assert "crash-loop" in finding["causes"]


def test_deterministic_crasher_abort_both_separators():
    ev = ev_of("crasher_abort.log")
    assert ev.state == "failed" and ev.fatal_error.startswith("Shard 6 crashed its worker 3 times")
    infra = ev.attempts[(ev.attempts["shard"] == 6) & (ev.attempts["kind"] == "infra")]
    assert list(infra["worker"]) == ["w-1", "w-2", "w-3"]  # `[exec]`-prefixed and bare lines


def test_iris_job_logs_prefix_and_all_workers_dead():
    ev = ev_of("iris_job_logs.txt")
    assert ev.job == "exec-c" and ev.state == "failed"
    assert ev.fatal_error.startswith("ZephyrWorkerError: No alive workers for 13.1s")
    assert ev.config["all_dead_ts"]  # the waiting line after workers registered counts
    assert ev.attempts.iloc[0][["shard", "elapsed_s", "outcome"]].tolist() == [3, 4.0, "done"]


def test_iris_json_records_and_get_task_logs():
    ev = ev_of("iris_records.jsonl")
    assert ev.status["ts"].iloc[0] == 1796248805.0 and ev.warnings == ["skipped 1 unparseable lines"]
    ev = ev_of("get_task_logs.json")
    assert ev.job == "exec-e" and ev.stages[0].start_ts == 1796209200.0
    crash = ev.crashes[0]
    assert crash.kind == "oom" and crash.shard == 2 and crash.text.startswith("Worker w-9 error on shard 2\nTraceback")
    assert ev.attempts.iloc[0]["returncode"] == -9


@pytest.mark.parametrize(
    "name,stage,completed,workers,state",
    [
        (
            "status_repr.txt",
            "stage1-Map → Write",
            4999,
            {"zephyr--c205e3c7-p0-workers-a0-2:0": "busy", "zephyr--c205e3c7-p0-workers-a0-3:0": "dead"},
            "running",
        ),
        ("status.json", "stage0-Map", 3, {"w-1": "failed", "w-2": "ready"}, "failed"),
        ("status_bare.txt", "stage0-Map", 0, {}, "failed"),
    ],
)
def test_get_status_forms(name, stage, completed, workers, state):
    ev = ev_of(name)
    assert ev.live.stage == stage and ev.live.completed == completed and ev.state == state
    assert {w: v["state"] for w, v in ev.live.workers.items()} == workers
    assert ev.status.iloc[-1]["completed"] == completed


def test_repr_tokenizer_is_not_eval():
    assert parse_literal("{'a': (1, -2.5e3), 'b': [None, True], 'c': 'x\\u2192y'}") == {
        "a": [1, -2500.0],
        "b": [None, True],
        "c": "x→y",
    }
    with pytest.raises(LiteralError):
        parse_literal("__import__('os').system('true')")
    inert = parse("JobStatus(stage='x', completed=1, total=2, workers={'w': os.getcwd()})", "s.txt")
    assert inert.workers == {"w": {"__type__": "os.getcwd"}}  # a call is data, never run
    with pytest.raises(ZdebugError, match=r"^s\.txt:2: unreadable JobStatus repr"):
        parse("JobStatus(stage='x',\n completed=1, total=2, workers={'w': ", "s.txt")


def test_list_tasks_new_and_old_fields():
    w = ev_of("tasks.json").workers.set_index("worker")
    row = w.loc["/alice/job/zephyr-w/0"]
    assert (row["memory_mb"], row["memory_peak_mb"], row["disk_mb"], row["cpu"]) == (168, 1890, 23597, 60)
    assert w.loc["/alice/job/zephyr-w/1", "state"] == "failed"
    old = ev_of("tasks_old.json").workers.iloc[0]
    assert (old["memory_mb"], old["disk_mb"], old["cpu"]) == (2048, 100, 95.5)


def test_evidence_dir_merges_by_content_not_name(tmp_path):
    shutil.copy(DATA / "coordinator_pypi.log", tmp_path / "whatever.txt")
    shutil.copy(DATA / "status_repr.txt", tmp_path / "a.log")
    shutil.copy(DATA / "counters.json", tmp_path / "c.json")
    shutil.copy(DATA / "tasks.json", tmp_path / "t.json")
    shutil.copy(DATA / "garbage.bin", tmp_path / "core.dump")
    ev = load(str(tmp_path))
    assert ev.job == "20261202-215916-1a2b3c4d" and ev.live.completed == 4999
    assert ev.counters["my/docs_kept"] == 77
    assert {"/alice/job/zephyr-w/0", "zephyr--c205e3c7-p0-workers-a0-1:0"} <= set(ev.workers["worker"])
    assert any("core.dump:1: binary data" in w for w in ev.warnings)


@pytest.mark.parametrize(
    "name,message",
    [
        ("truncated.json", r"^zdebug: error: .*truncated\.json:1: invalid or truncated JSON"),
        ("garbage.bin", r"^zdebug: error: .*garbage\.bin:1: binary data"),
    ],
)
def test_unusable_files_fail_with_one_line(name, message):
    done = cli("status", str(DATA / name))
    assert done.returncode != 0 and done.stderr.count("\n") == 1
    assert __import__("re").match(message, done.stderr)


def test_human_numbers():
    assert [human_number(t) for t in ("504", "1.09K", "12.3M", "2B", "x")] == [504, 1090, 12.3e6, 2e9, None]


@pytest.fixture(scope="module")
def big_log(tmp_path_factory):
    path = tmp_path_factory.mktemp("biglog") / "coordinator.log"
    return path, bench_logparse.generate(path, 12 << 20)


def test_generated_log_rebuilds_the_timeline(big_log):
    path, expected = big_log
    ev = logtext.load([path], "big")
    assert ev.config["status_lines"] == expected["status"] and 100 < len(ev.status) < expected["status"] / 4
    a = ev.attempts
    assert (a["outcome"] == "done").sum() == expected["done"]
    infra = a[a["kind"] == "infra"]
    assert len(infra) == expected["requeues"] and set(infra["shard"]) == {bench_logparse.STUCK}
    assert ev.stages[0].name == bench_logparse.STAGE and ev.stages[0].total == bench_logparse.SHARDS
    assert any("pull_task spam" in w for w in ev.warnings)


@pytest.mark.slow
def test_parallel_ranges_and_small_chunks_match_one_pass(big_log):
    path, _ = big_log
    one = logtext.scan_range(str(path), 0, path.stat().st_size)
    small = logtext.scan_range(str(path), 0, path.stat().st_size, chunk_bytes=4096)
    assert small == one
    parts = [logtext.scan_range(str(path), a, b) for a, b in logtext._ranges(path, 3)]
    assert [h[:3] for p in parts for h in p[0]] and sum(p[1] for p in parts) == one[1]
    assert [h[0] for p in parts for h in p[0]] == [h[0] for h in one[0]]
    tl_one, tl_par = (logtext.Timeline("x", "x") for _ in range(2))
    logtext.LogScanner(tl_one, "x").scan_file(path, processes=1)
    logtext.LogScanner(tl_par, "x").scan_file(path, processes=3)
    assert tl_one.finish().attempts.equals(tl_par.finish().attempts)
    assert [c.location for c in tl_one.crashes] == [c.location for c in tl_par.crashes]


def test_grep_finds_the_same_lines_as_the_python_scan(big_log, tmp_path):
    """grep -F is the fast path for large files: same hits, offsets, line numbers and blocks."""
    odd = tmp_path / "odd.log"  # NUL bytes, CR, invalid UTF-8, no final newline, keyword at line start
    odd.write_bytes(
        b"\x00\xff Shard 3 done in 1.0s\r\nShard 4 x\n \xe9 Worker w1 error on shard 2\nTraceback\n"
        b"  File 'x'\n [s] 1/2 complete, 1 in-flight"
    )
    files = [
        big_log[0],
        odd,
        *sorted((DATA.parent / "crashes" / "logs").glob("*")),
        *sorted(p for p in DATA.iterdir() if p.suffix in (".log", ".txt", ".bin")),
    ]
    for path in files:
        expected = logtext.scan_range(str(path), 0, path.stat().st_size)[0]
        assert grep_scan(str(path)) == expected, path
    assert len(grep_scan(str(big_log[0]))) > 1000


def test_without_grep_large_files_are_scanned_in_python(big_log, monkeypatch):
    path, expected = big_log
    monkeypatch.setenv("PATH", "/nonexistent")
    assert grep_scan(str(path)) is None
    assert logtext.load([path], "big").config["status_lines"] == expected["status"]


@pytest.mark.slow
def test_benchmark_reports_a_ratio(monkeypatch):
    monkeypatch.setenv("ZDEBUG_BENCH_LOG_MB", "8")
    for result in bench_logparse.run(quick=True).values():
        assert result["value"] > 0 and result["baseline_value"] > 0
        assert result["ratio"] == pytest.approx(result["value"] / result["baseline_value"], rel=1e-3)


def grep_scan(path: str) -> list | None:
    """Every hit of `logtext.grep_hits`, or None when grep is missing or fails."""
    try:
        return list(logtext.grep_hits(path))
    except logtext.GrepFailed:
        return None
