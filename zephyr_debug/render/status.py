"""Rich view of `zdebug status`: the outcome, counts, the worst findings and what to run next."""

from __future__ import annotations

from zephyr_debug.analyze.analysis import Analysis
from zephyr_debug.findings import INFO
from zephyr_debug.render.findings import cannot_tell, headline
from zephyr_debug.render.output import clean, console, duration, when

STATE_STYLE = {"succeeded": "green", "failed": "red", "interrupted": "yellow", "running": "cyan"}
NAMED = 3


def counts_line(a: Analysis) -> str:
    """`stage: 3/4 complete, 1 in-flight, 0 queued, 5 retries; workers 3 alive, 1 dead; …`;
    a job that ended: `workers 4 finished`."""
    p, pool = a.progress, a.pool
    when_line = f"ended {when(p.ended_at)}" if p.done else f"last progress {duration(p.since_progress_s)} ago"
    # A job that ended shut its workers down: they finished, they did not die (render/contract.py).
    workers = f"{pool.alive + pool.dead} finished" if p.done else f"{pool.alive} alive, {pool.dead} dead"
    return (
        f"{clean(p.stage)}: {p.completed}/{p.total} complete, {p.in_flight} in-flight, {p.queue_depth} "
        f"queued; {p.retries_total} retried attempt(s); workers {workers} "
        f"({pool.counted_from}); {when_line}"
    )


def render(a: Analysis) -> None:
    con = console()
    style = STATE_STYLE.get(a.state, "white")
    con.print(f"[bold]{clean(a.job)}[/]  [{style}]{clean(a.state)}[/]  {counts_line(a)}")
    con.print(f"[bold]Diagnosis:[/] {clean(a.headline)}")
    shown = [f for f in a.findings if f.severity != INFO][:NAMED]
    for f in shown:
        con.print(headline(f))
    cannot_tell(con, a)
    rest = len(a.problems) - len(shown)
    if rest > 0:
        con.print(f"(+{rest} more: zdebug diagnose)")
    for step in a.next[:NAMED]:
        con.print(f"  next: [bold cyan]{clean(step)}[/]", soft_wrap=True)
