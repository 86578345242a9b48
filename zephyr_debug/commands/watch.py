"""`zdebug watch <url>`: a live view of a running coordinator, refreshed every few seconds."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import typer

from zephyr_debug.commands.common import JOB, JSON, TIMEOUT, examples
from zephyr_debug.errors import ZdebugError

if TYPE_CHECKING:
    from zephyr_debug.model import Evidence

TOP_WORKERS = 5
NEWEST_FAILURES = 5


def snapshot(ev: Evidence, interval_s: float) -> dict:
    """Status, stragglers, top workers by memory and the newest failed attempts."""
    import pandas as pd

    from zephyr_debug.analyze.status import summarize
    from zephyr_debug.analyze.stragglers import analyze
    from zephyr_debug.analyze.workers import rank

    a = ev.attempts
    failed = a[a["outcome"] == "failed"].sort_values("end_ts", ascending=False).head(NEWEST_FAILURES)
    failures = failed[["end_ts", "stage", "shard", "attempt", "worker", "kind", "error"]]
    return {"job": ev.job, "source": ev.source, "now": ev.now, "interval_s": interval_s,
            "status": summarize(ev), "stragglers": analyze(ev), "workers": rank(ev, "memory", TOP_WORKERS),
            "failures": failures.astype(object).where(pd.notna(failures), None).to_dict("records")}


def register(app: typer.Typer) -> None:
    @app.command(epilog=examples("zdebug watch http://127.0.0.1:PORT   # the URL `zdebug demo` prints",
                                 "zdebug watch iris://127.0.0.1:10000/alice/my-pipeline --interval 10",
                                 "zdebug watch latest --once"))
    def watch(
        url: str = JOB,
        interval: float = typer.Option(2.0, min=0.2, metavar="SECONDS", help="Seconds between refreshes."),
        once: bool = typer.Option(False, "--once", help="Print one snapshot and exit."),
        timeout: float = TIMEOUT,
        as_json: bool = JSON,
    ) -> None:
        """Live view of a running job (best with a coordinator URL): progress, tail, stragglers, top workers,
        newest failures. Ctrl-C quits. --once / --json: a single snapshot."""
        from rich.live import Live

        from zephyr_debug.render import watch as view
        from zephyr_debug.render.output import console, print_json
        from zephyr_debug.sources import load

        snap = snapshot(load(url), interval)
        if as_json:
            print_json(snap)
            return
        con = console()
        if once:
            con.print(view.screen(snap, live=False))
            return
        try:
            with Live(view.screen(snap), console=con, auto_refresh=False, transient=False) as live:
                while snap["status"]["state"] == "running":
                    time.sleep(interval)
                    snap = snapshot(_reload(url, snap), interval)
                    live.update(view.screen(snap), refresh=True)
        except KeyboardInterrupt:
            con.print("[dim]stopped watching[/]")


def _reload(url: str, last: dict) -> Evidence:
    """Fresh evidence; when the coordinator is gone, the job's record in the job store."""
    from zephyr_debug.sources import load

    try:
        return load(url)
    except ZdebugError as exc:
        try:
            return load(last["job"])
        except ZdebugError:
            raise ZdebugError(f"{exc.message}; it stopped answering while the job was "
                              f"{last['status']['state']}") from None
