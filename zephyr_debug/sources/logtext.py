"""Zephyr/Iris log text -> Evidence: the timeline rebuilt from coordinator and worker lines.

Every event line holds one of a few keywords after a space (`KEYWORDS`). Files of 8 MiB and
more are searched for them by GNU grep (`-F`: one pass for all strings); otherwise, or without
grep, by one compiled regex over 1 MiB buffers (a literal prefix, so the scan runs in C). Only
the lines hit are parsed (prefix, then the message regexes in `MESSAGES`). Any line
prefix is accepted: Python logging, glog-like, Iris `[hh:mm:ss] task=… |`, or none. Tracebacks
and faulthandler dumps (untimestamped) are read after / before the error line that names them.
Memory stays bounded: one reused buffer of `CHUNK_BYTES` per process; hits are folded as they are
found (grep's output is read as it comes); large files are split into line-aligned ranges scanned
by several processes, a few ranges ahead of the fold, and their hits folded in order.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime
from itertools import pairwise
from pathlib import Path

from zephyr_debug import zephyrlog
from zephyr_debug.errors import EvidenceError
from zephyr_debug.model import Evidence
from zephyr_debug.sources import densefold, denseparse
from zephyr_debug.sources.denseparse import DenseRows
from zephyr_debug.sources.timeline import Timeline

CHUNK_BYTES = 1 << 20  # small enough for the CPU cache: the regex pass and line look-ups stay hot
MAX_LINE_BYTES = 1 << 20  # a longer line is skipped and counted (a 2 GB line of junk is no evidence)
GREP_MIN_BYTES = 8 << 20  # larger files are searched by grep (-F, many strings) when it is installed
PARALLEL_MIN_BYTES = 64 << 20  # larger files are scanned in line-aligned ranges by several processes
MAX_PROCESSES = 4
RANGES_PER_PROCESS = 4  # a large file's ranges per scanning process (the fold holds a few at a time)
SPAM_SAMPLE_BYTES = 4 << 20
SPAM_SHARE = 0.2
BLOCK_BYTES = 256 << 10  # most text kept after an error line (traceback) or before it (dump)
SNIFF_BYTES = 64 << 10
SNIFF_LONG_BYTES = 8 << 10  # a line longer than this at the sniff window's end is skipped, not sniffed
SNIFF_SKIPS = 4
DENSE_SHARE = 0.2  # a file whose first DENSE_SAMPLE_BYTES are this share status/Executing/done lines is read in bulk
DENSE_SAMPLE_BYTES = 4 << 20
DENSE_CHUNK_BYTES = 4 << 20  # text parsed per bulk split
DENSE_RANGE_BYTES = 32 << 20  # a large dense file's share per scanning process task
DENSE_WORDS = (b" complete, ", b"Executing stage ", b" done in ")  # what the bulk pattern's lines hold

# Words that every event line carries after a space (zephyrlog's routing keywords). Common prefix " " -> fast C scan.
KEYWORDS = list(dict.fromkeys(m.keyword for m in zephyrlog.MESSAGES))
_WORDS = b"|".join(re.escape(k) for k in KEYWORDS)
EVENT_RE = re.compile(b" (?:" + _WORDS + b")")
# Bare messages (no prefix: pasted text, `print`ed lines) start a line with their keyword. Their
# files are scanned with this slower pattern (no literal to search for); others keep EVENT_RE.
BARE_EVENT_RE = re.compile(b'(?:^|(?<=[\n"])| )(?:' + _WORDS + b")")  # also a JSON string's start
BARE_START_RE = re.compile(b'(?:^|[\n"])(?:' + _WORDS + b")")
SPAM = b"pull_task"
LINE_START_RE = zephyrlog.LINE_START_RE

ALL = tuple((m.name, m.regex) for m in zephyrlog.MESSAGES)
SIGNATURES = tuple(m.signature for m in zephyrlog.MESSAGES if m.signature)
# Which messages a line can be, by the first keyword on it (then the rest, in reading order).
BY_KEYWORD = {k: tuple((m.name, m.regex) for m in zephyrlog.MESSAGES if m.keyword == k) for k in KEYWORDS}
ROUTES = {b" " + k: v + tuple(r for r in ALL if r not in v) for k, v in BY_KEYWORD.items()}
# Lines whose untimestamped continuation (traceback) belongs to them: keyword -> marker in the line.
BLOCK_KEYS = {b" Worker ": b" error on shard ", b" method 'run_pipeline' failed": b"failed: "}
DUMP_START, DUMP_END = b"Fatal Python error", b"Extension modules:"


Hit = tuple  # (file offset, newlines before it in its range, keyword, line bytes, block bytes | None)


def _hits(buf, cut: int, pos: int, read, lines: list[int], rx: re.Pattern[bytes] = EVENT_RE) -> Iterator[Hit]:
    """The event lines of buf[:cut] (at file offset `pos`, after `lines[0]` newlines); adds the
    buffer's newlines to `lines[0]`."""
    last_line, counted = -1, 0
    for m in rx.finditer(buf, 0, cut):
        start = buf.rfind(b"\n", 0, m.start()) + 1
        if start == last_line:
            continue
        last_line = start
        stop = buf.find(b"\n", m.end(), cut)
        stop = cut if stop < 0 else stop
        lines[0] += buf.count(b"\n", counted, start)
        counted = start
        kw = m.group()
        yield _hit(read, pos + start, lines[0], kw if kw[:1] == b" " else b" " + kw, bytes(buf[start:stop]))
    lines[0] += buf.count(b"\n", counted, cut)


def _hit(read, offset: int, before: int, kw: bytes, line: bytes) -> Hit:
    block = _block(read, offset, offset + len(line), line) if kw in BLOCK_KEYS and BLOCK_KEYS[kw] in line else None
    return offset, before, kw, line, block


class GrepFailed(Exception):
    """grep could not be run or stopped with an error."""


def grep_hits(path: str) -> Iterator[Hit]:
    """The event lines found by GNU grep's multi-string search (`-F`, several times faster than a
    regex pass in Python), as grep prints them; GrepFailed when grep is missing or fails."""
    binary = shutil.which("grep")
    if binary is None:
        raise GrepFailed(path)
    args = [binary, "-a", "-n", "-b", "-F", "--color=never"] + [a for k in KEYWORDS for a in ("-e", " " + k.decode())]
    try:
        with (
            open(path, "rb", buffering=0) as fh,
            subprocess.Popen(
                [*args, "--", path],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "LC_ALL": "C"},
                bufsize=1 << 20,
            ) as proc,
        ):
            read, search = _reader(fh.fileno()), EVENT_RE.search
            assert proc.stdout is not None  # stdout=PIPE
            while raw := proc.stdout.readline(MAX_LINE_BYTES):
                number, offset, line = raw.split(b":", 2)
                if raw[-1:] != b"\n" and len(raw) >= MAX_LINE_BYTES:  # a longer line: skipped, counted
                    while (more := proc.stdout.readline(MAX_LINE_BYTES)) and more[-1:] != b"\n":
                        pass
                    yield int(offset), int(number) - 1, b"", b"", None
                    continue
                line = line[:-1] if line[-1:] == b"\n" else line
                hit = search(line)
                if hit is None:  # grep -F matched a keyword the regex needs a space before
                    continue
                kw = hit.group()
                if kw in BLOCK_KEYS:
                    yield _hit(read, int(offset), int(number) - 1, kw, line)
                else:
                    yield int(offset), int(number) - 1, kw, line, None
    except (OSError, ValueError, AttributeError) as exc:
        raise GrepFailed(path) from exc
    if proc.returncode not in (0, 1):
        raise GrepFailed(path)


def _reader(fd: int, limit: int | None = None):
    """`read(offset, size)` on an open file, for the text around a hit (tracebacks, dumps); with
    `limit`, nothing at or past that offset (a growing file's incomplete last line)."""
    if limit is None:
        return lambda offset, size: os.pread(fd, size, offset)
    return lambda offset, size: os.pread(fd, max(0, min(size, limit - offset)), offset)


def _block(read, start: int, stop: int, line: bytes) -> bytes:
    """The error line plus its untimestamped continuation (traceback); when it says a subprocess
    died, the faulthandler dump printed shortly before it goes first."""
    after = read(stop, BLOCK_BYTES)
    m = LINE_START_RE.search(after)
    text = line + zephyrlog.OUTER_RE.sub(b"", after[: m.start() if m else len(after)])
    if b"Subprocess for shard" in text:
        lo = max(0, start - BLOCK_BYTES)
        before = read(lo, start - lo)
        i = before.rfind(DUMP_START)
        if i >= 0:
            j = before.find(DUMP_END, i)
            k = before.find(b"\n", j) if j >= 0 else -1
            text = before[i : k if k >= 0 else len(before)].rstrip() + b"\n" + text
    return text


def scan_range(
    path: str, start: int, end: int, chunk_bytes: int = CHUNK_BYTES, rx: re.Pattern[bytes] = EVENT_RE
) -> tuple[list[Hit], int]:
    """Event lines among the lines that begin in [start, end) (line-aligned), and its newline count."""
    lines = [0]
    hits = list(range_hits(path, start, end, lines, chunk_bytes, rx))
    return hits, lines[0]


def range_hits(
    path: str,
    start: int,
    end: int,
    lines: list[int],
    chunk_bytes: int = CHUNK_BYTES,
    rx: re.Pattern[bytes] = EVENT_RE,
    limit: int | None = None,
) -> Iterator[Hit]:
    """The event lines that begin in [start, end) as they are found; their newlines are added to
    `lines[0]`. Reads `chunk_bytes` at a time into one reused buffer, so each pass stays in cache.
    `limit`: the text around a hit stops there (`_reader`)."""
    buf = bytearray(chunk_bytes)
    with open(path, "rb", buffering=0) as fh:
        read = _reader(fh.fileno(), limit)
        fh.seek(start)
        fill, pos = 0, start
        while pos < end:
            n = fh.readinto(memoryview(buf)[fill:])
            avail = fill + n
            if avail == 0:
                break
            if pos + avail >= end or n == 0:
                cut = min(avail, end - pos)
            else:
                cut = buf.rfind(b"\n", 0, avail) + 1
                if cut == 0 and avail < MAX_LINE_BYTES:  # a line longer than the buffer
                    fill = avail
                    buf.extend(bytes(len(buf)))
                    continue
                if cut == 0:  # longer than MAX_LINE_BYTES: skipped whole (a `cut` hit says so), never held
                    after = _line_end(fh, pos + avail)
                    yield pos, lines[0], b"", b"", None
                    lines[0] += 1
                    fh.seek(after)
                    fill, pos = 0, after
                    continue
            yield from _hits(buf, cut, pos, read, lines, rx)
            buf[: avail - cut] = buf[cut:avail]
            fill, pos = avail - cut, pos + cut


def _line_end(fh, at: int) -> int:
    """The offset after the next newline at or past `at` (the file's end when there is none)."""
    fh.seek(at)
    while chunk := fh.read(CHUNK_BYTES):
        k = chunk.find(b"\n")
        if k >= 0:
            return at + k + 1
        at += len(chunk)
    return at


def _ranges(path: Path, parts: int) -> list[tuple[int, int]]:
    """`parts` line-aligned byte ranges covering the file."""
    size = path.stat().st_size
    bounds = [0]
    with open(path, "rb") as fh:
        for k in range(1, parts):  # after the next newline (a line of any length never held)
            bounds.append(max(_line_end(fh, size * k // parts), bounds[-1]))
    bounds.append(size)
    return [(a, b) for a, b in pairwise(bounds) if b > a]


def _python_scan(
    path: Path, size: int, processes: int | None, rx: re.Pattern[bytes] = EVENT_RE
) -> Iterator[tuple[Iterable[Hit], list[int]]]:
    """(hits, [newline count]) per line-aligned range, in file order. One process streams the
    file; a large one is split into ranges scanned by several processes, a few ahead of the fold."""
    procs = processes or (min(os.cpu_count() or 1, MAX_PROCESSES) if size >= PARALLEL_MIN_BYTES else 1)
    if procs < 2:
        lines = [0]
        yield range_hits(str(path), 0, size, lines, CHUNK_BYTES, rx), lines
        return
    ranges = [(str(path), a, b, CHUNK_BYTES, rx) for a, b in _ranges(path, procs * RANGES_PER_PROCESS)]
    for hits, count in _in_order(scan_range, ranges, procs):
        yield hits, [count]


def _in_order(task: Callable, jobs: list[tuple], procs: int) -> Iterator:
    """`task(*job)` for every job in `procs` forked processes; the results in job order, at most
    two jobs per process ahead of the caller."""
    waiting = deque(jobs)
    with ProcessPoolExecutor(procs, mp_context=multiprocessing.get_context("fork")) as pool:
        ahead = deque(pool.submit(task, *waiting.popleft()) for _ in range(min(2 * procs, len(waiting))))
        while ahead:
            result = ahead.popleft().result()
            if waiting:
                ahead.append(pool.submit(task, *waiting.popleft()))
            yield result


def dense_chunks(
    path: str, start: int, end: int, chunk_bytes: int = DENSE_CHUNK_BYTES, limit: int | None = None
) -> Iterator[DenseRows]:
    """The lines that begin in [start, end) (line-aligned), parsed in bulk a chunk at a time
    (`limit`: the text around a hit stops there)."""
    with open(path, "rb", buffering=0) as fh:
        fd = fh.fileno()
        read, pos, before = _reader(fd, limit), start, 0
        while pos < end:
            buf = os.pread(fd, min(chunk_bytes, end - pos), pos)
            if not buf:
                break
            if pos + len(buf) < end:
                cut = buf.rfind(b"\n") + 1
                if cut == 0 and len(buf) < MAX_LINE_BYTES:  # a line longer than the chunk
                    chunk_bytes *= 2
                    continue
                if cut == 0:  # longer than MAX_LINE_BYTES: skipped whole, counted
                    rows = denseparse.parse(b"", pos, before, _hits, read)
                    rows.lines, rows.long_lines = 1, 1
                    before += 1
                    pos = _line_end(fh, pos + len(buf))
                    yield rows
                    continue
                buf = buf[:cut]
            rows = denseparse.parse(buf, pos, before, _hits, read)
            before += rows.lines
            pos += len(buf)
            yield rows


def dense_range(path: str, start: int, end: int) -> list[DenseRows]:
    """Every chunk of `dense_chunks` (a scanning process's task)."""
    return list(dense_chunks(path, start, end))


def is_bare(path: Path) -> bool:
    """Whether the file's head holds messages with no prefix (the slower pattern finds them)."""
    with open(path, "rb") as fh:
        return BARE_START_RE.search(sniff_head(fh)) is not None


def _is_dense(path: Path) -> bool:
    """Whether the file's first lines are mostly status / Executing / done lines."""
    with open(path, "rb") as fh:
        head = fh.read(DENSE_SAMPLE_BYTES)
    return sum(head.count(w) for w in DENSE_WORDS) >= DENSE_SHARE * max(head.count(b"\n"), 1)


def _dense_scan(path: Path, size: int) -> Iterator[DenseRows]:
    """Bulk-parsed chunks in file order, with each chunk's line numbers counted from the file's
    start; a large file is parsed in ranges by several processes, a few ranges ahead of the fold."""
    procs = min(os.cpu_count() or 1, MAX_PROCESSES) if size >= PARALLEL_MIN_BYTES else 1
    if procs < 2:
        yield from dense_chunks(str(path), 0, size)
        return
    ranges = [(str(path), a, b) for a, b in _ranges(path, max(procs, -(-size // DENSE_RANGE_BYTES)))]
    base = 0
    for chunks in _in_order(dense_range, ranges, procs):
        for rows in chunks:
            rows.line += base
            rows.slow = [(o, before + base, *rest) for o, before, *rest in rows.slow]
            yield rows
        base += sum(rows.lines for rows in chunks)


class LogScanner:
    """Feeds one Timeline from log text: a file (in parallel ranges when large), or records."""

    def __init__(self, timeline: Timeline, source: str, dense: bool = True):
        self.tl, self.source, self.dense = timeline, source, dense
        self.date_cache: dict[bytes, tuple[float, float]] = {}  # `date clock` -> (epoch, its date's day)
        self.midnights: dict[tuple, float | None] = {}  # (year, month, day, zone) -> its midnight's epoch
        self.day = 0.0  # date of the last dated line, for Iris clock-only prefixes
        self.year_guessed = False
        self.long_lines = 0  # lines over MAX_LINE_BYTES, skipped
        self.last_ts: float | None = None
        self.stamps: dict[int, float] = {}
        self.records = False

    def scan_file(self, path: Path, processes: int | None = None) -> None:
        """Large files go to grep when there is one (`processes` forces the Python scan)."""
        size = path.stat().st_size
        bare = is_bare(path)
        if not bare and self.dense and processes is None and _is_dense(path):
            for rows in _dense_scan(path, size):
                self._dense(rows)
        elif bare or not (processes is None and size >= GREP_MIN_BYTES and self._grep(path)):
            base = 0  # messages with no prefix (`bare`): only the slower pattern finds them
            for hits, lines in _python_scan(path, size, processes, BARE_EVENT_RE if bare else EVENT_RE):
                self._hits(hits, base)
                base += lines[0]
        self.notes(path, size)

    def scan_range(self, path: Path, start: int, end: int, base: int, bare: bool, limit: int) -> int:
        """The lines that begin in [start, end) (line-aligned), `base` newlines before `start`, as
        `scan_file` folds them, reading nothing at or past `limit` (a growing log: `follow`);
        returns their newline count."""
        if not bare and self.dense:
            lines = 0
            for rows in dense_chunks(str(path), start, end, limit=limit):
                rows.line += base
                rows.slow = [(o, before + base, *rest) for o, before, *rest in rows.slow]
                lines += rows.lines
                self._dense(rows)
            return lines
        count = [0]
        rx = BARE_EVENT_RE if bare else EVENT_RE
        self._hits(range_hits(str(path), start, end, count, CHUNK_BYTES, rx, limit), base)
        return count[0]

    def notes(self, path: Path, size: int) -> None:
        """What the scan of `path` (now `size` bytes) could not use, for the timeline's warnings."""
        if self.long_lines:
            self.tl.notes.append(
                f"{path.name}: skipped {self.long_lines} line(s) of more than {MAX_LINE_BYTES >> 20} MiB"
            )
        self._spam(path, size)

    def _hits(self, hits: Iterable[Hit], base: int) -> None:
        for offset, before, kw, line, block in hits:
            if kw:
                self._line(line, kw, base + before + 1, block, offset)
            else:
                self.long_lines += 1

    def _dense(self, rows: DenseRows) -> None:
        """Folds one bulk-parsed chunk: each run of dense rows, then the event line after it."""
        source = self.source
        self.long_lines += rows.long_lines
        lo = 0
        for (offset, before, kw, line, block), at in zip(rows.slow, rows.slow_at.tolist(), strict=True):
            self._fold(rows, lo, at, source)
            lo = at
            self._line(line, kw, before + 1, block, offset)
        self._fold(rows, lo, len(rows), source)

    def _fold(self, rows: DenseRows, lo: int, hi: int, source: str) -> None:
        if hi > lo:
            densefold.fold(self.tl, rows, lo, hi, source)
            self.last_ts, self.day = float(rows.ts[hi - 1]), float(rows.day[hi - 1])

    def _grep(self, path: Path) -> bool:
        """Folds grep's hits as they come; False when grep could not run (nothing folded)."""
        line_no = 0
        try:
            for offset, before, kw, line, block in grep_hits(str(path)):
                line_no = before + 1
                if kw:
                    self._line(line, kw, line_no, block, offset)
                else:
                    self.long_lines += 1
        except GrepFailed:
            if line_no:
                raise EvidenceError(f"{path}:{line_no}: grep stopped with an error after this line") from None
            return False
        return True

    def scan_records(self, records: Iterable[tuple[float | None, str]]) -> None:
        """(timestamp or None, text) pairs, e.g. Iris get-task-logs entries; each line gets a
        leading space so that messages without any prefix are found too."""
        buf = bytearray()
        self.stamps, self.records = {}, True
        for ts, text in records:
            for i, part in enumerate(str(text).split("\n")):
                if ts is not None and i == 0:
                    self.stamps[len(buf)] = ts
                buf += b" " + part.encode("utf-8", "replace") + b"\n"
        data = bytes(buf)
        for offset, _, kw, line, block in _hits(
            data, len(data), 0, lambda offset, size: data[offset : offset + size], [0]
        ):
            self._line(line, kw, None, block, offset)
        self.stamps, self.records = {}, False

    def _spam(self, path: Path, size: int) -> None:
        """pull_task share of the file's last SPAM_SAMPLE_BYTES (what a line-limited tail shows)."""
        with open(path, "rb") as fh:  # up to `size`: a growing log's incomplete line is not read yet
            start = max(0, size - SPAM_SAMPLE_BYTES)
            fh.seek(start)
            tail = fh.read(size - start)
        lines = tail.count(b"\n") or 1
        spam = tail.count(SPAM)
        if spam >= SPAM_SHARE * lines:
            self.tl.notes.append(
                f"{path.name}: {spam * 100 // lines}% of the last {lines} lines are pull_task "
                "spam; a line-limited log window may hold no progress lines"
            )

    def _line(self, line: bytes, kw: bytes, line_no: int | None, block: bytes | None, offset: int) -> None:
        first = line[:1]
        if first == b"{" or (first in b" \t" and line.lstrip()[:1] == b"{"):
            self._json_line(line)
            return
        for name, rx in ROUTES.get(kw, ALL):
            m = rx.search(line)
            if m is None:
                continue
            ts = self.stamps.get(offset) if self.stamps else None
            if ts is None:
                seen = (
                    self.date_cache.get(line[:19])
                    if line[19:20] == b"," and line[23:24] == b" " and line[20:23].isdigit()
                    else None
                )
                if seen is not None:  # Python logging's `2026-12-02 21:59:16,743 ` of a second already seen
                    secs, self.day = seen
                    ts = self.last_ts = secs + int(line[20:23]) / 1000
                else:
                    ts = self._timestamp(line[: m.start()])
            groups = {k: v.decode("utf-8", "replace") for k, v in m.groupdict().items() if v is not None}
            text = block.decode("utf-8", "replace") if block is not None else None
            if text is not None and self.records:  # drop the space each record line was given
                text = "\n".join(part[1:] if part[:1] == " " else part for part in text.split("\n"))
            self.tl.event(name, ts, groups, self.source, line_no, text)
            return
        if any(sig in line for sig in SIGNATURES):
            self.tl.bad += 1

    def _json_line(self, line: bytes) -> None:
        got = json_record(line)
        if got is None:
            self.tl.bad += 1
            return
        LogScanner(self.tl, self.source).scan_records([got])

    def _timestamp(self, prefix: bytes) -> float | None:
        """The time of a line from the text before its message (zephyrlog.PREFIXES: any form, any
        junk around it); a line without one takes the newest time before it, and a coarse time no
        earlier than a finer one before it that falls in its span (a log whose prefix turns from
        Python logging's milliseconds to glog's whole seconds once a library sets its handler)."""
        t = zephyrlog.prefix_time(prefix)
        if t is None:
            return self.last_ts
        if t.month is not None and t.day is not None:
            year = t.year
            if year is None:  # glog / journald: the year of the evidence's dated lines
                year = time.gmtime(self.day).tm_year if self.day else time.gmtime().tm_year
                if not self.day and not self.year_guessed:
                    self.year_guessed = True
                    self.tl.notes.append(f"{Path(self.source).name}: line times carry no year; read as {year}")
            key = (year, t.month, t.day, t.zone)
            midnight = self.midnights.get(key)
            if midnight is None:
                midnight = self.midnights[key] = zephyrlog.midnight(year, t.month, t.day, t.zone)
            if midnight is None:  # month 13, day 45: not a timestamp after all
                return self.last_ts
            self.day = midnight
            ts = midnight + t.clock
            if prefix[19:20] == b"," and t.zone is None:  # Python logging's: the next line of this second is a look-up
                secs = int(t.clock)
                stamp = b"%04d-%02d-%02d %02d:%02d:%02d" % (
                    year,
                    t.month,
                    t.day,
                    secs // 3600,
                    secs // 60 % 60,
                    secs % 60,
                )
                if prefix[:19] == stamp:
                    self.date_cache[stamp] = (midnight + secs, midnight)
        else:
            ts = self.day + t.clock
            if self.last_ts is not None and ts < self.last_ts - 43200:  # past midnight
                self.day += 86400
                ts += 86400
        if t.step >= zephyrlog.COARSEST_S and self.last_ts is not None and ts < self.last_ts < ts + t.step:
            ts = self.last_ts  # a whole-second time after a finer one within its second: written after it
        self.last_ts = ts
        return ts


# A log record's text and time, by the export that wrote it: Iris (`data`), Cloud Logging
# (`textPayload` / `jsonPayload.message`, `timestamp`), journald (`MESSAGE`, `__REALTIME_TIMESTAMP`
# in microseconds), and plain `message` / `msg`.
RECORD_TEXT = ("data", "textPayload", "MESSAGE", "message", "msg", "log")
RECORD_TIME = ("timestamp", "__REALTIME_TIMESTAMP", "receiveTimestamp", "time", "ts", "asctime")


def record(rec: object) -> tuple[float | None, str] | None:
    """(time, text) of one JSON log record, or None when it holds no text."""
    if not isinstance(rec, dict):
        return None
    payload = rec.get("jsonPayload")
    text = next((rec[k] for k in RECORD_TEXT if isinstance(rec.get(k), str)), None)
    if text is None and isinstance(payload, dict):
        text = next((payload[k] for k in ("message", "msg") if isinstance(payload.get(k), str)), None)
    if text is None:
        return None
    stamp = next((rec[k] for k in RECORD_TIME if rec.get(k) is not None), None)
    try:
        return record_ts(stamp), text
    except (ValueError, TypeError, OverflowError):
        return None, text


def json_record(line: bytes | str) -> tuple[float | None, str] | None:
    """The log record one JSON line holds, or None (not JSON, or no record)."""
    try:
        return record(json.loads(line))
    except (ValueError, RecursionError):
        return None


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
        return v / 1e6 if v > 1e14 else v / 1000 if v > 1e11 else v  # µs (journald), ms, s
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def sniff_head(fh) -> bytes:
    """Up to SNIFF_BYTES of the file's first lines for sniffing; a long line (junk, an embedded
    blob) where the window ends is skipped whole so the lines after it are sniffed too."""
    kept = bytearray()
    for _ in range(SNIFF_SKIPS):
        want = SNIFF_BYTES - len(kept)
        data = fh.read(want)
        cut = data.rfind(b"\n") + 1
        if len(data) < want or len(data) - cut <= SNIFF_LONG_BYTES:
            kept += data
            break
        kept += data[:cut]
        fh.seek(_line_end(fh, fh.tell()))
    return bytes(kept)


def sniff(head: bytes) -> bool:
    """Log text: no NUL bytes, and an event keyword or a known line prefix near the start."""
    if b"\x00" in head:
        return False
    if EVENT_RE.search(head):
        return True
    return LINE_START_RE.search(b"\n" + head) is not None


def load(paths: list[Path], name: str, dense: bool = True) -> Evidence:
    """One Evidence from one or more log files of the same job (`dense`: the bulk path for event lines)."""
    tl = Timeline(name, str(paths[0]) if len(paths) == 1 else str(paths[0].parent))
    for path in paths:
        LogScanner(tl, str(path), dense).scan_file(path)
    if not tl.events:
        raise EvidenceError(f"{paths[0]}:1: no Zephyr coordinator/worker lines found (not a Zephyr log?)")
    _release_freed()
    return tl.finish()


def _release_freed() -> None:
    """Hands the heap the scan freed (parsed chunks) back to the OS before the frames are built:
    glibc keeps freed blocks below its grown mmap threshold (~170 MB of a 1 GiB log)."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to do
        ctypes.CDLL("libc.so.6").malloc_trim(0)
