"""`sources/timeline.py` and the log scanner on hand-written lines: the folds a real log rarely
exercises (midnight under clock-only prefixes, files read out of order)."""

from __future__ import annotations

from pathlib import Path

from zephyr_debug import zephyrlog
from zephyr_debug.crashes.parse import coalesce, split
from zephyr_debug.sources.logtext import LogScanner
from zephyr_debug.sources.timeline import Timeline

W = "zephyr--4e7e9c87-p0-workers-a0-1:0"


def fold(tmp_path: Path, *files: tuple[str, str]):
    tl = Timeline("job", str(tmp_path))
    for name, text in files:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        LogScanner(tl, str(path)).scan_file(path)
    return tl.finish()


def test_clock_only_prefixes_roll_over_midnight(tmp_path):
    status = zephyrlog.STATUS.format(
        exec="e", stage="stage0-Map", completed=1, total=4, in_flight=3, queued=0, alive=3, registered=3, dead=0
    )
    text = (
        f"2026-12-02 23:59:50,000 INFO zephyr.execution: {status}\n"
        f"[23:59:58] task=/alice/job/0 | {status}\n"
        f"[00:00:02] task=/alice/job/0 | {status}\n"
    )
    ev = fold(tmp_path, ("job.log", text))
    ts = list(ev.status["ts"])
    assert ts[1] - ts[0] == 8 and ts[2] - ts[1] == 4  # not a day backwards


def test_an_older_file_does_not_roll_a_worker_state_back(tmp_path):
    newer = (
        f"2026-12-02 10:00:10,000 INFO zephyr.execution: {zephyrlog.HEARTBEAT_TIMEOUT.format(worker=W, secs=130.0)}\n"
    )
    older = (
        f"2026-12-02 09:00:00,000 INFO zephyr.execution: "
        f"{zephyrlog.EXECUTING.format(worker=W, stage='stage0-Map', shard=3, attempt=0)}\n"
    )
    ev = fold(tmp_path, ("coordinator.log", newer), ("worker-1.log", older))
    [state] = ev.workers.loc[ev.workers["worker"] == W, "state"]
    assert state == "failed"  # the worker's hour-old "busy" line read second does not revive it


def test_a_dump_repeated_verbatim_is_one_crash():
    dump = [
        "Fatal Python error: Segmentation fault",
        "",
        "Current thread 0x00007f (most recent call first):",
        '  File "/app/run_shard.py", line 12 in decode',
        "",
        "Extension modules: numpy (total: 1)",
    ]
    crashes = list(coalesce(split(dump + dump, "worker.log")))
    assert len(crashes) == 1 and crashes[0].text.startswith("Fatal Python error: Segmentation fault")
