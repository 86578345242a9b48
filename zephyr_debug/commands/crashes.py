"""`zdebug crashes <source> [--dedupe | --group FP]` and `zdebug crashes normalize FILE`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from zephyr_debug import jobstore
from zephyr_debug.commands.common import JSON, TIMEOUT, examples, load_evidence
from zephyr_debug.errors import EvidenceError, UsageError

if TYPE_CHECKING:
    from zephyr_debug.crashes.fingerprint import Fingerprinter
    from zephyr_debug.crashes.parse import Stats
    from zephyr_debug.model import Crash


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug crashes latest --dedupe   # the newest job, grouped",
            "zdebug crashes worker-3.log --shard 5",
            "zdebug crashes latest --group 1a2b3c4d   # one group whole",
            "zdebug crashes crashes/ --dedupe --in-app mypipeline",
            "iris job logs /alice/my-pipeline | zdebug crashes - --dedupe",
            "zdebug crashes normalize crash.txt",
        )
    )
    def crashes(
        args: list[str] = typer.Argument(
            ...,
            metavar="SOURCE | normalize FILE",
            help="A JOB (forms: see `zdebug --help`), a log file, a directory "
            "of crash files, or `-` for stdin. `normalize FILE` shows the "
            "normalized form of the crash reports in FILE.",
        ),
        dedupe: bool = typer.Option(False, "--dedupe", help="Group crashes by fingerprint."),
        group: str = typer.Option(
            None,
            "--group",
            metavar="FP",
            help="Open one group whole (a fingerprint or its prefix): first and latest event, "
            "every event in time order, the verdict, the playbook.",
        ),
        shard: int = typer.Option(None, "--shard", metavar="N", help="Only crashes of this shard."),
        in_app: list[str] = typer.Option(
            None, "--in-app", metavar="PKG", help="Frames of module PKG (and its submodules) are in-app; repeatable."
        ),
        exit_with_status: bool = typer.Option(
            False,
            "--exit-status",
            help="Exit 1 when a crash group is new or regressed against the earlier runs of the job's "
            "pipeline (any crash when there is no earlier run, or the source is no job).",
        ),
        timeout: float = TIMEOUT,
        as_json: bool = JSON,
    ) -> None:
        """Crashes of a job or log: one row per crash, or grouped by fingerprint with --dedupe."""
        from zephyr_debug.crashes import inputs
        from zephyr_debug.crashes.cluster import cluster, rows
        from zephyr_debug.crashes.fingerprint import Fingerprinter
        from zephyr_debug.crashes.parse import Stats
        from zephyr_debug.render import crashes as view

        fp = Fingerprinter(tuple(in_app or ()))
        stats = Stats()
        if args[0] == "normalize":
            if len(args) != 2:
                raise UsageError("usage: zdebug crashes normalize FILE (or - for stdin)")
            reports = [
                {"source": c.location, "normalized": fp.norm.report(c.text), **_signature(fp, c)}
                for c in inputs.stream(args[1], stats)
            ]
            _readable(args[1], stats)
            _finish(view.normalized, {"reports": reports}, stats, as_json)
            return
        if len(args) != 1:
            raise UsageError(f"expected one SOURCE, got {len(args)}: {' '.join(args)}")
        source = args[0]
        found, job, job_dir = _crashes(source, stats, as_json)
        if shard is not None:
            found = (c for c in found if c.shard == shard)
        context = {"source": source, "job": job, "shard": shard}
        if group is not None:
            grouped = cluster(found, fp, job=job)
            _readable(source, stats)
            chosen = _one_group(grouped, group, source)
            _finish(view.group, {**context, "group": chosen, "fingerprinter": fp}, stats, as_json)
            if exit_with_status:
                raise typer.Exit(1)
        elif dedupe:
            grouped = cluster(found, fp, job=job)
            _readable(source, stats)
            compared: list[str] = []
            if job_dir is not None:
                from zephyr_debug.crashes import history

                grouped, compared = history.compare(grouped, job_dir, fp)
            data = {**context, "compared_with": compared, "groups": grouped, "fingerprinter": fp}
            _finish(view.groups, data, stats, as_json)
            if exit_with_status and any(g.history in (None, "new", "regressed") for g in grouped):
                raise typer.Exit(1)
        else:
            listed = list(rows(found, fp))
            _readable(source, stats)
            _finish(view.rows, {**context, "crashes": listed}, stats, as_json)
            if exit_with_status and listed:
                raise typer.Exit(1)


def _crashes(source: str, stats: Stats, as_json: bool) -> tuple[Iterator[Crash], str | None, Path | None]:
    """(crashes, job id when the source is a job, its dir when it is in the job store). Logs and
    crash files are split here; jobs and JSON evidence (Iris get-task-logs, snapshot dirs) go
    through the evidence loaders."""
    from zephyr_debug.crashes import inputs

    how = _streamed(source)
    if how == "file":
        return inputs.stream(source, stats), None, None
    if how == "dir":
        return inputs.directory(Path(source), stats), None, None
    ev = load_evidence(source, as_json)
    job_dir = Path(ev.source)
    return iter(inputs.job(ev, stats)), ev.job, job_dir if job_dir.is_dir() and jobstore.is_job_dir(job_dir) else None


def _streamed(source: str) -> str | None:
    """ "file" (a log, a crash file, stdin), "dir" (of crash files), or None (a job or JSON
    evidence: the evidence loaders read it)."""
    path = Path(source)
    if source == "-" or (path.is_file() and not _json(path)):
        return "file"
    if path.is_dir() and not jobstore.is_job_dir(path) and not any(path.rglob("*.json")):
        return "dir"
    return None


def _readable(source: str, stats: Stats) -> None:
    """A file, stdin or directory of crash files that holds no crash report must at least be text
    a log is made of: empty, binary or random text is unreadable evidence (exit 3), not 0 crashes."""
    how = _streamed(source)
    if stats.reports or how is None:
        return  # jobs and JSON evidence have their own loaders' errors
    name = "<stdin>" if source == "-" else source
    if how == "dir":
        if stats.skipped * 2 >= stats.lines or stats.records == 0:
            raise EvidenceError(f"{name}: no crash report and no log line in its *.txt / *.log files")
        return
    if stats.lines == 0:
        raise EvidenceError(f"{name}: empty (no crash report, no log line)")
    if stats.skipped * 2 >= stats.lines:
        raise EvidenceError(f"{name}: binary or undecodable ({stats.skipped} of {stats.lines} lines unreadable)")
    if stats.records == 0:
        raise EvidenceError(f"{name}: no crash report and no log line in {stats.lines} line(s): not a log")


def _one_group(groups: list, wanted: str, source: str):
    matches = [g for g in groups if g.fingerprint.startswith(wanted.lower())]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UsageError(f"{source}: no crash group {wanted!r} ({len(groups)} group(s); see --dedupe)")
    raise UsageError(f"{source}: {wanted!r} names {len(matches)} groups: give more of the fingerprint")


def _json(path: Path) -> bool:
    from zephyr_debug.sources import evidencedir

    try:
        with open(path, "rb") as fh:
            return evidencedir.looks_json(fh.read(512))
    except OSError:
        return False


def _signature(fp: Fingerprinter, crash: Crash) -> dict:
    sig = fp.signature(crash.text, crash.kind, crash.stage)
    return {
        "fingerprint": sig.fingerprint,
        "kind": sig.kind,
        "exception": sig.exception,
        "message": sig.message,
        "frames": list(sig.frames),
    }


def _finish(render, data: dict, stats: Stats, as_json: bool) -> None:
    """Render (the crash iterators run here), then report what was skipped."""
    from zephyr_debug.render.output import print_json

    if as_json:
        from zephyr_debug.crashes.cluster import SCHEMA_VERSION

        payload = {"schema_version": SCHEMA_VERSION, **data}  # materialized above: lists
        payload.pop("fingerprinter", None)
        if "groups" in payload:
            payload["groups"] = [g.to_json() for g in payload["groups"]]
        if "group" in payload:
            payload["group"] = payload["group"].to_json(whole=True)
        payload["skipped_lines"] = stats.skipped
        payload["warnings"] = _warnings(stats)
        print_json(payload)
    else:
        render(data, _warnings(stats))


def _warnings(stats: Stats) -> list[str]:
    out = []
    if stats.skipped:
        out.append(f"skipped {stats.skipped} unreadable line(s) (binary or garbage) of {stats.lines}")
    if stats.truncated:
        out.append(f"cut {stats.truncated} over-long line(s)")
    return out
