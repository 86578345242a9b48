"""`zdebug report <job> [-o report.html]`: the findings, shard timeline, tail, memory and crash
groups of a job in one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from zephyr_debug.commands.common import FINELOG, JOB, JSON, TIMEOUT, Default, analyze_evidence, examples, load_evidence
from zephyr_debug.errors import ZdebugError
from zephyr_debug.findings import SCHEMA_VERSION

if TYPE_CHECKING:
    from zephyr_debug.model import Evidence


def default_path(ev: Evidence) -> Path:
    """`<job dir>/report.html`, else `zdebug-report-<job>.html` here."""
    from zephyr_debug.model import safe_name

    source = Path(ev.source)
    return source / "report.html" if source.is_dir() else Path(f"zdebug-report-{safe_name(ev.job)}.html")


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug report                 # the newest job: <job dir>/report.html",
            "zdebug report ./logs/ -o report.html",
            "zdebug report iris://127.0.0.1:10000/alice/my-pipeline --top 20",
        )
    )
    def report(
        job: str = JOB,
        output: Path = typer.Option(
            None,
            "--output",
            "-o",
            metavar="FILE",
            help="HTML file to write (default: <job dir>/report.html, else ./zdebug-report-<job>.html).",
        ),
        top: int = typer.Option(
            Default("zephyr_debug.render.report", "Limits.top_workers"),
            "--top",
            min=1,
            metavar="N",
            help="Workers in the memory/disk charts.",
        ),
        timeout: float = TIMEOUT,
        finelog: str = FINELOG,
        as_json: bool = JSON,
    ) -> None:
        """Write a self-contained HTML report (opens offline): shard timeline per stage, progress with
        tail episodes, worker memory/disk, crash groups and the findings with their next commands."""
        from zephyr_debug.render.output import console, print_json
        from zephyr_debug.render.report import Limits, render
        from zephyr_debug.sources import earlier

        ev = load_evidence(job, as_json, finelog)
        result = analyze_evidence(ev, job)
        text = render(ev, result, limits=Limits(top_workers=top), earlier=earlier.runs(ev))  # cached
        path = (output or default_path(ev)).absolute()
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ZdebugError(f"{path}: cannot write ({exc.strerror})") from None
        size = len(text.encode())
        summary = {
            "schema_version": SCHEMA_VERSION,
            "job": ev.job,
            "report": str(path),
            "bytes": size,
            "findings": len(result.findings),
            "crash_groups": len(result.crash_groups),
        }
        if as_json:
            print_json(summary)
        else:
            console().print(f"wrote {size / 2**20:.1f} MB report: {path}", soft_wrap=True)
