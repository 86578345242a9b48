"""Rich view of `analyze.status.summarize`."""

from __future__ import annotations

from rich.table import Table

from zephyr_debug.render.output import clean, console, duration

STATE_STYLE = {"succeeded": "green", "failed": "red", "interrupted": "yellow", "running": "cyan"}


def render(s: dict) -> None:
    con = console()
    style = STATE_STYLE.get(s["state"], "white")
    con.print(f"[bold]{clean(s['job'])}[/]  [{style}]{s['state']}[/]  {clean(s['stage'])}: "
              f"{s['completed']}/{s['total']} complete, {s['in_flight']} in-flight, {s['queue_depth']} queued, "
              f"{s['retries']} retries; workers {s['alive']} alive, {s['failed']} failed; "
              f"last progress {duration(s['since_progress_s'])} ago")
    if s["workers"]:
        table = Table(box=None, pad_edge=False)
        for col in ("worker", "state", "last seen"):
            table.add_column(col)
        for worker, info in sorted(s["workers"].items()):
            table.add_row(clean(worker), clean(info.get("state")), duration(info.get("last_seen_ago")) + " ago")
        con.print(table)
    con.print(f"[bold]Diagnosis:[/] {clean(s['diagnosis'])}")
    for step in s["next"]:
        con.print(f"  next: [bold cyan]{clean(step)}[/]")
