"""`zdebug diagnose <job>`: every analyzer, ranked findings, a playbook and next command each."""

from __future__ import annotations

import typer

from zephyr_debug.commands.common import (
    EXIT_STATUS,
    FINELOG,
    JOB,
    JSON,
    TIMEOUT,
    analyze_evidence,
    examples,
    exit_status,
    load_evidence,
)
from zephyr_debug.commands.status import STALL_MINUTES


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug diagnose               # the newest job in the store",
            "zdebug diagnose iris://127.0.0.1:10000/alice/my-pipeline",
            "zdebug diagnose coordinator.log --json",
            "zdebug diagnose latest --exit-status",
        )
    )
    def diagnose(
        job: str = JOB,
        stall_minutes: float = STALL_MINUTES,
        exit_with_status: bool = EXIT_STATUS,
        timeout: float = TIMEOUT,
        finelog: str = FINELOG,
        as_json: bool = JSON,
    ) -> None:
        """What is wrong with a job, most costly first, with the playbook and next command for each."""
        from zephyr_debug.analyze.liveness import listing
        from zephyr_debug.analyze.thresholds import Thresholds
        from zephyr_debug.render import contract
        from zephyr_debug.render import diagnose as view
        from zephyr_debug.render.output import print_json

        ev = load_evidence(job, as_json, finelog)
        result = analyze_evidence(ev, job, Thresholds(stall_s=stall_minutes * 60))
        print_json(contract.diagnose(result, listing(ev))) if as_json else view.render(result)
        if exit_with_status:
            raise typer.Exit(exit_status(result.state, has_errors=result.has_errors))
