"""`zdebug`: the command line. One module per subcommand under `commands/`.

Every failure below raises `ZdebugError`; here it becomes one line on stderr and its exit
code (2 usage, 3 unreadable evidence / unreachable source), never a traceback. Command
modules import their heavy parts (pandas, plotly, sources, analyzers) only when they run.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer

from zephyr_debug import __version__
from zephyr_debug.commands.common import JOB_FORMS, App
from zephyr_debug.errors import ZdebugError

# Subcommand modules; each has `register(app)`.
COMMANDS = [
    "demo",
    "jobs",
    "status",
    "diagnose",
    "stragglers",
    "workers",
    "crashes",
    "watch",
    "report",
    "profile",
    "dump",
    "playbook",
    "observe",
    "counters",
    "dashboards",
    "logs",
]


def _version(value: bool) -> None:
    if value:
        print(f"zdebug {__version__}")
        raise typer.Exit()


app = App(
    no_args_is_help=True,
    help="Diagnose stuck, slow and crashing Zephyr pipelines: what is wrong, "
    "and what to run next.\n\n" + JOB_FORMS + "\n\nExit codes: 0 ok, 1 failed job with --exit-status, "
    "2 usage error, 3 unreadable evidence or unreachable source.",
)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Diagnose Zephyr pipelines."""


for _name in COMMANDS:
    importlib.import_module(f"zephyr_debug.commands.{_name}").register(app)


def _fail(message: str, code: int) -> None:
    """One line on stderr; under `--json` also `{"schema_version", "error", "exit_code"}` on stdout
    (a script reading stdout sees why, not nothing). Same exit code either way."""
    from zephyr_debug.render.output import _CONTROL, error_json

    line = _CONTROL.sub("?", message).replace("\n", " ")
    if "--json" in sys.argv[1:]:
        sys.stdout.write(error_json(line, code) + "\n")
    sys.stderr.write("zdebug: error: " + line + "\n")
    sys.exit(code)


def main() -> None:
    try:
        _streams_saved()
        if "--json" in sys.argv[1:]:
            _json_main()
        else:
            app(prog_name="zdebug")
    except ZdebugError as exc:
        _fail(exc.message, exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(141)
    except Exception as exc:  # the last guard: a bug must still not print a traceback
        if os.environ.get("ZDEBUG_DEBUG"):
            raise
        _fail(f"internal error: {type(exc).__name__}: {exc} (set ZDEBUG_DEBUG=1 for the traceback)", 70)


def _json_main() -> None:
    """Under `--json` the option parser's own errors (unknown option, bad value) are JSON on stdout
    too, with their exit code (2); exit codes of the commands stay as they are."""
    try:  # typer's own click (vendored in newer typer), else click
        from typer import _click as click
    except ImportError:
        import click  # type: ignore[no-redef]
    from typer.core import Abort

    try:
        rv = app(prog_name="zdebug", standalone_mode=False)
    except click.ClickException as exc:
        _fail(exc.format_message(), exc.exit_code)
    except Abort:
        sys.exit(130)
    sys.exit(rv if isinstance(rv, int) else 0)


def _streams_saved() -> None:
    """`-` (standard input) and FIFO arguments become the file their bytes are saved to, so every
    command reads them and a suggested next command can name them."""
    from zephyr_debug import streams  # stdlib only: start-up stays light

    if any(streams.is_stream(a) for a in sys.argv[1:]):
        sys.argv[1:] = [streams.kept(a) if streams.is_stream(a) else a for a in sys.argv[1:]]


if __name__ == "__main__":
    main()
