"""`zdebug demo`: run the reference pipeline with injected faults, then show the findings."""

from __future__ import annotations

import shlex

import typer

from zephyr_debug.commands.common import JSON, Default, examples

DEFAULT_FAULTS = ["skew-shard:14:x20", "slow-worker:1:x6", "exception:2", "oom:5", "segfault:6", "kill-worker:2"]
# What the demo shows afterwards: zdebug subcommands run on the finished job.
FOLLOW_UPS: list[list[str]] = [
    ["diagnose"],
    ["crashes", "--dedupe"],
    ["stragglers"],
    ["workers", "--sort", "memory"],
    ["report"],
]
# What it suggests trying next, on the finished job.
NEXT: list[list[str]] = [["diagnose"], ["report"], ["watch", "--once"]]
WRITE_FINELOG = typer.Option(
    None,
    "--finelog",
    metavar="URL",
    show_default=False,  # reference/telemetry.py
    help="Also write Zephyr's per-shard telemetry (zephyr.worker / zephyr.stage) "
    "to the finelog server at URL, as real Zephyr does.",
)


def finelog_target(url: str, execution_id: str) -> str:
    """The `finelog://HOST:PORT/<execution_id>` target of a run that wrote to `url`."""
    from zephyr_debug.sources import finelog

    return f"{finelog.SCHEME}{finelog.server_url(url).split('://', 1)[1]}/{execution_id}"


def next_commands(execution_id: str, finelog: str | None = None) -> list[str]:
    """Commands on the finished job that paste and run (`watch --once`: its last state; with
    `finelog`, stragglers from the telemetry alone)."""
    tel = [shlex.join(["zdebug", "stragglers", finelog_target(finelog, execution_id)])] if finelog else []
    return [shlex.join(["zdebug", args[0], execution_id, *args[1:]]) for args in NEXT] + tel


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug demo                   # the default mixed set of faults",
            "zdebug demo --no-faults --no-show",
            "zdebug demo -f skew-shard:42:x30 -f oom:5:always --shards 64",
            "zdebug demo --json",
            "zdebug demo -f skew-shard:3:x30 --finelog 127.0.0.1:10001",
        )
    )
    def demo(
        fault: list[str] = typer.Option(
            None,
            "--fault",
            "-f",
            metavar="KIND:TARGET[:OPTS]",
            help="A fault, repeatable (e.g. skew-shard:42:x30, oom:5:always). Default: a mixed set.",
        ),
        no_faults: bool = typer.Option(False, "--no-faults", help="A healthy run."),
        workers: int = typer.Option(4, min=1, metavar="N", help="Worker processes."),
        shards: int = typer.Option(
            16, min=1, metavar="N", help="Shards in the first stage (the second has a quarter)."
        ),
        rows: int = typer.Option(20_000, min=10, metavar="N", help="Rows per shard."),
        runner: str = typer.Option("subprocess", metavar="inline|subprocess", help="How workers run a shard."),
        heartbeat: float = typer.Option(0.5, metavar="SECONDS", help="Heartbeat interval (Zephyr: 5)."),
        heartbeat_timeout: float = typer.Option(5.0, metavar="SECONDS", help="Heartbeat timeout (Zephyr: 120)."),
        memory_limit_mb: int = typer.Option(768, metavar="MB", help="The OOM watchdog's per-process RSS limit."),
        deadline: float = typer.Option(300.0, metavar="SECONDS", help="Stop the job after this long (interrupted)."),
        show: bool = typer.Option(True, help="Show the analyzers' findings afterwards."),
        host: str = typer.Option(
            Default("zephyr_debug.reference.server", "LOOPBACK"),
            "--host",
            metavar="ADDR",
            help="Address the coordinator listens on; anything but loopback is reachable from other machines (warns).",
        ),
        finelog: str = WRITE_FINELOG,
        as_json: bool = JSON,
    ) -> None:
        """Run the reference pipeline with faults; leaves a job dir for the other commands."""
        from zephyr_debug.reference import CoordinatorConfig, Job, JobConfig, default_stages, parse_fault
        from zephyr_debug.render.output import console, print_json, progress

        if runner not in ("inline", "subprocess"):
            raise typer.BadParameter("inline or subprocess", param_hint="--runner")
        specs = [] if no_faults else (fault or DEFAULT_FAULTS)
        config = JobConfig(
            workers=workers,
            runner=runner,
            stages=default_stages(shards, rows),
            faults=[parse_fault(s) for s in specs],
            coordinator=CoordinatorConfig(
                heartbeat_interval=heartbeat,
                heartbeat_timeout=heartbeat_timeout,
                status_interval=max(heartbeat * 2, 0.5),
                no_workers_timeout=heartbeat_timeout * 2,
            ),
            memory_limit_mb=memory_limit_mb,
            deadline_s=deadline,
            host=host,
            finelog=finelog,
        )
        con = console()
        job = Job(config).serve()
        if not as_json:
            con.print(f"[bold]coordinator[/] {job.url}  (job {job.execution_id})", soft_wrap=True)
            con.print(f"watch it live from another terminal: zdebug watch {job.url}", soft_wrap=True)
        job.start()
        total = sum(s.shards for s in config.stages)
        with progress(f"running {job.execution_id}", total) as advance:
            seen = [0]

            def tick(coordinator) -> None:
                finished = config.stages[: max(coordinator.stage_index, 0)]
                done = sum(stage.shards for stage in finished) + coordinator.completed
                advance(done - seen[0])
                seen[0] = done

            result = job.wait(on_tick=tick)
        nxt = next_commands(result.execution_id, finelog)
        summary = {
            "job": result.execution_id,
            "dir": str(result.job_dir),
            "url": job.url,
            "state": result.state,
            "fatal_error": result.fatal_error,
            "faults": specs,
            "next": nxt,
        }
        if as_json:
            print_json(summary)
            return
        con.print(
            f"[bold]ran[/] {result.execution_id} ({result.state}) with faults: {', '.join(specs) or 'none'}",
            soft_wrap=True,
        )
        con.print(f"job dir: {result.job_dir}", soft_wrap=True)
        if show:
            from zephyr_debug.cli import app as cli_app

            for args in FOLLOW_UPS:
                con.rule(f"zdebug {' '.join(args)} {result.execution_id}")
                cli_app([*args, str(result.job_dir)], standalone_mode=False)
        con.print("[bold]next, try:[/]")
        for line in nxt:
            con.print(f"  {line}", soft_wrap=True, markup=False)
