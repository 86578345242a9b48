"""A small thread-safe log writer in Zephyr's layout (the line formats are `zephyr_debug.zephyrlog`).

Lines are written the way Python logging formats them in Zephyr:
`2026-12-02 21:59:16,743 INFO zephyr.execution: <message>`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

from zephyr_debug.zephyrlog import timestamp


class LineLog:
    """Thread-safe log file writer in Python logging's default Zephyr layout."""

    def __init__(self, path: Path, name: str):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.name = name
        self._lock = threading.Lock()
        self._fh = open(path, "a", encoding="utf-8")

    def log(self, level: str, message: str) -> None:
        line = f"{timestamp(time.time())} {level} {self.name}: {message}\n"
        self._write(line)

    def info(self, message: str) -> None:
        self.log("INFO", message)

    def warning(self, message: str) -> None:
        self.log("WARNING", message)

    def error(self, message: str) -> None:
        self.log("ERROR", message)

    def raw(self, text: str) -> None:
        """Untimestamped text (tracebacks, faulthandler dumps), as the process wrote it."""
        self._write(text if text.endswith("\n") else text + "\n")

    def _write(self, text: str) -> None:
        with self._lock:
            if not self._fh.closed:
                try:
                    self._fh.write(text)
                    self._fh.flush()
                except OSError:  # disk full: a lost log line must not kill the caller (EventLog stops the job)
                    pass

    def close(self) -> None:
        with self._lock, contextlib.suppress(OSError):
            self._fh.close()
