"""Zephyr/Iris log text -> Evidence: the timeline rebuilt from coordinator and worker lines.

Speed comes from one compiled regex over large chunks: every event line holds one of a few
keywords after a space (`KEYWORDS`), so the regex has a literal prefix and the scan runs in C;
only the lines it hits are parsed (prefix, then the message regexes in `MESSAGES`). Any line
prefix is accepted: Python logging, glog-like, Iris `[hh:mm:ss] task=… |`, or none. Tracebacks
and faulthandler dumps (untimestamped) are read after / before the error line that names them.
Memory stays bounded: chunks of `CHUNK_BYTES`, carried over only at the last line boundary.
"""

from __future__ import annotations

import calendar
import json
import re
from collections.abc import Iterable
from pathlib import Path

from zephyr_debug.errors import ZdebugError
from zephyr_debug.model import Evidence
from zephyr_debug.sources.timeline import Timeline

CHUNK_BYTES = 32 << 20
BLOCK_BYTES = 256 << 10  # most text kept after an error line (traceback) or before it (dump)
SNIFF_BYTES = 64 << 10

# Words that every event line carries after a space. Common prefix " " -> fast C scan.
KEYWORDS = [b"workers ", b"Shard ", b"shard ", b"worker ", b"Worker ", b"tasks completed", b"Starting stage ",
            b"Executing stage ", b"retried ", b"Coordinator aborted", b"method 'run_pipeline' failed",
            b"[coordinator.shutdown]", b"zephyr pipeline: "]
EVENT_RE = re.compile(b" (?:" + b"|".join(re.escape(k) for k in KEYWORDS) + b")")
SPAM = b"pull_task"

# Line prefixes: optional Iris `[hh:mm:ss] task=… | `, then Python logging or glog-like time.
PREFIX_RE = re.compile(
    rb"(?:\[(?P<clock>\d\d:\d\d:\d\d)\] (?:task=\S+ \| )?)?"
    rb"(?:(?P<date>\d{4}-\d\d-\d\d)[ T](?P<time>\d\d:\d\d:\d\d)(?:[,.](?P<frac>\d{1,6}))?"
    rb"|[IWEFD](?P<gdate>\d{8}) (?P<gtime>\d\d:\d\d:\d\d)(?:\.(?P<gfrac>\d{1,6}))?)?")
# Start of a line that is not a continuation of a block (has a timestamp or is a JSON record).
LINE_START_RE = re.compile(rb"\n(?:\[\d\d:\d\d:\d\d\] |\d{4}-\d\d-\d\d[ T]\d\d:|[IWEFD]\d{8} \d\d:|\{)")
NUM = rb"([\d.]+[KMBT]?)"
STAGE = rb"([^\]\n]+)"

# (name, regex over the whole line, signature that makes a non-matching line "unparseable").
MESSAGES: list[tuple[str, re.Pattern, bytes | None]] = [(name, re.compile(rx), sig) for name, rx, sig in [
    ("status", rb"(?:\[([^\]\n]+)\] )?\[" + STAGE + rb"\] (\d+)/(\d+) complete, (\d+) in-flight, (\d+) queued, "
               rb"(\d+)/(\d+) workers alive, (\d+) dead(?:[;.] items=" + NUM + rb")?", b" complete, "),
    ("tasks_completed", rb"\[" + STAGE + rb"\] (\d+)/(\d+) tasks completed", None),
    ("stage_start", rb"(?:\[([^\]\n]+)\] )?Starting stage (\S+(?: \S+)*?) \(([^)\n]*)\) with (\d+) tasks",
     b"Starting stage "),
    ("executing", rb"\[([^\]\n]+)\] Executing stage (\S+(?: \S+)*?) shard (\d+) \(attempt (\d+)\)",
     b"Executing stage"),
    ("done", rb"\[([^\]\n]+)\] Shard (\d+) done in ([\d.]+)s", b" done in "),
    ("task_requeue", rb"Shard (\d+) failed on worker (\S+) \(task error (\d+)/(\d+)\)", b"(task error"),
    ("task_abort", rb"Shard (\d+) has failed (\d+) times \(max (\d+)\), last failure on worker (\S+?),? aborting",
     b"aborting pipeline"),
    ("infra_requeue", rb"Shard (\d+) requeued from worker (\S+) due to infra failure.*?Total generation: (\d+), "
                      rb"task errors so far: (\d+)/(\d+), infra-while-in-flight: (\d+)/(\d+)", b"infra failure"),
    ("infra_abort", rb"Shard (\d+) has been in flight during (\d+) infra failures \(max (\d+)\)[;.] treating as a "
                    rb"deterministic crasher.*?Last failure on worker (\S+?)\.?$", b"deterministic crasher"),
    ("registered", rb"Worker (\S+) registered, total: (\d+)", b" registered, total"),
    ("reregistering", rb"Worker (\S+) re-registering", None),
    ("heartbeat_timeout", rb"worker (\S+) failed to heartbeat within timeout \(([\d.]+)s\)", b"failed to heartbeat"),
    ("worker_error", rb"Worker (\S+) error on shard (\d+)", b" error on shard"),
    ("stale", rb"Ignoring stale result from worker (\S+) for shard (\d+) \(attempt (\d+), current (\d+)\)", None),
    ("all_dead", rb"All workers are dead/failed", None),
    ("no_workers", rb"(?:ZephyrWorkerError: )?(No alive workers for .*)", None),
    ("retried", rb"Shards retried \(attempts: shard count\): (\{[^}\n]*\})", None),
    ("aborted", rb"Coordinator aborted: (.*)", None),
    ("pipeline_failed", rb"method 'run_pipeline' failed: (.*)", None),
    ("counters", rb"\[coordinator\.shutdown\] Final counters: (\{.*\})", None),
    ("shutdown", rb"\[coordinator\.shutdown\] Starting shutdown", None),
    ("pipeline", rb"Starting zephyr pipeline: (\S+)", None),
]]
_RX = {name: rx for name, rx, _ in MESSAGES}
ALL = tuple((name, rx) for name, rx, _ in MESSAGES)
SIGNATURES = tuple(sig for _, _, sig in MESSAGES if sig)
# Which messages a line can be, by the first keyword on it (the rest are tried after).
BY_KEYWORD = {k: tuple((n, _RX[n]) for n in names) for k, names in {
    b"workers ": ("status", "all_dead", "no_workers"),
    b"Shard ": ("done", "task_requeue", "task_abort", "infra_requeue", "infra_abort"),
    b"Executing stage ": ("executing",),
    b"Worker ": ("registered", "worker_error", "reregistering"),
    b"worker ": ("heartbeat_timeout", "stale"),
    b"tasks completed": ("tasks_completed",),
    b"Starting stage ": ("stage_start",),
}.items()}
BLOCK_EVENTS = {"worker_error", "pipeline_failed"}  # the untimestamped lines after them belong to them
DUMP_START, DUMP_END = b"Fatal Python error", b"Extension modules:"


class LogScanner:
    """Feeds one Timeline from log text: chunks of a file, or single lines of JSON records."""

    def __init__(self, timeline: Timeline, source: str):
        self.tl, self.source = timeline, source
        self.date_cache: dict[bytes, float] = {}
        self.day = 0.0  # date of the last dated line, for Iris clock-only prefixes
        self.last_ts: float | None = None

    # -- files ---------------------------------------------------------------------------
    def scan_file(self, path: Path, chunk_bytes: int = CHUNK_BYTES) -> None:
        first_crash = len(self.tl.crashes)
        self._scan_file(path, chunk_bytes)
        _number_lines(path, self.tl.crashes[first_crash:])

    def _scan_file(self, path: Path, chunk_bytes: int) -> None:
        with open(path, "rb") as fh:
            carry, base = b"", 0
            while True:
                data = fh.read(chunk_bytes)
                eof = not data
                buf = carry + data
                if not buf:
                    break
                end = len(buf) if eof else buf.rfind(b"\n") + 1
                if end == 0:  # one line longer than a chunk: keep reading
                    carry = buf
                    continue
                done = self.scan_buffer(buf, end, base, eof)
                carry, base = buf[done:], base + done
                if eof:
                    break

    def scan_buffer(self, buf: bytes, end: int, base: int, eof: bool) -> int:
        """Handles the lines of buf[:end]; returns how far it got (a block may need more data)."""
        last_line = -1
        for m in EVENT_RE.finditer(buf, 0, end):
            start = buf.rfind(b"\n", 0, m.start()) + 1
            if start == last_line:
                continue
            last_line = start
            stop = buf.find(b"\n", m.end(), end)
            stop = end if stop < 0 else stop
            if not self._line(buf, start, stop, base, eof):
                self.tl.spam += buf.count(SPAM, 0, start)
                return start
        self.tl.spam += buf.count(SPAM, 0, end)
        return end

    # -- records (Iris get-task-logs / JSON lines) ---------------------------------------------
    def scan_records(self, records: Iterable[tuple[float | None, str]]) -> None:
        """(timestamp or None, line text) pairs, e.g. Iris get-task-logs entries."""
        lines = []
        for ts, text in records:
            for i, part in enumerate(str(text).split("\n")):
                lines.append((ts if i == 0 else None, part))
        buf = bytearray()
        stamps: dict[int, float] = {}
        for ts, text in lines:
            if ts is not None:
                stamps[len(buf)] = ts
            buf += b" " + text.encode("utf-8", "replace") + b"\n"
        self.stamps = stamps
        data = bytes(buf)
        first_crash = len(self.tl.crashes)
        self.scan_buffer(data, len(data), 0, True)
        self.stamps = {}
        for crash in self.tl.crashes[first_crash:]:
            crash.line = None  # offsets into records, not lines of a file

    # -- one event line ---------------------------------------------------------------------
    stamps: dict[int, float] = {}

    def _line(self, buf: bytes, start: int, stop: int, base: int, eof: bool) -> bool:
        line = buf[start:stop]
        if line.startswith(b"{"):
            return self._json_line(line, base + start)
        ts = self.stamps.get(start) if self.stamps else None
        if ts is None:
            ts = self._timestamp(line)
        hit = EVENT_RE.search(line)
        for name, rx in BY_KEYWORD.get(hit.group()[1:] if hit else b"", ()) + ALL:
            m = rx.search(line)
            if m is None:
                continue
            block = None
            if name in BLOCK_EVENTS:
                block = self._block(buf, start, stop, eof)
                if block is None:
                    return False
            groups = [g.decode("utf-8", "replace") if g is not None else None for g in m.groups()]
            self.tl.event(name, ts, groups, self.source, base + start, block)
            return True
        if any(sig in line for sig in SIGNATURES):
            self.tl.bad += 1
        return True

    def _json_line(self, line: bytes, offset: int) -> bool:
        try:
            rec = json.loads(line)
            text, ts = rec["data"], record_ts(rec.get("timestamp"))
        except (ValueError, KeyError, TypeError):
            self.tl.bad += 1
            return True
        sub = LogScanner(self.tl, self.source)
        sub.scan_records([(ts, text)])
        return True

    def _block(self, buf: bytes, start: int, stop: int, eof: bool) -> str | None:
        """The error line plus its untimestamped continuation (traceback), and a faulthandler dump
        printed shortly before it when the error says a subprocess died. None = need more data."""
        limit = min(len(buf), stop + BLOCK_BYTES)
        m = LINE_START_RE.search(buf, stop, limit)
        if m is None and limit == len(buf) and not eof and start > 0:
            return None
        end = m.start() if m else limit
        text = buf[start:end].decode("utf-8", "replace")
        if b"Subprocess for shard" in buf[stop:end]:
            dump_at = buf.rfind(DUMP_START, max(0, start - BLOCK_BYTES), start)
            if dump_at >= 0:
                dump_end = buf.find(b"\n", buf.find(DUMP_END, dump_at, start) + 1, start)
                dump = buf[dump_at:dump_end if dump_end > 0 else start].decode("utf-8", "replace")
                text = dump.rstrip() + "\n" + text
        return text

    def _timestamp(self, line: bytes) -> float | None:
        m = PREFIX_RE.match(line, 1 if line[:1] == b" " else 0)
        date, clock, frac = (m["date"], m["time"], m["frac"]) if m["date"] else (m["gdate"], m["gtime"], m["gfrac"])
        if date is not None:
            key = date + b" " + clock
            secs = self.date_cache.get(key)
            if secs is None:
                d = date.replace(b"-", b"")
                secs = float(calendar.timegm((int(d[:4]), int(d[4:6]), int(d[6:8]),
                                              int(clock[:2]), int(clock[3:5]), int(clock[6:8]))))
                self.date_cache[key] = secs
                self.day = secs - secs % 86400
            ts = secs + (int(frac) / 10 ** len(frac) if frac else 0.0)
        elif m["clock"] is not None:
            c = m["clock"]
            ts = self.day + int(c[:2]) * 3600 + int(c[3:5]) * 60 + int(c[6:8])
            if self.last_ts is not None and ts < self.last_ts - 43200:  # past midnight
                self.day += 86400
                ts += 86400
        else:
            return self.last_ts
        self.last_ts = ts
        return ts


def _number_lines(path: Path, crashes: list) -> None:
    """Crash byte offsets (set by the scan) -> 1-based line numbers, in one streaming pass."""
    todo = sorted((c.line, i) for i, c in enumerate(crashes) if c.line is not None)
    if not todo:
        return
    with open(path, "rb") as fh:
        base, lines, k = 0, 1, 0
        while k < len(todo):
            data = fh.read(CHUNK_BYTES)
            if not data:
                break
            while k < len(todo) and todo[k][0] < base + len(data):
                crashes[todo[k][1]].line = lines + data.count(b"\n", 0, todo[k][0] - base)
                k += 1
            lines += data.count(b"\n")
            base += len(data)


def record_ts(value) -> float | None:
    """Iris timestamps: epoch seconds or ms, {"epoch_ms": …}, {"seconds": …}, or ISO-8601 text."""
    if isinstance(value, dict):
        if "epoch_ms" in value:
            return float(value["epoch_ms"]) / 1000
        if "seconds" in value:
            return float(value["seconds"]) + float(value.get("nanos", 0)) / 1e9
        return None
    if isinstance(value, (int, float)) or (isinstance(value, str) and value.replace(".", "", 1).isdigit()):
        v = float(value)
        return v / 1000 if v > 1e11 else v
    if isinstance(value, str) and value:
        from datetime import datetime

        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def sniff(head: bytes) -> bool:
    """Log text: no NUL bytes, and an event keyword or a known line prefix near the start."""
    if b"\x00" in head:
        return False
    if EVENT_RE.search(head):
        return True
    return LINE_START_RE.search(b"\n" + head) is not None


def load(paths: list[Path], name: str) -> Evidence:
    """One Evidence from one or more log files of the same job."""
    tl = Timeline(name, str(paths[0]) if len(paths) == 1 else str(paths[0].parent))
    for path in paths:
        LogScanner(tl, str(path)).scan_file(path)
    if not tl.events:
        raise ZdebugError(f"{paths[0]}:1: no Zephyr coordinator/worker lines found (not a Zephyr log?)")
    return tl.finish()
