"""`zdebug report <job> [-o report.html]`: the findings, shard timeline, tail, memory and crash
groups of a job in one self-contained HTML file."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from zephyr_debug.commands.common import FINELOG, JOB, JSON, TIMEOUT, Default, analyze_evidence, examples, load_evidence
from zephyr_debug.errors import EvidenceError, ZdebugError
from zephyr_debug.findings import SCHEMA_VERSION

if TYPE_CHECKING:
    from zephyr_debug.model import Evidence


def default_path(ev: Evidence) -> Path:
    """`<job dir>/report.html`, else `zdebug-report-<job>.html` here."""
    from zephyr_debug.model import safe_name

    source = Path(ev.source)
    return source / "report.html" if source.is_dir() else Path(f"zdebug-report-{safe_name(ev.job)}.html")


def check_target(path: Path) -> None:
    """Refuse a symlink (someone else's evidence may have planted it) or a directory at `path`."""
    if path.is_symlink():
        raise EvidenceError(f"{path}: is a symbolic link; not writing through it (remove it or pass -o FILE)")
    if path.is_dir():
        raise EvidenceError(f"{path}: is a directory; pass -o FILE")


def write_file(path: Path, data: bytes) -> None:
    """Put `data` at `path` without ever writing through a link: a fresh file in the same directory
    (O_CREAT | O_EXCL | O_NOFOLLOW: a name planted there cannot redirect it) renamed over `path`.
    A symlink at `path` is refused, not replaced: someone else's evidence may have put it there."""
    check_target(path)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(temp, flags, 0o666)  # less the umask, as open() would
    except OSError as exc:
        raise ZdebugError(f"{path}: cannot write ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise ZdebugError(f"{path}: cannot write ({exc.strerror})") from None


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

        if output:
            check_target(output.absolute())  # before the work
        ev = load_evidence(job, as_json, finelog)
        result = analyze_evidence(ev, job)
        text = render(ev, result, limits=Limits(top_workers=top), earlier=earlier.runs(ev))  # cached
        path = (output or default_path(ev)).absolute()
        data = text.encode()
        write_file(path, data)
        size = len(data)
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
