"""Several log sources of one job (the coordinator log, the workers' task logs, `iris job logs`
text, per-worker files) folded as one: each source's events are recorded, then replayed into
one Timeline in time order across the sources, never in file order (a worker's `Executing …
(attempt 5)` read after the coordinator's whole log would undo the requeues before it).

Each event sorts by its own time (one file may hold several streams: get-task-logs lists each
task's lines in turn); an event without a time takes the time of the event before it in its
source (before the first time: that first time). At one time (1 s prefixes) an attempt's start
(`Executing …`) goes first: the coordinator's line that ends it may be stamped the same second;
other ties keep source and file order. A source with
no time at all is read after the timed ones, and a warning says so.
"""

from __future__ import annotations

import math

from zephyr_debug.sources.timeline import Timeline


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
    for rank, buf in enumerate(buffers):
        tl.bad += buf.bad
        tl.notes += buf.notes
        if not buf.rows:
            continue
        clock = next((row[1] for row in buf.rows if row[1] is not None), None)
        if clock is None:
            clock = math.inf
            tl.notes.append(f"{buf.source}: no line has a time; its {len(buf.rows)} events are read after the others")
        for seq, row in enumerate(buf.rows):
            clock = clock if row[1] is None else row[1]
            keyed.append((clock, row[0] != "executing", rank, seq, row))
    keyed.sort(key=lambda k: k[:4])
    for *_, (name, ts, g, source, line, block) in keyed:
        tl.event(name, ts, g, source, line, block)
