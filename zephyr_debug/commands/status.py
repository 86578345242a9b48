"""`zdebug status <job>`: JobStatus plus a one-paragraph diagnosis."""

from __future__ import annotations

import typer

from zephyr_debug.commands.common import (
    EXIT_STATUS,
    JOB_OR_PROMETHEUS,
    JSON,
    PROMETHEUS,
    RUN,
    TIMEOUT,
    Default,
    examples,
    exit_status,
    job_target,
    load_evidence,
)

STALL_MINUTES = typer.Option(Default("zephyr_debug.model", "STALL_THRESHOLD_S", scale=1 / 60), metavar="MINUTES",
                             help="No progress for this long = stalled.")


def register(app: typer.Typer) -> None:
    @app.command(epilog=examples("zdebug status                 # the newest job in the store",
                                 "zdebug status iris://127.0.0.1:10000/alice/my-pipeline",
                                 "zdebug status ./logs/ --json",
                                 "zdebug status latest --exit-status || echo failed"))
    def status(
        job: str = JOB_OR_PROMETHEUS,
        prometheus: str = PROMETHEUS,
        run: str = RUN,
        stall_minutes: float = STALL_MINUTES,
        exit_with_status: bool = EXIT_STATUS,
        timeout: float = TIMEOUT,
        as_json: bool = JSON,
    ) -> None:
        """Status of a job and what looks wrong with it."""
        from zephyr_debug.analyze.status import summarize
        from zephyr_debug.render import status as view
        from zephyr_debug.render.output import print_json

        summary = summarize(load_evidence(job_target(job, prometheus, run), as_json), stall_minutes * 60)
        print_json(summary) if as_json else view.render(summary)
        if exit_with_status:
            raise typer.Exit(exit_status(summary["state"], has_errors=False))
