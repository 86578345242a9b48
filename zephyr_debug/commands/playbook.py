"""`zdebug playbook [NAME]`: list the runbooks, or print one (rich Markdown on a TTY)."""

from __future__ import annotations

import sys

import typer

from zephyr_debug.commands.common import JSON, examples


def _complete(incomplete: str) -> list[str]:
    """Shell completion of NAME: the shipped playbooks' names."""
    from zephyr_debug.playbooks import ROOT

    names = sorted(p.name.removesuffix(".md") for p in ROOT.iterdir() if p.name.endswith(".md"))
    return [n for n in names if n.startswith(incomplete)]


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug playbook                 # list them",
            "zdebug playbook oom              # one, by a unique part of its name",
            "zdebug playbook straggler-tail --json",
        )
    )
    def playbook(
        name: str = typer.Argument(
            None, metavar="NAME", help="Playbook name (or a unique part of it).", autocompletion=_complete
        ),
        as_json: bool = JSON,
    ) -> None:
        """List the playbooks, or show one: symptoms, commands, how to read them, the fix."""
        from rich.markdown import Markdown
        from rich.table import Table

        from zephyr_debug import playbooks
        from zephyr_debug.findings import SCHEMA_VERSION
        from zephyr_debug.render.output import console, print_json

        con = console()
        if name is None:
            books = playbooks.all_playbooks()
            if as_json:
                print_json(
                    {
                        "schema_version": SCHEMA_VERSION,
                        "playbooks": [{"name": b.name, "title": b.title, "path": str(b.path)} for b in books],
                    }
                )
                return
            table = Table(title="playbooks (zdebug playbook NAME)")
            table.add_column("name")
            table.add_column("pattern")
            for b in books:
                table.add_row(b.name, b.title)
            con.print(table)
            return
        book = playbooks.find(name)
        if as_json:
            print_json(
                {
                    "schema_version": SCHEMA_VERSION,
                    "name": book.name,
                    "title": book.title,
                    "path": str(book.path),
                    "commands": book.commands,
                    "markdown": book.body,
                }
            )
        elif con.is_terminal:
            con.print(Markdown(book.body))
        else:
            sys.stdout.write(book.body)
