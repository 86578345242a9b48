"""Options and helpers shared by subcommands.

Command modules stay light: they declare options here and import analyzers, sources and
renderers inside the command function, so `zdebug --help` starts without pandas & co.
"""

from __future__ import annotations

import importlib
import operator
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from zephyr_debug.errors import UsageError

if TYPE_CHECKING:
    from zephyr_debug.model import Evidence

# Every form a JOB argument takes, listed once; commands point here (`zdebug --help`).
JOB_FORMS = (
    "JOB is one of: an execution id, a unique prefix of one, or `latest` (the job store); "
    "a job dir; an evidence file or dir (Zephyr/Iris logs, get_status, list-tasks JSON); "
    "a live coordinator `http://HOST:PORT`; an Iris job `iris://HOST:PORT/JOB_ID`; "
    "a finelog run `finelog://HOST:PORT/EXEC`; a Prometheus run "
    "`prometheus+http://HOST:9090?run=EXEC`."
)
_JOB_HELP = "The job (default: latest). Forms: see `zdebug --help`."


def complete_job(incomplete: str) -> list[str]:
    """Shell completion of JOB: `latest` and the job store's execution ids, newest first."""
    from zephyr_debug.jobstore import list_jobs

    return [j for j in ("latest", *(p.name for p in reversed(list_jobs()))) if j.startswith(incomplete)]


JSON = typer.Option(False, "--json", help="Print JSON instead of tables.")
JOB = typer.Argument("latest", metavar="JOB", help=_JOB_HELP, autocompletion=complete_job)
# `JOB` or `--prometheus URL [--run ID]`: declare the three, then load `job_target(job, prometheus, run)`.
JOB_OR_PROMETHEUS = typer.Argument(
    None,
    metavar="JOB",
    show_default=False,
    help="The job (default: latest; omit with --prometheus). Forms: see `zdebug --help`.",
    autocompletion=complete_job,
)
PROMETHEUS = typer.Option(None, "--prometheus", metavar="URL", help="Read the run from this Prometheus instead.")
RUN = typer.Option(None, "--run", metavar="EXEC_ID", help="With --prometheus: the run (default: the last to progress).")


# Commands that read a network source: the total deadline of each request (sources/http.py).
def _set_timeout(seconds: float | None) -> float | None:
    if seconds is None:  # the default: no need to import the network code (and pandas) at all
        return None
    from zephyr_debug.sources import http

    return http.set_timeout(seconds)


TIMEOUT = typer.Option(
    None,
    "--timeout",
    metavar="SECONDS",
    show_default=False,
    callback=_set_timeout,
    help="Give up on each network read (connect + whole answer) after SECONDS (default 15).",
)
FINELOG = typer.Option(
    None,
    "--finelog",
    metavar="URL",
    show_default=False,  # sources/finelog.py
    help="Merge in Zephyr's per-shard telemetry of the job from the finelog server at URL.",
)
EXIT_STATUS = typer.Option(
    False, "--exit-status", help="Exit 1 when the job failed or was interrupted (or has findings of severity error)."
)


EXIT_OK, EXIT_PROBLEM = 0, 1  # usage errors exit 2, unreadable evidence 3 (zephyr_debug.errors)
OK_STATES = ("succeeded", "running")


def exit_status(state: str, has_errors: bool) -> int:
    """`--exit-status`: 0 only for a job that succeeded or is running with no finding of severity
    error; a failed, interrupted or unreadable state (whatever its text) is 1."""
    return EXIT_OK if state in OK_STATES and not has_errors else EXIT_PROBLEM


class Default:
    """An option default that lives in a heavy module (pandas & co.): read only when a command
    runs or its help is shown, so the value stays defined once and start-up stays light."""

    def __init__(self, module: str, attr: str, scale: float | None = None):
        self.module, self.attr, self.scale = module, attr, scale

    def __call__(self) -> Any:
        value = operator.attrgetter(self.attr)(importlib.import_module(self.module))
        return value * self.scale if self.scale is not None else value

    def __str__(self) -> str:
        value = self()
        return f"{value:g}" if isinstance(value, float) else str(value)


def examples(*lines: str) -> str:
    """An `Examples:` epilog; each line `zdebug …  # what it does`, kept as written."""
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


def _light_flags(params: list) -> list:
    """typer >= 0.2x coerces even an unset flag (--help, --install-completion: None) through a
    pydantic TypeAdapter, ~0.15 s of imports per run; a flag's value is already a bool or None."""
    try:
        from typer._coercion import PassThroughRuntimeParam
    except ImportError:  # a typer without that layer: nothing to skip
        return params
    for param in params:
        desc = getattr(param, "type_descriptor", None)
        if desc is not None and desc.annotation is bool and getattr(param, "_runtime_param", False) is None:
            param._runtime_param = PassThroughRuntimeParam(annotation=bool, parameter_info=desc.parameter_info)
    return params


class Group(TyperGroup):
    """The root and `profile` groups: flags skip pydantic (`_light_flags`)."""

    def get_params(self, ctx: Any) -> list:
        return _light_flags(super().get_params(ctx))


class Command(TyperCommand):
    """Help without Python-type placeholders (arguments show only their metavar); flags skip
    pydantic (`_light_flags`)."""

    def get_params(self, ctx: Any) -> list:
        return _light_flags(super().get_params(ctx))

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args, opts = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if isinstance(param, TyperArgument):
                args.append((param._rich_display_name(), record[1]))
            else:
                opts.append(record)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class App(typer.Typer):
    """`typer.Typer` whose commands use `Command` and plain (non-boxed) help."""

    def __init__(self, cls: type[TyperGroup] = Group, **kwargs: Any):
        super().__init__(cls=cls, rich_markup_mode=None, pretty_exceptions_enable=False, **kwargs)

    def command(self, *args: Any, cls: type[TyperCommand] = Command, **kwargs: Any):  # type: ignore[override]
        return super().command(*args, cls=cls, **kwargs)


def job_target(job: str | None, prometheus: str | None = None, run: str | None = None) -> str:
    """The `load()` target of a JOB argument or of `--prometheus URL --run ID`."""
    if prometheus:
        if job:
            raise UsageError(f"give JOB ({job}) or --prometheus, not both")
        from zephyr_debug.sources import prometheus as prom

        return prom.target(prometheus, run)
    if run:
        raise UsageError("--run needs --prometheus URL")
    return job or "latest"


def load_evidence(target: str, as_json: bool, finelog: str | None = None) -> Evidence:
    """Load evidence (with `--finelog URL`'s telemetry merged in); its warnings (skipped lines, ...)
    go to stderr unless JSON carries them."""
    from zephyr_debug.sources import load

    return show_warnings(load(target, finelog), as_json)


def show_warnings(ev: Evidence, as_json: bool) -> Evidence:
    """`ev`, its warnings printed to stderr unless JSON carries them."""
    from zephyr_debug.render.output import clean, err_console
    from zephyr_debug.render.warnings import capped

    if not as_json:
        con = err_console()
        for warning in capped(ev.warnings):  # evidence names the files: no markup, no control sequences
            con.print(f"[yellow]warning:[/] {clean(warning)}", markup=True, highlight=False)
    return ev


def analyze_evidence(ev: Evidence, target: str, th: Any = None):
    """The one analysis of a loaded job, compared with the earlier runs of its pipeline in the job
    store (`sources.earlier`): what status, stragglers, diagnose, report and watch all render."""
    from zephyr_debug.analyze.analysis import analyze
    from zephyr_debug.analyze.thresholds import Thresholds
    from zephyr_debug.sources import earlier

    return analyze(ev, th or Thresholds(), target=target, earlier=earlier.runs(ev))
