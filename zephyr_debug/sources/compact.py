"""Compact stores a log timeline folds into: the status series, downsampled per stage as it
arrives (every change of state kept), and the shard-attempt table in typed columns.

Memory grows with what is kept, not with the lines read: a status row costs nothing once its
time bin holds a newer one; an attempt is a few array slots (codes for stage, worker, outcome).
"""

from __future__ import annotations

import copy
import math
from array import array

import numpy as np

from zephyr_debug.model import STATUS_COLUMNS
from zephyr_debug.zephyrlog import COARSEST_S

STATUS_ROWS_PER_STAGE = 2_000  # binned (unpinned) rows kept per stage; render/report.py draws 1,500
RECENT_ROWS = 64  # a stage's newest rows, always kept whole (the printed item resolution near the end)
BLOCK_ROWS = 8_192  # status rows buffered, then compressed at once (per stage), before the next arrives
# Status columns as the fold writes them (model.STATUS_COLUMNS but the stage); None is NaN.
STATUS_VALUES = tuple(c for c in STATUS_COLUMNS if c != "stage")
NAN = math.nan
STATUS_FLOATS = ("ts", "items", "bytes")  # the other status columns are counts (int64 once whole)
_TS, _DONE, _TOTAL, _FLIGHT, _QUEUE, _RETRIES, _ALIVE, _REG, _DEAD, _ITEMS, _BYTES = range(len(STATUS_VALUES))
_COUNTS = [_TOTAL, _ALIVE, _REG, _DEAD]  # a change of any is a change of state
# Equal rows: while the queue is not empty, and while it is empty (the tail's counts).
_RUN_KEY = [_DONE, _TOTAL, _FLIGHT, _QUEUE, _ALIVE, _REG, _DEAD, _ITEMS, _BYTES]
_TAIL_KEY = [_ITEMS, _BYTES]


def distinct(codes: np.ndarray) -> list[int]:
    """The distinct values of an integer array (most batches hold one stage: no sort then)."""
    if not len(codes):
        return []
    first = int(codes[0])
    return [first] if (codes == first).all() else np.unique(codes).tolist()


class _StageRows:
    """One stage's kept rows: pinned ones (changes of state) and time-binned ones (the rest).

    Pinned: the stage's first row; a change of total, retries, alive, registered or dead; the
    tail starting or ending (queue empty with shards in flight); completed or in_flight changing
    while the queue is empty; each end of a run of equal rows (equal items= and bytes while the queue is
    empty, equal counts otherwise; no value equals no value); and the row before each of these.
    The newest RECENT_ROWS rows are kept whole. The rest is binned by the stage's clock (the
    newest time seen so far: rows out of order join the newest bin), at most STATUS_ROWS_PER_STAGE
    rows: the bin width doubles as the stage grows, each bin keeps its newest row."""

    def __init__(self):
        empty = np.empty((0, len(STATUS_VALUES)))
        self.recent, self.recent_pin, self.recent_seq = empty, np.empty(0, bool), np.empty(0, np.int64)
        self.pinned: list[tuple[np.ndarray, np.ndarray]] = []  # (values, arrival numbers) pieces
        self.binned, self.binned_seq, self.binned_clock = empty, np.empty(0, np.int64), np.empty(0)
        self.t0 = NAN  # the stage's first time
        self.clock = NAN  # the newest time among the stored rows
        self.width = 0.0  # bin width in seconds; 0 = every row kept so far
        self.prev_same = False  # the newest row equals the one before it
        self.retries = NAN  # the newest retries count seen

    def copy(self) -> _StageRows:
        """An independent copy (stored arrays are replaced, never written, so they are shared)."""
        other = copy.copy(self)
        other.pinned = list(self.pinned)
        return other

    def add(self, v: np.ndarray, seq: np.ndarray) -> None:
        """Rows `v` (STATUS_VALUES columns, NaN = none) arriving in order, numbered `seq`."""
        k0 = len(self.recent)
        allv = np.concatenate((self.recent, v))
        pin = np.concatenate((self.recent_pin, np.zeros(len(v), bool)))
        s = max(k0, 1)  # the first new row with a row before it
        if k0 == 0:
            pin[0] = True  # the stage's first row
        retries = v[:, _RETRIES]
        counts = np.concatenate(([self.retries], retries))
        filled = counts[np.maximum.accumulate(np.where(np.isnan(counts), 0, np.arange(len(counts))))]
        self.retries = float(filled[-1])
        if len(allv) > s:
            cur, prev = allv[s:], allv[s - 1 : -1]
            nan = np.isnan(allv)
            eq = cur == prev
            same_value = eq | (nan[s:] & nan[s - 1 : -1])
            differ = ~(eq | nan[s:] | nan[s - 1 : -1])  # both known and different
            empty = allv[:, _QUEUE] == 0
            tail = empty & (allv[:, _FLIGHT] > 0)
            now_empty, was_empty = empty[s:], empty[s - 1 : -1]
            change = (
                (tail[s:] != tail[s - 1 : -1])
                | (now_empty & ~(same_value[:, _DONE] & same_value[:, _FLIGHT]))
                | differ[:, _COUNTS].any(axis=1)
                | (np.abs(retries - filled[:-1]) > 0)[s - k0 :]  # against the newest count before it
            )
            same = np.where(
                now_empty & was_empty,
                same_value[:, _TAIL_KEY].all(axis=1),
                ~now_empty & ~was_empty & same_value[:, _RUN_KEY].all(axis=1),
            )
            same_before = np.concatenate(([self.prev_same], same[:-1]))
            pin[s - 1 : -1] |= change | (same != same_before)  # the row before a change / each end of a run
            pin[s:] |= change
            self.prev_same = bool(same[-1])
        allseq = np.concatenate((self.recent_seq, seq))
        keep = max(len(allv) - RECENT_ROWS, 0)
        self.recent, self.recent_pin, self.recent_seq = allv[keep:].copy(), pin[keep:], allseq[keep:]
        if keep:
            self._store(allv[:keep], pin[:keep], allseq[:keep])

    def _store(self, v: np.ndarray, pinned: np.ndarray, seq: np.ndarray) -> None:
        clock = np.fmax.accumulate(np.concatenate(([self.clock], v[:, _TS])))[1:]  # NaN: no time yet
        self.clock = float(clock[-1])
        if self.t0 != self.t0 and self.clock == self.clock:
            self.t0 = float(clock[~np.isnan(clock)][0])
        if pinned.any():
            self.pinned.append((v[pinned], seq[pinned]))
            if len(self.pinned) > 64:
                self.pinned = [
                    (np.concatenate([p[0] for p in self.pinned]), np.concatenate([p[1] for p in self.pinned]))
                ]
        free = ~pinned
        self.binned = np.concatenate((self.binned, v[free]))
        self.binned_seq = np.concatenate((self.binned_seq, seq[free]))
        self.binned_clock = np.concatenate((self.binned_clock, clock[free]))
        if self.width > 0:
            self._dedupe()
        while len(self.binned_seq) > STATUS_ROWS_PER_STAGE:
            span = self.clock - self.t0 if self.clock == self.clock else 0.0
            self.width = max(self.width * 2, span / (STATUS_ROWS_PER_STAGE / 2), 1e-3)
            self._dedupe()

    def _dedupe(self) -> None:
        """Keeps the newest row of each time bin (bins rise with the clock, so a bin is one run)."""
        bins = np.floor((self.binned_clock - self.t0) / self.width)
        bins[np.isnan(bins)] = -1  # before the stage's first time
        last = np.append(bins[1:] != bins[:-1], True)
        self.binned, self.binned_seq, self.binned_clock = (
            self.binned[last],
            self.binned_seq[last],
            self.binned_clock[last],
        )

    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """Kept rows in arrival order: (values, arrival numbers)."""
        parts = [*self.pinned, (self.binned, self.binned_seq), (self.recent, self.recent_seq)]
        v = np.concatenate([p[0] for p in parts])
        seq = np.concatenate([p[1] for p in parts])
        order = np.argsort(seq, kind="stable")
        return v[order], seq[order]


def _values(row: dict) -> list:
    """A row dict's STATUS_VALUES (None, NaN in a float array, where it has none)."""
    return list(map(row.get, STATUS_VALUES))


class StatusSeries:
    """The status rows of a log: `append(row)` / `extend(stages, values)` and `[-1]` (the newest
    row, a dict the fold may still amend, e.g. its retries). Rows are buffered and compressed
    BLOCK_ROWS at a time, just before the next row arrives: at the same rows whichever way they
    came, so any split of the same rows into append and extend calls keeps the same rows."""

    def __init__(self):
        self.stages: dict[int, _StageRows] = {}  # stage code -> its kept rows
        self.names: list[str] = []  # stage code -> name
        self.codes: dict[str, int] = {}
        self.last: dict | None = None
        self.rows: list[dict] = []  # appended rows not yet in `pieces`, and their stage codes
        self.row_codes: list[int] = []
        self.pieces: list[tuple[np.ndarray, np.ndarray]] = []  # buffered (stage codes, values)
        self.buffered = 0
        self.seen = 0

    def __len__(self) -> int:
        return self.seen

    def __getitem__(self, index: int) -> dict:
        if index != -1 or self.last is None:
            raise IndexError("only the newest status row is kept as a row")
        return self.last

    def _code(self, stage: str) -> int:
        c = self.codes.get(stage)
        if c is None:
            c = self.codes[stage] = len(self.names)
            self.names.append(stage)
        return c

    def append(self, row: dict) -> None:
        """One row: a dict of the stage and STATUS_VALUES (None where the line has none)."""
        self._settle()
        if self.buffered >= BLOCK_ROWS:
            self._compress()
        self.rows.append(row)
        self.row_codes.append(self._code(row["stage"]))
        self.buffered += 1
        self.seen += 1
        self.last = row

    def extend(self, stages: np.ndarray, values: np.ndarray) -> None:
        """Rows at once: `stages` (names, object array), `values` (STATUS_VALUES columns, NaN = none)."""
        n = len(stages)
        if not n:
            return
        starts = np.concatenate(([0], np.flatnonzero(stages[1:] != stages[:-1]) + 1))
        runs = np.diff(np.append(starts, n))
        codes = np.repeat(np.array([self._code(s) for s in stages[starts].tolist()], np.int64), runs)
        self._settle()
        self._rows_to_piece()
        done = 0
        while done < n:
            if self.buffered >= BLOCK_ROWS:
                self._compress()
            take = min(n - done, BLOCK_ROWS - self.buffered)
            self.pieces.append((codes[done : done + take], values[done : done + take]))
            self.buffered += take
            self.seen += take
            done += take
        self.last = {"stage": stages[-1]} | {
            c: None if x != x else (x if c in STATUS_FLOATS else int(x))
            for c, x in zip(STATUS_VALUES, values[-1].tolist(), strict=True)
        }

    def _row_piece(self) -> tuple[np.ndarray, np.ndarray]:
        """The appended rows not yet in `pieces` as a piece: (stage codes, values)."""
        return np.array(self.row_codes, np.int64), np.array([_values(r) for r in self.rows], dtype=float)

    def _rows_to_piece(self) -> None:
        if self.rows:
            self.pieces.append(self._row_piece())
            self.rows, self.row_codes = [], []

    def _block(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The buffered rows: (stage codes, values)."""
        if not self.buffered:
            return None
        parts = self.pieces + [self._row_piece()] if self.rows else self.pieces
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def _settle(self) -> None:
        """The newest row as `[-1]` holds it now into the buffer (appended dicts are read as they
        are; an extended row is copied when amended: the caller's arrays stay as they were)."""
        if self.rows or not self.pieces or self.last is None:
            return
        codes, values = self.pieces[-1]
        now = np.array(_values(self.last), dtype=float)
        if not np.array_equal(values[-1], now, equal_nan=True):
            values = values.copy()
            values[-1] = now
            self.pieces[-1] = (codes, values)

    def _compress(self) -> None:
        """Hands the buffered rows to their stages' stores."""
        block = self._block()
        if block is not None:
            _feed(self.stages, *block, self.seen - self.buffered)
        self.rows, self.row_codes, self.pieces, self.buffered = [], [], [], 0

    def frame(self, columns: list[str]):
        """The kept rows as a DataFrame of `columns`, ordered by time (stable); integer columns
        without a gap as int64. The series is left as it was (rows may still be added)."""
        import pandas as pd

        self._settle()
        stores = {c: rows.copy() for c, rows in self.stages.items()}
        block = self._block()
        if block is not None:
            _feed(stores, *block, self.seen - self.buffered)
        parts = [(self.names[c], *rows.columns()) for c, rows in stores.items()]
        width = len(STATUS_VALUES)
        values = np.concatenate([p[1] for p in parts]) if parts else np.empty((0, width))
        seq = np.concatenate([p[2] for p in parts]) if parts else np.empty(0, np.int64)
        data = {c: values[:, k] for k, c in enumerate(STATUS_VALUES)}
        data["stage"] = (
            np.concatenate([np.full(len(p[2]), p[0], dtype=object) for p in parts])
            if parts
            else np.empty(0, dtype=object)
        )
        order = np.lexsort((seq, data["ts"]))  # NaN times sort last, as sort_values puts them
        out = {}
        for c in columns:
            v = data[c][order] if c in data else np.full(len(order), NAN)
            if c not in STATUS_FLOATS and c != "stage" and c in data:
                known = ~np.isnan(v)
                if known.all() and len(v) and (np.abs(v) < 2.0**63).all():  # else int64 would wrap
                    v = v.astype(np.int64)
                elif not known.any():
                    v = np.full(len(v), None, dtype=object)
            out[c] = v
        return pd.DataFrame(out, columns=columns)


def _feed(stores: dict[int, _StageRows], codes: np.ndarray, values: np.ndarray, first: int) -> None:
    """Rows (stage codes, values) numbered from `first` into their stages' stores."""
    seq = np.arange(first, first + len(codes))
    found = distinct(codes)
    groups = [(found[0], slice(None))] if len(found) == 1 else [(c, codes == c) for c in found]
    for c, mine in groups:
        rows = stores.get(c)
        if rows is None:
            rows = stores[c] = _StageRows()
        rows.add(values[mine], seq[mine])


# -- attempts --------------------------------------------------------------------------------
_FLOATS = ("start_ts", "end_ts", "elapsed_s")
_CODED = ("stage", "worker", "outcome")
_MISSING = object()


def _strings(names: list[str], codes):
    """A column of `names[code]` (-1: absent) as pandas' own string dtype builds it, by arrow
    when that dtype is arrow's (a dictionary decoded at once, not a Python object per row)."""
    import pandas as pd

    dtype = pd.Series(["x"]).dtype
    if dtype == np.dtype(object) or not len(codes):
        return np.array(names + [NAN], dtype=object)[codes]
    import pyarrow as pa

    absent = codes < 0
    strings = pa.DictionaryArray.from_arrays(pa.array(np.where(absent, 0, codes), mask=absent), pa.array(names))
    return pd.array(strings.dictionary_decode(), dtype=dtype)


def _shared_nans(n: int):
    """One read-only all-NaN column that every column no attempt has may share (2.2M attempts:
    ~190 MB less), when pandas copies on write (3.x: always); None otherwise."""
    import pandas as pd

    if int(pd.__version__.split(".")[0]) < 3 and pd.options.mode.copy_on_write is not True:
        return None
    nans = np.full(n, NAN)
    nans.flags.writeable = False
    return nans


class AttemptRow:
    """One attempt, read and written like the dict it stands for (absent keys read as missing)."""

    __slots__ = ("i", "t")

    def __init__(self, table: AttemptTable, index: int):
        self.t, self.i = table, index

    def get(self, key: str, default=None):
        t, i = self.t, self.i
        if key in t.floats:
            v = t.floats[key][i]
            return default if v != v else v
        if key in t.codes:
            c = t.codes[key][i]
            return default if c < 0 else t.names[key][c]
        if key == "shard":
            return t.shard[i]
        if key == "attempt":
            return t.attempt[i]
        return t.extra.get(i, {}).get(key, default)

    def __getitem__(self, key: str):
        v = self.get(key, _MISSING)
        if v is _MISSING:
            raise KeyError(key)
        return v

    def __setitem__(self, key: str, value) -> None:
        t, i = self.t, self.i
        if key in t.floats and (value is None or isinstance(value, (int, float))):
            t.floats[key][i] = NAN if value is None else value
        elif key in t.codes and (value is None or isinstance(value, str)):
            t.codes[key][i] = -1 if value is None else t.code(key, value)
        elif key in ("shard", "attempt", "stage"):
            raise KeyError(f"{key} is part of the attempt's key")
        else:
            t.extra.setdefault(i, {})[key] = value

    def update(self, **fields) -> None:
        t, i = self.t, self.i
        for key, value in fields.items():
            if key in t.floats and (value is None or isinstance(value, (int, float))):
                t.floats[key][i] = NAN if value is None else value
            elif key in t.codes and isinstance(value, str):
                t.codes[key][i] = t.code(key, value)
            else:
                self[key] = value


DEEP = 16  # attempts of one shard past which its look-ups go through an index
RECENT_ATTEMPTS = 64  # a shard's newest attempts searched for its open / reported / previous one


class AttemptTable:
    """Shard attempts keyed (stage, shard, attempt) in typed columns; lookups by shard go through
    one slot per shard number (its newest attempt) and a link to each attempt's previous one."""

    def __init__(self):
        self.floats = {c: array("d") for c in _FLOATS}
        self.codes = {c: array("i") for c in _CODED}
        self.names: dict[str, list[str]] = {c: [] for c in _CODED}
        self._code: dict[str, dict[str, int]] = {c: {} for c in _CODED}
        self.shard, self.attempt, self.prev, self.depth = array("q"), array("q"), array("q"), array("q")
        self.newest: dict[int, array] = {}  # stage code -> row of each shard's newest attempt (-1: none)
        self.sparse: dict[tuple[int, int], int] = {}  # shard numbers too far apart for a slot array
        self.extra: dict[int, dict] = {}  # rare fields (error, reason, failure, generation, ...)
        # shards with more than DEEP attempts (a log repeating one execution): attempt -> newest row,
        # and the highest attempt, so a look-up never walks the whole chain
        self.deep: dict[tuple[int, int], dict[int, int]] = {}
        self.deep_top: dict[tuple[int, int], int] = {}

    def _index_deep(self, s: int, shard: int, i: int, attempt: int) -> None:
        """Keeps the look-ups of a shard past DEEP attempts O(1) (its chain indexed once)."""
        deep = self.deep.get((s, shard))
        if deep is None:
            if self.depth[i] <= DEEP:
                return
            deep, j = {}, i
            while j >= 0:
                deep.setdefault(self.attempt[j], j)  # the newest row of each attempt number
                j = self.prev[j]
            self.deep[(s, shard)] = deep
            self.deep_top[(s, shard)] = max(deep)
            return
        deep[attempt] = i
        self.deep_top[(s, shard)] = max(self.deep_top[(s, shard)], attempt)

    def code(self, column: str, value: str) -> int:
        c = self._code[column].get(value)
        if c is None:
            c = self._code[column][value] = len(self.names[column])
            self.names[column].append(value)
        return c

    def __len__(self) -> int:
        return len(self.shard)

    def _head(self, stage: int, shard: int) -> int:
        slots = self.newest.get(stage)
        if slots is not None and 0 <= shard < len(slots):
            return slots[shard]
        return self.sparse.get((stage, shard), -1)

    def recent(self, stage: str, shard: int, limit: int = RECENT_ATTEMPTS) -> list[AttemptRow]:
        """The shard's newest `limit` attempts, newest first."""
        c = self._code["stage"].get(stage)
        out: list[AttemptRow] = []
        i = -1 if c is None else self._head(c, shard)
        while i >= 0 and len(out) < limit:
            out.append(AttemptRow(self, i))
            i = self.prev[i]
        return out

    def top_attempt(self, stage: str, shard: int) -> int:
        """The shard's highest attempt number (-1: none)."""
        c = self._code["stage"].get(stage)
        if c is None:
            return -1
        top = self.deep_top.get((c, shard))
        if top is not None:
            return top
        i, best = self._head(c, shard), -1
        while i >= 0:
            best = max(best, self.attempt[i])
            i = self.prev[i]
        return best

    def _find(self, key: tuple) -> int:
        stage, shard, attempt = key
        c = self._code["stage"].get(stage)
        if c is None:
            return -1
        deep = self.deep.get((c, shard))
        if deep is not None:
            return deep.get(attempt, -1)
        i = self._head(c, shard)
        while i >= 0 and self.attempt[i] != attempt:
            i = self.prev[i]
        return i

    def get(self, key: tuple) -> AttemptRow | None:
        i = self._find(key)
        return None if i < 0 else AttemptRow(self, i)

    def __getitem__(self, key: tuple) -> AttemptRow:
        row = self.get(key)
        if row is None:
            raise KeyError(key)
        return row

    def __contains__(self, key: tuple) -> bool:
        return self._find(key) >= 0

    def add(self, key: tuple, **fields) -> AttemptRow:
        stage, shard, attempt = key
        s = self.code("stage", stage)
        i = len(self.shard)
        self.codes["stage"].append(s)
        for c in ("worker", "outcome"):
            self.codes[c].append(-1)
        for col in self.floats.values():
            col.append(NAN)
        self.shard.append(shard)
        self.attempt.append(attempt)
        prev = self._head(s, shard)
        self.prev.append(prev)
        self.depth.append(self.depth[prev] + 1 if prev >= 0 else 1)
        self._index_deep(s, shard, i, attempt)
        slots = self.newest.setdefault(s, array("q"))
        if 0 <= shard < 2 * len(slots) + 65_536:
            if shard >= len(slots):
                slots.extend([-1] * (shard + 1 - len(slots)))
            slots[shard] = i
        else:
            self.sparse[(s, shard)] = i
        row = AttemptRow(self, i)
        row.update(**fields)
        return row

    def row_of(self, key: tuple) -> int:
        """The row number of an attempt that exists."""
        i = self._find(key)
        if i < 0:
            raise KeyError(key)
        return i

    def heads(self, names: list[str], stage, shards):
        """Per (stage, shard) (`stage`: codes into `names`): the row of the shard's newest attempt, -1 when none."""

        out = np.full(len(shards), -1, np.int64)
        for code in distinct(stage):
            c = self._code["stage"].get(names[code])
            if c is None:
                continue
            mine = np.flatnonzero(stage == code)
            slots = np.frombuffer(self.newest.get(c, array("q")), dtype=np.int64)
            k = shards[mine]
            inside = (k >= 0) & (k < len(slots))
            out[mine[inside]] = slots[k[inside]]
            for m in mine[~inside].tolist():
                out[m] = self.sparse.get((c, int(shards[m])), -1)
        return out

    def can_add_many(self, names: list[str], stage, shards) -> bool:
        """Whether `add_many` keeps each of these shards in its stage's slot array (as `add` would)."""
        for code in distinct(stage):
            c = self._code["stage"].get(names[code])
            top = 65_536 + 2 * (len(self.newest[c]) if c is not None and c in self.newest else 0)
            k = shards[stage == code]
            if k.min() < 0 or k.max() >= top:
                return False
        return True

    def add_many(self, names: list[str], stage, shards, attempts, workers, start_ts, outcome: str, heads):
        """New attempts of distinct (stage, shard)s, each its shard's newest (`stage`, `workers`:
        codes into `names`; `heads`: what `heads` gives for them); returns their rows."""
        n, base = len(shards), len(self.shard)
        codes = {k: self.code("stage", names[k]) for k in distinct(stage)}
        table = np.zeros(len(names), np.int32)
        for k, c in codes.items():
            table[k] = c
        stage_codes = table[stage]
        for k in dict.fromkeys(workers.tolist()):
            table[k] = self.code("worker", names[k])
        self.codes["stage"].frombytes(stage_codes.tobytes())
        self.codes["worker"].frombytes(table[workers].astype(np.int32).tobytes())
        self.codes["outcome"].frombytes(np.full(n, self.code("outcome", outcome), np.int32).tobytes())
        self.floats["start_ts"].frombytes(np.asarray(start_ts, dtype=float).tobytes())
        for col in ("end_ts", "elapsed_s"):
            self.floats[col].frombytes(np.full(n, NAN).tobytes())
        self.shard.frombytes(np.asarray(shards, dtype=np.int64).tobytes())
        self.attempt.frombytes(np.asarray(attempts, dtype=np.int64).tobytes())
        self.prev.frombytes(heads.tobytes())
        known = np.frombuffer(self.depth, dtype=np.int64)
        depth = np.ones(n, np.int64)
        linked = heads >= 0
        depth[linked] = known[heads[linked]] + 1
        del known
        self.depth.frombytes(depth.tobytes())
        rows = np.arange(base, base + n)
        for r in np.flatnonzero(depth > DEEP).tolist():  # a shard past DEEP attempts: its index
            self._index_deep(int(stage_codes[r]), int(shards[r]), base + r, int(attempts[r]))
        for c in codes.values():
            slots = self.newest.setdefault(c, array("q"))
            mine = np.flatnonzero(stage_codes == c)
            top = int(shards[mine].max()) + 1
            if top > len(slots):
                slots.extend([-1] * (top - len(slots)))
            view = np.frombuffer(slots, dtype=np.int64)
            view[shards[mine]] = rows[mine]
            del view
        return rows

    def close_many(self, rows, end_ts, elapsed_s, outcome: str) -> None:
        """Ends attempts: end time, duration, outcome; a start time where none was known (end - duration);
        an end placed finer by its start and duration, as `Timeline.done` does."""
        end = np.frombuffer(self.floats["end_ts"], dtype=float)
        elapsed = np.frombuffer(self.floats["elapsed_s"], dtype=float)
        start = np.frombuffer(self.floats["start_ts"], dtype=float)
        codes = np.frombuffer(self.codes["outcome"], dtype=np.int32)
        finer = start[rows] + elapsed_s
        end_ts = np.where((end_ts < finer) & (finer < end_ts + COARSEST_S), finer, end_ts)
        end[rows], elapsed[rows], codes[rows] = end_ts, elapsed_s, self.code("outcome", outcome)
        unknown = rows[np.isnan(start[rows])]
        start[unknown] = end[unknown] - elapsed[unknown]
        del end, elapsed, start, codes

    def rows_where(self, key: str, value) -> list[int]:
        """Rows whose rare field `key` (error, kind, reason, ...) is `value`."""
        return [i for i, d in self.extra.items() if d.get(key) == value]

    def done_ends(self, stage: str):
        """Per shard of `stage` whose newest `done` attempt has an end time: that time (an array)."""

        c = self._code["stage"].get(stage)
        done = self._code["outcome"].get("done")
        if c is None or done is None or not len(self.shard):
            return np.empty(0)
        rows = np.flatnonzero(
            (np.frombuffer(self.codes["stage"], dtype=np.int32) == c)
            & (np.frombuffer(self.codes["outcome"], dtype=np.int32) == done)
        )[::-1]
        _, first = np.unique(np.frombuffer(self.shard, dtype=np.int64)[rows], return_index=True)
        ends = np.frombuffer(self.floats["end_ts"], dtype=float)[rows[first]]
        return ends[~np.isnan(ends)]

    def frame(self, columns: list[str]):
        """Every attempt, in the order added, as a DataFrame of `columns` (absent fields NaN)."""
        import pandas as pd

        n = len(self.shard)
        empty = _shared_nans(n)
        out = {}
        for c in columns:
            if c in self.floats:
                out[c] = np.frombuffer(self.floats[c], dtype=float).copy() if n else np.empty(0)
            elif c in self.codes:
                codes = np.frombuffer(self.codes[c], dtype=np.int32) if n else np.empty(0, np.int32)
                out[c] = _strings(self.names[c], codes)
            elif c in ("shard", "attempt"):
                out[c] = np.frombuffer(getattr(self, c), dtype=np.int64).copy() if n else np.empty(0, np.int64)
            else:
                rows = [(i, d[c]) for i, d in self.extra.items() if c in d]
                if not rows and empty is not None:  # a column no attempt has
                    out[c] = empty
                    continue
                numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for _, v in rows)
                out[c] = v = np.full(n, NAN, dtype=float if numbers else object)
                for i, value in rows:
                    v[i] = value
        return pd.DataFrame(out, columns=columns, copy=False)
