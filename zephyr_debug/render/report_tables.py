"""The attempt rows `zdebug report` draws, and its Spark-like tables: summary metrics per stage,
every attempt (sortable, capped), per-worker totals. Descriptive numbers only: the findings
come from the one analysis.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from zephyr_debug.model import INFRA, Evidence
from zephyr_debug.render.output import safe

# Outcome of an attempt as drawn: key -> (legend label, colour), in legend order.
OUTCOMES = {
    "done": ("done", "#4c78a8"),
    "task": ("TASK failure", "#e45756"),
    "oom": ("OOM kill", "#b279a2"),
    "crash": ("segfault / exit", "#9d755d"),
    "lost": ("worker lost / requeued", "#eeca3b"),
    "running": ("running", "#72b7b2"),
    "stale": ("stale result", "#bab0ac"),
    "other": ("other", "#999999"),
}
FAILED = ("task", "oom", "crash", "lost")
ATTEMPT_ROWS = 1_000  # attempt table: failed and flagged attempts first, then the longest
WORKER_ROWS = 500  # worker table: the busiest
QUANTILES = (("min", 0), ("p25", 25), ("median", 50), ("p75", 75), ("max", 100))


def e(text) -> str:
    """Evidence text for HTML: control characters shown as `\\x1b` (as in a terminal), then escaped."""
    return html.escape(safe(text))


def label(text) -> str:
    """Evidence text for a plotly string (trace name, axis title, category tick, annotation, hover
    value): plotly draws `<a href>`, `<b>`, `<br>`, `<span style>` found in them and decodes only
    the entities it knows (`&amp;`, `&lt;`, `&gt;`, numeric; not `&quot;`), so `&`, `<`, `>` become
    entities and quotes stay as they are: `e()` here would show `&quot;` in the chart."""
    return safe(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def num(frame: pd.DataFrame, col: str) -> pd.Series:
    return pd.to_numeric(frame[col], errors="coerce") if col in frame else pd.Series(np.nan, index=frame.index)


def _text(frame: pd.DataFrame, col: str) -> pd.Series:
    return frame[col].astype(object) if col in frame else pd.Series(None, index=frame.index, dtype=object)


def outcome_keys(a: pd.DataFrame) -> np.ndarray:
    """OUTCOMES key of each attempt from what the evidence recorded (failure kind, return code)."""
    outcome, failure, kind = _text(a, "outcome"), _text(a, "failure"), _text(a, "kind")
    failed = outcome == "failed"
    oom = failed & ((failure == "oom") | (num(a, "returncode") == -9))
    crash = failed & ~oom & failure.isin(["segv", "exit"])
    lost = (outcome == "requeued") | (failed & ~oom & ~crash & (kind == INFRA))
    return np.select(
        [outcome == "done", oom, crash, lost, failed, outcome == "running", outcome == "stale"],
        ["done", "oom", "crash", "lost", "task", "running", "stale"],
        "other",
    )


def attempt_frame(ev: Evidence, t0: float) -> pd.DataFrame:
    """One row per attempt with a start: stage, shard, attempt (0-based), worker, outcome key,
    start (s since t0), secs, items, bytes, peak RSS (bytes), error."""
    a = ev.attempts
    secs = num(a, "elapsed_s")
    start = num(a, "start_ts").fillna(num(a, "end_ts") - secs)
    end = num(a, "end_ts").fillna(start + secs).fillna(ev.now)
    frame = pd.DataFrame(
        {
            "stage": a["stage"].astype(object),
            "shard": num(a, "shard"),
            "attempt": num(a, "attempt").fillna(0),
            "worker": a["worker"].fillna("?").astype(str),
            "outcome": outcome_keys(a),
            "start_abs": start,
            "end_abs": end,
            "secs": (end - start).clip(lower=0),
            "items": num(a, "items"),
            "bytes": num(a, "bytes"),
            "error": _text(a, "error"),
        }
    )
    frame = frame.dropna(subset=["start_abs"])
    frame["peak"] = _peak_rss(ev, frame, num(a, "peak_rss_bytes")[frame.index])
    frame["start"] = frame["start_abs"] - t0
    return frame.drop(columns=["start_abs", "end_abs"])


def _peak_rss(ev: Evidence, f: pd.DataFrame, own: pd.Series) -> np.ndarray:
    """The attempt's own peak RSS when recorded, else the highest RSS its worker's heartbeats
    showed while it ran (vectorised: samples sorted by worker then time, one range max each)."""
    s = ev.samples
    ts, rss = num(s, "ts").to_numpy(float), num(s, "rss_bytes").to_numpy(float)
    ok = ~np.isnan(ts) & ~np.isnan(rss)
    if not ok.any() or not len(f):
        return own.to_numpy(float)
    codes, names = pd.factorize(s["worker"].astype(str)[ok])
    ts, rss = ts[ok], rss[ok]
    base, width = ts.min(), ts.max() - ts.min() + 1.0
    key = codes * width + (ts - base)
    order = np.argsort(key, kind="stable")
    key, rss = key[order], np.r_[rss[order], np.nan]
    wc = pd.Index(names).get_indexer(f["worker"])
    lo = np.searchsorted(key, wc * width + np.clip(f["start_abs"].to_numpy(float) - base, 0, width), "left")
    hi = np.searchsorted(key, wc * width + np.clip(f["end_abs"].to_numpy(float) - base, 0, width), "right")
    has = (wc >= 0) & (hi > lo)
    seen = np.full(len(f), np.nan)
    if has.any():
        seen[has] = np.fmax.reduceat(rss, np.column_stack([lo[has], hi[has]]).ravel())[::2]
    return np.where(np.isnan(own.to_numpy(float)), seen, own.to_numpy(float))


def size(n: float, unit: str = "B") -> str:
    """1234567 -> '1.2 MB' (binary multiples); '-' when unknown."""
    if n is None or n != n:
        return "-"
    for prefix in ("", "K", "M", "G", "T"):
        if abs(n) < 1024 or prefix == "T":
            return f"{n:.0f} {prefix}{unit}" if not prefix else f"{n:.1f} {prefix}{unit}"
        n /= 1024
    return "-"


def _count(n: float) -> str:
    return "-" if n != n else f"{n:,.0f}"


def _secs(n: float) -> str:
    return "-" if n != n else f"{n:,.1f} s"


def table(head: list[str], rows: list[list[str]], sortable: bool = False) -> str:
    """`rows` hold HTML already escaped (`<td>` included when a cell needs attributes)."""
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table{' class=sortable' if sortable else ''}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: float, shown: str) -> str:
    """A numeric cell that sorts by `value`."""
    key = "" if value != value else f"{value:.6g}"
    return f'<td class="n" data-v="{key}">{e(shown)}</td>'


def summary_metrics(f: pd.DataFrame, stage: str) -> str:
    """Spark's 'Summary Metrics for Completed Tasks': quantiles over the stage's finished attempts."""
    done = f[(f["stage"] == stage) & (f["outcome"] == "done")]
    if not len(done):
        return '<p class="muted">No finished attempts yet.</p>'
    metrics = [
        ("duration", done["secs"], _secs),
        ("items", done["items"], _count),
        ("bytes", done["bytes"], size),
        ("peak memory (RSS)", done["peak"], size),
    ]
    rows = []
    for name, values, fmt in metrics:
        v = values.to_numpy(float)
        v = v[~np.isnan(v)]
        shown = [fmt(float(np.percentile(v, q))) if len(v) else "-" for _, q in QUANTILES]
        rows.append([e(name), *(f'<td class="n">{e(x)}</td>' for x in shown)])
    return f"<h3>Summary metrics over {len(done):,} finished attempts</h3>" + table(
        ["metric", *(q for q, _ in QUANTILES)], rows
    )


def attempt_table(f: pd.DataFrame, flagged: set[tuple[str, int]]) -> str:
    """Every attempt, sortable; above ATTEMPT_ROWS the failed and flagged ones, then the longest."""
    if not len(f):
        return '<p class="muted">No attempts.</p>'
    pairs = zip(f["stage"], f["shard"].fillna(-1), strict=True)
    hot = pd.Series([(s, int(n)) in flagged for s, n in pairs], index=f.index)
    rank = (f["outcome"] == "done").astype(int) - hot.astype(int)
    shown = f.assign(rank=rank).sort_values(["rank", "secs"], ascending=[True, False], kind="stable")
    shown = shown.head(ATTEMPT_ROWS)
    note = (
        f'<p class="muted">{len(shown):,} of {len(f):,} attempts shown: failed, unfinished and flagged ones '
        "first, then the longest.</p>"
        if len(shown) < len(f)
        else ""
    )
    rows = [
        [
            e(r.stage),
            _cell(r.shard, _count(r.shard)),
            _cell(r.attempt, f"{r.attempt:.0f}"),  # as Zephyr prints it: the first is 0
            e(r.worker),
            f'<td data-v="{e(OUTCOMES[r.outcome][0])}">{e(OUTCOMES[r.outcome][0])}</td>',
            _cell(r.start, f"{r.start:,.1f}"),
            _cell(r.secs, f"{r.secs:,.1f}"),
            _cell(r.items, _count(r.items)),
            _cell(r.bytes, size(r.bytes)),
            _cell(r.peak, size(r.peak)),
            e(r.error or ""),
        ]
        for r in shown.itertuples()
    ]
    head = [
        "stage",
        "shard",
        "attempt",
        "worker",
        "outcome",
        "start (s)",
        "seconds",
        "items",
        "bytes",
        "peak RSS",
        "error",
    ]
    return note + f'<div class="scroll" id="attempts">{table(head, rows, sortable=True)}</div>'


def worker_totals(ev: Evidence, f: pd.DataFrame) -> str:
    """Per worker: attempts done / failed, busy seconds, peak RSS (heartbeats, else the attempts')."""
    if not len(f):
        return '<p class="muted">No attempts.</p>'
    g = f.assign(ok=f["outcome"] == "done", bad=f["outcome"].isin(FAILED)).groupby("worker")
    totals = pd.DataFrame(
        {"done": g["ok"].sum(), "failed": g["bad"].sum(), "busy": g["secs"].sum(), "peak": g["peak"].max()}
    )
    s = ev.samples
    if len(s):
        beat = pd.concat([num(s, "rss_bytes"), num(s, "rss_peak_bytes")], axis=1).max(axis=1)
        totals["peak"] = np.fmax(totals["peak"], beat.groupby(s["worker"].astype(str)).max().reindex(totals.index))
    state = ev.workers.set_index(ev.workers["worker"].astype(str))["state"] if len(ev.workers) else pd.Series()
    totals = totals.sort_values("busy", ascending=False, kind="stable")
    shown = totals.head(WORKER_ROWS)
    note = (
        f'<p class="muted">the {len(shown):,} busiest of {len(totals):,} workers</p>'
        if len(shown) < len(totals)
        else ""
    )
    rows = [
        [
            e(w),
            e(state.get(w, "-")),
            _cell(r.done, f"{r.done:,.0f}"),
            _cell(r.failed, f"{r.failed:,.0f}"),
            _cell(r.busy, _secs(r.busy)),
            _cell(r.peak, size(r.peak)),
        ]
        for w, r in shown.iterrows()
    ]
    return note + table(["worker", "state", "shards done", "failed attempts", "busy", "peak RSS"], rows, sortable=True)
