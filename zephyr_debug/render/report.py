"""`zdebug report`: one self-contained HTML file (plotly.js inlined once, no network needed).

Charts: a shard Gantt per stage (workers x time, one bar trace per attempt outcome, each in
its own colour, plus an outline over the shards the analysis flagged, labelled without
overlaps), the status series with tail episodes shaded, and memory/disk of the top-k workers.
Tables: the findings (each links to its bar), Spark-like summary metrics per stage, per-worker
totals, every attempt (sortable, capped), tail episodes, crash groups. Nothing here analyses:
the findings, episodes and crash groups come from the one analysis. Large jobs stay light
(LIMITS, explained in the footer): traces per outcome, not per shard; time series binned (max
per bin); top-k workers only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from zephyr_debug.analyze.analysis import Analysis
from zephyr_debug.analyze.counters import ITEMS, Run
from zephyr_debug.findings import Finding
from zephyr_debug.model import Evidence
from zephyr_debug.render.output import duration, short_names
from zephyr_debug.render.report_script import CSS, SCRIPT
from zephyr_debug.render.report_tables import (
    OUTCOMES,
    attempt_frame,
    attempt_table,
    e,
    label,
    num,
    size,
    summary_metrics,
    table,
    worker_totals,
)
from zephyr_debug.render.warnings import capped

FLAGGED = "#f58518"  # outline of the bars of flagged shards (no outcome uses it)
SERIES = {"in_flight": "#4c78a8", "queue_depth": "#b279a2", "completed": "#54a24b"}
TEMPLATE = "plotly_white"
FINDINGS_SHOWN = 15  # the rest sit in a collapsed <details>
LABEL_LANES = (-22, 22, -40, 40, -58, 58)  # label offsets (px) that stagger labels close to each other
ERROR_CHARS = 300  # failure text in a hover


@dataclass(frozen=True)
class Limits:
    """What keeps a 5,000-shard x 200-worker report light enough for a browser."""

    bars_per_stage: int = 20_000  # beyond this, the shortest finished attempts are left out
    series_points: int = 1_500  # status series: time bins (max per bin)
    sample_points: int = 400  # memory/disk per worker: time bins (max per bin)
    top_workers: int = 10  # memory/disk charts: workers with the highest peak RSS
    labels_per_stage: int = 20  # flagged shards annotated with their id (overlapping ones dropped)
    bar_texts: int = 300  # stages with at most this many attempts write the shard id in each bar
    tail_shades: int = 200  # tail episodes shaded


@dataclass(frozen=True)
class Bar:
    """Where a flagged shard's newest attempt is drawn: figure, x span, worker row index."""

    fig: str
    x0: float
    x1: float
    y: int


def render(ev: Evidence, analysis: Analysis, limits: Limits = Limits(), earlier: Sequence[Run] = ()) -> str:
    """The HTML page of a job's evidence and its one analysis (findings, tail episodes, crash groups);
    `earlier`: counter summaries of earlier runs (`sources.earlier.runs`), overlaid on throughput."""
    t0 = _origin(ev)
    notes: list[str] = []
    attempts = attempt_frame(ev, t0)
    marks = _marks(analysis.problems)  # outlined and labelled; info findings only link to their bars
    wanted = set(_marks(analysis.findings))
    bars: dict[tuple[str, int], Bar] = {}
    timelines = []
    for i, stage in enumerate(_stage_names(ev)):
        fig_id = f"fig-{i}"
        fig = _gantt(attempts, stage, t0, marks, limits, notes, fig_id, bars, wanted)
        chart = (
            _plot(fig_id, fig, labels=True) + f'<p class="muted" id="{fig_id}-labels"></p>'
            if fig
            else '<p class="muted">no attempts</p>'
        )
        timelines.append(f"<h2>Shard timeline: {e(stage)}</h2>{chart}{summary_metrics(attempts, stage)}")
    n = len(timelines)
    progress = _progress(ev, t0, analysis.tail, limits, notes)
    resources = _resources(ev, t0, limits, notes)
    throughput = _throughput(ev, t0, limits, notes, earlier)
    body = [
        _header(ev, analysis, t0),
        _findings(analysis.findings, bars),
        _legend(),
        *timelines,
        "<h2>Progress over time</h2>"
        + (_plot(f"fig-{n}", progress) if progress else _no_data())
        + _episodes(analysis.tail, t0),
        "<h2>Throughput per stage</h2>" + (_plot(f"fig-{n + 2}", throughput) if throughput else _no_data()),
        "<h2>Worker memory and disk</h2>" + (_plot(f"fig-{n + 1}", resources) if resources else _no_data()),
        "<h2>Workers</h2>" + worker_totals(ev, attempts),
        "<h2>Attempts</h2>" + attempt_table(attempts, set(marks)),
        _crashes(analysis.crash_groups),
        _footer(notes),
    ]
    script = get_plotlyjs().replace("</script", "<\\/script")
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>zdebug report · {e(ev.job)}'
        f"</title><style>{CSS}</style><script>{script}</script></head>\n<body>\n"
        + "\n".join(body)
        + f"\n<script>{SCRIPT}</script>\n</body></html>\n"
    )


def _no_data() -> str:
    return '<p class="muted">no data</p>'


def _marks(findings: tuple[Finding, ...]) -> dict[tuple[str, int], Finding]:
    """(stage, shard) -> the highest-ranked finding about it (findings come ranked)."""
    marks: dict[tuple[str, int], Finding] = {}
    for f in findings:
        if f.stage is not None:
            for shard in f.all_shards:
                marks.setdefault((f.stage, int(shard)), f)
    return marks


def _origin(ev: Evidence) -> float:
    """The job's first timestamp: the charts' x axis is seconds since then."""
    starts = [s.start_ts for s in ev.stages if s.start_ts] + [
        num(ev.attempts, "start_ts").min(),
        num(ev.status, "ts").min(),
        num(ev.samples, "ts").min(),
    ]
    starts = [t for t in starts if t == t and t is not None]
    return float(min(starts)) if starts else float(ev.now)


def _stage_names(ev: Evidence) -> list[str]:
    names = [s.name for s in ev.stages]
    return names + [s for s in pd.unique(ev.attempts["stage"].dropna()) if s not in names]


def _x_title(t0: float) -> str:
    return f"seconds since {datetime.fromtimestamp(t0, UTC):%Y-%m-%d %H:%M:%S} UTC"


def _gantt(
    attempts: pd.DataFrame,
    stage: str,
    t0: float,
    marks: dict[tuple[str, int], Finding],
    limits: Limits,
    notes: list[str],
    fig_id: str,
    bars: dict[tuple[str, int], Bar],
    wanted: set[tuple[str, int]],
):
    """The stage's attempts as bars on worker rows, the `marks` outlined and labelled; fills `bars`
    with where the newest attempt of each `wanted` shard is drawn."""
    a = attempts[attempts["stage"] == stage]
    if not len(a):
        return None
    mine = {shard: f for (s, shard), f in marks.items() if s == stage}
    is_hot = a["shard"].isin(list(mine))
    done = (a["outcome"] == "done") & ~a["shard"].isin([n for s, n in wanted if s == stage])
    if done.sum() > limits.bars_per_stage:
        keep = a[done].nlargest(limits.bars_per_stage, "secs").index
        notes.append(
            f"{stage}: {int(done.sum()) - len(keep):,} shortest finished attempts not drawn "
            f"(more than {limits.bars_per_stage:,})"
        )
        a = a[~done | a.index.isin(keep)]
        is_hot = is_hot[a.index]
    names, prefix = short_names(a["worker"].unique())
    labels = {worker: label(name) for worker, name in names.items()}  # category ticks and hovers: drawn as markup
    order = sorted(labels.values(), key=lambda s: (len(s), s))
    a = a.assign(y=a["worker"].map(labels))
    fig = go.Figure()
    texts = len(a) <= limits.bar_texts
    for key, (name, color) in OUTCOMES.items():
        rows = a[a["outcome"] == key]
        if len(rows):
            fig.add_trace(_bars(rows, name, {"color": color}, 0.7, texts=texts))
    hot = a[is_hot]
    if len(hot):
        # An outline over the flagged shards' attempts, so the outcome's colour still shows.
        fig.add_trace(
            _bars(
                hot, "flagged by the analysis", {"color": "rgba(0,0,0,0)", "line": {"color": FLAGGED, "width": 3}}, 0.9
            )
        )
    row_of = {name: i for i, name in enumerate(order)}
    linked = a[a["shard"].isin([n for s, n in wanted if s == stage])]
    newest = linked.sort_values("attempt").groupby("shard").tail(1).set_index("shard")
    for shard, r in newest.iterrows():
        bars[(stage, int(shard))] = Bar(fig_id, float(r["start"]), float(r["start"] + r["secs"]), row_of[r["y"]])
    placed: list[tuple[float, int]] = []
    span = max(float((a["start"] + a["secs"]).max()), 1.0)
    # `mine` keeps the analysis's ranking: labels of higher-ranked findings are kept first.
    for shard, f in [kv for kv in mine.items() if (stage, kv[0]) in bars][: limits.labels_per_stage]:
        x1, y = bars[(stage, shard)].x1, bars[(stage, shard)].y
        lane = sum(abs(y - py) <= 2 and abs(x1 - px) <= 0.25 * span for px, py in placed)
        placed.append((x1, y))
        fig.add_annotation(
            x=x1,
            y=order[y],
            text=label(f"shard {shard} · {f.kind}"),
            showarrow=True,
            arrowhead=2,
            ax=30,
            ay=LABEL_LANES[lane % len(LABEL_LANES)],
            font={"color": "#a04000"},
            bgcolor="rgba(255,255,255,0.85)",
        )
    fig.update_layout(
        template=TEMPLATE,
        barmode="overlay",
        height=int(np.clip(140 + 16 * len(order), 280, 2200)),
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"},
        xaxis={"title": _x_title(t0)},
        yaxis={
            "title": label(f"worker {prefix}…" if prefix else "worker"),
            "type": "category",
            "categoryorder": "array",
            "categoryarray": order,
            "autorange": "reversed",
        },
    )
    return fig


def _bars(rows: pd.DataFrame, name: str, marker: dict, width: float, texts: bool = False) -> go.Bar:
    detail = [
        " · ".join(
            part
            for part in (
                f"{items:,.0f} items" if items == items else "",
                size(nbytes) if nbytes == nbytes else "",
                f"peak RSS {size(peak)}" if peak == peak else "",
            )
            if part
        )
        for items, nbytes, peak in zip(rows["items"], rows["bytes"], rows["peak"], strict=True)
    ]
    error = [label(str(x)[:ERROR_CHARS]) if isinstance(x, str) and x else "" for x in rows["error"]]
    data = list(
        zip(
            rows["shard"].astype(int).tolist(),
            rows["attempt"].astype(int).tolist(),  # as Zephyr prints it: the first is 0
            rows["secs"].round(2).tolist(),
            detail,
            error,
            strict=True,
        )
    )
    return go.Bar(
        orientation="h",
        name=label(name),
        y=rows["y"].tolist(),
        base=rows["start"].round(3).to_numpy(),
        x=rows["secs"].round(3).to_numpy(),
        width=width,
        marker=marker,
        customdata=data,
        text=rows["shard"].astype(int).astype(str).tolist() if texts else None,
        textposition="inside",
        insidetextanchor="middle",
        textfont={"size": 10},
        hovertemplate="shard %{customdata[0]} · attempt %{customdata[1]} · %{customdata[2]} s<br>"
        "worker %{y}<br>%{customdata[3]}<br>%{customdata[4]}<extra>" + label(name) + "</extra>",
    )


def _binned(frame: pd.DataFrame, cols: list[str], points: int) -> pd.DataFrame:
    """At most `points` rows: equal time bins, each column's max (peaks survive), bin start as ts."""
    if len(frame) <= points:
        return frame
    ts = frame["ts"].to_numpy(float)
    edges = np.linspace(ts.min(), ts.max(), points + 1)
    b = np.clip(np.searchsorted(edges, ts, side="right") - 1, 0, points - 1)
    out = frame[cols].groupby(b).max()
    out["ts"] = edges[out.index]
    return out.reset_index(drop=True)


def _progress(ev: Evidence, t0: float, episodes, limits: Limits, notes: list[str]):
    st = ev.status
    if not len(st):
        return None
    cols = list(SERIES)
    frame = pd.DataFrame({c: num(st, c) for c in ["ts", *cols]}).dropna(subset=["ts"]).sort_values("ts")
    binned = _binned(frame, cols, limits.series_points)
    if len(binned) < len(frame):
        notes.append(f"status: {len(frame):,} snapshots binned to {len(binned):,} points (max per bin)")
    fig = go.Figure()
    for col, color in SERIES.items():
        fig.add_trace(
            go.Scatter(
                x=(binned["ts"] - t0).round(3).to_numpy(),
                y=binned[col].to_numpy(),
                name=col,
                mode="lines",
                line={"color": color, "shape": "hv"},
            )
        )
    for ep in episodes[: limits.tail_shades]:
        fig.add_vrect(x0=ep.start - t0, x1=ep.end - t0, fillcolor=FLAGGED, opacity=0.18, line_width=0)
    if len(episodes) > limits.tail_shades:
        notes.append(f"tail: first {limits.tail_shades} of {len(episodes)} episodes shaded")
    for s in ev.stages[1:]:
        if s.start_ts:
            fig.add_vline(x=s.start_ts - t0, line={"color": "#999", "dash": "dot"})
            fig.add_annotation(
                x=s.start_ts - t0,
                y=1,
                yref="paper",
                text=label(s.name),
                showarrow=False,
                xanchor="left",
                yanchor="bottom",
                font={"size": 10, "color": "#666"},
            )
    fig.update_layout(
        template=TEMPLATE,
        height=360,
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        xaxis={"title": _x_title(t0)},
        yaxis={"title": "shards"},
        hovermode="x unified",
        title={"text": "shaded: tail episodes (in flight > 0, queue empty)", "font": {"size": 12}},
    )
    return fig


def _throughput(ev: Evidence, t0: float, limits: Limits, notes: list[str], earlier: Sequence[Run]):
    """Items/s per stage over time: the status series' cumulative `items` (binned, max per bin)
    differenced over the time gaps, so a point is the mean rate of its bin; each earlier run's
    mean rate of the same stage (items over its wall time) as a dashed line."""
    st = ev.status
    if not len(st) or "items" not in st:
        return None
    frame = pd.DataFrame({"ts": num(st, "ts"), "items": num(st, "items"), "stage": st["stage"]})
    frame = frame.dropna().sort_values("ts", kind="stable")
    palette = pio.templates[TEMPLATE].layout.colorway
    fig = go.Figure()
    for i, (stage, rows) in enumerate(frame.groupby("stage", sort=False)):
        binned = _binned(rows, ["items"], limits.series_points)
        gap = binned["ts"].diff().to_numpy()
        rate = binned["items"].diff().to_numpy() / np.where(gap > 0, gap, np.nan)
        keep = np.isfinite(rate)
        if not keep.any():
            continue
        x = binned["ts"].to_numpy()
        color = palette[i % len(palette)]
        fig.add_trace(
            go.Scatter(
                x=(x[:-1][keep[1:]] - t0).round(3),  # a rate holds from the row before
                y=np.clip(rate[keep], 0, None).round(3),
                name=label(stage),
                mode="lines",
                line={"color": color, "shape": "hv"},
            )
        )
        span = [x[0] - t0, x[-1] - t0]
        for run in earlier:
            before = run.stage(str(stage))
            items = before.counter(ITEMS) if before else None
            if items and items.rate:
                fig.add_trace(
                    go.Scatter(
                        x=span,
                        y=[round(items.rate, 3)] * 2,
                        name=label(f"{stage} · {run.job} (mean)"),
                        mode="lines",
                        line={"color": color, "dash": "dash", "width": 1},
                    )
                )
    if not fig.data:
        return None
    if len(frame) > limits.series_points:
        notes.append(f"throughput: each stage's status items binned to at most {limits.series_points:,} points")
    if not earlier:
        notes.append("throughput: no earlier runs of this pipeline in the job store to overlay")
    fig.update_layout(
        template=TEMPLATE,
        height=320,
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        xaxis={"title": _x_title(t0)},
        yaxis={"title": "items/s", "rangemode": "tozero"},
        hovermode="x unified",
        title={"text": "status lines' items per second; dashed: earlier runs' mean", "font": {"size": 12}},
    )
    return fig


def _resources(ev: Evidence, t0: float, limits: Limits, notes: list[str]):
    s = ev.samples
    if not len(s):
        return None
    s = pd.DataFrame(
        {
            "ts": num(s, "ts"),
            "worker": s["worker"].astype(str),
            "rss": num(s, "rss_bytes") / 2**20,
            "disk": num(s, "disk_bytes") / 2**20,
        }
    ).dropna(subset=["ts"])
    peak = s.groupby("worker")["rss"].max().sort_values(ascending=False, kind="stable")
    top = list(peak.index[: limits.top_workers])
    notes.append(
        f"memory/disk: top {len(top)} of {len(peak)} workers by peak RSS, each binned to at most "
        f"{limits.sample_points} points (max per bin)"
    )
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, subplot_titles=("RSS (MB)", "scratch disk (MB)")
    )
    palette = pio.templates[TEMPLATE].layout.colorway
    for i, worker in enumerate(top):
        w = _binned(s[s["worker"] == worker].sort_values("ts"), ["rss", "disk"], limits.sample_points)
        x = (w["ts"] - t0).round(3).to_numpy()
        color = palette[i % len(palette)]
        for row, col in ((1, "rss"), (2, "disk")):
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=w[col].round(2).to_numpy(),
                    name=label(worker),
                    legendgroup=label(worker),
                    showlegend=row == 1,
                    mode="lines",
                    line={"color": color, "width": 1.5},
                ),
                row=row,
                col=1,
            )
    limit = ev.config.get("memory_limit_mb")
    if limit:
        fig.add_hline(
            y=float(limit),
            row=1,
            col=1,
            line={"color": "#e45756", "dash": "dash"},
            annotation_text=label(f"memory limit {limit} MB"),
            annotation_position="top left",
        )
    fig.update_layout(template=TEMPLATE, height=560, margin={"l": 10, "r": 10, "t": 30, "b": 40}, hovermode="x unified")
    fig.update_xaxes(title_text=_x_title(t0), row=2, col=1)
    return fig


def _plot(div_id: str, fig: go.Figure, labels: bool = False) -> str:
    """A figure's div and JSON spec (drawn by SCRIPT; `labels`: uncluttered after drawing)."""
    spec = pio.to_json(fig, validate=False).replace("<", "\\u003c")
    mark = ' data-labels="1"' if labels else ""
    return (
        f'<div class="plot" id="{div_id}"{mark}></div>'
        f'<script type="application/json" id="{div_id}-spec">{spec}</script>'
    )


def _header(ev: Evidence, analysis: Analysis, t0: float) -> str:
    rows = [
        [
            e(s.name),
            str(s.total),
            f"{(s.start_ts or t0) - t0:.1f}s" if s.start_ts else "-",
            duration(s.end_ts - s.start_ts) if s.start_ts and s.end_ts else "-",
        ]
        for s in ev.stages
    ]
    fatal = f'<p class="cause">fatal error: {e(ev.fatal_error)}</p>' if ev.fatal_error else ""
    warn = "".join(f'<p class="muted">warning: {e(w)}</p>' for w in capped([*ev.warnings, *analysis.warnings]))
    return (
        f'<h1>zdebug report · {e(ev.job)}</h1><p class="headline">{e(analysis.headline)}</p>'
        f"<p>state <b>{e(ev.state)}</b> · source <code>{e(ev.source)}</code> · {len(ev.attempts):,} attempts · "
        f"{ev.attempts['worker'].nunique():,} workers</p>{fatal}{warn}"
        + (table(["stage", "shards", "starts at", "wall"], rows) if rows else "")
    )


def _legend() -> str:
    keys = "".join(
        f'<span class="swatch" style="background:{color}"></span>{e(name)}' for name, color in OUTCOMES.values()
    )
    flagged = f'<span class="swatch" style="border:3px solid {FLAGGED};box-sizing:border-box"></span>flagged'
    return f'<p class="muted">Bar colours: {keys}{flagged} (outline over the shards a finding names)</p>'


def _findings(findings: tuple[Finding, ...], bars: dict[tuple[str, int], Bar]) -> str:
    if not findings:
        return "<h2>Findings</h2><p>None: no shard held its stage up, failed, or ran on a dead worker.</p>"
    rows = [_finding_row(i, f, bars) for i, f in enumerate(findings, 1)]
    head = ["#", "severity", "finding", "where", "cost", "evidence", "next"]
    shown, rest = rows[:FINDINGS_SHOWN], rows[FINDINGS_SHOWN:]
    more = f"<details><summary>{len(rest)} more finding(s)</summary>{table(head, rest)}</details>" if rest else ""
    return f"<h2>Findings ({len(findings)})</h2>" + table(head, shown) + more


def _finding_row(i: int, f: Finding, bars: dict[tuple[str, int], Bar]) -> list[str]:
    causes = "".join(f"<br>+{e(c)}" for c in f.causes if c != f.kind)
    where = " · ".join(e(x) for x in (f.stage, _shards(f), f.worker) if x)
    bar = next((bars[(f.stage, s)] for s in f.all_shards if f.stage is not None and (f.stage, s) in bars), None)
    if bar:
        where += (
            f'<br><a class="jump" href="#{bar.fig}" data-finding="finding-{i}" data-fig="{bar.fig}" '
            f'data-x0="{bar.x0:.3f}" data-x1="{bar.x1:.3f}" data-y="{bar.y}" data-color="{FLAGGED}">'
            "show on timeline</a>"
        )
    return [
        f'<td id="finding-{i}">{i}</td>',
        f'<span class="sev sev-{e(f.severity)}">{e(f.severity)}</span>',
        f'<b>{e(f.title)}</b><br><span class="cause">{e(f.kind)}</span>{causes}',
        where or "job",
        e(f.cost.sentence() or "-"),
        "<br>".join(e(line) for line in f.evidence),
        "<br>".join(f"<code>{e(step)}</code>" for step in f.next),
    ]


def _shards(f: Finding) -> str:
    shards = f.all_shards
    if not shards:
        return ""
    listed = ", ".join(map(str, shards[:10])) + (" …" if len(shards) > 10 else "")
    return f"shard {listed}" if len(shards) == 1 else f"shards {listed}"


def _episodes(episodes, t0: float) -> str:
    if not episodes:
        return ""
    rows = [
        [
            e(ep.stage),
            f"{ep.start - t0:.1f}s",
            e(duration(ep.duration_s)),
            "-" if ep.share is None else f"{ep.share * 100:.0f}%",
            str(ep.in_flight),
            e(", ".join(map(str, ep.shards)) + (" …" if ep.n_shards > len(ep.shards) else "")),
        ]
        for ep in episodes
    ]
    return "<h3>Tail episodes</h3>" + table(
        ["stage", "starts at", "duration", "share of stage", "in flight", "shards"], rows
    )


def _crashes(groups) -> str:
    if not groups:
        return "<h2>Crash groups</h2><p>No crashes.</p>"
    parts = [f"<h2>Crash groups ({len(groups)}, {sum(g.count for g in groups)} crashes)</h2>"]
    for i, g in enumerate(groups):
        shards = ", ".join(map(str, g.shards[:20])) + (" …" if len(g.shards) > 20 else "")
        parts.append(
            f"<details{' open' if i < 3 else ''}><summary><b>{g.count}×</b> <code>{e(g.kind)}</code> "
            f'{e(g.exception)}: {e(g.raw_message or g.message)} <span class="muted">· shards {e(shards or "-")} · '
            f"{len(g.workers)} worker(s) · {e(g.fingerprint)}</span></summary><pre>{e(g.example)}</pre>"
            "</details>"
        )
    return "".join(parts)


def _footer(notes: list[str]) -> str:
    how = (
        "Shard bars are drawn as one trace per attempt outcome (not one per shard); time series are binned "
        "(max per bin, so peaks survive)."
    )
    return (
        f"<footer><p>{e(how)}</p>"
        + "".join(f"<p>{e(n)}</p>" for n in notes)
        + '<p>charts drawn in <span id="render-ms">…</span> · generated by zdebug report · '
        f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC</p></footer>"
    )
