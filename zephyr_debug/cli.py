"""`zdebug`: the command line. One module per subcommand under `commands/`.

Every failure below raises `ZdebugError`; here it becomes one line on stderr and a
non-zero exit, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer

from zephyr_debug.errors import ZdebugError
from zephyr_debug.render.output import _CONTROL

# Subcommand modules; each has `register(app)`.
COMMANDS = ["demo", "jobs", "status", "profile", "dump", "crashes", "stragglers", "workers", "watch", "playbook", "report", "diagnose", "observe"]

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  help="Diagnose stuck, slow and crashing Zephyr pipelines: what is wrong, and what to run next.")
for _name in COMMANDS:
    importlib.import_module(f"zephyr_debug.commands.{_name}").register(app)


def _fail(message: str, code: int) -> None:
    sys.stderr.write("zdebug: error: " + _CONTROL.sub("?", message).replace("\n", " ") + "\n")
    sys.exit(code)


def main() -> None:
    try:
        app()
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


if __name__ == "__main__":
    main()
