"""What the evidence could show, said with every result: the sources read (their event lines and
how many carried a time) and ignored (why), and `blind`: each problem the evidence cannot rule
out, with what to fetch. A job is "healthy" only where nothing is blind: an honest "cannot tell:
fetch X" beats "No problems found" on one status line or on a log whose times were not read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zephyr_debug.analyze.progress import Progress
from zephyr_debug.model import Evidence, SourceRead


@dataclass(frozen=True)
class Coverage:
    reads: tuple[SourceRead, ...]
    event_lines: int
    timed_lines: int
    blind: tuple[str, ...]  # "cannot tell …: fetch …", one per problem the evidence cannot show

    def to_json(self) -> dict[str, Any]:
        return {
            "event_lines": self.event_lines,
            "timed_lines": self.timed_lines,
            "sources": [r.to_json() for r in self.reads],
            "cannot_tell": list(self.blind),
        }


def judge(ev: Evidence, prog: Progress, target: str, live: bool) -> Coverage:
    """The coverage of `ev` for the analysis of `target` (what next commands name; `live`: a
    running job zdebug can watch)."""
    logs = [r for r in ev.reads if r.events is not None]
    events = sum(r.events or 0 for r in logs)
    timed = sum(r.timed or 0 for r in logs)
    blind: list[str] = []
    if events and not timed:
        blind.append(
            "no log line carries a time zdebug reads, so stragglers, stalls and stuck shards cannot be "
            "judged: fetch the log with its timestamps (e.g. `iris job logs <job>`)"
        )
    if not prog.done and prog.in_flight and not prog.queue_depth and _one_moment(ev, prog.stage):
        blind.append(
            f"{prog.stage} is in its tail at {prog.completed}/{prog.total} with {prog.in_flight} in flight, "
            "but the evidence is one moment: how long it has waited, and on what, is unknown; "
            + (f"watch it (`zdebug watch {target}`)" if live else "fetch more of the coordinator log")
            + " (e.g. `iris job logs <job> --max-lines 100000`)"
        )
    runs = ev.config.get("runs_at_once")
    if runs:
        blind.append(
            f"runs {', '.join(runs)} ran at the same time and their lines are read as one job, so whose "
            "shards and failures are whose cannot be told: a stale coordinator (see its finding), or "
            "evidence of different jobs mixed: give each job's evidence alone"
        )
    return Coverage(tuple(ev.reads), events, timed, tuple(blind))


def _one_moment(ev: Evidence, stage: str) -> bool:
    """The stage's status lines hold one time at most and no attempt of it has a start time."""
    st = ev.status
    times = st.loc[st["stage"] == stage, "ts"].dropna().nunique() if len(st) else 0
    a = ev.attempts
    started = len(a) and a.loc[a["stage"] == stage, "start_ts"].notna().any()
    return times <= 1 and not started
