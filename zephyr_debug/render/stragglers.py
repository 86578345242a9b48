"""Rich view of `zdebug stragglers`: stages, tail episodes, then every shard finding."""

from __future__ import annotations

from rich.table import Table

from zephyr_debug.analyze.analysis import Analysis
from zephyr_debug.analyze.causes import STRAGGLER_KINDS
from zephyr_debug.analyze.tail import Episode
from zephyr_debug.findings import INFO
from zephyr_debug.render.findings import show
from zephyr_debug.render.output import clean, console, duration


def _pct(share) -> str:
    return "-" if share is None else f"{share * 100:.0f}%"


def stages_table(a: Analysis) -> Table:
    table = Table(title="stages", box=None, pad_edge=False, title_justify="left")
    for col in ("stage", "done", "running", "median", "p99", "outlier >", "wall"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    for s in a.stages:
        table.add_row(
            clean(s.stage),
            f"{s.done}/{s.total}",
            str(s.running),
            duration(s.median_s),
            duration(s.p99_s),
            duration(s.cut_s),
            duration(s.wall_s),
        )
    return table


def tail_table(tail: tuple[Episode, ...]) -> Table:
    table = Table(title="tail episodes (in flight > 0, queue empty)", box=None, pad_edge=False, title_justify="left")
    for col in ("stage", "duration", "of stage", "in flight", "shards"):
        table.add_column(col, overflow="fold")
    for t in tail:
        more = f" (+{t.n_shards - len(t.shards)})" if t.n_shards > len(t.shards) else ""
        table.add_row(
            clean(t.stage),
            duration(t.duration_s) + (" (ongoing)" if t.ongoing else ""),
            _pct(t.share),
            str(t.in_flight),
            ", ".join(map(str, t.shards)) + more,
        )
    return table


def render(a: Analysis) -> None:
    con = console()
    con.print(f"[bold]{clean(a.job)}[/]  {clean(a.state)}  {clean(a.headline)}")
    if a.stages:
        con.print(stages_table(a))
    if a.tail:
        con.print(tail_table(a.tail))
    found = [f for f in a.problems if f.stage is not None]
    watch = [f for f in a.findings if f.severity == INFO and f.kind in STRAGGLER_KINDS]  # not a problem yet
    if not found and not watch:
        con.print(
            "[green]No stragglers:[/] no shard held its stage up, is stuck, failing repeatedly or held by a "
            "dead worker."
        )
        return
    con.print(f"[bold]{len(found)} finding(s)[/]" + (f", {len(watch)} shard(s) to watch" if watch else ""))
    for f in [*found, *watch]:
        con.print()
        show(con, f)
