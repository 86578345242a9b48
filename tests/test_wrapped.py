"""Logs copied from a terminal (or `fold`) that wrapped their lines at some width read as the
log did: the same state and findings on every real capture at every width, with a note saying
the lines were joined; logs nobody wrapped are read as they are."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from zephyr_debug import streams
from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.sources import load

CAPTURES = Path(__file__).parent / "data" / "realcaptures"
NAMES = sorted(p.parent.name for p in CAPTURES.glob("*/truth.json"))


def fold(text: str, width: int, crlf: bool = False) -> str:
    """What a terminal of `width` columns shows of `text`, copied: every line cut every `width`."""
    out = []
    for line in text.split("\n")[:-1]:
        out += [line[i : i + width] for i in range(0, len(line), width)] or [""]
    return ("\r\n" if crlf else "\n").join(out) + "\n"


def verdict(path: Path) -> tuple:
    a = analyze(load(str(path)))
    return a.state, sorted((f.kind, f.stage, f.shard) for f in a.findings), a.progress.completed


@pytest.mark.parametrize("name", NAMES)
def test_a_capture_wrapped_at_any_width_reads_as_the_capture(name, tmp_path):
    original = tmp_path / "original"
    original.mkdir()
    shutil.copy(CAPTURES / name / "coordinator.log", original)
    want = verdict(original)
    text = (original / "coordinator.log").read_text()
    for width, crlf in ((60, False), (80, False), (100, True), (132, False)):
        wrapped = tmp_path / f"w{width}"
        wrapped.mkdir()
        (wrapped / "coordinator.log").write_bytes(fold(text, width, crlf).encode())
        streams.NOTES.clear()
        assert verdict(wrapped) == want, (name, width)
        a = analyze(load(str(wrapped)))
        assert any(f"wrapped at {width} columns" in w for w in a.warnings), (width, a.warnings)


@pytest.mark.parametrize("name", NAMES)
def test_a_log_nobody_wrapped_is_read_as_it_is(name):
    assert streams.wrap_width((CAPTURES / name / "coordinator.log").read_bytes()) is None


# Generated logs of every scenario are read as written (not taken for wrapped): test_reordered.py


def test_empty_lines_and_json_survive_the_join(tmp_path):
    lines = [f"2026-12-03 13:26:{i:02d},000 INFO zephyr.execution: " + "x" * 50 + str(i) for i in range(10)]
    text = "".join(f"{line}\n\n" for line in lines)
    wrapped = tmp_path / "paste.log"
    wrapped.write_text(fold(text, 40))
    joined = streams.unwrapped(wrapped, "paste.log")
    assert joined.read_text() == text
    record = tmp_path / "status.json"
    record.write_text(json.dumps({"a": 1}))
    assert streams.unwrapped(record, "status.json") == record


def test_bare_lines_of_one_width_are_not_taken_for_wrapped(tmp_path):
    """Untimed status lines, many at the widest length: no line starts a record, so nothing shows
    a wrap (and joining them would lose events)."""
    lines = [
        f"[exec-1] [stage0-Map] {i}/40 complete, 4 in-flight, {36 - i} queued, 4/4 workers alive, 0 dead"
        for i in range(37)
    ]
    assert streams.wrap_width(("\n".join(lines) + "\n").encode()) is None
