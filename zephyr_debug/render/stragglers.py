"""Rich view of `analyze.stragglers.analyze`."""

from __future__ import annotations

from rich.table import Table

from zephyr_debug.render.output import clean, console, duration

CAUSE_STYLE = {"all-workers-dead": "bold red", "oom": "red", "crash-loop": "red", "dead-holder": "magenta",
               "stuck": "yellow", "slow-worker": "cyan", "data-skew": "blue"}


def _pct(share) -> str:
    return "-" if share is None else f"{share * 100:.0f}%"


def stages_table(report: dict) -> Table:
    table = Table(title="stages", box=None, pad_edge=False, title_justify="left")
    for col in ("stage", "done", "running", "median", "p90", "p99", "wall"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    for s in report["stages"]:
        table.add_row(clean(s["stage"]), f"{s['done']}/{s['total']}", str(s["running"]), duration(s["median_s"]),
                      duration(s["p90_s"]), duration(s["p99_s"]), duration(s["wall_s"]))
    return table


def tail_table(report: dict) -> Table:
    table = Table(title="tail episodes (in flight > 0, queue empty)", box=None, pad_edge=False,
                  title_justify="left")
    for col in ("stage", "duration", "share of stage", "in flight", "shards"):
        table.add_column(col)
    for t in report["tail"]:
        more = f" (+{t['n_shards'] - len(t['shards'])})" if t["n_shards"] > len(t["shards"]) else ""
        table.add_row(clean(t["stage"]), duration(t["duration_s"]) + (" (ongoing)" if t["ongoing"] else ""),
                      _pct(t["share"]), str(t["in_flight"]), ", ".join(map(str, t["shards"])) + more)
    return table


def render(report: dict) -> None:
    con = console()
    con.print(f"[bold]{clean(report['job'])}[/]  {report['state']}")
    if report["stages"]:
        con.print(stages_table(report))
    if report["tail"]:
        con.print(tail_table(report))
    findings = report["findings"]
    if not findings:
        con.print("[green]No stragglers:[/] no shard is slow against its finished peers, stuck, failing "
                  "repeatedly or held by a dead worker.")
        return
    con.print(f"[bold]{len(findings)} finding(s)[/]")
    for f in findings:
        style = CAUSE_STYLE.get(f["cause"], "white")
        others = [c for c in f["causes"] if c != f["cause"]]
        ratio = f", {f['ratio_to_median']:.1f}x median" if f["ratio_to_median"] else ""
        con.print(f"\n[{style}]{f['cause']}[/]{' (+' + ', '.join(others) + ')' if others else ''}  "
                  f"shard {f['shard']} of {clean(f['stage'])} on {clean(f['worker'] or '?')}: "
                  f"{duration(f['elapsed_s'])}{ratio}")
        for line in f["evidence"]:
            con.print(f"  - {clean(line)}")
        con.print(f"  next: [bold cyan]{clean(f['next'])}[/]")
