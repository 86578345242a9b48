"""The live screen of `zdebug watch`: progress, tail, findings, top workers, newest failures."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from zephyr_debug.render import workers as workers_view
from zephyr_debug.render.findings import headline
from zephyr_debug.render.output import clean, safe, short_names, when
from zephyr_debug.render.status import STATE_STYLE, counts_line
from zephyr_debug.render.stragglers import tail_table

if TYPE_CHECKING:
    from zephyr_debug.commands.watch import Snapshot

SHOWN = 5
ERROR_CHARS = 80  # of a failure's error text (`zdebug logs` / `crashes` show it whole)


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def screen(snap: Snapshot, live: bool = True) -> Panel:
    """The whole screen; `live=False` (`--once`): no refresh interval, no Ctrl-C hint."""
    a = snap.analysis
    p = a.progress
    style = STATE_STYLE.get(a.state, "white")
    head = Text.from_markup(f"[bold]{clean(a.job)}[/]  [{style}]{clean(a.state)}[/]  {counts_line(a)}")
    bar = Table.grid(padding=(0, 1))
    bar.add_row(
        ProgressBar(total=max(p.total, 1), completed=p.completed, width=40),
        f"{p.completed}/{p.total} of {clean(p.stage)}",
    )
    parts: list[RenderableType] = [head, bar, Text.from_markup(f"[bold]{clean(a.headline)}[/]")]
    if a.tail:
        parts.append(tail_table(a.tail[-3:]))
    parts += [Text("cannot tell: ", style="bold yellow") + Text(safe(line)) for line in a.cannot_tell]
    for f in a.problems[:SHOWN]:
        parts.append(headline(f))
        parts += [Text("     next: ") + Text(safe(step), style="bold cyan") for step in f.next[:1]]
    if snap.workers.workers:
        parts.append(workers_view.table(snap.workers, f"top workers by {snap.workers.sort}"))
    if snap.failures:
        parts.append(_failures(snap.failures))
    return Panel(
        Group(*parts),
        title=f"zdebug watch {clean(a.source)}",
        subtitle=when(snap.now) + (f" · every {snap.interval_s:g}s · Ctrl-C to quit" if live else ""),
    )


def _failures(failures: list[dict]) -> Table:
    """Time, shard, worker and kind whole (the worker without the prefix all share, named in the
    title); the error text is what is cut to fit."""
    labels, prefix = short_names([str(f["worker"]) for f in failures])
    rows = [
        (
            when(f["end_ts"])[-8:],
            str(f["shard"]),
            clean(labels.get(str(f["worker"]), str(f["worker"]))),
            clean(f["kind"]),
            clean(_cut(str(f["error"] or ""), ERROR_CHARS)),
        )
        for f in failures
    ]
    title = "newest failures" + (f" (worker = {clean(prefix)}…)" if prefix else "")
    t = Table(title=title, box=None, pad_edge=False, title_justify="left")
    for i, col in enumerate(("when", "shard", "worker", "kind")):
        t.add_column(col, no_wrap=True, min_width=max([len(col)] + [len(r[i]) for r in rows]))
    t.add_column("error", overflow="fold")  # wraps first: rich then never narrows the columns above
    for r in rows:
        t.add_row(*r)
    return t
