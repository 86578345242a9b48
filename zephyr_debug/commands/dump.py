"""`zdebug dump <target>`: every thread of a (hung) worker, normalized, and the frame each sits in."""

from __future__ import annotations

from pathlib import Path

import typer

from zephyr_debug.commands.common import JSON, TIMEOUT, examples
from zephyr_debug.commands.profile import JOB, STRAGGLER, SUBPROCESSES, TARGET, target_info, with_subprocesses


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug dump --straggler latest        # the worker holding the longest shard",
            "zdebug dump 12345 --json",
            "zdebug dump saved-dump.txt   # a saved py-spy dump (text or --json)",
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
        """Where each thread of a worker sits now (py-spy dump): the next step for a stuck shard.
        A saved or pasted dump (a file, or `-` for stdin) is read the same way."""
        from zephyr_debug.profile import pyspy
        from zephyr_debug.profile.dump import normalize
        from zephyr_debug.profile.target import resolve
        from zephyr_debug.render.output import print_json
        from zephyr_debug.render.profile import render_dump

        if target and not (job or straggler or target.isdigit()) and Path(target).is_file():
            saved = _saved_dump(Path(target))
            print_json(saved) if as_json else render_dump(saved)
            return
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


def _saved_dump(path: Path) -> dict:
    """A py-spy dump someone saved or pasted: its threads as a live dump shows them."""
    from zephyr_debug.errors import EvidenceError
    from zephyr_debug.profile import dumptext
    from zephyr_debug.profile.dump import normalize

    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    threads = normalize(dumptext.parse(text, str(path)))
    return {"target": str(path), "pid": threads[0]["pid"] if threads else None, "threads": threads, "next": []}
