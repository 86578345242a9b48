"""`zdebug report`: one self-contained HTML file (plotly.js inlined once, no network needed).

Charts: a shard Gantt per stage (workers x time, one bar trace per attempt outcome plus one
for the shards the stragglers analyzer flagged), the status series with tail episodes shaded,
and memory/disk of the top-k workers. Tables: findings with their next command, tail
episodes, crash groups with an example each. Nothing here analyses: the findings, episodes
and crash groups come in ready-made. Large jobs stay light (LIMITS, explained in the footer):
traces per outcome, not per shard; time series binned (max per bin); top-k workers only.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from zephyr_debug.analyze.analysis import Analysis
from zephyr_debug.model import Evidence
from zephyr_debug.render.output import duration

OUTCOME_COLORS = {"done": "#4c78a8", "requeued": "#b279a2", "running": "#72b7b2", "stale": "#bab0ac",
                  "failed": "#e45756"}
FLAGGED = "#f58518"
SERIES = {"in_flight": "#4c78a8", "queue_depth": "#b279a2", "completed": "#54a24b"}
TEMPLATE = "plotly_white"
FINDINGS_SHOWN = 15  # the rest sit in a collapsed <details>
CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1400px;padding:0 16px;color:#222}
h1{font-size:22px} h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0} td,th{padding:3px 10px;border-bottom:1px solid #eee;
text-align:left;vertical-align:top} th{background:#f6f6f6} code,pre{font:12px ui-monospace,monospace}
pre{background:#f6f6f6;padding:8px;overflow-x:auto} .muted{color:#777} .cause{font-weight:600;color:#c0392b}
footer{margin-top:40px;font-size:12px;color:#666;border-top:1px solid #ddd;padding-top:8px}
"""
# Draws every figure, then reports how long that took (footer) and sets body[data-rendered].
DRAW = """
(function () {
  const t0 = performance.now();
  const drawn = Array.from(document.querySelectorAll("div.plot")).map(function (div) {
    const spec = JSON.parse(document.getElementById(div.id + "-spec").textContent);
    return Plotly.newPlot(div, spec.data, spec.layout, {displaylogo: false, responsive: true});
  });
  Promise.all(drawn).then(function () {
    document.getElementById("render-ms").textContent = Math.round(performance.now() - t0) + " ms";
    document.body.dataset.rendered = String(drawn.length);
  });
})();
"""


@dataclass(frozen=True)
class Limits:
    """What keeps a 5,000-shard x 200-worker report light enough for a browser."""

    bars_per_stage: int = 20_000  # beyond this, the shortest finished attempts are left out
    series_points: int = 1_500  # status series: time bins (max per bin)
    sample_points: int = 400  # memory/disk per worker: time bins (max per bin)
    top_workers: int = 10  # memory/disk charts: workers with the highest peak RSS
    labels_per_stage: int = 20  # flagged shards annotated with their id
    bar_texts: int = 300  # stages with at most this many attempts write the shard id in each bar
    tail_shades: int = 200  # tail episodes shaded


def render(ev: Evidence, analysis: Analysis, limits: Limits = Limits()) -> str:
    """The HTML page of a job's evidence and its one analysis (findings, tail episodes, crash groups)."""
    t0 = _origin(ev)
    notes: list[str] = []
    findings, groups = analysis.stragglers_json(), list(analysis.crash_groups)
    flagged, episodes = [f for f in findings["findings"] if f["shard"] is not None], findings["tail"]
    sections = [(f"Shard timeline: {s}", _gantt(ev, s, t0, flagged, limits, notes), "") for s in _stage_names(ev)]
    sections.append(("Progress over time", _progress(ev, t0, episodes, limits, notes), _episodes(episodes, t0)))
    sections.append(("Worker memory and disk", _resources(ev, t0, limits, notes), ""))
    body = [_header(ev, t0), _findings(findings)]
    for i, (title, fig, after) in enumerate(sections):
        chart = _plot(f"fig-{i}", fig) if fig else '<p class="muted">no data</p>'
        body.append(f"<h2>{_e(title)}</h2>{chart}{after}")
    body.append(_crashes(groups))
    body.append(_footer(notes))
    script = get_plotlyjs().replace("</script", "<\\/script")
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>zdebug report · {_e(ev.job)}'
            f"</title><style>{CSS}</style><script>{script}</script></head>\n<body>\n" + "\n".join(body)
            + f"\n<script>{DRAW}</script>\n</body></html>\n")


def _e(text) -> str:
    return html.escape("" if text is None else str(text))


def _num(frame: pd.DataFrame, col: str) -> pd.Series:
    return pd.to_numeric(frame[col], errors="coerce") if col in frame else pd.Series(np.nan, index=frame.index)


def _origin(ev: Evidence) -> float:
    """The job's first timestamp: the charts' x axis is seconds since then."""
    starts = [s.start_ts for s in ev.stages if s.start_ts] + [
        _num(ev.attempts, "start_ts").min(), _num(ev.status, "ts").min(), _num(ev.samples, "ts").min()]
    starts = [t for t in starts if t == t and t is not None]
    return float(min(starts)) if starts else float(ev.now)


def _stage_names(ev: Evidence) -> list[str]:
    names = [s.name for s in ev.stages]
    return names + [s for s in pd.unique(ev.attempts["stage"].dropna()) if s not in names]


def _x_title(t0: float) -> str:
    return f"seconds since {datetime.fromtimestamp(t0, timezone.utc):%Y-%m-%d %H:%M:%S} UTC"


def _short_names(workers) -> tuple[dict[str, str], str]:
    """Worker id -> label without the prefix all workers share (cut at a separator)."""
    workers = [str(w) for w in workers]
    if len(set(workers)) < 2:
        return {w: w for w in workers}, ""
    prefix = os.path.commonprefix(workers)
    cut = max(prefix.rfind(c) for c in "-_:/.") + 1
    return {w: w[cut:] for w in workers}, prefix[:cut]


def _gantt(ev: Evidence, stage: str, t0: float, flagged: list[dict], limits: Limits, notes: list[str]):
    a = ev.attempts[ev.attempts["stage"] == stage]
    secs = _num(a, "elapsed_s")
    start = _num(a, "start_ts").fillna(_num(a, "end_ts") - secs)
    end = _num(a, "end_ts").fillna(start + secs).fillna(ev.now)
    a = pd.DataFrame({"shard": _num(a, "shard"), "attempt": _num(a, "attempt").fillna(0),
                      "worker": a["worker"].fillna("?").astype(str), "outcome": a["outcome"].fillna("?"),
                      "start": start - t0, "secs": (end - start).clip(lower=0)}).dropna(subset=["start"])
    if not len(a):
        return None
    mine = [f for f in flagged if f["stage"] == stage]
    is_hot = a["shard"].isin([f["shard"] for f in mine])
    done = (a["outcome"] == "done") & ~is_hot
    if done.sum() > limits.bars_per_stage:
        keep = a[done].nlargest(limits.bars_per_stage, "secs").index
        notes.append(f"{stage}: {int(done.sum()) - len(keep):,} shortest finished attempts not drawn "
                     f"(more than {limits.bars_per_stage:,})")
        a = a[~done | a.index.isin(keep)]
        is_hot = is_hot[a.index]
    labels, prefix = _short_names(a["worker"].unique())
    order = sorted(labels.values(), key=lambda s: (len(s), s))
    a["y"] = a["worker"].map(labels)
    fig = go.Figure()
    texts = len(a) <= limits.bar_texts
    for outcome, rows in a.groupby("outcome", sort=False):
        fig.add_trace(_bars(rows, str(outcome), OUTCOME_COLORS.get(outcome, "#999"), 0.7, texts=texts))
    hot = a[is_hot]
    if len(hot):
        fig.add_trace(_bars(hot, "flagged by stragglers", FLAGGED, 0.9, outline=True))
    for f in sorted(mine, key=lambda f: -(f.get("elapsed_s") or 0))[:limits.labels_per_stage]:
        last = hot[hot["shard"] == f["shard"]].sort_values("attempt").tail(1)
        if len(last):
            r = last.iloc[0]
            fig.add_annotation(x=r["start"] + r["secs"], y=r["y"], text=_e(f"shard {f['shard']} · {f['cause']}"),
                               showarrow=True, arrowhead=2, ax=40, ay=-18, font={"color": "#a04000"},
                               bgcolor="rgba(255,255,255,0.8)")
    fig.update_layout(template=TEMPLATE, barmode="overlay", height=int(np.clip(120 + 14 * len(order), 260, 2200)),
                      margin={"l": 10, "r": 10, "t": 30, "b": 40}, legend={"orientation": "h", "y": 1.02,
                                                                            "yanchor": "bottom"},
                      xaxis={"title": _x_title(t0)},
                      yaxis={"title": _e(f"worker {prefix}…" if prefix else "worker"), "type": "category",
                             "categoryorder": "array", "categoryarray": order, "autorange": "reversed"})
    return fig


def _bars(rows: pd.DataFrame, name: str, color: str, width: float, outline: bool = False,
          texts: bool = False) -> go.Bar:
    data = np.column_stack([rows["shard"].to_numpy(float), rows["attempt"].to_numpy(float),
                            rows["secs"].round(2).to_numpy(float)])
    # Flagged shards: an outline over their attempts, so the outcome's colour still shows.
    marker = {"color": "rgba(0,0,0,0)", "line": {"color": color, "width": 3}} if outline else {"color": color}
    return go.Bar(orientation="h", name=_e(name), y=rows["y"].tolist(), base=rows["start"].round(3).to_numpy(),
                  x=rows["secs"].round(3).to_numpy(), width=width, marker=marker, customdata=data,
                  text=rows["shard"].astype(int).astype(str).tolist() if texts else None, textposition="inside",
                  insidetextanchor="middle", textfont={"size": 10},
                  hovertemplate="shard %{customdata[0]} attempt %{customdata[1]}<br>worker %{y}<br>"
                                "%{customdata[2]} s<extra>" + _e(name) + "</extra>")


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


def _progress(ev: Evidence, t0: float, episodes: list[dict], limits: Limits, notes: list[str]):
    st = ev.status
    if not len(st):
        return None
    cols = list(SERIES)
    frame = pd.DataFrame({c: _num(st, c) for c in ["ts", *cols]}).dropna(subset=["ts"]).sort_values("ts")
    binned = _binned(frame, cols, limits.series_points)
    if len(binned) < len(frame):
        notes.append(f"status: {len(frame):,} snapshots binned to {len(binned):,} points (max per bin)")
    fig = go.Figure()
    for col, color in SERIES.items():
        fig.add_trace(go.Scatter(x=(binned["ts"] - t0).round(3).to_numpy(), y=binned[col].to_numpy(), name=col,
                                 mode="lines", line={"color": color, "shape": "hv"}))
    for ep in episodes[:limits.tail_shades]:
        fig.add_vrect(x0=ep["start"] - t0, x1=ep["end"] - t0, fillcolor=FLAGGED, opacity=0.18, line_width=0)
    if len(episodes) > limits.tail_shades:
        notes.append(f"tail: first {limits.tail_shades} of {len(episodes)} episodes shaded")
    for s in ev.stages[1:]:
        if s.start_ts:
            fig.add_vline(x=s.start_ts - t0, line={"color": "#999", "dash": "dot"})
            fig.add_annotation(x=s.start_ts - t0, y=1, yref="paper", text=_e(s.name), showarrow=False,
                               xanchor="left", yanchor="bottom", font={"size": 10, "color": "#666"})
    fig.update_layout(template=TEMPLATE, height=360, margin={"l": 10, "r": 10, "t": 30, "b": 40},
                      xaxis={"title": _x_title(t0)}, yaxis={"title": "shards"}, hovermode="x unified",
                      title={"text": "shaded: tail episodes (in flight > 0, queue empty)", "font": {"size": 12}})
    return fig


def _resources(ev: Evidence, t0: float, limits: Limits, notes: list[str]):
    s = ev.samples
    if not len(s):
        return None
    s = pd.DataFrame({"ts": _num(s, "ts"), "worker": s["worker"].astype(str),
                      "rss": _num(s, "rss_bytes") / 2**20, "disk": _num(s, "disk_bytes") / 2**20}).dropna(subset=["ts"])
    peak = s.groupby("worker")["rss"].max().sort_values(ascending=False, kind="stable")
    top = list(peak.index[:limits.top_workers])
    notes.append(f"memory/disk: top {len(top)} of {len(peak)} workers by peak RSS, each binned to at most "
                 f"{limits.sample_points} points (max per bin)")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("RSS (MB)", "scratch disk (MB)"))
    palette = pio.templates[TEMPLATE].layout.colorway
    for i, worker in enumerate(top):
        w = _binned(s[s["worker"] == worker].sort_values("ts"), ["rss", "disk"], limits.sample_points)
        x = (w["ts"] - t0).round(3).to_numpy()
        color = palette[i % len(palette)]
        for row, col in ((1, "rss"), (2, "disk")):
            fig.add_trace(go.Scatter(x=x, y=w[col].round(2).to_numpy(), name=_e(worker), legendgroup=_e(worker),
                                     showlegend=row == 1, mode="lines", line={"color": color, "width": 1.5}),
                          row=row, col=1)
    limit = ev.config.get("memory_limit_mb")
    if limit:
        fig.add_hline(y=float(limit), row=1, col=1, line={"color": "#e45756", "dash": "dash"},
                      annotation_text=f"memory limit {limit} MB", annotation_position="top left")
    fig.update_layout(template=TEMPLATE, height=560, margin={"l": 10, "r": 10, "t": 30, "b": 40},
                      hovermode="x unified")
    fig.update_xaxes(title_text=_x_title(t0), row=2, col=1)
    return fig


def _plot(div_id: str, fig: go.Figure) -> str:
    spec = pio.to_json(fig, validate=False).replace("<", "\\u003c")
    return f'<div class="plot" id="{div_id}"></div><script type="application/json" id="{div_id}-spec">{spec}</script>'


def _table(head: list[str], rows: list[list[str]]) -> str:
    """`rows` hold HTML already escaped."""
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    return f"<table><tr>{th}</tr>" + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>"
                                              for r in rows) + "</table>"


def _header(ev: Evidence, t0: float) -> str:
    rows = [[_e(s.name), str(s.total), f"{(s.start_ts or t0) - t0:.1f}s" if s.start_ts else "-",
             duration(s.end_ts - s.start_ts) if s.start_ts and s.end_ts else "-"] for s in ev.stages]
    fatal = f'<p class="cause">fatal error: {_e(ev.fatal_error)}</p>' if ev.fatal_error else ""
    warn = "".join(f'<p class="muted">warning: {_e(w)}</p>' for w in ev.warnings)
    return (f"<h1>zdebug report · {_e(ev.job)}</h1><p>state <b>{_e(ev.state)}</b> · source <code>{_e(ev.source)}"
            f"</code> · {len(ev.attempts):,} attempts · {ev.attempts['worker'].nunique():,} workers</p>{fatal}{warn}"
            + (_table(["stage", "shards", "starts at", "wall"], rows) if rows else ""))


def _findings(findings: dict) -> str:
    items = findings["findings"]
    if not items:
        return ("<h2>Findings</h2><p>No stragglers: no shard held its stage up, is stuck, crash-looping or held "
                "by a dead worker.</p>")
    rows = [[_e(f["stage"]), _e("-" if f["shard"] is None else f["shard"]), _e(f["worker"] or "?"),
             f'<span class="cause">{_e(f["cause"])}</span>'
             + "".join(f"<br>+{_e(c)}" for c in f["causes"] if c != f["cause"]),
             _e(duration(f["elapsed_s"])), _e(f"{f['ratio_to_median']:.1f}x" if f["ratio_to_median"] else "-"),
             "<br>".join(_e(line) for line in f["evidence"]),
             "<br>".join(f"<code>{_e(step)}</code>" for step in f["next"])] for f in items]
    head = ["stage", "shard", "worker", "cause", "elapsed", "vs median", "evidence", "next"]
    shown, rest = rows[:FINDINGS_SHOWN], rows[FINDINGS_SHOWN:]
    more = f"<details><summary>{len(rest)} more finding(s)</summary>{_table(head, rest)}</details>" if rest else ""
    return f"<h2>Findings ({len(items)})</h2>" + _table(head, shown) + more


def _episodes(episodes: list[dict], t0: float) -> str:
    if not episodes:
        return ""
    rows = [[_e(ep["stage"]), f"{ep['start'] - t0:.1f}s", _e(duration(ep["duration_s"])),
             "-" if ep.get("share") is None else f"{ep['share'] * 100:.0f}%", str(ep["in_flight"]),
             _e(", ".join(map(str, ep.get("shards", []))) + (" …" if ep.get("n_shards", 0) > len(ep.get("shards", []))
                                                            else ""))] for ep in episodes]
    return "<h3>Tail episodes</h3>" + _table(["stage", "starts at", "duration", "share of stage", "in flight",
                                              "shards"], rows)


def _crashes(groups: list) -> str:
    if not groups:
        return "<h2>Crash groups</h2><p>No crashes.</p>"
    parts = [f"<h2>Crash groups ({len(groups)}, {sum(g.count for g in groups)} crashes)</h2>"]
    for i, g in enumerate(groups):
        shards = ", ".join(map(str, g.shards[:20])) + (" …" if len(g.shards) > 20 else "")
        parts.append(
            f"<details{' open' if i < 3 else ''}><summary><b>{g.count}×</b> <code>{_e(g.kind)}</code> "
            f"{_e(g.exception)}: {_e(g.message)} <span class=\"muted\">· shards {_e(shards or '-')} · "
            f"{len(g.workers)} worker(s) · {_e(g.fingerprint)}</span></summary><pre>{_e(g.example)}</pre>"
            "</details>")
    return "".join(parts)


def _footer(notes: list[str]) -> str:
    how = ("Shard bars are drawn as one trace per attempt outcome (not one per shard); time series are binned "
           "(max per bin, so peaks survive).")
    return (f"<footer><p>{_e(how)}</p>" + "".join(f"<p>{_e(n)}</p>" for n in notes)
            + '<p>charts drawn in <span id="render-ms">…</span> · generated by zdebug report · '
            f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC</p></footer>")

