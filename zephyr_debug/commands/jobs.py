"""`zdebug jobs`: the runs in the job store, newest last."""

from __future__ import annotations

import typer
from rich.table import Table

from zephyr_debug import jobstore
from zephyr_debug.analyze.status import summarize
from zephyr_debug.commands.common import JSON
from zephyr_debug.render.output import clean, console, print_json, when
from zephyr_debug.sources import jobdir


def register(app: typer.Typer) -> None:
    @app.command()
    def jobs(as_json: bool = JSON) -> None:
        """List the jobs under $ZDEBUG_HOME/jobs (default .zdebug/jobs)."""
        rows = []
        for path in jobstore.list_jobs():
            s = summarize(jobdir.load(path))
            rows.append({"job": s["job"], "dir": str(path), "state": s["state"], "stage": s["stage"],
                         "completed": s["completed"], "total": s["total"], "progress_time": s["progress_time"]})
        if as_json:
            print_json({"root": str(jobstore.jobs_root()), "jobs": rows})
            return
        table = Table(title=f"jobs in {jobstore.jobs_root()}")
        for col in ("job", "state", "stage", "progress", "last progress"):
            table.add_column(col)
        for r in rows:
            table.add_row(clean(r["job"]), r["state"], clean(r["stage"]), f"{r['completed']}/{r['total']}",
                          when(r["progress_time"]))
        console().print(table if rows else "no jobs yet: run `zdebug demo`")
