"""`zdebug dump <target>`: every thread of a (hung) worker, normalized, and the frame each sits in."""

from __future__ import annotations

import typer

from zephyr_debug.commands.common import JSON, TIMEOUT, examples
from zephyr_debug.commands.profile import JOB, STRAGGLER, SUBPROCESSES, TARGET, target_info, with_subprocesses


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug dump --straggler latest        # the worker holding the longest shard",
            "zdebug dump 12345 --json",
            "zdebug dump zephyr-4e7e9c87-p0-workers-1 --job latest",
        )
    )
    def dump(
        target: str = TARGET,
        job: str = JOB,
        straggler: str = STRAGGLER,
        subprocesses: bool = SUBPROCESSES,
        timeout: float = TIMEOUT,
        as_json: bool = JSON,
    ) -> None:
        """Where each thread of a worker sits now (py-spy dump): the next step for a stuck shard."""
        from zephyr_debug.profile import pyspy
        from zephyr_debug.profile.dump import normalize
        from zephyr_debug.profile.target import resolve
        from zephyr_debug.render.output import print_json
        from zephyr_debug.render.profile import render_dump

        resolved = resolve(target, job, straggler)
        threads = normalize(pyspy.dump(resolved.pid, subprocesses=with_subprocesses(resolved, subprocesses)))
        running = any(t["state"] == "running" for t in threads)
        result = {
            "target": resolved.label,
            **target_info(resolved),
            "threads": threads,
            "next": [f"zdebug profile {resolved.pid}"] if running else [],
        }
        print_json(result) if as_json else render_dump(result)
