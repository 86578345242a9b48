"""`zdebug diagnose <job>`: every analyzer, ranked findings, a playbook and next command each."""

from __future__ import annotations

import typer

from zephyr_debug.analyze.diagnose import diagnose as run_diagnosis
from zephyr_debug.commands.common import JOB, JSON, load_evidence
from zephyr_debug.crashes.cluster import job_groups
from zephyr_debug.model import STALL_THRESHOLD_S
from zephyr_debug.render import diagnose as view
from zephyr_debug.render.output import print_json


def register(app: typer.Typer) -> None:
    @app.command()
    def diagnose(
        job: str = JOB,
        stall_minutes: float = typer.Option(STALL_THRESHOLD_S / 60, help="No progress for this long = stalled."),
        as_json: bool = JSON,
    ) -> None:
        """What is wrong with a job, most urgent first, with the playbook and next command for each."""
        ev = load_evidence(job, as_json)
        result = run_diagnosis(ev, job_groups(ev), stall_threshold_s=stall_minutes * 60)
        print_json(result) if as_json else view.render(result)
