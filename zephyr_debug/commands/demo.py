"""`zdebug demo`: run the reference pipeline with injected faults, then show the findings."""

from __future__ import annotations

import typer

from zephyr_debug.commands.common import JSON
from zephyr_debug.reference import CoordinatorConfig, JobConfig, Job, default_stages, parse_fault
from zephyr_debug.reference.server import LOOPBACK
from zephyr_debug.render.output import console, print_json, progress

DEFAULT_FAULTS = ["skew-shard:3:x6", "slow-worker:1:x6", "exception:2", "oom:5", "segfault:6", "kill-worker:2"]
# What the demo shows afterwards: zdebug subcommands run on the finished job.
FOLLOW_UPS: list[list[str]] = [["diagnose"], ["crashes", "--dedupe"], ["stragglers"], ["workers", "--sort", "memory"], ["report"]]


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        fault: list[str] = typer.Option(None, "--fault", "-f", help="KIND:TARGET[:OPTIONS], repeatable "
                                        "(e.g. skew-shard:42:x30, oom:5:always). Default: a mixed set."),
        no_faults: bool = typer.Option(False, "--no-faults", help="A healthy run."),
        workers: int = typer.Option(4, min=1, help="Worker processes."),
        shards: int = typer.Option(16, min=1, help="Shards in the first stage (the second has a quarter)."),
        rows: int = typer.Option(20_000, min=10, help="Rows per shard."),
        runner: str = typer.Option("subprocess", help="inline | subprocess"),
        heartbeat: float = typer.Option(0.5, help="Heartbeat interval, seconds (Zephyr: 5)."),
        heartbeat_timeout: float = typer.Option(5.0, help="Heartbeat timeout, seconds (Zephyr: 120)."),
        memory_limit_mb: int = typer.Option(768, help="The OOM watchdog's per-process RSS limit."),
        deadline: float = typer.Option(300.0, help="Stop the job after this many seconds (interrupted)."),
        show: bool = typer.Option(True, help="Show the analyzers' findings afterwards."),
        host: str = typer.Option(LOOPBACK, "--host", help="Address the coordinator listens on; anything but "
                                 "loopback is reachable from other machines (warns)."),
        as_json: bool = JSON,
    ) -> None:
        """Run the reference pipeline with faults; leaves a job dir for the other commands."""
        if runner not in ("inline", "subprocess"):
            raise typer.BadParameter("inline or subprocess", param_hint="--runner")
        specs = [] if no_faults else (fault or DEFAULT_FAULTS)
        config = JobConfig(
            workers=workers, runner=runner, stages=default_stages(shards, rows), faults=[parse_fault(s) for s in specs],
            coordinator=CoordinatorConfig(heartbeat_interval=heartbeat, heartbeat_timeout=heartbeat_timeout,
                                          status_interval=max(heartbeat * 2, 0.5), no_workers_timeout=heartbeat_timeout * 2),
            memory_limit_mb=memory_limit_mb, deadline_s=deadline, host=host)
        job = Job(config).start()
        total = sum(s.shards for s in config.stages)
        with progress(f"running {job.execution_id}", total) as advance:
            seen = [0]

            def tick(coordinator) -> None:
                done = sum(stage.shards for stage in config.stages[:max(coordinator.stage_index, 0)]) + coordinator.completed
                advance(done - seen[0])
                seen[0] = done

            result = job.wait(on_tick=tick)
        summary = {"job": result.execution_id, "dir": str(result.job_dir), "state": result.state,
                   "fatal_error": result.fatal_error, "faults": specs}
        if as_json:
            print_json(summary)
            return
        con = console()
        con.print(f"[bold]ran[/] {result.execution_id} ({result.state}) with faults: {', '.join(specs) or 'none'}")
        con.print(f"job dir: {result.job_dir}")
        if show:
            from zephyr_debug.cli import app as cli_app

            for args in FOLLOW_UPS:
                con.rule(f"zdebug {' '.join(args)} {result.execution_id}")
                cli_app([*args, str(result.job_dir)], standalone_mode=False)
