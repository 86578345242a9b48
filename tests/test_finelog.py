"""Zephyr's own telemetry (finelog `zephyr.worker` / `zephyr.stage`) read back by zdebug.

A real finelog EmbeddedServer on 127.0.0.1 and real marin-zephyr pipelines (fray local
backend, this file run as a script: `python test_finelog.py SCENARIO URL`) writing to it; the
sample interval is cut from 5 s to SAMPLE_S so a stall of many samples takes seconds.
Scenario `tail`: 8 shards, shard SKEW has SKEW_X x the items at the normal rate, shard STUCK
blocks STUCK_S on its first item, shard SLOW runs each item SLOW_X x slower. Scenario `fail`:
shard 1 raises on every attempt (the pipeline aborts after 3).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import ClassVar

import pytest

pytestmark = pytest.mark.alone  # the stragglers rule compares real shard durations: not beside other tests
ROWS, ROW_S, SAMPLE_S = 4, 0.05, 0.5
SKEW, SKEW_X = 2, 40
STUCK, STUCK_S = 4, 8.0
SLOW, SLOW_X = 6, 30
ZDEBUG = Path(sys.executable).with_name("zdebug")


# --- the pipelines (run in a child process) -------------------------------------------------


def _work(pair: tuple[int, int]) -> int:
    shard, row = pair
    if shard == STUCK and row == 0:
        time.sleep(STUCK_S)
    time.sleep(ROW_S * (SLOW_X if shard == SLOW else 1))
    return row


def _fail(x: int) -> int:
    if x == 1:
        raise ValueError(f"bad record {x}")
    return x


def _run(scenario: str, url: str) -> None:
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import zephyr.execution
    import zephyr.runners
    import zephyr.stats
    from zephyr import Dataset, ZephyrContext

    zephyr.stats.StatsWriter.resolve_url = staticmethod(lambda: url)
    zephyr.runners.SUBPROCESS_STATS_INTERVAL = SAMPLE_S
    make_id = zephyr.execution._generate_execution_id
    zephyr.execution._generate_execution_id = lambda: f"{scenario}-{make_id()}"
    if scenario == "tail":
        spec = [(i, ROWS * SKEW_X if i == SKEW else ROWS) for i in range(8)]
        ds = Dataset.from_list(spec).flat_map(lambda s: [(s[0], r) for r in range(s[1])]).map(_work)
        ctx = ZephyrContext(max_workers=3)
    else:
        ds, ctx = Dataset.from_list(list(range(4))).map(_fail), ZephyrContext(max_workers=2, max_execution_retries=0)
    try:
        ctx.execute(ds)
    except Exception as exc:
        print(f"pipeline failed: {type(exc).__name__}", file=sys.stderr)


if __name__ == "__main__":
    _run(sys.argv[1], sys.argv[2])
    sys.exit(0)


# --- the tests ------------------------------------------------------------------------------

from zephyr_debug.errors import ZdebugError  # noqa: E402
from zephyr_debug.model import Evidence  # noqa: E402
from zephyr_debug.sources import finelog, finelog_summary, load  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from finelog_server import EmbeddedServer

    srv = EmbeddedServer(log_dir=str(tmp_path_factory.mktemp("finelog")), host="127.0.0.1", port=0)
    yield srv
    srv.stop()


def _executions(url: str) -> dict[str, str]:
    from finelog.client import LogClient

    client = LogClient.connect(url)
    try:
        ids = client.query('SELECT DISTINCT execution_id FROM "zephyr.worker"').column(0).to_pylist()
    finally:
        client.close()
    return {i.split("-", 1)[0]: i for i in ids}


@pytest.fixture(scope="module")
def runs(server, tmp_path_factory) -> dict[str, str]:
    """scenario -> finelog:// target of its real run."""
    root = tmp_path_factory.mktemp("zephyr")
    env = {**os.environ, "MARIN_PREFIX": str(root / "marin")}
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, name, server.address],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(root / f"{name}.log", "wb"),
        )
        for name in ("tail", "fail")
    ]
    for proc in procs:
        assert proc.wait(timeout=300) == 0
    ids = _executions(server.address)
    return {
        **{name: f"finelog://127.0.0.1:{server.port}/{ids[name]}" for name in ("tail", "fail")},
        "tail.log": str(root / "tail.log"),
    }


def zdebug(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(ZDEBUG), *args], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr
    assert (done.returncode == 0) == ok, done.stderr
    return done


@pytest.mark.slow
def test_tail_run_reads_back_per_shard(runs):
    ev = load(runs["tail"])
    assert ev.provenance == ["finelog"] and ev.state == "succeeded" and not ev.warnings
    a = ev.attempts.set_index("shard")
    assert sorted(a.index) == list(range(8)) and (a["outcome"] == "done").all()
    assert a["worker"].isna().all()
    expect = {i: ROWS * (SKEW_X if i == SKEW else 1) for i in range(8)}
    assert a["items"].to_dict() == expect
    assert (a["bytes"] > 0).all() and (a["peak_rss_bytes"] > 10 << 20).all()
    normal = a["elapsed_s"].drop([SKEW, STUCK, SLOW]).median()
    for shard in (SKEW, STUCK, SLOW):  # 30-40x nominal; per-shard overhead under load shrinks the ratio
        assert a.loc[shard, "elapsed_s"] > 5 * normal, (shard, a["elapsed_s"].to_dict())
    assert a.loc[STUCK, "elapsed_s"] >= STUCK_S
    # RUNNING rows are samples; this release's inline runner samples them in a thread that sees no
    # counters or RSS, so they carry no item counts (NaN, not a frozen 0: every shard would look stuck).
    s = ev.samples[ev.samples["shard"] == STUCK]
    assert len(s) >= STUCK_S / SAMPLE_S / 2 and s["items"].isna().all()
    # This release's inline runner sends RUNNING rows with 0 memory/CPU: read as not sampled.
    assert not (ev.samples["rss_bytes"] == 0).any() and not (ev.samples["cpu_pct"] == 0).any()
    assert (ev.samples["items"].diff().fillna(0)[ev.samples["shard"].diff() == 0] >= 0).all()
    assert ev.config["heartbeat_interval"] == pytest.approx(SAMPLE_S, rel=0.5)
    for col in ("items", "bytes", "start_ts", "elapsed_s", "shard"):
        assert ev.attempts[col].dtype == float
    [stage] = ev.stages
    assert stage.name == "stage0-Map" and stage.total == 8 and stage.end_ts and stage.end_ts > stage.start_ts
    assert stage.totals["items"] == sum(expect.values()) and stage.totals["total_shards"] == 8


@pytest.mark.slow
def test_tail_stragglers_name_causes(runs):
    report = json.loads(zdebug("stragglers", runs["tail"], "--json").stdout)
    found = {f["shard"]: f for f in report["findings"]}
    assert {SKEW, STUCK} <= set(found), found
    # the stuck shard is an outlier whose cause telemetry cannot decide here (no item counts while it ran)
    assert found[SKEW]["cause"] == "data-skew" and found[STUCK]["cause"] == "undetermined"
    assert any(f"items {ROWS * SKEW_X:,} " in line for line in found[SKEW]["evidence"]), found[SKEW]["evidence"]
    # The slow shard (a sleep per item: no CPU, no worker to compare) is not size skew.
    assert found.get(SLOW, {}).get("cause") != "data-skew", found[SLOW]
    table = zdebug("stragglers", runs["tail"]).stdout
    assert max(map(len, table.splitlines())) <= 80 or "COLUMNS" in os.environ


@pytest.mark.slow
def test_failing_shard_reads_as_task_failures(runs):
    ev = load(runs["fail"])
    assert ev.state == "failed"
    bad = ev.attempts[ev.attempts["shard"] == 1].sort_values("attempt")
    assert list(bad["outcome"]) == ["failed"] * 3 and list(bad["kind"]) == ["task"] * 3
    assert list(bad["attempt"]) == [0.0, 1.0, 2.0]
    report = json.loads(zdebug("stragglers", runs["fail"], "--json").stdout)
    assert {f["shard"]: f["cause"] for f in report["findings"]}[1] == "crash-loop"


def _log_evidence(tel: Evidence, worker: str) -> Evidence:
    """What a coordinator log of the same run says: the same attempts with a worker, no numbers."""
    a = tel.attempts.copy()
    a["worker"] = worker
    a[["items", "bytes", "peak_rss_bytes"]] = float("nan")
    a = a.drop(columns=["cpu_time_s"])
    a.loc[0, "error"] = "kept from the log"
    return Evidence(
        job=tel.job,
        source="coordinator.log",
        now=tel.now,
        state="succeeded",
        attempts=a,
        provenance=["coordinator-log"],
    )


@pytest.mark.slow
def test_merge_fills_numbers_and_names_workers(runs, server):
    tel = load(runs["tail"])
    ev = finelog.merge(_log_evidence(tel, "w-1"), server.address)
    assert ev.provenance == ["coordinator-log", "finelog"] and not ev.warnings
    assert len(ev.attempts) == len(tel.attempts) and ev.attempts.loc[0, "error"] == "kept from the log"
    assert ev.attempts.set_index("shard")["items"].to_dict() == tel.attempts.set_index("shard")["items"].to_dict()
    assert (ev.samples["worker"] == "w-1").all() and len(ev.samples) == len(tel.samples)
    assert ev.stages[0].totals == tel.stages[0].totals


@pytest.mark.slow
def test_real_log_with_finelog_option(runs, server):
    """The run's own coordinator log plus `--finelog URL`: the log's workers, telemetry's numbers."""
    log = load(runs["tail.log"])
    ev = load(runs["tail.log"], server.address)
    assert ev.provenance[-1] == "finelog" and len(ev.provenance) == 2
    assert len(ev.attempts) == len(log.attempts) and ev.attempts["worker"].notna().all()
    done = ev.attempts[ev.attempts["outcome"] == "done"].set_index("shard")
    assert done["items"].to_dict() == {i: ROWS * (SKEW_X if i == SKEW else 1) for i in range(8)}
    assert done["peak_rss_bytes"].notna().all()
    assert set(ev.samples["worker"].dropna()) <= set(log.attempts["worker"])
    assert ev.samples["worker"].notna().sum() >= len(load(runs["tail"]).samples) * 0.9
    report = json.loads(zdebug("stragglers", runs["tail.log"], "--finelog", server.address, "--json").stdout)
    found = {f["shard"]: f for f in report["findings"]}
    assert found[SKEW]["cause"] == "data-skew" and found[SKEW]["worker"]


@pytest.mark.slow
def test_merge_of_an_unreachable_server_keeps_the_log(runs):
    tel = load(runs["tail"])
    log = _log_evidence(tel, "w-1")
    ev = finelog.merge(log, "http://127.0.0.1:9")
    assert len(ev.attempts) == len(tel.attempts) and ev.provenance == ["coordinator-log"]
    [warning] = ev.warnings
    assert warning.startswith("finelog telemetry not merged: http://127.0.0.1:9") and "\n" not in warning


@pytest.mark.slow
def test_unknown_execution_lists_known_ones(runs, server):
    with pytest.raises(ZdebugError, match=r"no zephyr.worker rows for execution nope.*it holds: .*tail-"):
        load(f"finelog://127.0.0.1:{server.port}/nope")
    done = zdebug("status", f"finelog://127.0.0.1:{server.port}/nope", ok=False)
    assert done.returncode == 3 and len(done.stderr.strip().splitlines()) == 1


def test_server_down_is_one_line():
    done = zdebug("stragglers", "finelog://127.0.0.1:9/20260101-000000-deadbeef", ok=False)
    assert done.returncode == 3 and len(done.stderr.strip().splitlines()) == 1
    assert "127.0.0.1:9" in done.stderr


def test_bad_targets():
    with pytest.raises(ZdebugError, match="expected finelog://HOST:PORT/<execution_id>"):
        finelog.parse("finelog://127.0.0.1:1")
    with pytest.raises(ZdebugError, match="not an execution id"):
        finelog.fetch("http://127.0.0.1:9", "x' OR '1'='1")


def test_missing_table_and_wrong_types(tmp_path):
    """A server without Zephyr's tables, then a zephyr.worker table whose numbers are strings."""
    from finelog.client import LogClient
    from finelog_server import EmbeddedServer

    @dataclass
    class Odd:  # zephyr.worker with the wrong types and no mem/cpu columns
        key_column: ClassVar[str] = "execution_id"
        execution_id: str
        stage_name: str
        shard_idx: str
        status: str
        ts: datetime
        items: str
        bytes_processed: int

    with EmbeddedServer(log_dir=str(tmp_path), host="127.0.0.1", port=0) as srv:
        with pytest.raises(ZdebugError, match=r"no zephyr.worker table"):
            load(f"finelog://127.0.0.1:{srv.port}/e-1")
        client = LogClient.connect(srv.address)
        table = client.get_table("zephyr.worker", Odd)
        now = datetime(2026, 1, 1, 12, 0, 0)
        table.write(
            [
                Odd("e-1", "stage0-Map", "0", "START", now, "0", 0),
                Odd("e-1", "stage0-Map", "0", "END", now.replace(second=3), "12", 40),
                Odd("e-1", "stage0-Map", "x", "END", now, "12", 40),
                Odd("e-1", "stage0-Map", "1", "START", now, "many", 0),
                Odd("e-1", "stage0-Map", "1", "BOGUS", now, "1", 0),
            ]
        )
        assert table.flush(timeout=30) == "succeeded"
        client.close()
        ev = load(f"finelog://127.0.0.1:{srv.port}/e-1")
    assert any("lacks column(s) cpu_time_total" in w for w in ev.warnings)
    assert any("no zephyr.stage table" in w for w in ev.warnings)
    assert any("skipped 3 row(s)" in w for w in ev.warnings)
    [row] = ev.attempts.to_dict("records")
    assert (row["shard"], row["items"], row["bytes"], row["outcome"], row["elapsed_s"]) == (
        0.0,
        12.0,
        40.0,
        "done",
        3.0,
    )


# --- the Iris snapshot's saved telemetry, read offline -------------------------------------


def _snapshot(runs, server, tmp_path) -> Path:
    """What `iris_snapshot.save` leaves for a job: its log and its telemetry as Parquet."""
    from zephyr_debug.sources import iris_finelog

    snap = tmp_path / "snapshot"
    snap.mkdir()
    (snap / "job.log").write_bytes(Path(runs["tail.log"]).read_bytes())
    log = load(runs["tail.log"])
    assert iris_finelog.execution_id(Path(runs["tail.log"]).read_text().splitlines()) == log.job
    iris_finelog.save(finelog.fetch(server.address, log.job), snap)
    return snap


@pytest.mark.slow
def test_snapshot_parquet_read_offline(runs, server, tmp_path):
    from zephyr_debug.sources import iris_finelog

    snap = _snapshot(runs, server, tmp_path)
    ev = load(str(snap))
    assert ev.provenance == ["zephyr-output", "finelog"] and not ev.warnings, ev.warnings
    done = ev.attempts[ev.attempts["outcome"] == "done"].set_index("shard")
    assert done["items"].to_dict() == {i: ROWS * (SKEW_X if i == SKEW else 1) for i in range(8)}
    assert ev.samples["worker"].notna().any() and ev.stages[0].totals["total_shards"] == 8
    report = json.loads(zdebug("stragglers", str(snap), "--json").stdout)
    assert {f["shard"]: f["cause"] for f in report["findings"]}.get(SKEW) == "data-skew", report["findings"]
    # A truncated Parquet file: one warning naming it, the log's evidence kept.
    worker_file = snap / iris_finelog.FILES["worker"]
    worker_file.write_bytes(worker_file.read_bytes()[:200])
    ev = load(str(snap))
    assert ev.provenance == ["zephyr-output"] and len(ev.attempts) == len(load(runs["tail.log"]).attempts)
    [warning] = [w for w in ev.warnings if "finelog" in w]
    assert str(worker_file) in warning and "unreadable Parquet" in warning and "\n" not in warning
    assert ev.attempts["worker"].notna().all() and ev.attempts["items"].isna().all()


# --- the reference pipeline writing Zephyr's telemetry --------------------------------------

REF_SKEW, REF_SKEW_X, REF_SHARDS = 3, 8, 9


@pytest.mark.slow
def test_reference_job_writes_zephyr_telemetry(server, jobs_root):
    from conftest import FAST, run_reference
    from finelog.client import LogClient

    result = run_reference(
        jobs_root,
        (f"skew-shard:{REF_SKEW}:x{REF_SKEW_X}",),
        workers=3,
        shards=REF_SHARDS,
        stages=1,
        finelog=server.address,
    )
    assert result.state == "succeeded"
    client = LogClient.connect(server.address)
    try:
        where = f"WHERE execution_id = '{result.execution_id}'"
        rows = dict(
            zip(
                *client.query(f'SELECT status, count(*) FROM "zephyr.worker" {where} GROUP BY status').columns,
                strict=True,
            )
        )
        stage_rows = client.query(f'SELECT * FROM "zephyr.stage" {where}').to_pylist()
    finally:
        client.close()
    rows = {k.as_py(): v.as_py() for k, v in rows.items()}
    assert rows["START"] == rows["END"] == REF_SHARDS and rows["RUNNING"] >= 3 and "FAILED" not in rows, rows
    [stage_row] = stage_rows
    assert stage_row["status"] == "END" and stage_row["total_shards"] == REF_SHARDS
    assert stage_row["cpu_time_total"] > 0 and stage_row["mem_peak_bytes_max"] > 10 << 20

    target = f"finelog://127.0.0.1:{server.port}/{result.execution_id}"
    ev = load(target)
    assert ev.state == "succeeded" and ev.provenance == ["finelog"]
    tel = ev.attempts.set_index("shard")["items"]
    # The same item counts as the job's own record, the skewed shard x8.
    job = load(str(result.job_dir)).attempts
    assert tel.to_dict() == job[job["outcome"] == "done"].set_index("shard")["items"].to_dict()
    assert tel[REF_SKEW] == REF_SKEW_X * tel.drop(REF_SKEW).median()
    assert ev.config["heartbeat_interval"] == pytest.approx(FAST.heartbeat_interval, rel=0.5)
    assert stage_row["items"] == tel.sum()

    report = json.loads(zdebug("stragglers", target, "--json").stdout)
    found = {f["shard"]: f for f in report["findings"]}
    assert found[REF_SKEW]["cause"] == "data-skew", found
    evidence = found[REF_SKEW]["evidence"]
    assert any(f"items {int(tel[REF_SKEW]):,} " in line for line in evidence), evidence

    # `zdebug watch` on the telemetry, and on the job dir with --finelog merged in.
    frame = json.loads(zdebug("watch", target, "--json").stdout)
    assert {f["shard"]: f["cause"] for f in frame["stragglers"]["findings"]}[REF_SKEW] == "data-skew"
    merged = json.loads(zdebug("watch", str(result.job_dir), "--finelog", server.address, "--json").stdout)
    assert REF_SKEW in {f["shard"] for f in merged["stragglers"]["findings"]}
    down = zdebug("watch", str(result.job_dir), "--finelog", "127.0.0.1:9", "--once")
    assert down.stderr.startswith("warning: finelog telemetry not merged: http://127.0.0.1:9"), down.stderr


# --- large executions: summarised on the server (finelog_summary) ---------------------------


def _findings(ev: Evidence, metrics: bool = False) -> list[tuple]:
    """kind, stage, shard, worker, causes (and metrics, rounded) of each problem found."""
    from zephyr_debug.analyze.analysis import analyze

    def rounded(pairs) -> tuple:
        return tuple((k, (round(v, 6) if v == v else None) if isinstance(v, float) else v) for k, v in pairs)

    return sorted(
        (f.kind, f.stage or "", -1 if f.shard is None else f.shard, f.worker or "", f.causes)
        + ((rounded(f.metrics), f.evidence) if metrics else ())
        for f in analyze(ev).problems
    )


def _both(target: str, monkeypatch, log: str | None = None) -> tuple[Evidence, Evidence]:
    """The evidence of `target` read raw and summarised (with a log: merged into it)."""
    out = []
    for read in ("raw", "summary"):
        monkeypatch.setenv(finelog_summary.READ_ENV, read)
        out.append(load(log, target.split("/")[2]) if log else load(target))
    return out[0], out[1]


def _same(raw: Evidence, summary: Evidence, metrics: bool = True) -> None:
    """The same attempts, interval, state, stages and findings (with their metrics and evidence
    lines unless `metrics` is False)."""
    import pandas as pd

    pd.testing.assert_frame_equal(raw.attempts, summary.attempts)
    assert raw.config == summary.config and raw.state == summary.state and raw.now == summary.now
    assert raw.warnings == summary.warnings and raw.provenance == summary.provenance
    assert [(s.name, s.total, s.start_ts, s.end_ts, s.totals) for s in raw.stages] == [
        (s.name, s.total, s.start_ts, s.end_ts, s.totals) for s in summary.stages
    ]
    assert _findings(raw, metrics) == _findings(summary, metrics)


def _stat(shard: int, status: str, at: float, items: int, mem: int = 100 << 20, stage: str = "stage0-Map"):
    from zephyr.stats import ZephyrWorkerStat

    ts = datetime(2026, 1, 1) + timedelta(seconds=at)
    return ZephyrWorkerStat(
        "e-sum", stage, shard, status, ts, items, items * 10, 1.0, 10.0, at, 50.0 + shard, 50.0, mem, mem, mem + shard
    )


def test_summary_matches_raw_rows_on_odd_shards(tmp_path, monkeypatch):
    """Plain shards are summarised; a retried, a running, a stalled shard, rows before START, a
    START tied with a sample, unsampled RUNNING rows and an unknown status are read row by row.
    Raw and summarised reads give the same attempts, interval, state and findings."""
    from finelog.client import LogClient
    from finelog_server import EmbeddedServer

    rows = []
    for shard in range(12):  # plain: START, RUNNING every 5 s, END; shard 3 has 6x the items
        n = 6 if shard != 3 else 30
        rows += [_stat(shard, "START", shard, 0)]
        rows += [_stat(shard, "RUNNING", shard + 5 * i, i * 10) for i in range(1, n)]
        rows += [_stat(shard, "END", shard + 5 * n, n * 10)]
    rows += [_stat(1, "RUNNING", 2 + 5 * i, i * 7, stage="stage1-Write") for i in range(1, 4)]  # no START
    rows += [_stat(1, "END", 30, 21, stage="stage1-Write")]
    rows += [_stat(12, "START", 0, 0), _stat(12, "RUNNING", 5, 10), _stat(12, "FAILED", 6, 10)]  # retried
    rows += [_stat(12, "START", 7, 0), *(_stat(12, "RUNNING", 7 + 5 * i, i * 10) for i in range(1, 6))]
    rows += [_stat(12, "END", 40, 60)]
    rows += [_stat(13, "START", 0, 0), *(_stat(13, "RUNNING", 5 * i, 10 if i > 1 else 5) for i in range(1, 12))]
    rows += [_stat(13, "END", 60, 10)]  # stalled at 10 items for 50 s
    rows += [_stat(14, "START", 0, 0), *(_stat(14, "RUNNING", 5 * i, i * 10, mem=0) for i in range(1, 6))]
    rows += [_stat(14, "END", 30, 60)]  # inline runner: RUNNING rows unsampled
    rows += [_stat(15, "START", 0, 0), _stat(15, "RUNNING", 0, 1), _stat(15, "END", 30, 60)]  # tie
    rows += [_stat(16, "START", 0, 0), _stat(16, "BOGUS", 3, 1), _stat(16, "END", 30, 60)]
    rows += [_stat(17, "START", 0, 0), *(_stat(17, "RUNNING", 5 * i, i * 10) for i in range(1, 14))]  # running
    with EmbeddedServer(log_dir=str(tmp_path), host="127.0.0.1", port=0) as srv:
        client = LogClient.connect(srv.address)
        table = client.get_table("zephyr.worker", type(rows[0]))
        table.write(rows)
        assert table.flush(timeout=30) == "succeeded"
        client.close()
        target = f"finelog://127.0.0.1:{srv.port}/e-sum"
        raw, summary = _both(target, monkeypatch)
        monkeypatch.setenv(finelog_summary.READ_ENV, "summary")
        read = finelog.fetch(srv.address, "e-sum")
        monkeypatch.delenv(finelog_summary.READ_ENV)
        monkeypatch.setattr(finelog_summary, "SUMMARY_ROWS", len(rows))  # auto: summarised at the threshold
        auto = finelog.fetch(srv.address, "e-sum")
        monkeypatch.setattr(finelog_summary, "SUMMARY_ROWS", len(rows) + 1)  # below it: raw rows
        below = finelog.fetch(srv.address, "e-sum")
        # above GAP_ROWS the interval is the median of the shards' mean gaps, not of every gap
        monkeypatch.setenv(finelog_summary.READ_ENV, "summary")
        monkeypatch.setattr(finelog_summary, "GAP_ROWS", 0)
        estimated = load(target)
        # A summary over the server's reply limit comes in parts (shard_idx modulo 2, 4, ...).
        client = LogClient.connect(srv.address)

        def limited(sql: str):
            if "shard_idx %" not in sql:
                raise finelog._TooBig("reply over the limit")
            return client.query(sql)

        whole = finelog_summary.summary(client.query, "zephyr.worker", "e-sum")
        parts = finelog_summary.summary(limited, "zephyr.worker", "e-sum")
        client.close()
    key = [("stage_name", "ascending"), ("shard_idx", "ascending")]
    assert parts.num_rows == whole.num_rows and parts.sort_by(key).equals(whole.sort_by(key))
    assert estimated.config == raw.config and _findings(estimated, True) == _findings(raw, True)
    _same(raw, summary)
    # summarised: shards 0-11, and 14 (none of its samples had RSS, so none can show a plateau)
    assert read.worker.schema.metadata[finelog_summary.META_SUMMARY] == b"13"
    assert auto.worker.num_rows == read.worker.num_rows < below.worker.num_rows == len(rows)
    assert raw.config["heartbeat_interval"] == 5.0
    # a plain shard's samples collapse into one; the others keep every one
    per_shard = summary.samples.groupby(["stage", "shard"]).size()
    assert per_shard[("stage0-Map", 3)] == per_shard[("stage0-Map", 14)] == 1
    assert len(raw.samples[raw.samples["shard"] == 3]) == 29
    for stage, shard in (("stage0-Map", 12), ("stage0-Map", 13), ("stage0-Map", 17), ("stage1-Write", 1)):
        kept = raw.samples[(raw.samples["shard"] == shard) & (raw.samples["stage"] == stage)]
        assert per_shard[(stage, shard)] == len(kept) > 1
    kinds = {(k, shard) for k, _, shard, _, _ in _findings(raw)}
    assert summary.state == raw.state == "interrupted" and any(shard == 13 for _, shard in kinds), kinds


@pytest.mark.slow
def test_summary_of_real_runs_finds_the_same(runs, monkeypatch):
    """The real Zephyr runs read raw and summarised, alone and merged into the run's own log."""
    for name in ("tail", "fail"):
        _same(*_both(runs[name], monkeypatch))
    _same(*_both(runs["tail"], monkeypatch, log=runs["tail.log"]))


@pytest.mark.slow
def test_summary_of_a_reference_job_with_a_stall(server, jobs_root, monkeypatch):
    """The reference pipeline's telemetry (RUNNING rows with real item counts at every heartbeat),
    one shard skewed and one blocked mid-shard: its flat samples are read row by row."""
    from conftest import run_reference

    result = run_reference(
        jobs_root,
        (f"skew-shard:{REF_SKEW}:x{REF_SKEW_X}", "hang:5:secs=3"),
        workers=3,
        shards=REF_SHARDS,
        stages=1,
        finelog=server.address,
    )
    assert result.state == "succeeded"
    target = f"finelog://127.0.0.1:{server.port}/{result.execution_id}"
    raw, summary = _both(target, monkeypatch)
    _same(raw, summary)
    assert len(summary.samples) < len(raw.samples)
    hung = [len(ev.samples[ev.samples["shard"] == 5]) for ev in (raw, summary)]
    assert hung[0] == hung[1] > 3, hung  # its flat samples, all kept
    assert {(k, s) for k, _, s, _, _ in _findings(raw)} >= {("data-skew", REF_SKEW)}, _findings(raw)
    # Merged into the job's own evidence, whose heartbeats are samples too: a no-progress span
    # between a heartbeat and a telemetry row of the same count goes with the collapsed rows
    # (milliseconds here), so only the findings themselves are compared.
    _same(*_both(target, monkeypatch, log=str(result.job_dir)), metrics=False)
