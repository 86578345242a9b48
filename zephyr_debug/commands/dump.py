"""`zdebug dump <target>`: every thread of a (hung) worker, normalized, and the frame each sits in."""

from __future__ import annotations

import typer

from zephyr_debug.commands.common import JSON
from zephyr_debug.commands.profile import JOB, STRAGGLER, SUBPROCESSES, TARGET, target_info, with_subprocesses
from zephyr_debug.profile import pyspy
from zephyr_debug.profile.dump import normalize
from zephyr_debug.profile.target import resolve
from zephyr_debug.render.output import print_json
from zephyr_debug.render.profile import render_dump


def register(app: typer.Typer) -> None:
    @app.command()
    def dump(
        target: str = TARGET,
        job: str = JOB,
        straggler: str = STRAGGLER,
        subprocesses: bool = SUBPROCESSES,
        as_json: bool = JSON,
    ) -> None:
        """Where each thread of a worker sits now (py-spy dump): the next step for a stuck shard."""
        resolved = resolve(target, job, straggler)
        threads = normalize(pyspy.dump(resolved.pid, subprocesses=with_subprocesses(resolved, subprocesses)))
        running = any(t["state"] == "running" for t in threads)
        result = {"target": resolved.label, **target_info(resolved), "threads": threads,
                  "next": [f"zdebug profile {resolved.pid}"] if running else []}
        print_json(result) if as_json else render_dump(result)
