"""Logs as a terminal or a log viewer hands them over read as the log did: coloured by a log
handler (ANSI codes around the level or the whole line), newest first (`gcloud logging read`, a
viewer's copy: whole records reversed, or `tac`: every line), and those forms combined with a
terminal's wrap (a terminal's copy carries no colour codes). Each real capture gives its own
verdict in every form, with a note that says what was rewritten; an oldest-first log, and
generated logs of every scenario, are read as they are.

The variants are made here from the text alone (a record is a line with a date at its start, Python or glog, and
the lines below it), not with the reader's own patterns."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from test_wrapped import CAPTURES, NAMES, fold, verdict

from zephyr_debug import streams
from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.sources import load

HEAD = re.compile(r"^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|[IWEF]\d{8} \d\d:)")  # Python logging or glog
LEVEL = re.compile(r" (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")
COLOUR = {"DEBUG": "36", "INFO": "32", "WARNING": "33", "ERROR": "31", "CRITICAL": "1;31"}


def records(text: str) -> list[str]:
    """The text's records: a dated line and the lines up to the next one."""
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        if HEAD.match(line) or not out:
            out.append(line)
        else:
            out[-1] += line
    return out


def levels_coloured(text: str) -> str:
    """colorlog's default: the level name in its colour."""
    return LEVEL.sub(lambda m: f" \x1b[{COLOUR[m[1]]}m{m[1]}\x1b[0m ", text)


def lines_coloured(text: str) -> str:
    """rich / a level-coloured formatter: each record's first line wholly in its level's colour."""
    out = []
    for rec in records(text):
        level = LEVEL.search(rec.split("\n", 1)[0])
        code = COLOUR[level[1]] if level else "0"
        first, nl, rest = rec.partition("\n")
        out.append(f"\x1b[{code};1m{first}\x1b[0m{nl}{rest}")
    return "".join(out)


def newest_first(text: str) -> str:
    """A viewer's copy: whole records, newest first."""
    return "".join(reversed(records(text)))


def every_line_reversed(text: str) -> str:
    """`tac`: every line, last first."""
    return "".join(reversed(text.splitlines(keepends=True)))


FORMS = {
    "levels coloured": (levels_coloured, "colour code"),
    "lines coloured": (lines_coloured, "colour code"),
    "newest first": (newest_first, "newest first"),
    "tac": (every_line_reversed, "newest first"),
    "coloured, newest first": (lambda t: newest_first(levels_coloured(t)), "newest first"),
    "newest first, wrapped at 100": (lambda t: fold(newest_first(t), 100), "wrapped at 100"),
}


@pytest.mark.parametrize("name", NAMES)
def test_a_capture_in_every_form_reads_as_the_capture(name, tmp_path):
    original = tmp_path / "original"
    original.mkdir()
    shutil.copy(CAPTURES / name / "coordinator.log", original)
    want = verdict(original)
    text = (original / "coordinator.log").read_text()
    for i, (form, (make, note)) in enumerate(FORMS.items()):
        changed = tmp_path / str(i)
        changed.mkdir()
        (changed / "coordinator.log").write_text(make(text))
        streams.NOTES.clear()
        assert verdict(changed) == want, (name, form)
        warnings = analyze(load(str(changed))).warnings
        assert any(note in w for w in warnings), (form, warnings)


PYTHON_HEAD = re.compile(r"(\d{4})-(\d\d)-(\d\d) (\d\d:\d\d:\d\d),(\d{3}) (\w+) [\w.\-]+: ")
GLOG_HEAD = re.compile(r"([IWEF])(\d{4})(\d\d)(\d\d) (\d\d:\d\d:\d\d)(?:\.\d+)? +\d+ [\w.\-]+ ")


def cloud_logging(text: str) -> list[dict]:
    """The capture as a Cloud Logging export: one entry per record, its prefix as fields."""
    out = []
    for rec in records(text):
        if m := PYTHON_HEAD.match(rec):
            when, severity = f"{m[1]}-{m[2]}-{m[3]}T{m[4]}.{m[5]}Z", m[6]
        elif m := GLOG_HEAD.match(rec):
            when, severity = f"{m[2]}-{m[3]}-{m[4]}T{m[5]}Z", {"I": "INFO", "W": "WARNING"}.get(m[1], "ERROR")
        else:
            continue
        out.append({"textPayload": rec[m.end() :].rstrip("\n"), "timestamp": when, "severity": severity})
    return out


@pytest.mark.parametrize("name", NAMES)
def test_a_cloud_logging_export_newest_first_reads_as_oldest_first(name, tmp_path):
    """`gcloud logging read --format=json` lists entries newest first."""
    entries = cloud_logging((CAPTURES / name / "coordinator.log").read_text())
    want = []
    for order, entries_in in (("oldest", entries), ("newest", entries[::-1])):
        export = tmp_path / f"{order}.json"
        export.write_text(json.dumps(entries_in))
        a = analyze(load(str(export)))
        want.append((a.state, sorted((f.kind, f.stage, f.shard) for f in a.findings), a.progress.completed))
        assert (order == "newest") == any("not in time order" in w for w in a.warnings), (order, a.warnings)
    assert want[0] == want[1]


@pytest.mark.parametrize("name", NAMES)
def test_json_lines_newest_first_read_as_oldest_first(name, tmp_path):
    """The same export one entry per line (a viewer's `.jsonl` download, `gcloud … | jq -c '.[]'`),
    with a line that is no record: newest first reads as oldest first, and says so."""
    entries = cloud_logging((CAPTURES / name / "coordinator.log").read_text())
    want = []
    for order, entries_in in (("oldest", entries), ("newest", entries[::-1])):
        export = tmp_path / f"{order}.jsonl"
        export.write_text("".join(json.dumps(e) + "\n" for e in entries_in) + '{"not": "a record"}\n')
        a = analyze(load(str(export)))
        want.append((a.state, sorted((f.kind, f.stage, f.shard) for f in a.findings), a.progress.completed))
        moved = [w for w in a.warnings if "not in time order" in w]
        assert (order == "newest") == bool(moved), (order, a.warnings)
        assert not moved or "1 line(s) that are no log record skipped" in moved[0], moved
    assert want[0] == want[1]


@pytest.mark.parametrize("name", NAMES)
def test_a_capture_as_written_is_not_rewritten(name):
    path = CAPTURES / name / "coordinator.log"
    assert streams.readable(path, name) == path


def test_generated_logs_of_every_scenario_are_read_as_written(tmp_path):
    from benchmarks.prodjobs import SCENARIOS
    from benchmarks.prodjobs.simulate import simulate
    from benchmarks.prodjobs.truth import resolve
    from benchmarks.prodjobs.write import write

    read = 0
    for sc in SCENARIOS[:12]:
        out = tmp_path / sc.name
        write(resolve(sc, 0, simulate), "full", out)
        for log in out.rglob("*.log"):
            assert streams.readable(log, log.name) == log, log
            read += 1
    assert read >= 12


def test_logs_of_several_files_joined_are_not_taken_for_newest_first(tmp_path):
    """Two workers' logs concatenated go back in time once, at the join: that is not an order."""
    lines = [f"2026-12-03 13:26:{i:02d},000 INFO zephyr.execution: step {i}" for i in range(30)]
    joined = tmp_path / "both.log"
    joined.write_text("\n".join(lines[15:] + lines[:15]) + "\n")
    assert streams.readable(joined, "both.log") == joined


def test_a_clock_that_jumps_back_in_a_log_written_in_order_is_not_newest_first(tmp_path):
    """logmaker's odd clock (back 0.5-30 s now and then): most time steps go back, the lines do not."""
    from logmaker import Knobs, make_job

    [text] = make_job(Knobs(seed=2149, shards=3, odd=0.05)).values()
    log = tmp_path / "odd.log"
    log.write_text(text)
    assert streams.readable(log, log.name) == log
    assert streams.newest_first(newest_first(text).encode())


def test_untimed_lines_newest_first_are_put_back_by_what_they_say(tmp_path):
    status = "[stage0-Map] {}/40 complete, 4 in-flight, {} queued, 4/4 workers alive, 0 dead"
    lines = [status.format(k, 36 - k) for k in range(30)]
    log = tmp_path / "bare.log"
    log.write_text("\n".join(reversed(lines)) + "\n")
    assert Path(streams.readable(log, log.name)).read_text() == "\n".join(lines) + "\n"


def test_a_traceback_reversed_line_by_line_is_put_back_whole(tmp_path):
    text = (
        "2026-12-03 13:26:01,000 INFO zephyr.execution: start\n"
        "2026-12-03 13:26:02,000 ERROR zephyr.execution: Worker w-1 error on shard 3\n"
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "ValueError: bad\n"
        + "".join(f"2026-12-03 13:26:{s:02d},000 INFO zephyr.execution: tick {s}\n" for s in range(3, 12))
    )
    for make in (newest_first, every_line_reversed):
        log = tmp_path / f"{make.__name__}.log"
        log.write_text(make(text))
        assert Path(streams.readable(log, log.name)).read_text() == text, make.__name__
