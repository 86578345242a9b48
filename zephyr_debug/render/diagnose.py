"""One screen of `zdebug diagnose`: the outcome, then every finding ranked, with its cost."""

from __future__ import annotations

from zephyr_debug.analyze.analysis import Analysis
from zephyr_debug.render.findings import cannot_tell, show
from zephyr_debug.render.output import clean, console

SHOWN = 10


def render(a: Analysis) -> None:
    con = console()
    con.print(f"[bold]{clean(a.job)}[/] {clean(a.state)}")
    con.print(clean(a.headline))
    if a.healthy:
        con.print(
            "[green]No problems found:[/] no straggler held a stage up, nothing is stuck or crash-looping, "
            "the workers are alive."
        )
    cannot_tell(con, a)
    for rank, f in enumerate(a.findings[:SHOWN], 1):
        con.print()
        show(con, f, rank)
    if len(a.findings) > SHOWN:
        con.print(f"\n(+{len(a.findings) - SHOWN} more findings: --json shows all)")
