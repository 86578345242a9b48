"""`zdebug watch <url>`: a live view of a running coordinator, refreshed every few seconds."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer

from zephyr_debug.commands.common import FINELOG, JOB, JSON, TIMEOUT, examples, show_warnings
from zephyr_debug.errors import UsageError, ZdebugError
from zephyr_debug.findings import SCHEMA_VERSION

if TYPE_CHECKING:
    from zephyr_debug.analyze.analysis import Analysis
    from zephyr_debug.analyze.workers import WorkerRanking
    from zephyr_debug.dashboards.exporter import FindingsCollector
    from zephyr_debug.model import Evidence

TOP_WORKERS = 5
NEWEST_FAILURES = 5


@dataclass(frozen=True)
class Snapshot:
    """One frame of `watch`: the job's one analysis, its top workers and newest failures."""

    analysis: Analysis
    workers: WorkerRanking
    failures: list[dict]
    worker_list: list[dict]
    now: float
    interval_s: float

    def to_json(self) -> dict:
        from zephyr_debug.render import contract

        a = self.analysis
        return {
            "schema_version": SCHEMA_VERSION,
            "job": a.job,
            "source": a.source,
            "now": self.now,
            "interval_s": self.interval_s,
            "status": contract.status(a, self.worker_list),
            "stragglers": a.stragglers_json(),
            "workers": self.workers.to_json(),
            "failures": self.failures,
        }


def snapshot(ev: Evidence, interval_s: float, target: str) -> Snapshot:
    """The analysis, top workers by memory and the newest failed attempts."""
    import pandas as pd

    from zephyr_debug.analyze.liveness import listing
    from zephyr_debug.analyze.workers import rank
    from zephyr_debug.commands.common import analyze_evidence

    a = ev.attempts
    failed = a[a["outcome"] == "failed"].sort_values("end_ts", ascending=False).head(NEWEST_FAILURES)
    failures = failed[["end_ts", "stage", "shard", "attempt", "worker", "kind", "error"]]
    return Snapshot(
        analyze_evidence(ev, target),
        rank(ev, "memory", TOP_WORKERS),
        failures.astype(object).where(pd.notna(failures), None).to_dict("records"),
        listing(ev),
        ev.now,
        interval_s,
    )


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug watch http://127.0.0.1:PORT   # the URL `zdebug demo` prints",
            "zdebug watch iris://127.0.0.1:10000/alice/my-pipeline --interval 10",
            "zdebug watch latest --once",
            "zdebug watch finelog://127.0.0.1:10001/EXEC_ID --once",
            "zdebug watch iris://127.0.0.1:10000/alice/my-pipeline --metrics-port 9101",
        )
    )
    def watch(
        url: str = JOB,
        interval: float = typer.Option(2.0, min=0.2, metavar="SECONDS", help="Seconds between refreshes."),
        once: bool = typer.Option(False, "--once", help="Print one snapshot and exit."),
        timeout: float = TIMEOUT,
        finelog: str = FINELOG,
        metrics_port: int = typer.Option(
            None,
            min=0,
            max=65535,
            metavar="PORT",
            help="Also serve the findings as Prometheus metrics on 127.0.0.1:PORT/metrics "
            "(0: any free port), for the Zdebug* alert rules in dashboards/alerts.yml.",
        ),
        as_json: bool = JSON,
    ) -> None:
        """Live view of a running job (best with a coordinator URL): progress, tail, stragglers, top workers,
        newest failures. Ctrl-C quits. --once / --json: a single snapshot."""
        from rich.live import Live

        from zephyr_debug.render import watch as view
        from zephyr_debug.render.output import console, print_json

        if metrics_port is not None and (once or as_json):
            raise UsageError("--metrics-port serves every refresh: it cannot go with --once or --json")
        read = _reader(url, finelog)
        snap = snapshot(show_warnings(read(), as_json), interval, url)
        if as_json:
            print_json(snap.to_json())
            return
        con = console()
        if once:
            con.print(view.screen(snap, live=False))
            return
        export = _exporter(url, metrics_port, con)
        local = _local(url)
        said: set[str] = set()
        try:
            with Live(view.screen(snap), console=con, auto_refresh=False, transient=False) as live:
                while True:
                    if export is not None:
                        export.update(snap.analysis, snap.now)
                    if snap.analysis.state != "running":
                        break
                    time.sleep(interval)
                    ev = _refresh(read, snap, finelog, local, lambda m: _say_once(con, said, m))
                    if ev is None:
                        continue
                    snap = snapshot(ev, interval, url)
                    live.update(view.screen(snap), refresh=True)
        except KeyboardInterrupt:
            con.print("[dim]stopped watching[/]")


def _exporter(target: str, port: int | None, con) -> FindingsCollector | None:
    """The metrics endpoint `--metrics-port` asks for (None: not asked); a port in use is a
    one-line error."""
    if port is None:
        return None
    from zephyr_debug.dashboards.exporter import serve

    try:
        collector, bound = serve(target, port)
    except OSError as exc:
        raise ZdebugError(f"--metrics-port {port}: cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    con.print(f"metrics: http://127.0.0.1:{bound}/metrics", soft_wrap=True, highlight=False)
    return collector


def _local(url: str) -> bool:
    """Whether `url` is a file or directory here (not a coordinator, Iris or finelog address)."""
    from pathlib import Path

    return "://" not in url and Path(url).exists()


def _reader(url: str, finelog: str | None) -> Callable[[], Evidence]:
    """How each refresh reads the job: a plain log file only grows, so a refresh folds what was
    appended since the last (`sources.follow`); anything else is loaded whole."""
    from pathlib import Path

    from zephyr_debug.sources import load
    from zephyr_debug.sources.follow import LogFollower

    path = Path(url)
    if finelog is None and LogFollower.follows(path):
        return LogFollower(path).evidence
    return lambda: load(url, finelog)


def _refresh(
    read: Callable[[], Evidence], last: Snapshot, finelog: str | None, local: bool, say: Callable[[str], None]
) -> Evidence | None:
    """The next refresh's evidence; None: a local log that reads as nothing for now (rewritten in
    place or rotated by copytruncate, it can read empty or cut for a moment), said, the last read kept."""
    if not local:
        return _reload(read, last, finelog)
    try:
        return read()
    except ZdebugError as exc:
        say(f"refresh: {exc.message}; showing the last good read")
        return None


def _say_once(con, said: set[str], message: str) -> None:
    from zephyr_debug.render.output import clean

    if message not in said:
        said.add(message)
        con.print(f"[dim]{clean(message)}[/]", highlight=False)


def _reload(read: Callable[[], Evidence], last: Snapshot, finelog: str | None) -> Evidence:
    """Fresh evidence (with `--finelog` telemetry); when the coordinator is gone, the job's record
    in the job store."""
    from zephyr_debug.sources import load

    try:
        return read()
    except ZdebugError as exc:
        try:
            return load(last.analysis.job, finelog)
        except ZdebugError:
            raise ZdebugError(f"{exc.message}; it stopped answering while the job was {last.analysis.state}") from None
