"""One screen of `zdebug diagnose`: the summary, then the ranked findings."""

from __future__ import annotations

from zephyr_debug.render.output import clean, console

SHOWN = 10
STYLE = {"aborted": "red", "all-workers-dead": "red", "oom": "red", "crash-loop": "red", "stalled": "yellow",
         "stuck": "yellow", "dead-holder": "yellow"}


def render(d: dict) -> None:
    con = console()
    p = d["progress"]
    con.print(f"[bold]{clean(d['job'])}[/] {d['state']} · {clean(p['stage'])}: {p['completed']}/{p['total']} "
              f"complete, {p['in_flight']} in-flight, {p['queue_depth']} queued")
    con.print(clean(d["summary"]))
    if d["healthy"]:
        con.print("[green]No findings: no stragglers, crashes or stalls.[/]")
        return
    for f in d["findings"][:SHOWN]:
        style = STYLE.get(f["cause"], "cyan")
        con.print(f"\n[bold]{f['rank']}.[/] [{style}]{f['cause']}[/]  {clean(f['title'])}")
        for line in f["evidence"][:3]:
            con.print(f"     {clean(line)}")
        for step in f["next"]:
            con.print(f"     next: [bold cyan]{clean(step)}[/]")
    if len(d["findings"]) > SHOWN:
        con.print(f"\n(+{len(d['findings']) - SHOWN} more findings: --json shows all)")
