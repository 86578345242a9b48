"""Several log sources of one job (the coordinator log, the workers' task logs, `iris job logs`
text, per-worker files) folded as one: each source's events are recorded, then replayed into
one Timeline in time order across the sources, never in file order (a worker's `Executing …
(attempt 5)` read after the coordinator's whole log would undo the requeues before it).

Each event sorts by its own time (one file may hold several streams: get-task-logs lists each
task's lines in turn); an event without a time takes the time of the event before it in its
source (before the first time: that first time), and one less than a second before the time of
the event before it keeps that time (one log mixing `,ms` and whole-second prefixes). At one time
(1 s prefixes) an attempt's start (`Executing …`) goes first: the coordinator's line that ends it
may be stamped the same second (a start after another line of its own source at that time stays
after it: within a source the file's order holds); other ties keep source and file order. A
source with no time at all is read after the timed ones, and a warning says so.

Sources overlap as users hold them (the same log twice, rotated files that share lines, a whole
job log beside its coordinator's part): an event another source already gave, the same line at
the same time, is folded once (as often as the source holding it most often has it; the copy of
the source that starts first), and a warning counts them. A log's own repeated lines all count.
"""

from __future__ import annotations

import math

from zephyr_debug import zephyrlog
from zephyr_debug.sources.timeline import Timeline

STEP_BACK_S = zephyrlog.COARSEST_S  # a time this little before its source's previous one keeps the file's order


class EventBuffer(Timeline):
    """A Timeline that records the events of one source instead of folding them."""

    def __init__(self, job: str, source: str):
        super().__init__(job, source)
        self.rows: list[tuple] = []

    def event(self, name: str, ts: float | None, g: dict, source: str, line: int | None, block: str | None) -> None:
        self.rows.append((name, ts, g, source, line, block))
        self.events += 1
        self.timed += ts is not None


def replay(tl: Timeline, buffers: list[EventBuffer]) -> None:
    """Folds every buffer's events into `tl`, ordered by time across buffers."""
    keyed: list[tuple[float, int, int, int, tuple]] = []
    given: dict[tuple, int] = {}  # an event's identity -> how many times an earlier source gave it
    # The source that starts first (the larger at a tie) ranks first, so of two overlapping sources the
    # one whose order holds the shared lines' neighbours keeps them.
    ordered = sorted(
        buffers, key=lambda b: (min((r[1] for r in b.rows if r[1] is not None), default=math.inf), -len(b.rows))
    )
    for rank, buf in enumerate(ordered):
        tl.bad += buf.bad
        tl.notes += buf.notes
        if not buf.rows:
            continue
        clock = next((row[1] for row in buf.rows if row[1] is not None), None)
        if clock is None:
            clock = math.inf
            tl.notes.append(f"{buf.source}: no line has a time; its {len(buf.rows)} events are read after the others")
        mine: dict[tuple, int] = {}
        again = 0
        settled: set[float] = set()  # times at which this source has had an event other than a start
        for seq, row in enumerate(buf.rows):
            if row[1] is not None and not clock - STEP_BACK_S < row[1] < clock:
                clock = row[1]  # less than a second back: a coarser prefix (glog's whole seconds), in file order
            name, _, g, _, _, block = row
            identity = (name, clock, tuple(sorted(g.items())), block)
            nth = mine[identity] = mine.get(identity, 0) + 1
            if nth <= given.get(identity, 0):
                again += 1
                continue
            # a start goes before the other sources' events of its time, never before its own source's
            leads = name == "executing" and clock not in settled
            if not leads:
                settled.add(clock)
            keyed.append((clock, not leads, rank, seq, row))
        for identity, n in mine.items() if rank < len(ordered) - 1 else ():  # a later source may repeat them
            given[identity] = max(n, given.get(identity, 0))
        if again:
            tl.notes.append(f"{buf.source}: {again:,} event line(s) another source already gave; read once")
    keyed.sort(key=lambda k: k[:4])
    for *_, (name, ts, g, source, line, block) in keyed:
        tl.event(name, ts, g, source, line, block)
