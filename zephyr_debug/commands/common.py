"""Options and helpers shared by subcommands."""

from __future__ import annotations

import typer

from zephyr_debug import sources
from zephyr_debug.errors import ZdebugError
from zephyr_debug.model import Evidence
from zephyr_debug.render.output import err_console
from zephyr_debug.sources import load

JSON = typer.Option(False, "--json", help="Print JSON instead of tables.")
JOB = typer.Argument(..., help="Execution id (or prefix, or `latest`), job dir, coordinator URL, or evidence file/dir.")
# `JOB` or `--prometheus URL [--run ID]`: declare the three, then load `job_target(job, prometheus, run)`.
JOB_OR_PROMETHEUS = typer.Argument(None, show_default=False, help="Execution id (or prefix, or `latest`), job dir, "
                                   "coordinator URL, evidence file/dir, or prometheus+URL?run=ID; omit with --prometheus.")
PROMETHEUS = typer.Option(None, "--prometheus", metavar="URL", help="Read the run from this Prometheus instead.")
RUN = typer.Option(None, "--run", metavar="EXEC_ID", help="With --prometheus: the run (default: the last to progress).")


def job_target(job: str | None, prometheus: str | None = None, run: str | None = None) -> str:
    """The `load()` target of a JOB argument or of `--prometheus URL --run ID`."""
    if prometheus:
        if job:
            raise ZdebugError(f"give JOB ({job}) or --prometheus, not both")
        return sources.prometheus.target(prometheus, run)
    if run:
        raise ZdebugError("--run needs --prometheus URL")
    if not job:
        raise ZdebugError("missing JOB (execution id, job dir, coordinator URL or evidence path) or --prometheus URL")
    return job


def load_evidence(target: str, as_json: bool) -> Evidence:
    """Load evidence; its warnings (skipped lines, ...) go to stderr unless JSON carries them."""
    ev = load(target)
    if not as_json:
        con = err_console()
        for warning in ev.warnings:
            con.print(f"[yellow]warning:[/] {warning}", markup=True, highlight=False)
    return ev
