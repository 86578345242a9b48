"""`zdebug stragglers <job>`: which shards hold a stage up, and why."""

from __future__ import annotations

import typer

from zephyr_debug.analyze.stragglers import Thresholds, analyze
from zephyr_debug.commands.common import JOB_OR_PROMETHEUS, JSON, PROMETHEUS, RUN, job_target, load_evidence
from zephyr_debug.render import stragglers as view
from zephyr_debug.render.output import print_json

D = Thresholds()


def register(app: typer.Typer) -> None:
    @app.command()
    def stragglers(
        job: str = JOB_OR_PROMETHEUS,
        prometheus: str = PROMETHEUS,
        run: str = RUN,
        multiplier: float = typer.Option(D.multiplier, min=1.0, help="Slow = elapsed above this x the median of "
                                         "finished peers (Flink's rule) ..."),
        quantile: float = typer.Option(D.quantile, min=0.0, max=1.0, help="... and above this quantile of them."),
        min_finished: float = typer.Option(D.min_finished, min=0.0, max=1.0, help="Judge elapsed only once this "
                                           "share of the stage finished (Spark's speculation quantile)."),
        min_excess: float = typer.Option(D.min_excess_heartbeats, min=0.0, help="... and only when elapsed - "
                                         "median is at least this many heartbeat intervals."),
        stuck_heartbeats: int = typer.Option(D.stuck_heartbeats, min=1, help="No item progress for this many "
                                             "heartbeat intervals = stuck."),
        skew_items: float = typer.Option(D.skew_items, min=1.0, help="Items above this x the stage median = "
                                         "far more data (data-skew)."),
        normal_rate: float = typer.Option(D.normal_rate, min=0.0, max=1.0, help="Rate above this x the stage "
                                          "median = normal speed."),
        memory_near: float = typer.Option(D.memory_near, min=0.0, max=1.0, help="RSS above this x the memory "
                                          "limit counts as OOM evidence."),
        as_json: bool = JSON,
    ) -> None:
        """Straggling shards with their cause (data-skew, slow-worker, stuck, dead-holder, crash-loop, oom,
        all-workers-dead), the evidence and the next command to run."""
        th = Thresholds(multiplier=multiplier, quantile=quantile, min_finished=min_finished,
                        min_excess_heartbeats=min_excess, stuck_heartbeats=stuck_heartbeats, skew_items=skew_items,
                        normal_rate=normal_rate, memory_near=memory_near)
        report = analyze(load_evidence(job_target(job, prometheus, run), as_json), th)
        print_json(report) if as_json else view.render(report)
