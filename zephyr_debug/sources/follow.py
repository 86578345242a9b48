"""A growing log read incrementally (`zdebug watch LOG`): each refresh folds only what was
appended since the last one, and gives the Evidence a full read of the file would.

The fold keeps its Timeline between refreshes up to the start of the newest record (a record's
traceback may still be arriving); the rest is folded into a copy each refresh and finished there.
A file that shrank or was replaced, or that a full read would not take as one plain Zephyr log
(compressed, coloured, terminal-wrapped, newest first, not a log), is read whole again.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from zephyr_debug import streams
from zephyr_debug.errors import EvidenceError, ZdebugError
from zephyr_debug.model import Evidence, SourceRead
from zephyr_debug.sources import evidencedir, logtext
from zephyr_debug.sources.timeline import Timeline
from zephyr_debug.zephyrlog import LINE_START_RE

HOLD_BYTES = 1 << 20  # how far back from the end the newest record's start is looked for


class LogFollower:
    """Folds one log file as it grows; `evidence()` after each append."""

    def __init__(self, path: Path):
        self.path = path
        self.full_reads = 0  # times the file was (re)read from its start
        self._reset(None)

    def _reset(self, inode: int | None) -> None:
        self.inode = inode
        self.tl = Timeline(self.path.stem, str(self.path))
        self.scanner = logtext.LogScanner(self.tl, str(self.path), dense=True)
        self.offset = 0  # bytes folded into `tl` (line-aligned)
        self.lines = 0  # newlines before `offset`
        self.bare = False

    @staticmethod
    def follows(path: Path) -> bool:
        """Whether a full read takes `path` as one plain Zephyr log (what this folds). Says nothing:
        the read that follows when it does not gives the warnings."""
        said = len(streams.NOTES)
        try:
            with open(path, "rb") as fh:
                if streams.compression(fh.read(8)) is not None:
                    return False
            return streams.readable(path, str(path)) == path and evidencedir.classify(path)[0] == "log"
        except (OSError, ZdebugError):  # not a readable file: the full read says why
            return False
        finally:
            del streams.NOTES[said:]

    def evidence(self) -> Evidence:
        """The Evidence of the file as it is now (its complete lines)."""
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise EvidenceError(f"{self.path}: cannot read ({exc.strerror or exc})") from None
        bare = logtext.is_bare(self.path)  # its head may only now show messages with no prefix
        if st.st_ino != self.inode or st.st_size < self.offset or bare != self.bare:
            reads = self.full_reads  # first read, replaced, truncated, or another pattern needed
            self._reset(st.st_ino)
            self.bare, self.full_reads = bare, reads + 1
        end, hold = self._bounds(st.st_size)
        if hold > self.offset:
            self.lines += self.scanner.scan_range(self.path, self.offset, hold, self.lines, self.bare, end)
            self.offset = hold
        tl, scanner = copy.deepcopy((self.tl, self.scanner))
        if end > self.offset:
            scanner.scan_range(self.path, self.offset, end, self.lines, self.bare, end)
        if not tl.events:
            raise EvidenceError(f"{self.path}:1: no Zephyr coordinator/worker lines found (not a Zephyr log?)")
        scanner.notes(self.path, end)
        ev = tl.finish()
        ev.reads = [SourceRead(str(self.path), "log", tl.events, tl.timed)]
        ev.provenance = ["zephyr-output"]
        return ev

    def _bounds(self, size: int) -> tuple[int, int]:
        """(the end of the file's last complete line, the start of its newest record at or after
        `offset`: what may be folded for good)."""
        with open(self.path, "rb") as fh:
            lo = max(self.offset, size - HOLD_BYTES)
            tail = os.pread(fh.fileno(), size - lo, lo)
        end = lo + tail.rfind(b"\n") + 1 if b"\n" in tail else self.offset
        starts = [m.start() + 1 for m in LINE_START_RE.finditer(tail, 0, max(end - lo - 1, 0))]
        return end, lo + starts[-1] if starts else self.offset
