"""Bulk parse of the lines a long job writes for every shard (status, Executing, done).

A chunk of log text is split by `zephyrlog.DENSE_PATTERN` in one C pass: the groups of each
such line become numpy columns (`DenseRows`), and the text between them (every other line) is
searched for event lines as before (`logtext._hits`). A line the bulk parse cannot read exactly as
the per-line reader would (a date that is not one, an integer too long for int64, a duration that
is not a number) goes with the other lines, so nothing is read differently, only faster.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import repeat
from operator import is_not

import numpy as np

from zephyr_debug import zephyrlog

DENSE_RE = re.compile(zephyrlog.DENSE_PATTERN)
SLOTS = DENSE_RE.groups + 1  # re.split yields the text before each match, then its groups
G = DENSE_RE.groupindex
STATUS, EXECUTING, DONE = 0, 1, 2
# Integer columns <- (the pattern's group, the kind of line that holds it).
INTS = {
    "e_shard": ("e_shard", EXECUTING),
    "d_shard": ("d_shard", DONE),
    "attempt": ("e_attempt", EXECUTING),
    "completed": ("s_completed", STATUS),
    "total": ("s_total", STATUS),
    "in_flight": ("s_in_flight", STATUS),
    "queued": ("s_queued", STATUS),
    "alive": ("s_alive", STATUS),
    "registered": ("s_registered", STATUS),
    "dead": ("s_dead", STATUS),
    "workers": ("s_workers", STATUS),
}
MAX_DIGITS = zephyrlog.MAX_INT_DIGITS  # longer integers overflow int64: such a line is read per line
MAX_DECIMAL_DIGITS = 15  # mantissas below 2**53: one division rounds as float() does
# Which parse reads a chunk: `arrow` (densearrow: RE2 finds the lines, numpy cuts their fields;
# a chunk that is not UTF-8 goes to `re`) or `re` (this module's re.split).
ENGINE_ENV = "ZDEBUG_DENSE_PARSE"
ENGINE = os.environ.get(ENGINE_ENV, "arrow")

Hit = tuple  # logtext's (file offset, newlines before it, keyword, line bytes, block bytes | None)


@dataclass
class DenseRows:
    """One chunk's dense lines in order, as columns, and its other event lines (`slow`)."""

    kind: np.ndarray  # STATUS / EXECUTING / DONE
    ts: np.ndarray  # epoch seconds
    day: np.ndarray  # epoch of the line's date at 00:00 (the per-line reader's `day`)
    line: np.ndarray  # newlines before the line in its range
    worker: np.ndarray  # codes into `words` (-1: none)
    stage: np.ndarray
    exec: np.ndarray
    ints: dict[str, np.ndarray]  # -1: the line has no such count
    secs: np.ndarray  # a done line's duration
    items: np.ndarray  # a status line's items= (NaN: none)
    size: np.ndarray  # its bytes_processed= (NaN: none)
    words: list[str]
    slow: list[Hit] = field(default_factory=list)  # other event lines (put in line order)
    lines: int = 0  # newlines in the chunk
    long_lines: int = 0  # lines over logtext.MAX_LINE_BYTES, skipped
    slow_at: np.ndarray = field(init=False)  # dense rows before each of `slow` (derived)

    def __post_init__(self) -> None:
        self.slow.sort(key=lambda h: h[1])
        self.slow_at = np.searchsorted(self.line, np.array([h[1] for h in self.slow], np.int64))

    def __len__(self) -> int:
        return len(self.kind)


def parse(buf: bytes, pos: int, before: int, hits: Callable, read: Callable) -> DenseRows:
    """The lines of `buf` (whole lines at file offset `pos`, after `before` newlines of its range).
    `hits(text, cut, pos, read, [before])` finds the event lines of the text between dense ones."""
    if ENGINE == "arrow":
        from zephyr_debug.sources import densearrow  # pyarrow: imported when a dense log is read

        rows = densearrow.parse(buf, pos, before, hits, read)
        if rows is not None:
            return rows
    return parse_re(buf, pos, before, hits, read)


def parse_re(buf: bytes, pos: int, before: int, hits: Callable, read: Callable) -> DenseRows:
    """`parse` by one re.split of the chunk (the reference; any bytes)."""
    text = b"\n" + (buf[:-1] if buf.endswith(b"\n") else buf)
    parts = DENSE_RE.split(text)
    n = (len(parts) - 1) // SLOTS
    starts = np.flatnonzero(np.frombuffer(text, np.uint8) == 10)  # text offset of each line's "\n"
    between = parts[0::SLOTS]
    gaps = [i for i, p in enumerate(between) if p]
    newlines = np.zeros(n + 1, np.int64)
    newlines[gaps] = [between[i].count(b"\n") for i in gaps]
    lines_before = np.arange(n + 1) + np.cumsum(newlines) - newlines  # lines before each gap
    line = lines_before[:n] + newlines[:n]

    groups = {name: parts[i::SLOTS] for name, i in G.items()}

    def present(name: str, rows: np.ndarray | None = None) -> tuple[np.ndarray, list[bytes]]:
        """(which rows hold group `name`, its values): `rows` when as many values as rows."""
        values = list(filter(None, groups[name]))
        if rows is None or len(values) != np.count_nonzero(rows):
            rows = np.fromiter(map(is_not, groups[name], repeat(None)), bool, n)
        return rows, values

    executing, _ = present("e_shard")
    done, _ = present("d_shard")
    kind = np.full(n, STATUS, np.int8)
    kind[executing], kind[done] = EXECUTING, DONE
    rows_of = {STATUS: kind == STATUS, EXECUTING: executing, DONE: done}
    ts, day, ok = _times(groups["ts"])
    ints = {name: np.full(n, -1, np.int64) for name in INTS}
    for name, (g, where) in INTS.items():
        mask, values = present(g, rows_of[where])
        ints[name][mask], good = _ints(values)
        ok[mask] &= good
    ints["shard"] = np.maximum(ints.pop("e_shard"), ints.pop("d_shard"))
    older = ints["registered"] < 0  # the older status form: `…, 488 workers`
    ints["registered"][older] = ints.pop("workers")[older]
    secs = np.full(n, np.nan)
    secs[done], good = _decimals(present("d_secs", done)[1])
    ok[done] &= good
    words: dict = {None: -1}
    names: dict[str, int] = {}
    status = rows_of[STATUS]
    first = _codes(groups["first"], words, names)
    stage, exec_, worker = np.where(status, first, -1), np.full(n, -1, np.int32), np.where(status, -1, first)
    mask, values = present("second", status)  # `[exec] [stage]`: first is the exec
    stage[mask], exec_[mask] = _codes(values, words, names), first[mask]
    mask, values = present("e_stage", executing)
    stage[mask] = _codes(values, words, names)
    items = np.full(n, np.nan)
    mask, values = present("s_items", status)
    items[mask] = _numbers(values, zephyrlog.human_number)
    size = np.full(n, np.nan)
    mask, values = present("s_bytes", status)
    size[mask] = _numbers(values, zephyrlog.human_bytes_number)

    slow: list[Hit] = []
    for i in gaps:
        piece = between[i][1:] + b"\n"
        slow.extend(hits(piece, len(piece), pos + int(starts[lines_before[i]]), read, [before + int(lines_before[i])]))
    for j in np.flatnonzero(~ok):  # lines read per line after all
        k = int(line[j])
        end = int(starts[k + 1]) if k + 1 < len(starts) else len(text)
        piece = text[int(starts[k]) + 1 : end] + b"\n"
        slow.extend(hits(piece, len(piece), pos + int(starts[k]), read, [before + k]))
    keep = np.flatnonzero(ok)
    return DenseRows(
        kind=kind[keep],
        ts=ts[keep],
        day=day[keep],
        line=line[keep] + before,
        worker=worker[keep],
        stage=stage[keep],
        exec=exec_[keep],
        ints={k: v[keep] for k, v in ints.items()},
        secs=secs[keep],
        items=items[keep],
        size=size[keep],
        words=list(names),
        slow=slow,
        lines=len(starts) if buf.endswith(b"\n") else len(starts) - 1,
    )


def _matrix(values: list[bytes]) -> np.ndarray:
    """The byte strings as rows of a zero-padded uint8 matrix."""
    s = np.array(values, dtype=bytes) if values else np.empty(0, "S1")
    return s.view(np.uint8).reshape(len(values), s.dtype.itemsize)


def _ints(values: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(value; True where int64 holds it) of `\\d+` groups."""
    return _ints_of(_matrix(values))


def _ints_of(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_ints` of the groups as rows of a zero-padded matrix (at least MAX_DIGITS + 1 wide to tell
    a longer one)."""
    good = (u[:, MAX_DIGITS:] == 0).all(axis=1)
    v = np.zeros(len(u), np.int64)
    for c in range(min(u.shape[1], MAX_DIGITS)):
        b = u[:, c].astype(np.int64)
        v = np.where(b != 0, v * 10 + (b - 48), v)
    return v, good


def _decimals(values: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(value; True where float() reads it) of `[\\d.]+` groups."""
    return _decimals_of(_matrix(values))


def _decimals_of(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_decimals` of the groups as rows of a zero-padded matrix."""
    dot = u == 46
    digits = ((u != 0) & ~dot).sum(axis=1)
    good = (dot.sum(axis=1) <= 1) & (digits >= 1) & (digits <= MAX_DECIMAL_DIGITS)
    mantissa = np.zeros(len(u), np.int64)
    after = np.zeros(len(u), np.int64)
    seen = np.zeros(len(u), bool)
    for c in range(u.shape[1]):
        b = u[:, c].astype(np.int64)
        digit = (b != 0) & (b != 46)
        mantissa = np.where(digit, mantissa * 10 + (b - 48), mantissa)
        after += digit & seen
        seen |= b == 46
    return mantissa / np.power(10.0, after), good


def _times(values: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(epoch, day, valid) of `YYYY-MM-DD hh:mm:ss,mmm` groups, read as zephyrlog.naive_epoch does."""
    if not values:
        return np.empty(0), np.empty(0), np.empty(0, bool)
    return _times_of(np.frombuffer(np.array(values, dtype="S23").tobytes(), np.uint8).reshape(len(values), 23))


def _times_of(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`_times` of the groups as the rows of an (n, 23) uint8 matrix."""
    n = len(raw)
    if not n:
        return np.empty(0), np.empty(0), np.empty(0, bool)
    s = np.ascontiguousarray(raw).view("S23").ravel()
    u = raw.astype(np.int64) - 48

    def two(i: int) -> np.ndarray:
        return u[:, i] * 10 + u[:, i + 1]

    h, m, sec = two(11), two(14), two(17)
    sod = h * 3600 + m * 60 + sec
    ms = u[:, 20] * 100 + u[:, 21] * 10 + u[:, 22]
    ok = (h < 24) & (m < 60) & (sec < 60)
    if zephyrlog.zone() is None:  # UTC: the date's midnight plus the clock
        dates = np.ascontiguousarray(s.view(np.uint8).reshape(n, 23)[:, :10]).view("S10").ravel()
        if (dates == dates[0]).all():
            mid = np.full(n, _epoch(dates[0], b"00:00:00"))
        else:
            uniq, inv = np.unique(dates, return_inverse=True)
            mid = np.array([_epoch(d, b"00:00:00") for d in uniq])[inv]
        secs = mid + sod
    else:
        keys = np.ascontiguousarray(s.view(np.uint8).reshape(n, 23)[:, :19]).view("S19").ravel()
        uniq, inv = np.unique(keys, return_inverse=True)
        secs = np.array([_epoch(k[:10], k[11:19]) for k in uniq])[inv]
    ok &= ~np.isnan(secs)
    return secs + ms / 1000, secs - sod, ok


def _epoch(date: bytes, clock: bytes) -> float:
    value = zephyrlog.naive_epoch(date.decode(), clock.decode())
    return np.nan if value is None else value


def _codes(values: list, words: dict, names: dict[str, int]) -> np.ndarray:
    """Codes of byte strings (`words`: bytes -> code; None is -1) into `names`, their text as the
    per-line reader decodes it: byte strings that decode alike share a code."""
    for v in dict.fromkeys(values):
        if v not in words:
            words[v] = names.setdefault(v.decode("utf-8", "replace"), len(names))
    return np.fromiter(map(words.__getitem__, values), np.int32, len(values))


def _numbers(values: list[bytes], read: Callable[[str], float | None]) -> np.ndarray:
    """`values` as `read` reads their text, once per distinct value (NaN: not a number)."""
    cache: dict[bytes, float] = {}
    for v in dict.fromkeys(values):
        r = read(v.decode("utf-8", "replace"))
        cache[v] = np.nan if r is None else r
    return np.fromiter(map(cache.__getitem__, values), float, len(values))
