"""Folds a chunk's dense rows (status, Executing, done: `denseparse.DenseRows`) into a Timeline.

A run of dense rows between two other event lines is a batch. A batch is applied with numpy
and a little Python per stage and per worker when it is plain: every Executing line starts a
new attempt of a shard the batch names once, every done line closes the attempt its worker
was running, no worker's state comes from another file. Otherwise (and for short batches) its
rows go through the Timeline's per-line methods one by one. Both give the same Timeline.
"""

from __future__ import annotations

import numpy as np

from zephyr_debug.model import StatusExec
from zephyr_debug.sources.compact import STATUS_VALUES
from zephyr_debug.sources.denseparse import DONE, EXECUTING, STATUS, DenseRows
from zephyr_debug.sources.timeline import STATUS_FIELDS, Timeline

MIN_BATCH = 64  # shorter batches are folded row by row (numpy's fixed cost per call would dominate)
_COUNTS = tuple(col for col, _ in STATUS_FIELDS)
_GROUP = dict(STATUS_FIELDS)  # status column -> DenseRows.ints key


def fold(tl: Timeline, rows: DenseRows, lo: int, hi: int, source: str) -> None:
    """Rows [lo, hi) of `rows`, in order."""
    if hi <= lo:
        return
    if hi - lo < MIN_BATCH or not _batch(tl, rows, lo, hi, source):
        for j in range(lo, hi):
            _row(tl, rows, j, source)


def _name(rows: DenseRows, code) -> str | None:
    return None if code < 0 else rows.words[code]


def _status_row(rows: DenseRows, j: int) -> dict:
    return {col: (None if (v := int(rows.ints[_GROUP[col]][j])) < 0 else v) for col in _COUNTS}


def _status_values(rows: DenseRows, idx: np.ndarray) -> np.ndarray:
    """compact.STATUS_VALUES columns of status rows `idx` (NaN where a line has no such value)."""
    out = np.full((len(idx), len(STATUS_VALUES)), np.nan)
    for k, col in enumerate(STATUS_VALUES):
        if col == "ts":
            out[:, k] = rows.ts[idx]
        elif col == "items":
            out[:, k] = rows.items[idx]
        elif col == "bytes":
            out[:, k] = rows.size[idx]
        elif col in _GROUP:
            v = rows.ints[_GROUP[col]][idx]
            out[:, k] = np.where(v < 0, np.nan, v)
    return out


def _row(tl: Timeline, rows: DenseRows, j: int, source: str) -> None:
    """One row through the Timeline's per-line methods."""
    ts = float(rows.ts[j])
    tl.seen(ts, source)
    kind, stage, worker = rows.kind[j], _name(rows, rows.stage[j]), _name(rows, rows.worker[j])
    if kind == STATUS:
        items, size = float(rows.items[j]), float(rows.size[j])
        assert stage is not None  # every status line names its stage
        tl.status_line(
            ts,
            stage,
            _name(rows, rows.exec[j]),
            _status_row(rows, j),
            None if items != items else items,
            None if size != size else size,
        )
    elif kind == EXECUTING:
        assert stage is not None and worker is not None
        tl.executing(ts, worker, stage, int(rows.ints["shard"][j]), int(rows.ints["attempt"][j]))
    else:
        assert worker is not None
        tl.done(ts, worker, int(rows.ints["shard"][j]), float(rows.secs[j]))


def _batch(tl: Timeline, rows: DenseRows, lo: int, hi: int, source: str) -> bool:
    """Applies a plain batch at once; False (nothing changed) when it is not plain."""
    kind, ts = rows.kind[lo:hi], rows.ts[lo:hi]
    shard, worker, stage = rows.ints["shard"][lo:hi], rows.worker[lo:hi], rows.stage[lo:hi]
    ex, dn, st = np.flatnonzero(kind == EXECUTING), np.flatnonzero(kind == DONE), np.flatnonzero(kind == STATUS)
    words, table = rows.words, tl.attempts
    # -- Executing: new attempts of distinct shards --------------------------------------------
    ex_stage, ex_shard, attempt = stage[ex], shard[ex], rows.ints["attempt"][lo:hi][ex]
    if len(np.unique(ex_stage.astype(np.int64) << 40 | ex_shard)) < len(ex):
        return False
    if not table.can_add_many(words, ex_stage, ex_shard):
        return False
    heads = table.heads(words, ex_stage, ex_shard)
    for k in np.flatnonzero(heads >= 0).tolist():
        if (words[ex_stage[k]], int(ex_shard[k]), int(attempt[k])) in table:
            return False  # an attempt seen before: per line
    # -- done: each closes the attempt its worker runs ------------------------------------------
    acting = np.flatnonzero(kind != STATUS)
    order = acting[np.argsort(worker[acting], kind="stable")]
    same = np.zeros(len(order), bool)
    same[1:] = worker[order[1:]] == worker[order[:-1]]
    prev = np.full(hi - lo, -1)
    prev[order[1:][same[1:]]] = order[:-1][same[1:]]
    done_prev = prev[dn]
    in_batch = done_prev >= 0
    if ((kind[done_prev[in_batch]] != EXECUTING) | (shard[done_prev[in_batch]] != shard[dn[in_batch]])).any():
        return False
    held = _held(tl, [words[c] for c in worker[dn[~in_batch]].tolist()], shard[dn[~in_batch]])
    if held is None:
        return False
    # -- plain: apply -------------------------------------------------------------------------
    tl.seen_rows(hi - lo, float(ts.max()), source)  # every bulk row has its Python logging time
    _stages(tl, rows, lo, hi, st)
    new = table.add_many(words, ex_stage, ex_shard, attempt, worker[ex], ts[ex], "running", heads)
    row_of_ex = np.full(hi - lo, -1, np.int64)
    row_of_ex[ex] = new
    target = np.empty(len(dn), np.int64)
    target[in_batch] = row_of_ex[done_prev[in_batch]]
    target[~in_batch] = held
    table.close_many(target, ts[dn], rows.secs[lo:hi][dn], "done")
    _holders(tl, rows, lo, hi, order, same, source)
    _status(tl, rows, lo, hi, st, dn)
    return True


def _held(tl: Timeline, workers: list[str], shards: np.ndarray) -> np.ndarray | None:
    """Table rows of the attempts these workers hold since before the batch; None unless each
    holds an attempt of the shard given."""
    got = [tl.held(w) for w in workers]
    keys = [k for k, s in zip(got, shards.tolist(), strict=True) if k is not None and k[1] == s]
    if len(keys) < len(got):
        return None
    names = list(dict.fromkeys(k[0] for k in keys))
    code = {n: i for i, n in enumerate(names)}
    stage = np.array([code[k[0]] for k in keys], np.int64)
    table = tl.attempts
    rows = table.heads(names, stage, shards)
    attempt = np.array([k[2] for k in keys], np.int64)
    newest = np.frombuffer(table.attempt, dtype=np.int64)[rows] if len(rows) else attempt
    for i in np.flatnonzero((rows < 0) | (newest != attempt)).tolist():
        rows[i] = table.row_of(keys[i])  # not its shard's newest attempt
    return rows


def _stages(tl: Timeline, rows: DenseRows, lo: int, hi: int, st: np.ndarray) -> None:
    """Stages in order of first mention; a status line's total (last non-zero) sets the stage's."""
    stage = rows.stage[lo:hi]
    codes, first = np.unique(stage, return_index=True)
    first, codes = first[codes >= 0], codes[codes >= 0]
    totals, named = rows.ints["total"][lo:hi][st], stage[st]
    for code in codes[np.argsort(first)].tolist():
        mine = totals[(named == code) & (totals > 0)]
        tl.stage(rows.words[code], int(mine[-1]) if len(mine) else 0)


def _holders(tl: Timeline, rows: DenseRows, lo: int, hi: int, order, same, source: str) -> None:
    """Per worker (grouped rows `order`): its state after the batch (busy after Executing, ready
    after done), when it was last seen, and what it holds."""
    kind, ts, worker, shard = rows.kind[lo:hi], rows.ts[lo:hi], rows.worker[lo:hi], rows.ints["shard"][lo:hi]
    starts = np.flatnonzero(~same)
    if not len(starts):
        return
    ends = np.append(starts[1:], len(order)) - 1
    tops = np.maximum.reduceat(ts[order], starts)
    by_first = np.argsort(order[starts], kind="stable")  # workers in order of their first row
    last = order[ends[by_first]]
    names = [rows.words[c] for c in worker[last].tolist()]
    busy = (kind[last] == EXECUTING).tolist()
    shards = shard[last].tolist()
    stages = [rows.words[c] for c in rows.stage[lo:hi][last].tolist()]
    attempts = rows.ints["attempt"][lo:hi][last].tolist()
    for g, name, is_busy, k, top in zip(by_first.tolist(), names, busy, shards, tops[by_first].tolist(), strict=True):
        if tl.seen_elsewhere(name, source):
            for j in order[starts[g] : ends[g] + 1].tolist():  # its state came from another file: row by row
                b = kind[j] == EXECUTING
                tl.worker(name, float(ts[j]), state="busy" if b else "ready", shard=int(shard[j]) if b else None)
        else:  # this file's rows alone: its newest row decides, seen at its latest time
            tl.worker(name, top, state="busy" if is_busy else "ready", shard=k if is_busy else None)
    for name, is_busy, stage, k, a in zip(names, busy, stages, shards, attempts, strict=True):
        tl.hold(name, (stage, k, a) if is_busy else None)


def _status(tl: Timeline, rows: DenseRows, lo: int, hi: int, st: np.ndarray, dn: np.ndarray) -> None:
    """Status rows: the job, the status_exec facts, progress, the status series."""
    ts = rows.ts[lo:hi]
    if len(dn):
        tl.progressed(float(ts[dn[-1]]))  # the last done line sets it
    if len(st):
        idx = st + lo
        exec_ = rows.exec[idx]
        named = exec_[exec_ >= 0]
        if len(named):
            tl.named(rows.words[named[-1]])
        alive = rows.ints["alive"][idx]
        key = exec_.astype(np.int64) * (1 << 40) + alive
        change = np.flatnonzero(np.diff(key)) + 1
        run_first = np.concatenate(([0], change))
        run_last = np.concatenate((change - 1, [len(st) - 1]))
        for a, b in zip(run_first, run_last, strict=True):
            fields = (_name(rows, exec_[a]), None if alive[a] < 0 else int(alive[a]))
            tl.fact(StatusExec(float(ts[st[a]]), *fields), runs=True)
            if b != a:
                tl.fact(StatusExec(float(ts[st[b]]), *fields), runs=True)
        stage, completed = rows.stage[idx], rows.ints["completed"][idx]
        last = tl.status[-1] if tl.status else None
        prev_stage = np.concatenate(([-2], stage[:-1]))
        prev_completed = np.concatenate(([0], completed[:-1]))
        rising = (stage == prev_stage) & (completed > prev_completed)
        if last is not None:
            code = rows.words.index(last["stage"]) if last["stage"] in rows.words else -3
            rising[0] = stage[0] == code and completed[0] > last["completed"]
        after = st > (dn[-1] if len(dn) else -1)
        times = ts[st[rising & after]]
        if len(times):  # then the rising counts of status lines after it
            tl.progressed(float(times.max()), at_least=True)
        tl.status.extend(np.array(rows.words, dtype=object)[stage], _status_values(rows, idx))
