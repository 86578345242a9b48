"""Event-dense logs (issue 21 part 3): the status series is downsampled as it is read, keeping
every change of state, and the analysis finds the same as from every row."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from benchmarks import bench_logdense
from zephyr_debug.analyze import progress
from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.analyze.tail import episodes
from zephyr_debug.sources import compact, logtext

SHARDS, WORKERS = 6_000, 150


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    path = tmp_path_factory.mktemp("dense") / "coordinator.log"
    expected = bench_logdense.generate(path, 6 << 20, shards=SHARDS, workers=WORKERS)
    kept = logtext.load([path], "dense")
    with pytest.MonkeyPatch.context() as mp:  # the same log with every status row kept
        mp.setattr(compact, "STATUS_ROWS_PER_STAGE", 10**12)
        full = logtext.load([path], "dense")
    return path, expected, kept, full


def _states(st: pd.DataFrame) -> pd.DataFrame:
    """The rows whose state (every column but the time) differs from the row before."""
    cols = [c for c in st.columns if c != "ts"]
    state = st[cols].astype(str)
    return st[(state != state.shift()).any(axis=1)].reset_index(drop=True)


def test_status_rows_are_downsampled_and_every_change_is_kept(dense):
    _, expected, kept, full = dense
    assert len(full.status) == kept.config["status_lines"] == expected["status"]
    per_stage = kept.status.groupby("stage").size()
    assert len(kept.status) < expected["status"] / 3
    assert (per_stage <= compact.STATUS_ROWS_PER_STAGE + 2 * compact.RECENT_ROWS + 400).all(), per_stage
    for name, st in full.status.groupby("stage", sort=False):
        mine = kept.status[kept.status["stage"] == name]
        assert mine["ts"].iloc[[0, -1]].tolist() == st["ts"].iloc[[0, -1]].tolist()  # first and last line
        assert (
            mine.iloc[-compact.RECENT_ROWS :]
            .reset_index(drop=True)
            .equals(st.iloc[-compact.RECENT_ROWS :].reset_index(drop=True))
        )
        empty = st["queue_depth"] == 0  # the tail: every change of state, at the time it happened
        assert _states(mine[mine["queue_depth"] == 0]).equals(_states(st[empty])), name
        for col in ("total", "alive", "registered", "dead"):
            assert set(mine[col]) == set(st[col])
    assert kept.status["ts"].is_monotonic_increasing


def test_same_findings_as_from_every_row(dense):
    _, expected, kept, full = dense
    assert kept.attempts.equals(full.attempts) and kept.state == full.state == "running"
    assert int((kept.attempts["outcome"] == "done").sum()) == expected["done"]
    assert len(kept.stages) == expected["stages"]
    a, b = analyze(kept), analyze(full)
    key = lambda f: (f.kind, f.stage, f.shard, f.shards, f.severity)
    assert [key(f) for f in a.findings] == [key(f) for f in b.findings]
    assert any(f.shard == SHARDS - 1 for f in a.findings), [f.title for f in a.findings]  # the stuck last shard
    interval = 5.0  # the stuck tail's status interval
    pk, pf = progress.latest(kept), progress.latest(full)
    assert pk == pf and pk.tail
    assert abs(progress.frozen_items_s(kept, pk) - progress.frozen_items_s(full, pf)) <= interval
    assert progress.frozen_items_s(kept, pk) >= bench_logdense.STUCK_S - interval
    last = kept.stages[-1].name
    ak, af = progress.alone(kept, last), progress.alone(full, last)
    assert abs(ak.start - af.start) <= interval and ak.end == af.end and ak.rate == af.rate
    assert ak.frozen() == af.frozen() and ak.step == af.step
    assert np.isclose(ak.shard_s, af.shard_s, rtol=0.05)
    ek, ef = episodes(kept), episodes(full)
    assert [(e.stage, e.start, round(e.duration_s, 3)) for e in ek] == [
        (e.stage, e.start, round(e.duration_s, 3)) for e in ef
    ]


def test_fold_keeps_memory_per_event_not_per_line(dense, tmp_path):
    """Peak RSS of a child that loads the log, over one that loads a 40-line log: the fold's own
    memory stays a fraction of the log's size (it was ~11x before issue 21)."""
    path, expected, _, _ = dense
    small = tmp_path / "small.log"
    small.write_text("".join(path.open().readlines()[:40]))
    code = (
        "import json, resource, sys; from pathlib import Path; from zephyr_debug.sources import logtext; "
        "ev = logtext.load([Path(sys.argv[1])], 'x'); "
        "print(json.dumps([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, len(ev.attempts)]))"
    )
    run = lambda p: json.loads(
        subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, check=True).stdout
    )
    (base, _), (peak, attempts) = run(small), run(path)
    assert attempts == expected["done"] + expected["requeues"] + 1
    grown = peak - base
    assert grown < 0.5 * expected["bytes"], (grown, expected["bytes"])
