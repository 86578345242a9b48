"""The bulk parse of a dense chunk without a Python object per field (`denseparse.parse`'s fast path).

`denseparse.parse_re` splits a chunk by `zephyrlog.DENSE_PATTERN` with Python's `re`, which makes
a bytes object of every group of every line, then turns those lists into numpy columns. Here the
chunk's lines become one Arrow string array (zero-copy, over newline offsets), RE2's DFA tells
which lines match the pattern (no captures: `RE2_PATTERN` holds no group, so no submatch engine
runs), and the fields of those lines are cut out by numpy from where the pattern puts them:

- the prefix: the time is the line's first 23 bytes, `first` runs from the first `[` to the next `]`;
- the byte after `] ` says which alternative matched (`E`xecuting, `S`hard … done, or a status
  line's `[` / digit): the three start with different bytes;
- every `\\d+` is the run of digits that starts there (the pattern puts a non-digit after each),
  `[\\d.]+` the run of digits and dots, a bracketed name runs to the next `]`;
- an Executing line's stage (`\\S+(?: \\S+)*?`, lazy) ends at the first ` shard ` after it when
  ` shard \\d+ (attempt \\d+)` follows there (then the lazy match stops there too); else the
  line is read per line;
- a status line's optional tails (`; items=…`, `bytes_processed=…`) are checked byte by byte
  as the pattern reads them.

Each of these is checked on the bytes, not assumed from the match, and a line whose fields are
not what the checks expect goes to the per-line path with the other lines, as does a line the
columns cannot hold (`denseparse`'s rules: a bad date, an integer of 19+ digits, an odd decimal).
A chunk that is not valid UTF-8 (RE2 reads Arrow strings as UTF-8) returns None: the caller
parses it with `parse_re`. On valid UTF-8, RE2's classes read as the pattern's bytes classes do
(`\\d`, `\\w` ASCII; `[^\\]\\n]` and `\\S` never split a character, `\\S` spelled out because RE2's
`\\s` leaves out `\\v`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from zephyr_debug import zephyrlog
from zephyr_debug.sources import denseparse
from zephyr_debug.sources.denseparse import DONE, EXECUTING, STATUS, DenseRows, Hit

PAD = 128  # zero bytes after the chunk: every look-ahead past its end reads them
_POWERS = 10 ** np.arange(19, dtype=np.int64)
RUN = 20  # the longest run of digits (and dots) looked at: a longer one has more than int64's 18 digits


def _re2_pattern(pattern: bytes) -> str:
    """DENSE_PATTERN for RE2 over one line: anchored at the line's start instead of its `\\n`, no
    groups, no trailing `[^\\n]*` (it matches any rest of the line), `\\S` as Python's bytes `\\S`."""
    text = pattern.decode("ascii")
    assert text.startswith("\\n") and text.endswith("[^\\n]*"), text
    text = "^" + text[2 : -len("[^\\n]*")]
    text = re.sub(r"\(\?P<\w+>", "(?:", text)
    return text.replace("\\S", "[^\\t\\n\\v\\f\\r ]")


# What RE2 checks: the prefix, and an Executing line whole (its lazy stage is the one part not
# cut out below); a done or status line only by its first byte, then byte by byte below (the DFA
# stops as soon as a line matches: a shorter pattern reads less of each line).
_HEAD, _EXEC, _ = zephyrlog.DENSE_PATTERN.partition(b"(?:" + zephyrlog._prefixed(zephyrlog._EXECUTING, b"e_"))
assert _EXEC, "DENSE_PATTERN's alternatives start with the Executing line"
RE2_PATTERN = _re2_pattern(_HEAD + b"(?:" + zephyrlog._EXECUTING + rb"|Shard |\[|\d)[^\n]*")
UNITS = [u.encode() for u in zephyrlog.BYTE_UNITS]


class _Chunk:
    """Byte look-ups over one chunk. Offsets past its end read the zero bytes after it (PAD)."""

    def __init__(self, buf: bytes):
        self.size = len(buf)
        self.u = np.frombuffer(buf + bytes(PAD), np.uint8)
        self._at: dict[bytes, np.ndarray] = {}
        self._views: dict[int, np.ndarray] = {}

    def byte(self, x: np.ndarray) -> np.ndarray:
        return self.u[np.minimum(x, self.size)]

    def window(self, x: np.ndarray, width: int) -> np.ndarray:
        """The `width` (< PAD) bytes at each offset `x`, one row each."""
        view = self._views.get(width)
        if view is None:  # every `width` bytes from each offset, as one item: a row is a copy of them
            view = self._views[width] = np.ndarray((self.size + 1,), f"V{width}", self.u, strides=(1,))
        return view[np.minimum(x, self.size)].view(np.uint8).reshape(len(x), width)

    def is_(self, x: np.ndarray, text: bytes) -> np.ndarray:
        """Whether `text` is at each offset `x`."""
        if len(text) == 1:
            return self.byte(x) == text[0]
        return (self.window(x, len(text)) == np.frombuffer(text, np.uint8)).all(axis=1)

    def next(self, text: bytes, x: np.ndarray, near: int = 0) -> np.ndarray:
        """The offset of the first `text` at or after each `x` (the chunk's size: none); looked
        for in the `near` bytes after `x` first, then, for the rows it is not in, in the chunk."""
        if near and len(x):
            width = near + len(text) - 1
            win = self.window(x, width)
            hit = win[:, :near] == text[0]
            for k, c in enumerate(text[1:], 1):
                hit &= win[:, k : k + near] == c
            at = np.argmax(hit, axis=1)
            missed = ~hit[np.arange(len(x)), at]
            out = x + at
            if missed.any():
                out[missed] = self.next(text, x[missed])
            return out
        found = self._at.get(text)
        if found is None:
            u = self.u[: self.size + 1]
            hit = np.flatnonzero(u == text[0])
            if len(text) > 1:
                hit = hit[self.is_(hit, text)]
            found = self._at[text] = np.append(hit, self.size)
        return found[np.searchsorted(found, np.minimum(x, self.size))]

    def digits(self, x: np.ndarray) -> np.ndarray:
        """Where the run of digits at each `x` ends (`x`: none; RUN bytes on: RUN or more)."""
        return x + _run_length((self.window(x, RUN) - np.uint8(48)) < 10)

    def numbers(self, x: np.ndarray) -> np.ndarray:
        """Where the run of digits and dots at each `x` ends (`x`: none; RUN bytes on: RUN or more)."""
        w = self.window(x, RUN)
        return x + _run_length(((w - np.uint8(48)) < 10) | (w == 46))

    def ints(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(value; True where int64 holds it: at most MAX_DIGITS) of the digits [a, b) of each row."""
        lens = b - a
        good = lens <= denseparse.MAX_DIGITS
        if not len(a):
            return np.zeros(0, np.int64), good
        k = np.arange(max(1, min(int(lens.max()), denseparse.MAX_DIGITS)))
        power = np.where(k < lens[:, None], _POWERS[np.clip(lens[:, None] - 1 - k, 0, denseparse.MAX_DIGITS)], 0)
        return ((self.window(a, len(k)).astype(np.int64) - 48) * power).sum(axis=1), good

    def matrix(self, a: np.ndarray, b: np.ndarray, width: int) -> np.ndarray:
        """Bytes [a, b) of each row, at most `width`, left-aligned, zero-padded."""
        lens = np.clip(b - a, 0, width)
        k = np.arange(max(1, int(lens.max())) if len(a) else 1)
        return np.where(k < lens[:, None], self.window(a, len(k)), 0).astype(np.uint8)

    def strings(self, a: np.ndarray, b: np.ndarray) -> pa.Array:
        """Bytes [a, b) of each row (b >= a) as an Arrow string array."""
        lens = (b - a).astype(np.int64)
        offsets = np.zeros(len(a) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        width = int(lens.max()) if len(a) else 0
        if 0 < width < PAD:  # each row's first `width` bytes, then the first `lens` of each row
            win = self.window(a, width)
            data = win[np.arange(width) < lens[:, None]]
        else:
            data = self.u[np.arange(int(offsets[-1]), dtype=np.int64) + np.repeat(a - offsets[:-1], lens)]
        return pa.LargeStringArray.from_buffers(len(a), pa.py_buffer(offsets), pa.py_buffer(data))


def parse(buf: bytes, pos: int, before: int, hits: Callable, read: Callable) -> DenseRows | None:
    """`denseparse.parse_re(buf, pos, before, hits, read)`'s rows, or None when `buf` is not UTF-8."""
    size = len(buf)
    if not size:
        return None
    u = np.frombuffer(buf, np.uint8)
    newlines = np.flatnonzero(u == 10)
    starts = np.concatenate(([0], newlines + 1))
    if starts[-1] == size:  # ends with a newline: no line after it
        starts = starts[:-1]
    count = len(starts)
    ends = np.append(starts[1:] - 1, size if buf[-1:] != b"\n" else size - 1)  # each line's end (no \n)
    offsets = np.append(starts, size).astype(np.int64)
    lines = pa.LargeStringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(buf))
    try:
        lines.validate(full=True)
    except pa.ArrowInvalid:  # not UTF-8: RE2 cannot read it as the bytes pattern does
        return None
    matched = pc.match_substring_regex(lines, RE2_PATTERN).to_numpy(zero_copy_only=False)
    dense = np.flatnonzero(matched)
    ch = _Chunk(buf)
    s, e = starts[dense], ends[dense]
    n = len(dense)

    ok = np.ones(n, bool)
    # -- prefix: `ts [A-Z]+ [\w.-]+: [first] ` --------------------------------------------------
    open_ = ch.next(b"[", s + 23, 40)  # `[`: neither `[A-Z]+` nor `[\w.-]+` holds one
    close = ch.next(b"]", open_ + 1, 64)
    ok &= (close > open_ + 1) & (close < e) & ch.is_(close, b"] ")
    c = close + 2
    lead = ch.byte(c)
    kind = np.full(n, STATUS, np.int8)
    executing, done = lead == 69, lead == 83  # `E`xecuting stage, `S`hard … done
    kind[executing], kind[done] = EXECUTING, DONE
    status = ~(executing | done)

    spans: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # group -> (rows, start, end)

    def digits(rows: np.ndarray, at: np.ndarray, then: bytes | None) -> tuple[np.ndarray, np.ndarray]:
        """`\\d+` at `at` (rows `rows`), then `then`: (its end, whether it is there)."""
        end = ch.digits(at)
        good = end > at
        if then is not None:
            good &= ch.is_(end, then)
        return end, good

    # -- done: `Shard (\d+) done in ([\d.]+)s` --------------------------------------------------
    d = np.flatnonzero(done)
    dc = c[d]
    good = ch.is_(dc, b"Shard ")
    shard_end, g = digits(d, dc + 6, b" done in ")
    good &= g
    secs_at = shard_end + 9
    secs_end = ch.numbers(secs_at)
    good &= (secs_end > secs_at) & ch.is_(secs_end, b"s")
    ok[d] &= good
    spans["d_shard"] = (d, dc + 6, shard_end)
    spans["d_secs"] = (d, secs_at, secs_end)

    # -- Executing: `Executing stage (stage) shard (\d+) \(attempt (\d+)\)` ----------------------
    x = np.flatnonzero(executing)
    xc = c[x] + 16
    good = ch.is_(c[x], b"Executing stage ")
    at = ch.next(b" shard ", xc, 64)
    shard_end, g = digits(x, at + 7, b" (attempt ")
    good &= g & (at < e[x])
    attempt_end, g = digits(x, shard_end + 10, b")")
    good &= g
    ok[x] &= good
    spans["e_stage"] = (x, xc, at)
    spans["e_shard"] = (x, at + 7, shard_end)
    spans["e_attempt"] = (x, shard_end + 10, attempt_end)

    # -- status: `[second] C/T complete, F in-flight, Q queued, A/R workers alive, D dead[; items=…]`
    st = np.flatnonzero(status)
    y = c[st]
    two = ch.byte(y) == 91
    second_end = np.where(two, ch.next(b"]", y + 1, 64), y)
    good = ~two | ((second_end > y + 1) & (second_end < e[st]) & ch.is_(second_end, b"] "))
    spans["second"] = (st[two], y[two] + 1, second_end[two])
    y = np.where(two, second_end + 2, y)
    fields = [("s_completed", b"/"), ("s_total", b" complete, "), ("s_in_flight", b" in-flight, ")]
    fields.append(("s_queued", b" queued, "))
    for name, then in fields:
        end, g = digits(st, y, then)
        good &= g
        spans[name] = (st, y, end)
        y = end + len(then)
    a_end, g = digits(st, y, None)
    good &= g
    alive = ch.is_(a_end, b"/")
    r_end, g_r = digits(st, a_end + 1, b" workers alive, ")
    dead_at = r_end + 16
    dead_end, g_d = digits(st, dead_at, b" dead")
    good &= np.where(alive, g_r & g_d, ch.is_(a_end, b" workers"))
    spans["s_alive"] = (st[alive], y[alive], a_end[alive])
    spans["s_registered"] = (st[alive], a_end[alive] + 1, r_end[alive])
    spans["s_dead"] = (st[alive], dead_at[alive], dead_end[alive])
    spans["s_workers"] = (st[~alive], y[~alive], a_end[~alive])
    t = np.where(alive, dead_end + 5, a_end + 8)  # after the counts
    # `(?:[;.] items=([\d.]+[KMBT]?)(?: \([^)\n]*\), bytes_processed=(B))?)?`
    sep = ch.byte(t)
    items_at = t + 8
    items_end = ch.numbers(items_at)
    has_items = ((sep == 59) | (sep == 46)) & ch.is_(t + 1, b" items=") & (items_end > items_at)
    long_run = has_items & (items_end - items_at >= RUN)  # its end not looked for: per line
    suffix = ch.byte(items_end)
    items_end = items_end + ((suffix == 75) | (suffix == 77) | (suffix == 66) | (suffix == 84))
    paren = ch.next(b")", items_end + 2, 32)  # `)`: `[^)\n]*` runs to the first one
    b_at = paren + 19
    b_int = ch.digits(b_at)
    frac = ch.is_(b_int, b".") & ((ch.byte(b_int + 1) - np.uint8(48)) < 10)
    b_num = np.where(frac, ch.digits(b_int + 1), b_int)
    unit = np.zeros(len(st), np.int64)  # the unit's length (0: none)
    for word in UNITS[::-1]:  # the first that matches wins: no unit is another's prefix
        unit = np.where(ch.is_(b_num + 1, word), len(word), unit)
    lead_in = has_items & ch.is_(items_end, b" (") & (paren < e[st]) & ch.is_(paren, b"), bytes_processed=")
    has_bytes = lead_in & (b_int > b_at) & ch.is_(b_num, b" ") & (unit > 0)
    long_run |= lead_in & ((b_int - b_at >= RUN) | (frac & (b_num - b_int > RUN)))
    ok[st] &= good & ~long_run
    spans["s_items"] = (st[has_items], items_at[has_items], items_end[has_items])
    b_end = b_num + 1 + unit
    spans["s_bytes"] = (st[has_bytes], b_at[has_bytes], b_end[has_bytes])
    ok &= _inside(spans, e, n)

    # -- columns (the rules of denseparse.parse_re) -----------------------------------------------
    ts, day, good = denseparse._times_of(ch.matrix(s, s + 23, 23))
    ok &= good
    ints = {name: np.full(n, -1, np.int64) for name in denseparse.INTS}
    for name, (group, _) in denseparse.INTS.items():
        rows, a, b = spans[group]
        ints[name][rows], good = ch.ints(a, b)
        ok[rows] &= good
    ints["shard"] = np.maximum(ints.pop("e_shard"), ints.pop("d_shard"))
    older = ints["registered"] < 0  # the older status form: `…, 488 workers`
    ints["registered"][older] = ints.pop("workers")[older]
    secs = np.full(n, np.nan)
    rows, a, b = spans["d_secs"]
    width = denseparse.MAX_DECIMAL_DIGITS + 1  # a longer `[\d.]+` has too many digits or dots
    secs[rows], good = denseparse._decimals_of(ch.matrix(a, b, width))
    ok[rows] &= good & (b - a <= width)

    # names and numbers of the rows read in bulk (a value read once per distinct text)
    names: dict[str, int] = {}
    first = np.full(n, -1, np.int32)
    first[ok] = _codes(ch.strings(open_[ok] + 1, close[ok]), names)
    stage = np.where(status, first, -1).astype(np.int32)
    exec_ = np.full(n, -1, np.int32)
    worker = np.where(status, -1, first).astype(np.int32)
    rows, a, b = _kept(spans["second"], ok)  # `[exec] [stage]`: first is the exec
    stage[rows], exec_[rows] = _codes(ch.strings(a, b), names), first[rows]
    rows, a, b = _kept(spans["e_stage"], ok)
    stage[rows] = _codes(ch.strings(a, b), names)
    items = np.full(n, np.nan)
    rows, a, b = _kept(spans["s_items"], ok)
    items[rows] = _numbers(ch.strings(a, b), zephyrlog.human_number)
    size_ = np.full(n, np.nan)
    rows, a, b = _kept(spans["s_bytes"], ok)
    size_[rows] = _numbers(ch.strings(a, b), zephyrlog.human_bytes_number)

    # -- every other line: the per-line path, a run of lines at a time ------------------------------
    other = np.ones(count, np.int8)
    other[dense[ok]] = 0
    edge = np.diff(np.concatenate(([0], other, [0])))
    slow: list[Hit] = []
    for lo, hi in zip(np.flatnonzero(edge == 1).tolist(), np.flatnonzero(edge == -1).tolist(), strict=True):
        a0, b0 = int(starts[lo]), int(starts[hi]) if hi < count else size
        piece = buf[a0:b0] if buf[b0 - 1 : b0] == b"\n" else buf[a0:b0] + b"\n"
        slow.extend(hits(piece, len(piece), pos + a0, read, [before + lo]))
    keep = np.flatnonzero(ok)
    return DenseRows(
        kind=kind[keep],
        ts=ts[keep],
        day=day[keep],
        line=dense[keep] + before,
        worker=worker[keep],
        stage=stage[keep],
        exec=exec_[keep],
        ints={k: v[keep] for k, v in ints.items()},
        secs=secs[keep],
        items=items[keep],
        size=size_[keep],
        words=list(names),
        slow=slow,
        lines=len(newlines),
    )


def _run_length(inside: np.ndarray) -> np.ndarray:
    """Per row: how many leading columns are True (all of them: the width)."""
    if not inside.shape[0]:
        return np.zeros(0, np.int64)
    return np.where(inside.all(axis=1), inside.shape[1], np.argmin(inside, axis=1))


def _kept(span: tuple[np.ndarray, np.ndarray, np.ndarray], ok: np.ndarray) -> tuple[np.ndarray, ...]:
    """The span's rows that are read in bulk."""
    rows, a, b = span
    sel = ok[rows]
    return rows[sel], a[sel], b[sel]


def _inside(spans: dict, e: np.ndarray, n: int) -> np.ndarray:
    """Rows whose fields all end within their line (the look-ups above read past a line's end)."""
    ok = np.ones(n, bool)
    for rows, _, b in spans.values():
        ok[rows] &= b <= e[rows]
    return ok


def _codes(values: pa.Array, names: dict[str, int]) -> np.ndarray:
    """Codes of `values` into `names` (new ones in order of first appearance, as
    denseparse._codes gives them: the text is valid UTF-8, so each decodes to itself)."""
    enc = pc.dictionary_encode(values)
    lut = np.array([names.setdefault(v, len(names)) for v in enc.dictionary.to_pylist()], np.int32)
    if not len(lut):
        return np.empty(0, np.int32)
    return lut[enc.indices.to_numpy(zero_copy_only=False)]


def _numbers(values: pa.Array, read: Callable[[str], float | None]) -> np.ndarray:
    """`values` as `read` reads their text, once per distinct value (NaN: not a number)."""
    enc = pc.dictionary_encode(values)
    got = [read(v) for v in enc.dictionary.to_pylist()]
    lut = np.array([np.nan if r is None else r for r in got], float)
    if not len(lut):
        return np.empty(0)
    return lut[enc.indices.to_numpy(zero_copy_only=False)]
