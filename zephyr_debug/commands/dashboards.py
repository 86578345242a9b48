"""`zdebug dashboards DIR`: write the Grafana dashboard, the Prometheus alert rules (and their
promtool tests) and Grafana provisioning files that the package ships. No extra needed."""

from __future__ import annotations

from pathlib import Path

import typer

from zephyr_debug.commands.common import JSON, examples


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug dashboards ./dash   # then import ./dash/zephyr-pipeline.json",
            "zdebug dashboards /etc/zephyr --json",
            "promtool test rules ./dashboards/alerts_test.yml",
        )
    )
    def dashboards(
        directory: Path = typer.Argument(..., metavar="DIR", help="Where to write them (created if missing)."),
        as_json: bool = JSON,
    ) -> None:
        """Write the Grafana dashboard JSON, the alert rules and the provisioning files into DIR."""
        from zephyr_debug.dashboards.__main__ import PACKAGED
        from zephyr_debug.errors import EvidenceError, UsageError
        from zephyr_debug.render.output import clean, console, print_json

        sources = sorted(p for p in PACKAGED.rglob("*") if p.is_file())
        if not sources:
            raise EvidenceError(f"{PACKAGED}: the packaged dashboards are missing (a broken install: reinstall zdebug)")
        if directory.exists() and not directory.is_dir():
            raise UsageError(f"{directory}: not a directory")
        written = []
        try:
            for src in sources:
                dest = directory / src.relative_to(PACKAGED)
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(src.read_bytes())
                written.append(str(dest))
        except OSError as exc:
            raise UsageError(f"{directory}: cannot write there ({exc.strerror or exc})") from None
        if as_json:
            print_json({"dir": str(directory), "files": written})
            return
        con = console()
        for path in written:
            con.print(f"wrote {clean(path)}")
        con.print(
            f"Grafana: import {clean(directory / 'zephyr-pipeline.json')} (or provision it with "
            f"{clean(directory / 'provisioning')}); Prometheus: add {clean(directory / 'alerts.yml')} to rule_files",
            soft_wrap=True,
        )
