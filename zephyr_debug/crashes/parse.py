"""Split any text (a log, a crash file, stdin) into crash reports, streaming.

Recognises Python tracebacks (chained exceptions, exception groups), faulthandler dumps
(`Fatal Python error:` / `Current thread 0x… (most recent call first):`, other threads,
`Extension modules: … (total: N)`), Zephyr's SIGKILL MemoryError / exit-code RuntimeError
messages and infra requeue lines. Log prefixes (Python logging, glog-like, Iris) are stripped;
the last `Executing stage S shard N (attempt A)` / `Worker W error on shard N` line gives the
shard, attempt and worker. Memory is bounded: a report keeps at most MAX_REPORT_LINES lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from zephyr_debug import zephyrlog
from zephyr_debug.model import Crash

MAX_LINE = 16_384  # longer lines are cut
MAX_REPORT_LINES = 2_000  # a report keeps its first lines only
MAX_MESSAGE_LINES = 50  # continuation lines of a multi-line exception message

# A new log record (Python logging, glog-like) and Iris' `job logs` prefix (raw output follows).
RECORD = zephyrlog.RECORD_RE
IRIS = zephyrlog.IRIS_PREFIX_RE
TRACEBACK_START = re.compile(r"^(?:\s*\+ )?(?:Exception Group )?Traceback \(most recent call last\):")
FAULT_START = re.compile(
    r"^(?:Fatal Python error: |(?:Current thread|Thread) 0x[0-9a-fA-F]+ |Stack \(most recent call first\))"
)
FAULT_BODY = re.compile(
    r"^(?:$|\s+File \"|\s+<no Python frame>|\s+\.\.\.|\s+Garbage-collecting|Current thread |Thread 0x|"
    r"Stack \(most|<Cannot show|Python runtime state:|Fatal Python error:)"
)
# A traceback frame line with no `Traceback (most recent call last):` above it (a paste, a
# chained part cut from its header): the report starts here, the header is put back.
HEADLESS_FRAME = re.compile(r'^  File "[^"]+", line \d+, in ')
HEADER = "Traceback (most recent call last):"
# An exception line on its own (`KeyError: 'user_id'`): a crash only in an input holding no report.
BARE_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning|Invalid|Iteration|Timeout|Fault)"
    r"(?::(?: .*)?)?$"
)
MAX_BARE_INPUT = 20  # non-blank lines of an input whose bare exception lines are crashes
CHAIN = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
EXECUTING = re.compile(zephyrlog.EXECUTING.pattern.decode())
WORKER_ERROR = re.compile(zephyrlog.WORKER_ERROR.pattern.decode())


def _one_line(fmt: str, shard_group: str) -> str:
    """A regex for one of Zephyr's subprocess-runner errors, from its format (up to ` (` or `;`)."""
    head = re.escape(re.split(r" \(|;", fmt, maxsplit=1)[0])
    return head.replace(r"\{shard\}", rf"(?P<{shard_group}>\d+)").replace(r"\{code\}", r"-?\d+")


# Zephyr's SIGKILL MemoryError / exit-code RuntimeError, with or without the exception type.
ZEPHYR_ONE_LINE = re.compile(
    rf"(?P<type>(?:MemoryError|RuntimeError): )?(?:{_one_line(zephyrlog.OOM_ERROR, 'shard')}|"
    rf"{_one_line(zephyrlog.EXIT_ERROR, 'shard2')})[^\n]*"
)
# A line holding none of these cannot start a report nor name a shard: skipped without a regex.
TRIGGERS = (
    "Traceback (",
    "Fatal Python error",
    "thread 0x",
    "Thread 0x",
    "Stack (most",
    "Subprocess for shard",
    "due to infra failure",
    "Executing stage",
    "error on shard",
    'File "',
)
INFRA_REQUEUE = re.compile(
    zephyrlog.INFRA_REQUEUE.pattern.decode().split(" due to infra failure")[0] + r" due to infra failure[^\n]*"
)


@dataclass
class Stats:
    """What the splitter saw: lines read, lines skipped (binary / garbage), lines cut."""

    lines: int = 0
    skipped: int = 0
    truncated: int = 0
    reports: int = 0
    records: int = 0  # lines that look like log records (prefix times, Iris' prefix)


@dataclass
class _Open:
    kind: str  # traceback | fault
    line: int
    lines: list[str]
    state: str  # frames | exception | chain (traceback); body (fault)
    group: bool = False  # an exception group (indented, no exception line of its own)
    pending_blank: int = 0
    message_lines: int = 0
    restated: bool = False  # follows Zephyr's abort `Last error:`: a failure already reported


class _Context:
    """What the log said last about the shard being run, and when (the last record line, parsed
    only when a crash needs its time)."""

    def __init__(self) -> None:
        self.worker: str | None = None
        self.stage: str | None = None
        self.shard: int | None = None
        self.attempt: int | None = None
        self.record: str | None = None
        self._parsed: tuple[str | None, float | None] = (None, None)

    @property
    def ts(self) -> float | None:
        if self._parsed[0] is not self.record:
            ts = record_ts(RECORD.match(self.record or ""))
            self._parsed = (self.record, ts if ts is not None else self._parsed[1])
        return self._parsed[1]

    def see(self, message: str) -> None:
        if "Executing stage" in message and (m := EXECUTING.search(message)):
            self.worker, self.stage = m["worker"], m["stage"]
            self.shard, self.attempt = int(m["shard"]), int(m["attempt"])
        elif (
            "error on shard" in message
            and (m := WORKER_ERROR.search(message))
            and (int(m["shard"]) != self.shard or m["worker"] != self.worker)
        ):
            self.worker, self.shard, self.attempt = m["worker"], int(m["shard"]), None


def decode_lines(raw: Iterable[bytes], stats: Stats) -> Iterator[str]:
    """Binary lines to text: NUL bytes or mostly undecodable lines are skipped and counted."""
    n = 0
    try:
        for n, data in enumerate(raw, 1):  # noqa: B007 (`n` is read in `finally`)
            if len(data) > MAX_LINE:
                data = data[:MAX_LINE]
                stats.truncated += 1
            if b"\x00" in data:
                stats.skipped += 1
                continue
            text = data.decode("utf-8", "replace").rstrip("\r\n")
            if "\ufffd" in text and text.count("\ufffd") * 4 > len(text):
                stats.skipped += 1
                continue
            yield text
    finally:
        stats.lines += n


def split(lines: Iterable[str], source: str, stats: Stats | None = None) -> Iterator[Crash]:
    """Crash reports found in `lines` (already decoded), each with its 1-based line number."""
    stats = stats if stats is not None else Stats()
    ctx = _Context()
    cur: _Open | None = None
    prev = ""
    found = stats.reports
    bare: list[tuple[int, str]] | None = []  # bare exception lines of a short input (None: too long)
    for lineno, line in enumerate(lines, 1):
        if cur is None and not any(t in line for t in TRIGGERS):  # most lines: nothing to do
            if line[4:5] == "-" or line[1:9].isdigit():
                ctx.record = line
                stats.records += line[:4].isdigit() or line[1:9].isdigit()
            elif bare is not None and line.strip():
                bare = bare if len(bare) < MAX_BARE_INPUT and lineno <= 4 * MAX_BARE_INPUT else None
                if bare is not None and BARE_EXCEPTION.match(line.strip()):
                    bare.append((lineno, line.strip()))
            prev = line
            continue
        record = None
        if line[:1].isdigit() or line[:1] in ("I", "W", "E", "F"):
            record = RECORD.match(line)
        elif line.startswith("[") and (m := IRIS.match(line)):
            line = line[m.end() :]
            stats.records += 1
        if cur is not None:
            if record is None and _feed(cur, line):
                prev = line
                continue
            if not cur.restated:
                yield _close(cur, source, ctx, stats)
            cur = None
        if record is not None:
            ctx.record = line
            stats.records += 1
            line = record["message"]
            ctx.see(line)
        if TRACEBACK_START.match(line):
            cur = _Open(
                "traceback",
                lineno,
                [line],
                "frames",
                group=line[0] != "T",
                restated=prev.rstrip().endswith("Last error:"),
            )
        elif FAULT_START.match(line):
            cur = _Open("fault", lineno, [line], "body")
        elif HEADLESS_FRAME.match(line):
            cur = _Open("traceback", lineno, [HEADER, line], "frames")
        elif "Subprocess for shard" in line and (m := ZEPHYR_ONE_LINE.search(line)):
            text = (
                m.group(0) if m["type"] else ("MemoryError: " if "SIGKILL" in line else "RuntimeError: ") + m.group(0)
            )
            yield _crash(text, source, lineno, ctx, stats, shard=int(m["shard"] or m["shard2"]))
        elif "due to infra failure" in line and (m := INFRA_REQUEUE.search(line)):
            yield _crash(
                m.group(0), source, lineno, ctx, stats, shard=int(m["shard"]), worker=m["worker"], kind="infra"
            )
        prev = line
    if cur is not None and not cur.restated:
        yield _close(cur, source, ctx, stats)
    if bare and stats.reports == found:
        for lineno, line in bare:
            yield _crash(line, source, lineno, ctx, stats)


def _feed(cur: _Open, line: str) -> bool:
    """Add `line` to the open report; False when the report ended before it."""
    if cur.kind == "fault":
        if line.startswith("Extension modules:"):
            _append(cur, line)
            cur.state = "done"
            return True
        if cur.state == "done" or not FAULT_BODY.match(line):
            return False
        if not line:
            cur.pending_blank += 1
            return cur.pending_blank < 3
        _append(cur, line)
        return True
    if not line.strip():
        cur.pending_blank += 1
        return (cur.state != "frames" or cur.group) and cur.pending_blank < 3
    if line in CHAIN:
        _append(cur, line)
        cur.state = "chain"
        return True
    if cur.state == "chain":
        headless = bool(HEADLESS_FRAME.match(line))  # a chained part pasted without its header
        if headless:
            _append(cur, HEADER)
        elif not TRACEBACK_START.match(line):
            return False
        _append(cur, line)
        cur.state, cur.group = "frames", not headless and line[0] != "T"
        return True
    if cur.state == "frames":
        if line[0] in " \t|+":
            _append(cur, line)
            return True
        if cur.group:  # an exception group's traceback is indented to its last line
            return False
        _append(cur, line)  # the exception line
        cur.state = "exception"
        return True
    if (
        not cur.pending_blank
        and cur.message_lines < MAX_MESSAGE_LINES
        and not TRACEBACK_START.match(line)
        and not FAULT_START.match(line)
    ):
        cur.message_lines += 1  # a multi-line exception message
        _append(cur, line)
        return True
    return False


def _append(cur: _Open, line: str) -> None:
    if cur.pending_blank:
        cur.lines.extend([""] * cur.pending_blank)
    cur.pending_blank = 0
    if len(cur.lines) < MAX_REPORT_LINES:
        cur.lines.append(line)


def _close(cur: _Open, source: str, ctx: _Context, stats: Stats) -> Crash:
    return _crash("\n".join(cur.lines), source, cur.line, ctx, stats)


def _crash(
    text: str,
    source: str,
    lineno: int,
    ctx: _Context,
    stats: Stats,
    shard: int | None = None,
    worker: str | None = None,
    kind: str | None = None,
) -> Crash:
    stats.reports += 1
    same_shard = shard is None or shard == ctx.shard
    return Crash(
        text=text,
        source=source,
        line=lineno,
        stage=ctx.stage if same_shard else None,
        shard=shard if shard is not None else ctx.shard,
        attempt=ctx.attempt if same_shard else None,
        worker=worker or (ctx.worker if same_shard else None),
        kind=kind,
        ts=ctx.ts,
    )


def record_ts(record: re.Match | None) -> float | None:
    """Unix seconds of a log record's prefix time (zephyrlog's one time-zone rule)."""
    if record is None:
        return None
    if record["date"]:
        return zephyrlog.naive_epoch(record["date"], record["time"])
    return zephyrlog.naive_epoch(record["gdate"], record["gtime"])


def coalesce(crashes: Iterable[Crash]) -> Iterator[Crash]:
    """One crash per native crash in a log: a faulthandler dump repeated verbatim (the child's
    stderr, then the worker's error report) is kept once, and Zephyr's exit-code RuntimeError
    right after it (a traceback, or the bare one-line form) joins the dump."""
    held: Crash | None = None
    for crash in crashes:
        if held is not None:
            if crash.text == held.text:
                continue
            if _reports_exit(crash.text):
                held.text += "\n\n" + crash.text
                held.shard = held.shard if held.shard is not None else crash.shard
                held.worker, held.attempt = (
                    held.worker or crash.worker,
                    held.attempt if held.attempt is not None else crash.attempt,
                )
                yield held
                held = None
                continue
            yield held
            held = None
        if crash.text.startswith(("Fatal Python error", "Current thread", "Thread 0x")):
            held = crash
        else:
            yield crash
    if held is not None:
        yield held


def _reports_exit(text: str) -> bool:
    """Zephyr's `Subprocess for shard N exited with code C` error, as a traceback or one line."""
    return text.startswith(("Traceback", "RuntimeError: Subprocess")) and "Subprocess for shard" in text
