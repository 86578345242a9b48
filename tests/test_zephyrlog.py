"""`zephyrlog`: every line zdebug writes it can read back with the same named groups, routed by its
keyword; one time rule for prefix times, whatever the machine's zone."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zephyr_debug import zephyrlog
from zephyr_debug.sources import logtext

SAMPLE = {
    "exec": "20261202-215916-4e7e9c87",
    "stage": "stage1-Map → Write",
    "completed": 3,
    "total": 4,
    "in_flight": 1,
    "queued": 0,
    "alive": 3,
    "registered": 4,
    "dead": 1,
    "counts": "{1: 5}",
    "ops": "map",
    "n": 2,
    "worker": "zephyr--4e7e9c87-p0-workers-a0-1:0",
    "secs": 12.5,
    "shard": 7,
    "max": 3,
    "generation": 2,
    "task": 0,
    "task_max": 3,
    "infra": 19,
    "infra_max": 20,
    "attempt": 1,
    "current": 2,
    "error": "boom",
    "counters": "{'zephyr/item_count': 5}",
    "files": 30,
    "chunks": 30,
    "rows": 12,
    "item_bytes": 24.2,
    "op": "a1b2",
    "method": "run_pipeline",
    "delay": 2.0,
    "url": "http://10.0.0.1:30000",
    "shards": 1376,
}


@pytest.mark.parametrize("msg", [m for m in zephyrlog.MESSAGES if m.fmt], ids=lambda m: m.name)
def test_every_written_line_reads_back_with_its_fields(msg):
    line = msg.format(**SAMPLE)
    m = msg.regex.search(line.encode())
    assert m is not None, line
    for name, value in m.groupdict().items():
        if value is not None and name in SAMPLE and name not in ("secs", "counts", "counters", "error"):
            assert value.decode() == str(SAMPLE[name]), (name, line)
    assert b" " + msg.keyword in b" " + line.encode()  # the routing keyword every form carries after a space
    # the scanner finds it in a log and sends it to this message first
    hit = logtext.EVENT_RE.search(b"2026-12-02 21:59:16,743 INFO zephyr.execution: " + line.encode())
    assert hit and msg.name in {n for n, _ in logtext.BY_KEYWORD[hit.group()[1:]]} | {n for n, _ in logtext.ALL}


def test_old_forms_are_read_by_the_same_patterns():
    old = zephyrlog.STATUS_WORKERS_ONLY.format(**SAMPLE)
    m = zephyrlog.STATUS.regex.search(old.encode())
    assert m["workers"] == b"4" and m["alive"] is None
    semi = (
        "Shard 6 has been in flight during 3 infra failures (max 3); treating as a deterministic crasher "
        "(likely native SIGSEGV / OOM in shard code) and aborting pipeline. Last failure on worker w-1."
    )
    assert zephyrlog.INFRA_ABORT.regex.search(semi.encode())["worker"] == b"w-1"


def test_prefix_times_read_the_same_under_any_machine_zone():
    code = (
        "from zephyr_debug import zephyrlog as z; print(z.naive_epoch('2026-01-01', '10:00:00'), "
        "z.naive_epoch('20260101', '10:00:00'))"
    )
    got = {
        tz: subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "TZ": tz, "ZDEBUG_TZ": ""},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for tz in ("UTC", "America/New_York")
    }
    assert got["UTC"] == got["America/New_York"] == ["1767261600.0", "1767261600.0"]  # UTC unless told


def test_zdebug_tz_names_the_zone_prefix_times_are_in():
    try:
        zephyrlog.set_timezone("America/New_York")
        assert zephyrlog.naive_epoch("2026-01-01", "10:00:00") == 1767261600 + 5 * 3600
        with pytest.raises(ValueError):
            zephyrlog.set_timezone("Mars/Olympus")
    finally:
        zephyrlog.set_timezone(None)
    assert zephyrlog.naive_epoch("2026-01-01", "10:00:00") == 1767261600
    assert zephyrlog.naive_epoch("2026-13-45", "10:00:00") is None  # not a date after all


def test_writer_timestamps_are_utc_and_round_trip():
    stamp = zephyrlog.timestamp(1767261600.25)
    assert stamp == "2026-01-01 10:00:00,250"
    t = zephyrlog.prefix_time(stamp.encode())
    assert t is not None and (t.year, t.month, t.day, t.zone) == (2026, 1, 1, None)
    assert zephyrlog.midnight(2026, 1, 1, None) + t.clock == 1767261600.25


def test_human_numbers_round_trip():
    for n in (999, 1090, 12_300_000, 2e9):
        assert zephyrlog.human_number(zephyrlog.human_count(n)) == pytest.approx(n, rel=0.01)


_text = st.text(st.characters(blacklist_characters="]\n\r", blacklist_categories=("Cs",)), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    worker=_text.filter(lambda s: s.strip() == s),
    stage=st.from_regex(r"stage\d-[A-Za-z]+( → [A-Za-z]+)?", fullmatch=True),
    exec_=st.one_of(st.none(), st.from_regex(r"\d{8}-\d{6}-[0-9a-f]{8}", fullmatch=True)),
    n=st.integers(0, 10**12),
    secs=st.floats(0, 1e6, allow_nan=False),
    items=st.one_of(st.none(), st.sampled_from(["999", "1.09K", "12.3M", "4B"])),
    level=st.sampled_from(["INFO", "WARNING", "DEBUG"]),
    ms=st.integers(0, 999),
)
def test_dense_pattern_reads_what_each_message_reads(worker, stage, exec_, n, secs, items, level, ms):
    """zephyrlog.DENSE_PATTERN (the bulk reader) finds the same fields as the three messages' own
    patterns on every line their writer formats print."""
    dense = re.compile(zephyrlog.DENSE_PATTERN)
    prefix = f"2026-12-02 21:59:16,{ms:03d} {level} zephyr.execution: "
    status = zephyrlog.STATUS.format(
        exec=exec_, stage=stage, completed=n, total=n + 1, in_flight=2, queued=n % 7, alive=3, registered=4, dead=1
    )
    if exec_ is None:
        status = status.split("] ", 1)[1]
    if items is not None:
        status += zephyrlog.THROUGHPUT.format(items=items, item_rate="1.2", bytes="3 GiB", byte_rate="1 KiB")
    lines = {
        zephyrlog.STATUS: status,
        zephyrlog.EXECUTING: zephyrlog.EXECUTING.format(worker=worker, stage=stage, shard=n, attempt=n % 3),
        zephyrlog.SHARD_DONE: zephyrlog.SHARD_DONE.format(worker=worker, shard=n, secs=secs),
    }
    for message, text in lines.items():
        line = (prefix + text).encode()
        want = {k: v for k, v in message.regex.search(line).groupdict().items() if v is not None}
        m = dense.match(b"\n" + line)
        assert m is not None and m.end() == len(line) + 1, text
        got = {k.split("_", 1)[1] if k[:2] in ("e_", "d_", "s_") else k: v for k, v in m.groupdict().items() if v}
        first, second = got.pop("first"), got.pop("second", None)
        if message is zephyrlog.STATUS:
            got.update({"exec": first, "stage": second} if second is not None else {"stage": first})
        else:
            got["worker"] = first
        assert got.pop("ts") == f"2026-12-02 21:59:16,{ms:03d}".encode()
        assert got == want, text


@settings(max_examples=600, deadline=None)
@given(
    day=st.dates(),
    clock=st.times().map(lambda t: t.strftime("%H:%M:%S")),
    frac=st.sampled_from(["", ",708", ".7", ".708123", ",123456789", ",1234567890"]),
    zone=st.sampled_from(["", "Z", "+01:00", "-0530"]),
    level=st.sampled_from(["INFO", "I", "W", "WARNING", "X"]),
    logger=st.from_regex(r"[\w.\-]{1,12}", fullmatch=True),
    tail=st.sampled_from([": ", ":", " ", ":341] ", " [x-1] ", ": 22:18:25 ", " 2026-11-19T22:18:25Z ", ""]),
    form=st.sampled_from(["python", "glog-year", "glog"]),
    outer=st.sampled_from(["", "[22:18:25] task=/alice/job/0 | ", "[22:18:25] task=/a:b | ", "x "]),
)
def test_common_prefixes_read_without_a_search_as_the_search_reads_them(
    day, clock, frac, zone, level, logger, tail, form, outer
):
    """Python logging's and glog's prefixes (behind the Iris CLI's too) are read without searching
    every form: the time must be the one the search finds (near misses and later times included)."""
    time_ = f"{clock}{frac}{zone}"
    text = {
        "python": f"{day.isoformat()} {time_} {level} {logger}{tail}",
        "glog-year": f"{level[0]}{day:%Y%m%d} {time_} 140415056467648 {logger}{tail}",
        "glog": f"{level[0]}{day:%m%d} {time_} 140415 {logger}{tail}",
    }[form]
    text = (outer + text).encode()
    assert zephyrlog.prefix_time(text) == zephyrlog.search_time(text)
