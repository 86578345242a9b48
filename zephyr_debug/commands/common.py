"""Options and helpers shared by subcommands."""

from __future__ import annotations

import typer

from zephyr_debug.model import Evidence
from zephyr_debug.render.output import err_console
from zephyr_debug.sources import load

JSON = typer.Option(False, "--json", help="Print JSON instead of tables.")
JOB = typer.Argument(..., help="Execution id (or prefix, or `latest`), job dir, coordinator URL, or evidence file/dir.")


def load_evidence(target: str, as_json: bool) -> Evidence:
    """Load evidence; its warnings (skipped lines, ...) go to stderr unless JSON carries them."""
    ev = load(target)
    if not as_json:
        con = err_console()
        for warning in ev.warnings:
            con.print(f"[yellow]warning:[/] {warning}", markup=True, highlight=False)
    return ev
