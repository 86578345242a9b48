"""`zdebug stragglers <job>`: which shards hold a stage up, and why."""

from __future__ import annotations

import typer

from zephyr_debug.commands.common import (
    JOB_OR_PROMETHEUS,
    JSON,
    PROMETHEUS,
    RUN,
    TIMEOUT,
    Default,
    examples,
    job_target,
    load_evidence,
)


def _th(name: str) -> Default:
    return Default("zephyr_debug.analyze.stragglers", f"Thresholds.{name}")


def register(app: typer.Typer) -> None:
    @app.command(epilog=examples("zdebug stragglers             # the newest job in the store",
                                 "zdebug stragglers latest --multiplier 2",
                                 "zdebug stragglers --prometheus http://127.0.0.1:9090 --run EXEC_ID",
                                 "zdebug stragglers ./logs/ --json"))
    def stragglers(
        job: str = JOB_OR_PROMETHEUS,
        prometheus: str = PROMETHEUS,
        run: str = RUN,
        multiplier: float = typer.Option(_th("multiplier"), min=1.0, metavar="X", help="Slow = elapsed above "
                                         "this x the median of finished peers (Flink's rule) ..."),
        quantile: float = typer.Option(_th("quantile"), min=0.0, max=1.0, metavar="Q",
                                       help="... and above this quantile of them."),
        min_finished: float = typer.Option(_th("min_finished"), min=0.0, max=1.0, metavar="SHARE", help="Judge "
                                           "elapsed only once this share of the stage finished (Spark's "
                                           "speculation quantile)."),
        min_excess: float = typer.Option(_th("min_excess_heartbeats"), min=0.0, metavar="HEARTBEATS", help="... "
                                         "and only when elapsed - median is at least this many heartbeat intervals."),
        stuck_heartbeats: int = typer.Option(_th("stuck_heartbeats"), min=1, metavar="HEARTBEATS", help="No item "
                                             "progress for this many heartbeat intervals = stuck."),
        skew_items: float = typer.Option(_th("skew_items"), min=1.0, metavar="X", help="Items above this x the "
                                         "stage median = far more data (data-skew)."),
        normal_rate: float = typer.Option(_th("normal_rate"), min=0.0, max=1.0, metavar="X", help="Rate above "
                                          "this x the stage median = normal speed."),
        memory_near: float = typer.Option(_th("memory_near"), min=0.0, max=1.0, metavar="SHARE", help="RSS above "
                                          "this x the memory limit counts as OOM evidence."),
        timeout: float = TIMEOUT,
        as_json: bool = JSON,
    ) -> None:
        """Straggling shards with their cause (data-skew, slow-worker, stuck, dead-holder, crash-loop, oom,
        all-workers-dead), the evidence and the next command to run."""
        from zephyr_debug.analyze.stragglers import Thresholds, analyze
        from zephyr_debug.render import stragglers as view
        from zephyr_debug.render.output import print_json

        th = Thresholds(multiplier=multiplier, quantile=quantile, min_finished=min_finished,
                        min_excess_heartbeats=min_excess, stuck_heartbeats=stuck_heartbeats, skew_items=skew_items,
                        normal_rate=normal_rate, memory_near=memory_near)
        report = analyze(load_evidence(job_target(job, prometheus, run), as_json), th)
        print_json(report) if as_json else view.render(report)
