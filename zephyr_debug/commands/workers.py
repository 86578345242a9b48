"""`zdebug workers <job> --sort memory|disk|cpu`: workers ranked, outliers marked."""

from __future__ import annotations

from enum import StrEnum

import typer

from zephyr_debug.commands.common import FINELOG, JOB, JSON, TIMEOUT, examples, load_evidence


class Sort(StrEnum):
    memory = "memory"
    disk = "disk"
    cpu = "cpu"


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug workers --sort memory --top 10",
            "zdebug workers iris://127.0.0.1:10000/alice/my-pipeline --sort cpu",
            "zdebug workers latest --json",
        )
    )
    def workers(
        job: str = JOB,
        sort: Sort = typer.Option(
            Sort.memory, "--sort", metavar="memory|disk|cpu", help="Rank by peak then current memory, disk or CPU."
        ),
        top: int = typer.Option(0, min=0, metavar="N", help="Show only the first N (0 = all)."),
        timeout: float = TIMEOUT,
        finelog: str = FINELOG,
        as_json: bool = JSON,
    ) -> None:
        """Workers ranked by memory, disk or CPU, with state, last seen, shards held and outlier marks."""
        from zephyr_debug.analyze.workers import rank
        from zephyr_debug.render import workers as view
        from zephyr_debug.render.output import print_json

        report = rank(load_evidence(job, as_json, finelog), sort.value, top or None)
        print_json(report.to_json()) if as_json else view.render(report)
