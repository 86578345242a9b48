"""`zdebug status <job>`: JobStatus plus a one-paragraph diagnosis."""

from __future__ import annotations

import typer

from zephyr_debug.commands.common import (
    EXIT_STATUS,
    FINELOG,
    JOB_OR_PROMETHEUS,
    JSON,
    PROMETHEUS,
    RUN,
    TIMEOUT,
    Default,
    analyze_evidence,
    examples,
    exit_status,
    job_target,
    load_evidence,
)

STALL_MINUTES = typer.Option(
    Default("zephyr_debug.model", "STALL_THRESHOLD_S", scale=1 / 60),
    metavar="MINUTES",
    help="No progress for this long = stalled.",
)


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug status                 # the newest job in the store",
            "zdebug status iris://127.0.0.1:10000/alice/my-pipeline",
            "zdebug status ./logs/ --json",
            "zdebug status latest --exit-status || echo failed",
        )
    )
    def status(
        job: str = JOB_OR_PROMETHEUS,
        prometheus: str = PROMETHEUS,
        run: str = RUN,
        stall_minutes: float = STALL_MINUTES,
        exit_with_status: bool = EXIT_STATUS,
        timeout: float = TIMEOUT,
        finelog: str = FINELOG,
        as_json: bool = JSON,
    ) -> None:
        """Status of a job, the outcome in one line and the worst findings."""
        from zephyr_debug.analyze.liveness import listing
        from zephyr_debug.analyze.thresholds import Thresholds
        from zephyr_debug.render import contract
        from zephyr_debug.render import status as view
        from zephyr_debug.render.output import print_json

        target = job_target(job, prometheus, run)
        ev = load_evidence(target, as_json, finelog)
        result = analyze_evidence(ev, job or target, Thresholds(stall_s=stall_minutes * 60))
        print_json(contract.status(result, listing(ev))) if as_json else view.render(result)
        if exit_with_status:
            raise typer.Exit(exit_status(result.state, has_errors=result.has_errors))
