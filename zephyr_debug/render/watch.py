"""The live screen of `zdebug watch`: progress, tail, top workers, stragglers, newest failures."""

from __future__ import annotations

from rich.console import Group
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from zephyr_debug.render import stragglers as strag_view
from zephyr_debug.render import workers as workers_view
from zephyr_debug.render.output import clean, duration, when
from zephyr_debug.render.status import STATE_STYLE


def screen(snap: dict, live: bool = True) -> Panel:
    """The whole screen; `live=False` (`--once`): no refresh interval, no Ctrl-C hint."""
    s = snap["status"]
    style = STATE_STYLE.get(s["state"], "white")
    head = Text.from_markup(
        f"[bold]{clean(s['job'])}[/]  [{style}]{s['state']}[/]  {clean(s['stage'])}: {s['completed']}/{s['total']} "
        f"complete, {s['in_flight']} in-flight, {s['queue_depth']} queued, {s['retries']} retries; "
        f"workers {s['alive']} alive, {s['failed']} failed; last progress {duration(s['since_progress_s'])} ago")
    bar = Table.grid(padding=(0, 1))
    bar.add_row(ProgressBar(total=max(s["total"], 1), completed=s["completed"], width=50),
                f"{s['completed']}/{s['total']} of {clean(s['stage'])}")
    parts = [head, bar, Text.from_markup(f"[bold]Diagnosis:[/] {clean(s['diagnosis'])}")]
    report = snap["stragglers"]
    if report["tail"]:
        parts.append(strag_view.tail_table({"tail": report["tail"][-3:]}))
    if report["findings"]:
        parts.append(_findings(report["findings"]))
    if snap["workers"]["workers"]:
        parts.append(workers_view.table(snap["workers"], f"top workers by {snap['workers']['sort']}"))
    if snap["failures"]:
        parts.append(_failures(snap["failures"]))
    return Panel(Group(*parts), title=f"zdebug watch {clean(snap['source'])}",
                 subtitle=when(snap["now"]) + (f" · every {snap['interval_s']:g}s · Ctrl-C to quit" if live else ""))


def _findings(findings: list[dict]) -> Table:
    t = Table(title="stragglers", box=None, pad_edge=False, title_justify="left")
    for col in ("shard", "stage", "cause", "elapsed", "x median", "next"):
        t.add_column(col)
    for f in findings[:5]:
        ratio = "-" if f["ratio_to_median"] is None else f"{f['ratio_to_median']:.1f}"
        t.add_row(str(f["shard"]), clean(f["stage"]), f"[{strag_view.CAUSE_STYLE.get(f['cause'], '')}]{f['cause']}[/]",
                  duration(f["elapsed_s"]), ratio, clean(f["next"]))
    return t


def _failures(failures: list[dict]) -> Table:
    t = Table(title="newest failures", box=None, pad_edge=False, title_justify="left")
    for col in ("when", "shard", "worker", "kind", "error"):
        t.add_column(col, overflow="fold" if col == "worker" else "ellipsis", no_wrap=col != "worker")
    for f in failures:
        t.add_row(when(f["end_ts"])[-8:], str(f["shard"]), clean(f["worker"]), clean(f["kind"]), clean(f["error"]))
    return t
