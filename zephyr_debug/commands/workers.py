"""`zdebug workers <job> --sort memory|disk|cpu`: workers ranked, outliers marked."""

from __future__ import annotations

from enum import Enum

import typer

from zephyr_debug.analyze.workers import rank
from zephyr_debug.commands.common import JOB, JSON, load_evidence
from zephyr_debug.render import workers as view
from zephyr_debug.render.output import print_json


class Sort(str, Enum):
    memory = "memory"
    disk = "disk"
    cpu = "cpu"


def register(app: typer.Typer) -> None:
    @app.command()
    def workers(
        job: str = JOB,
        sort: Sort = typer.Option(Sort.memory, "--sort", help="Rank by current/peak memory, disk or CPU."),
        top: int = typer.Option(0, min=0, help="Show only the first N (0 = all)."),
        as_json: bool = JSON,
    ) -> None:
        """Workers ranked by memory, disk or CPU, with state, last seen, shards held and outlier marks."""
        report = rank(load_evidence(job, as_json), sort.value, top or None)
        print_json(report) if as_json else view.render(report)
