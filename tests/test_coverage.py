"""Never silent (analyze/coverage.py): every result says what it read (each source, its event
lines and how many carried a time) and what it ignored and why; "healthy" / "No problems found"
only where the evidence could have shown the problems it rules out; counts never contradict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REAL = Path(__file__).parent / "data" / "realcaptures"
TAIL = (
    "2026-11-19 22:18:25,708 INFO zephyr.execution: [exec-1] [stage0-Map] 4999/5000 complete, 1 in-flight, "
    "0 queued, 300/300 workers alive, 0 dead\n"
)


def zdebug(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zephyr_debug.cli", *args], capture_output=True, text=True, timeout=120
    )


def _json(*args: str) -> dict:
    proc = zdebug(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["status", "diagnose"])
def test_one_status_line_in_a_tail_is_not_healthy(command, tmp_path):
    path = tmp_path / "tail.log"
    path.write_text(TAIL, encoding="utf-8")
    d = _json(command, str(path))
    assert d["healthy"] is False and d["findings"] == []
    assert any("one moment" in c for c in d["coverage"]["cannot_tell"])
    text = zdebug(command, str(path)).stdout
    assert "No problems found" not in text and "cannot tell:" in text
    assert all(len(line) <= 80 for line in text.splitlines())


def test_the_stage_table_agrees_with_the_status_line(tmp_path):
    path = tmp_path / "tail.log"
    path.write_text(TAIL, encoding="utf-8")
    (stage,) = _json("stragglers", str(path))["stages"]
    assert (stage["done"], stage["running"], stage["total"]) == (4999, 1, 5000)


def test_lines_without_any_time_cannot_clear_a_job(tmp_path):
    path = tmp_path / "bare.log"
    lines = [
        f"[exec-1] [stage0-Map] {i}/40 complete, 4 in-flight, {36 - i} queued, 4/4 workers alive, 0 dead"
        for i in range(37)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    d = _json("diagnose", str(path))
    assert d["coverage"]["timed_lines"] == 0 and d["coverage"]["event_lines"] == 37
    assert d["healthy"] is False and any("no log line carries a time" in c for c in d["coverage"]["cannot_tell"])


def test_sources_read_and_ignored_are_listed(tmp_path):
    (tmp_path / "coordinator.log").write_bytes((REAL / "healthy" / "coordinator.log").read_bytes())
    (tmp_path / "notes.json").write_text('{"owner": "alice"}', encoding="utf-8")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01garbage")
    d = _json("diagnose", str(tmp_path))
    by_name = {Path(s["path"]).name: s for s in d["coverage"]["sources"]}
    log = by_name["coordinator.log"]
    assert log["kind"] == "log" and log["events"] > 0 and log["timed"] == log["events"]
    assert "ignored" in by_name["notes.json"] and "binary" in by_name["blob.bin"]["ignored"]


@pytest.mark.parametrize("name", ["healthy", "healthy-wide", "recovered"])
def test_a_healthy_real_capture_is_healthy_with_nothing_it_cannot_tell(name):
    d = _json("diagnose", str(REAL / name))
    assert d["healthy"] is True and d["coverage"]["cannot_tell"] == []


@pytest.mark.slow
def test_a_12_hour_tail_copied_from_a_viewer_is_stalled(tmp_path):
    """The issue's case: 12 h of `4095/4096 complete, 1 in-flight, 0 queued` with a viewer's
    receive time glued to glog lines: the times are read and the stall is named."""
    import calendar

    from zephyr_debug import zephyrlog

    viewer, glog = (next(p for p in zephyrlog.PREFIXES if p.name == n) for n in ("viewer-glued", "glog"))
    start = calendar.timegm((2026, 11, 19, 10, 0, 0))
    path = tmp_path / "tail.log"
    path.write_text(
        "".join(
            viewer.format(start + t) + glog.format(start + t) + "[exec-9] [stage0-Map] 4095/4096 complete, "
            "1 in-flight, 0 queued, 300/300 workers alive, 0 dead\n"
            for t in range(0, 12 * 3600 + 1, 30)
        ),
        encoding="utf-8",
    )
    d = _json("diagnose", str(path))
    assert [f["kind"] for f in d["findings"]] == ["stalled"] and d["healthy"] is False
    assert "No problems found" not in zdebug("diagnose", str(path)).stdout
