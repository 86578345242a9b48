"""`zdebug profile <target>`: py-spy a worker, write a schema-valid speedscope file, print a verdict.

`zdebug profile summarize FILE` gives the same verdict for any speedscope file (or an Iris
profile-task reply). `zdebug profile <target>` is short for `zdebug profile record <target>`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from zephyr_debug.commands.common import JSON, TIMEOUT, App, Group, examples

if TYPE_CHECKING:
    from zephyr_debug.profile.target import Target

TARGET = typer.Argument(None, metavar="PID|WORKER", help="A pid, or a worker id of a live job (with --job).")
JOB = typer.Option(
    None, "--job", metavar="JOB", help="The live job the worker id belongs to (forms: see `zdebug --help`)."
)
STRAGGLER = typer.Option(
    None, "--straggler", metavar="JOB", help="Target the worker holding JOB's longest-running in-flight shard."
)
SUBPROCESSES = typer.Option(
    None,
    "--subprocesses/--no-subprocesses",
    help="Include child processes (default: on for jobs using the subprocess runner).",
)


NOTES = {
    "gil": "--gil keeps only GIL-holding samples: the waiting share is not measured",
    "no-idle": "--no-idle: idle threads were not sampled, so the waiting share is a lower bound",
}


class _RecordByDefault(Group):
    """Anything that is not a subcommand goes to `record`."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["record", *args]
        return super().parse_args(ctx, args)


def with_subprocesses(target: Target, flag: bool | None) -> bool:
    return target.runner == "subprocess" if flag is None else flag


def target_info(target: Target) -> dict:
    return {
        "pid": target.pid,
        "worker": target.worker,
        "shard": target.shard,
        "shard_elapsed_s": target.elapsed_s,
        "why": target.why,
    }


def _default_output(target: Target) -> Path:
    from zephyr_debug.model import safe_name

    stamp = time.strftime("%Y%m%d-%H%M%S")
    if target.job_dir is not None and target.worker:
        return target.job_dir / "profiles" / f"{safe_name(target.worker)}-{stamp}.speedscope.json"
    return Path(f"zdebug-profile-{target.pid}-{stamp}.speedscope.json")


def _next_steps(summary: dict, file: Path, pid: int | None) -> list[str]:
    if summary["verdict"] in ("waiting", "mixed", "no-samples") and pid:
        return [f"zdebug dump {pid}", f"open {file} in https://www.speedscope.app"]
    return [f"open {file} in https://www.speedscope.app"]


def register(app: typer.Typer) -> None:
    group = App(
        cls=_RecordByDefault,
        no_args_is_help=True,
        help="Profile a worker with py-spy: user code vs libraries vs waiting, hot frames. "
        "`zdebug profile TARGET` is short for `zdebug profile record TARGET`.",
    )
    app.add_typer(group, name="profile")

    @group.command(
        epilog=examples(
            "zdebug profile --straggler latest   # the worker holding the longest shard",
            "zdebug profile 12345 --duration 30 --gil",
            "zdebug profile zephyr-4e7e9c87-p0-workers-1 --job latest -o w1.json",
        )
    )
    def record(
        target: str = TARGET,
        job: str = JOB,
        straggler: str = STRAGGLER,
        duration: int = typer.Option(10, min=1, metavar="SECONDS", help="Seconds to sample."),
        rate: int = typer.Option(100, min=1, max=10_000, metavar="HZ", help="Samples per second."),
        gil: bool = typer.Option(False, "--gil", help="Only samples holding the GIL; reports the GIL-holding share."),
        idle: bool = typer.Option(
            True, "--idle/--no-idle", help="Sample idle threads too (needed to measure waiting)."
        ),
        subprocesses: bool = SUBPROCESSES,
        nonblocking: bool = typer.Option(
            True,
            "--nonblocking/--blocking",
            help="--blocking pauses the worker for each sample: exact stacks, much more overhead on a busy host.",
        ),
        output: Path = typer.Option(
            None,
            "-o",
            "--output",
            metavar="FILE",
            help="Speedscope file to write (default: <job dir>/profiles/ for a worker, else the current dir).",
        ),
        timeout: float = TIMEOUT,
        as_json: bool = JSON,
    ) -> None:
        """Sample a pid or a job's worker with py-spy; write a speedscope file; print the verdict."""
        from zephyr_debug.profile import pyspy
        from zephyr_debug.profile.summary import summarize as summarize_profile
        from zephyr_debug.profile.target import resolve
        from zephyr_debug.render.output import print_json
        from zephyr_debug.render.profile import render_summary

        iris_job = next((t for t in (straggler, job) if t and t.startswith("iris://")), None)
        if iris_job:  # Iris runs py-spy on the task's host: profile-task
            _record_on_iris(iris_job, None if straggler else target, duration, output, as_json)
            return
        resolved = resolve(target, job, straggler)
        rec = pyspy.record(
            resolved.pid,
            output or _default_output(resolved),
            duration_s=duration,
            rate=rate,
            gil=gil,
            idle=idle,
            subprocesses=with_subprocesses(resolved, subprocesses),
            nonblocking=nonblocking,
        )
        doc = _load_fixed(rec.path)
        summary = summarize_profile(doc, duration_s=rec.duration_s, gil=gil, source=resolved.label)
        summary.update(
            file=str(rec.path),
            target=target_info(resolved),
            rate=rate,
            idle=idle,
            subprocesses=rec.subprocesses,
            next=_next_steps(summary, rec.path, resolved.pid),
            notes=[NOTES[flag] for flag in ("gil", "no-idle") if {"gil": gil, "no-idle": not idle}[flag]],
        )
        print_json(summary) if as_json else render_summary(summary)

    @group.command(
        epilog=examples(
            "zdebug profile summarize w1.speedscope.json",
            "zdebug profile summarize reply.json -o fixed.speedscope.json --json",
        )
    )
    def summarize(
        file: Path = typer.Argument(
            ..., metavar="FILE", help="A speedscope JSON file, or an Iris profile-task reply (profile_data)."
        ),
        output: Path = typer.Option(
            None, "-o", "--output", metavar="FILE", help="Also write the (decoded, fixed) speedscope file."
        ),
        as_json: bool = JSON,
    ) -> None:
        """The verdict for an existing speedscope file."""
        from zephyr_debug.profile import speedscope
        from zephyr_debug.profile.summary import summarize as summarize_profile
        from zephyr_debug.render.output import print_json
        from zephyr_debug.render.profile import render_summary

        doc = speedscope.load(file)
        if output:
            speedscope.write(doc, output)
        summary = summarize_profile(doc, source=str(file))
        summary.update(file=str(output or file), next=_next_steps(summary, output or file, None))
        print_json(summary) if as_json else render_summary(summary)


def _record_on_iris(job: str, worker: str | None, duration: int, output: Path | None, as_json: bool) -> None:
    """`zdebug profile --straggler iris://…` / `WORKER --job iris://…`: Iris's profile-task."""
    from zephyr_debug.profile import iris_task
    from zephyr_debug.profile.summary import summarize as summarize_profile
    from zephyr_debug.render.output import print_json
    from zephyr_debug.render.profile import render_summary

    path = output or Path(f"zdebug-profile-iris-{time.strftime('%Y%m%d-%H%M%S')}.speedscope.json")
    path.write_bytes(iris_task.profile_task(job, duration, worker))
    doc = _load_fixed(path)
    summary = summarize_profile(doc, duration_s=duration, source=job)
    summary.update(file=str(path), target={"iris": job, "worker": worker}, next=_next_steps(summary, path, None))
    print_json(summary) if as_json else render_summary(summary)


def _load_fixed(path: Path) -> dict:
    """A just-recorded speedscope file, rewritten in place so that it validates; its document."""
    from zephyr_debug.profile import speedscope

    doc = speedscope.load(path)
    speedscope.write(doc, path)
    return doc
