"""Rich view of `analyze.workers.rank`."""

from __future__ import annotations

from rich.table import Table

from zephyr_debug.analyze.workers import WorkerRanking
from zephyr_debug.render.output import clean, console, duration, short_names

STATE_STYLE = {"failed": "red", "dead": "red", "done": "dim"}
COLUMNS = {"memory_mb": "mem MB", "memory_peak_mb": "peak MB", "disk_mb": "disk MB", "cpu": "cpu %"}


def _num(value) -> str:
    return "-" if value is None or value != value else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def table(report: WorkerRanking, title: str | None = None) -> Table:
    _, prefix = short_names([w["worker"] for w in report.workers])
    full_title = (title or "") + (f"\nworker = {clean(prefix)}…" if prefix else "")
    t = Table(
        title=full_title,
        box=None,
        pad_edge=False,
        title_justify="left",
        min_width=max(map(len, full_title.splitlines()), default=0),  # the prefix line is never cut
    )
    t.add_column("worker", overflow="fold")
    t.add_column("state")
    t.add_column("seen", justify="right")
    for label in COLUMNS.values():
        t.add_column(label, justify="right")
    t.add_column("held")
    t.add_column("done", justify="right")
    for w in report.workers:
        style = STATE_STYLE.get(w["state"], "")
        cells = [f"[bold red]{_num(w[c])} ![/]" if c in w["outliers"] else _num(w[c]) for c in COLUMNS]
        t.add_row(
            clean(str(w["worker"])[len(prefix) :]),
            f"[{style}]{clean(w['state'])}[/]" if style else clean(w["state"]),
            duration(w["last_seen_ago"]),
            *cells,
            ", ".join(map(str, w["shards_held"])) or "-",
            str(w["shards_done"]),
        )
    return t


def render(report: WorkerRanking) -> None:
    con = console()
    if not report.workers:
        con.print("no workers in the evidence")
        return
    con.print(
        table(
            report,
            f"workers of {clean(report.job)} by {report.sort}"
            + (f" (limit {report.memory_limit_mb:g} MB)" if report.memory_limit_mb else "")
            + "\n! = outlier: modified z-score > 3.5 (median/MAD)",
        )
    )
