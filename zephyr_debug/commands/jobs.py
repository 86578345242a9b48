"""`zdebug jobs`: the runs in the job store, newest last."""

from __future__ import annotations

import typer

from zephyr_debug import jobstore
from zephyr_debug.commands.common import JSON, examples
from zephyr_debug.findings import SCHEMA_VERSION


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug jobs", "zdebug jobs --json", "ZDEBUG_HOME=.zdebug zdebug jobs   # a checkout's own store"
        )
    )
    def jobs(as_json: bool = JSON) -> None:
        """List the jobs in the job store ($ZDEBUG_HOME/jobs, default
        $XDG_STATE_HOME/zdebug/jobs or ~/.local/state/zdebug/jobs)."""
        from rich.table import Table

        from zephyr_debug.render.output import clean, console, print_json, when

        paths = jobstore.list_jobs()
        rows = [_row(path) for path in paths]
        if as_json:
            print_json({"schema_version": SCHEMA_VERSION, "root": str(jobstore.jobs_root()), "jobs": rows})
            return
        table = Table(title=f"jobs in {jobstore.jobs_root()}")
        # The id is what a user copies: never cut or folded, the other columns wrap first.
        ids = [clean(r["job"]) for r in rows]
        table.add_column("job", no_wrap=True, min_width=max((len(i) for i in ids), default=3))
        for col in ("state", "stage", "progress", "last progress"):
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row(
                clean(r["job"]),
                r["state"],
                clean(r["stage"]),
                f"{r['completed']}/{r['total']}",
                when(r["progress_time"]),
            )
        console().print(table if rows else f"no jobs in {jobstore.jobs_root()} yet: run `zdebug demo`")


def _row(path) -> dict:
    from zephyr_debug.analyze.progress import latest
    from zephyr_debug.sources import jobdir

    ev = jobdir.load(path)
    p = latest(ev)
    return {
        "job": ev.job,
        "dir": str(path),
        "state": ev.state,
        "stage": p.stage,
        "completed": p.completed,
        "total": p.total,
        "progress_time": p.progress_time,
    }
