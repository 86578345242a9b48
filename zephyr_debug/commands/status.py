"""`zdebug status <job>`: JobStatus plus a one-paragraph diagnosis."""

from __future__ import annotations

import typer

from zephyr_debug.analyze.status import summarize
from zephyr_debug.commands.common import JOB_OR_PROMETHEUS, JSON, PROMETHEUS, RUN, job_target, load_evidence
from zephyr_debug.model import STALL_THRESHOLD_S
from zephyr_debug.render import status as view
from zephyr_debug.render.output import print_json


def register(app: typer.Typer) -> None:
    @app.command()
    def status(
        job: str = JOB_OR_PROMETHEUS,
        prometheus: str = PROMETHEUS,
        run: str = RUN,
        stall_minutes: float = typer.Option(STALL_THRESHOLD_S / 60, help="No progress for this long = stalled."),
        as_json: bool = JSON,
    ) -> None:
        """Status of a job and what looks wrong with it."""
        summary = summarize(load_evidence(job_target(job, prometheus, run), as_json), stall_minutes * 60)
        print_json(summary) if as_json else view.render(summary)
