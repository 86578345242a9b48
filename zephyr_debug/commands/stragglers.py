"""`zdebug stragglers <job>`: which shards hold a stage up, and why."""

from __future__ import annotations

import typer

from zephyr_debug.commands.common import (
    FINELOG,
    JOB_OR_PROMETHEUS,
    JSON,
    PROMETHEUS,
    RUN,
    TIMEOUT,
    Default,
    analyze_evidence,
    examples,
    job_target,
    load_evidence,
)


def _th(name: str) -> Default:
    return Default("zephyr_debug.analyze.thresholds", f"Thresholds.{name}")


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug stragglers             # the newest job in the store",
            "zdebug stragglers latest --outlier-z 5",
            "zdebug stragglers --prometheus http://127.0.0.1:9090 --run EXEC_ID",
            "zdebug stragglers ./logs/ --json",
        )
    )
    def stragglers(
        job: str = JOB_OR_PROMETHEUS,
        prometheus: str = PROMETHEUS,
        run: str = RUN,
        outlier_z: float = typer.Option(
            _th("outlier_z"),
            min=0.0,
            metavar="Z",
            help="Outlier = log run time above the stage median + Z robust sigmas (MAD) ...",
        ),
        false_rate: float = typer.Option(
            _th("false_rate"),
            min=1e-9,
            max=1.0,
            metavar="N",
            help="... Z raised so a healthy stage of n shards expects N false outliers in all.",
        ),
        multiplier: float = typer.Option(
            _th("multiplier"), min=1.0, metavar="X", help="... and above X times the median (Flink's rule: a floor)."
        ),
        min_excess: float = typer.Option(
            _th("min_excess_heartbeats"),
            min=0.0,
            metavar="HEARTBEATS",
            help="... and this many heartbeat intervals above the median.",
        ),
        min_held: float = typer.Option(
            _th("min_held_heartbeats"),
            min=0.0,
            metavar="HEARTBEATS",
            help="A straggler kept its stage open this long past every other shard.",
        ),
        min_finished: float = typer.Option(
            _th("min_finished"),
            min=0.0,
            max=1.0,
            metavar="SHARE",
            help="A running stage is judged once this share finished (Spark's gate).",
        ),
        stuck_heartbeats: int = typer.Option(
            _th("stuck_heartbeats"),
            min=1,
            metavar="HEARTBEATS",
            help="No item progress for this many heartbeat intervals = stuck.",
        ),
        skew_items: float = typer.Option(
            _th("skew_items"),
            min=1.0,
            metavar="X",
            help="Input (items, chunks) above X times the stage median = bigger input (data-skew).",
        ),
        normal_rate: float = typer.Option(
            _th("normal_rate"),
            min=0.0,
            max=1.0,
            metavar="X",
            help="Rate above X times the stage median = normal speed.",
        ),
        slow_worker_speed: float = typer.Option(
            _th("slow_worker_speed"),
            min=0.0,
            max=1.0,
            metavar="X",
            help="A worker whose other shards run at X times the stage speed or slower is slow.",
        ),
        memory_near: float = typer.Option(
            _th("memory_near"),
            min=0.0,
            max=1.0,
            metavar="SHARE",
            help="RSS above this share of the memory limit counts as OOM evidence.",
        ),
        timeout: float = TIMEOUT,
        finelog: str = FINELOG,
        as_json: bool = JSON,
    ) -> None:
        """Shards that hold their stage up, with the cause the evidence supports (data-skew, slow-worker,
        stuck, dead-holder, crash-loop, oom, all-workers-dead, or undetermined), the numbers behind it
        and the next command to run."""
        from zephyr_debug.analyze.thresholds import Thresholds
        from zephyr_debug.render import stragglers as view
        from zephyr_debug.render.output import print_json

        th = Thresholds(
            outlier_z=outlier_z,
            false_rate=false_rate,
            multiplier=multiplier,
            min_excess_heartbeats=min_excess,
            min_held_heartbeats=min_held,
            min_finished=min_finished,
            stuck_heartbeats=stuck_heartbeats,
            skew_items=skew_items,
            normal_rate=normal_rate,
            slow_worker_speed=slow_worker_speed,
            memory_near=memory_near,
        )
        target = job_target(job, prometheus, run)
        result = analyze_evidence(load_evidence(target, as_json, finelog), job or target, th)
        print_json(result.stragglers_json()) if as_json else view.render(result)
