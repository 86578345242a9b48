"""`zdebug logs JOB --shard N [--stage S] [--attempt K]`: one shard's lines from every log of the job.

The evidence gives the shard's attempts (stage, attempt as Zephyr numbers it, holder worker, start
and end); then every log file of the job (coordinator, worker logs and stderr, crash files) is
scanned for the lines, inside an attempt's time window, that name the shard (`shard N`, `Shard N`,
`shard=N`) or its holder worker, or that a file of that worker holds. A line without a time of its
own (a traceback's) goes with the line before it. Printed in time order with their file.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from zephyr_debug.commands.common import JOB, JSON, TIMEOUT, examples

if TYPE_CHECKING:
    from zephyr_debug.model import Evidence

BEFORE_S, AFTER_S = 1.0, 2.0  # the coordinator logs an assignment just before, a failure just after
LOG_SUFFIXES = (".log", ".stderr", ".stdout", ".txt", ".out", ".err")
MAX_FILE_BYTES = 2 << 30  # one log file read at most (a longer one is read up to this)


@dataclass(frozen=True)
class Attempt:
    stage: str
    shard: int
    attempt: int
    worker: str | None
    start_ts: float | None
    end_ts: float | None
    outcome: str
    kind: str | None
    crash_file: str | None

    def window(self, now: float) -> tuple[float, float]:
        start = self.start_ts if self.start_ts is not None else -math.inf
        end = self.end_ts if self.end_ts is not None else now
        return start - BEFORE_S, end + AFTER_S

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "crash_file"}


@dataclass(frozen=True)
class Line:
    ts: float | None
    source: str
    line: int
    text: str

    def to_json(self) -> dict[str, Any]:
        return vars(self)


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _str(v: Any) -> str | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def attempts(ev: Evidence, shard: int, stage: str | None, attempt: int | None) -> list[Attempt]:
    """The shard's attempts the options select; a bad option is a one-line error naming what exists."""
    from zephyr_debug.errors import UsageError

    a = ev.attempts
    mine = a[a["shard"] == shard] if len(a) else a
    if not len(mine):
        have = sorted({int(s) for s in a["shard"].dropna()}) if len(a) else []
        shown = ", ".join(map(str, have[:20])) + (" …" if len(have) > 20 else "")
        raise UsageError(f"shard {shard}: no attempt of it in {ev.source} (shards: {shown or 'none'})")
    if stage is not None:
        stages = list(dict.fromkeys(map(str, mine["stage"])))
        exact = [s for s in stages if s == stage] or [s for s in stages if s.startswith(stage)]
        if len(exact) != 1:
            why = "ambiguous" if exact else "no such stage"
            raise UsageError(f"--stage {stage}: {why} for shard {shard} (its stages: {', '.join(stages)})")
        mine = mine[mine["stage"] == exact[0]]
    if attempt is not None:
        have = sorted({int(x) for x in mine["attempt"].dropna()})
        mine = mine[mine["attempt"] == attempt]
        if not len(mine):
            raise UsageError(
                f"--attempt {attempt}: shard {shard} has attempts {', '.join(map(str, have))} (Zephyr counts from 0)"
            )
    rows = [
        Attempt(
            stage=str(r["stage"]),
            shard=int(r["shard"]),
            attempt=int(r["attempt"]),
            worker=_str(r.get("worker")),
            start_ts=_num(r.get("start_ts")),
            end_ts=_num(r.get("end_ts")),
            outcome=str(r.get("outcome")),
            kind=_str(r.get("kind")),
            crash_file=_str(r.get("crash_file")),
        )
        for _, r in mine.iterrows()
    ]
    return sorted(rows, key=lambda x: (x.start_ts if x.start_ts is not None else math.inf, x.stage, x.attempt))


def log_files(ev: Evidence, target: str) -> list[Path]:
    """Every text log of the job: the log sources read, else the files of its dir (job dir or an
    evidence dir), else the file named."""
    paths = [Path(r.path) for r in ev.reads if r.kind == "log"]
    for root in dict.fromkeys(p for p in (Path(ev.source), Path(target)) if p.exists()):
        if root.is_dir():
            paths += [
                p
                for p in sorted(root.rglob("*"))
                if p.is_file() and p.suffix in LOG_SUFFIXES and "scratch" not in p.relative_to(root).parts
            ]
        elif not paths:
            paths.append(root)
    return list(dict.fromkeys(p.resolve() for p in paths))


def _line_ts(raw: bytes) -> float | None:
    from zephyr_debug.zephyrlog import midnight, prefix_time

    t = prefix_time(raw[:80])
    if t is None or t.year is None or t.month is None or t.day is None:
        return None
    base = midnight(t.year, t.month, t.day, t.zone)
    return None if base is None else base + t.clock


def _worker_keys(worker: str) -> list[bytes]:
    """A worker's id as lines and file names spell it (`…-workers-1:0` as `…-workers-1`)."""
    keys = {worker, worker.split(":")[0]}
    return sorted((k.encode() for k in keys if len(k) >= 3), key=len, reverse=True)


def _ids_re(keys: list[bytes]) -> re.Pattern[bytes] | None:
    """Any of these ids, whole (`workers-1` is not `workers-10`)."""
    return re.compile(rb"|".join(re.escape(k) + rb"(?![\w-])" for k in keys)) if keys else None


ANY_SHARD = re.compile(rb"\b[Ss]hard[ =](\d+)\b(?![.\d])")
ANY_ATTEMPT = re.compile(rb"\(attempt (\d+)")


@dataclass(frozen=True)
class Match:
    """What a line must (not) name to belong to the chosen attempts."""

    shard: int
    windows: list[tuple[Attempt, float, float, re.Pattern[bytes] | None]]  # attempt, window, its holder's id
    other_stages: list[bytes]
    other_workers: re.Pattern[bytes] | None

    def keep(self, raw: bytes, ts: float, owners: list[re.Pattern[bytes]]) -> bool:
        shards = {int(x) for x in ANY_SHARD.findall(raw)}
        if shards and self.shard not in shards:
            return False  # another shard's line (its worker ran it just before or after)
        if any(name in raw for name in self.other_stages):
            return False
        tries = {int(x) for x in ANY_ATTEMPT.findall(raw)}
        named = bool(shards)
        for a, start, end, holder_re in self.windows:
            if tries and a.attempt not in tries:
                continue
            holder = holder_re is not None and (holder_re in owners or holder_re.search(raw) is not None)
            if self.other_workers is not None and not holder and self.other_workers.search(raw):
                continue  # names another worker: its own line
            if (named and start <= ts <= end) or (holder and start + BEFORE_S <= ts <= end - AFTER_S):
                return True
        return False


def matcher(ev: Evidence, chosen: list[Attempt], now: float) -> Match:
    stages = {a.stage for a in chosen}
    others = [s.name for s in ev.stages if s.name not in stages and not any(s.name in c for c in stages)]
    holders = {k for a in chosen if a.worker for k in _worker_keys(a.worker)}
    known = set(map(str, ev.workers["worker"])) if len(ev.workers) else set()
    known |= {str(w) for w in ev.attempts["worker"].dropna()} if len(ev.attempts) else set()
    rest = sorted({k for w in known for k in _worker_keys(w)} - holders, key=len, reverse=True)
    windows = [(a, *a.window(now), _ids_re(_worker_keys(a.worker)) if a.worker else None) for a in chosen]
    return Match(
        shard=chosen[0].shard,
        windows=windows,
        other_stages=[o.encode() for o in others if o],
        other_workers=_ids_re(rest),
    )


def scan(files: list[Path], chosen: list[Attempt], match: Match, root: Path | None) -> list[Line]:
    """The lines of `files` that belong to the chosen attempts, in time order (stable: file order
    within one time)."""
    shard_re = re.compile(rb"\b[Ss]hard[ =]%d\b(?![.\d])" % match.shard)
    crash_files = {str(Path(a.crash_file).resolve()): a for a in chosen if a.crash_file}
    anyone = _ids_re([k for a in chosen if a.worker for k in _worker_keys(a.worker)])
    out: list[Line] = []
    for path in files:
        name = str(path.relative_to(root)) if root and path.is_relative_to(root) else str(path)
        try:
            with path.open("rb") as fh:
                data = fh.read(MAX_FILE_BYTES)
        except OSError:
            continue
        whole = crash_files.get(str(path))
        if whole is not None:  # a crash file is one attempt's own output: all of it, at its end
            out += [Line(whole.end_ts, name, i, _text(raw)) for i, raw in enumerate(data.splitlines(), 1)]
            continue
        owners = [h for *_, h in match.windows if h is not None and h.search(path.name.encode())]
        taking, last_ts = False, None
        for i, raw in enumerate(data.splitlines(), 1):
            candidate = (
                taking or owners or shard_re.search(raw) is not None or (anyone is not None and anyone.search(raw))
            )
            ts = _line_ts(raw) if candidate else None
            if ts is None:
                if taking:  # a continuation (traceback) of the line kept before
                    out.append(Line(last_ts, name, i, _text(raw)))
                continue
            taking = match.keep(raw, ts, owners)
            if taking:
                last_ts = ts
                out.append(Line(ts, name, i, _text(raw)))
    return sorted(out, key=lambda x: x.ts if x.ts is not None else math.inf)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r")


def register(app: typer.Typer) -> None:
    @app.command(
        epilog=examples(
            "zdebug logs latest --shard 2                      # every attempt of shard 2",
            "zdebug logs latest --shard 2 --stage stage0-Map --attempt 1",
            "zdebug logs ./logs/ --shard 17 --json",
        )
    )
    def logs(
        job: str = JOB,
        shard: int = typer.Option(..., "--shard", metavar="N", help="The shard (as Zephyr numbers it)."),
        stage: str = typer.Option(None, "--stage", metavar="STAGE", help="Its stage (a unique prefix; default: all)."),
        attempt: int = typer.Option(
            None, "--attempt", metavar="K", help="The attempt, from 0 as Zephyr prints it (default: all)."
        ),
        timeout: float = TIMEOUT,
        as_json: bool = JSON,
    ) -> None:
        """One shard's log lines from every source of the job (coordinator, worker logs, crash files), in time order."""
        from zephyr_debug.commands.common import load_evidence
        from zephyr_debug.render.output import console, print_json, safe, when

        ev = load_evidence(job, as_json)
        chosen = attempts(ev, shard, stage, attempt)
        files = log_files(ev, job)
        if not files:
            from zephyr_debug.errors import EvidenceError

            raise EvidenceError(
                f"{ev.source}: no log file to read (zdebug logs reads a job dir, a log file or a dir of them)"
            )
        src = Path(ev.source)
        root = src.resolve() if src.is_dir() else (src.resolve().parent if src.exists() else None)
        lines = scan(files, chosen, matcher(ev, chosen, ev.now), root)
        if as_json:
            print_json(
                {
                    "job": ev.job,
                    "shard": shard,
                    "stage": stage,
                    "attempt": attempt,
                    "attempts": [a.to_json() for a in chosen],
                    "files": [str(f) for f in files],
                    "lines": [x.to_json() for x in lines],
                }
            )
            return
        con = console()
        for a in chosen:
            span = f"{when(a.start_ts)} → {when(a.end_ts) if a.end_ts is not None else 'now'}"
            kind = f" ({safe(a.kind)})" if a.kind else ""
            con.out(
                f"# shard {a.shard} of {safe(a.stage)}, attempt {a.attempt}: {safe(a.outcome)}{kind}", highlight=False
            )
            con.out(f"#   on {safe(a.worker or 'an unknown worker')}", highlight=False)
            con.out(f"#   {span}", highlight=False)
        if not lines:
            con.out(f"no line of the {len(files)} log file(s) names shard {shard} or its worker then", highlight=False)
        for x in lines:  # evidence text, whole (a terminal wraps it; a pasted id stays one)
            con.out(f"{x.source}:{x.line}: {safe(x.text)}", highlight=False)
