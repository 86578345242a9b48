"""Shared output plumbing: consoles, JSON encoding, escaping of evidence text."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

# C0/C1 control characters except tab and newline: evidence must not drive the terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def console() -> Console:
    return Console(highlight=False, soft_wrap=False)


def err_console() -> Console:
    return Console(stderr=True, highlight=False)


# Longer evidence lines are cut when shown: rich wraps a line in quadratic time.
MAX_LINE_CHARS = 2000
_LONG_LINE = re.compile(rf"[^\n]{{{MAX_LINE_CHARS}}}[^\n]+")


def safe(text: object) -> str:
    """Evidence text for a rich `Text` (no markup): control sequences shown as `\\x1b`, lines over
    MAX_LINE_CHARS cut."""
    s = "" if text is None else str(text)
    if len(s) > MAX_LINE_CHARS:
        s = _LONG_LINE.sub(lambda m: f"{m.group()[:MAX_LINE_CHARS]}… (+{len(m.group()) - MAX_LINE_CHARS} chars)", s)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", s)


def clean(text: object) -> str:
    """`safe` text with rich markup escaped, for strings printed as markup."""
    return escape(safe(text))


def _plain(value):
    """JSON-able copy: numpy scalars → Python, NaN → None, sets → sorted lists."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [_plain(v) for v in items]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


# Characters json.dumps leaves raw with ensure_ascii=False that terminals may act on (DEL, C1 such as 8-bit CSI).
_JSON_RAW_CONTROL = re.compile(r"[\x7f-\x9f]")


def to_json(data) -> str:
    text = json.dumps(_plain(data), indent=2, ensure_ascii=False, default=str)
    return _JSON_RAW_CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)  # only inside strings: still JSON


def print_json(data) -> None:
    """A command's JSON; every top-level object carries `schema_version` (findings.SCHEMA_VERSION
    unless the command has its own), first."""
    if isinstance(data, dict) and "schema_version" not in data:
        from zephyr_debug.findings import SCHEMA_VERSION

        data = {"schema_version": SCHEMA_VERSION, **data}
    sys.stdout.write(to_json(data) + "\n")


def error_json(message: str, exit_code: int) -> str:
    """`--json`'s error object (docs/schemas/error.json)."""
    from zephyr_debug.findings import SCHEMA_VERSION

    return json.dumps({"schema_version": SCHEMA_VERSION, "error": message, "exit_code": exit_code}, ensure_ascii=True)


def short_names(workers) -> tuple[dict[str, str], str]:
    """Worker id -> label without the prefix all workers share (cut at a separator), and that
    prefix, so a narrow screen shows what differs."""
    workers = [str(w) for w in workers]
    if len(set(workers)) < 2:
        return {w: w for w in workers}, ""
    prefix = os.path.commonprefix(workers)  # noqa: RUF071 (ids, not paths: cut at a separator below)
    cut = max(prefix.rfind(c) for c in "-_:/.") + 1
    return {w: w[cut:] for w in workers}, prefix[:cut]


def when(ts: float | None) -> str:
    if ts is None or (isinstance(ts, float) and math.isnan(ts)):
        return "-"
    return datetime.fromtimestamp(ts, UTC).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def duration(seconds: float | None) -> str:
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    seconds = float(seconds)
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


@contextmanager
def progress(description: str, total: float | None = None) -> Iterator:
    """A rich progress bar on a TTY (stderr), nothing when piped. Yields `advance(n)`."""
    con = err_console()
    if not con.is_terminal:
        yield lambda n=1: None
        return
    bar = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=con, transient=True)
    with bar:
        task = bar.add_task(description, total=total)
        yield lambda n=1: bar.advance(task, n)
