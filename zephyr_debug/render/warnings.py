"""Warnings as a person reads them: the same warning about another file or line (a directory of
50,000 files zdebug cannot read) is shown `PER_KIND` times, then `… and N more like these`; at
most `TOTAL` lines in all. `--json` carries every warning."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

PER_KIND = 3
TOTAL = 20
_WHERE = re.compile(r"^(ignored )?\S+?:(\d+:)? ")  # the leading `path[:line]: ` a warning is about
_NUMBER = re.compile(r"\d[\d,.]*")


def kind(warning: str) -> str:
    """What a warning says, whatever file, line or count it says it of."""
    return _NUMBER.sub("#", _WHERE.sub(r"\1<where> ", warning, count=1))


def capped(warnings: Iterable[str], per_kind: int = PER_KIND, total: int = TOTAL) -> list[str]:
    """The warnings to show, in order: each kind's first `per_kind` followed by `… and N more like
    these`, at most `total` warnings, the rest counted on the last line."""
    shown: list[tuple[str, str]] = []
    seen: Counter[str] = Counter()
    more: Counter[str] = Counter()
    for warning in warnings:
        key = kind(warning)
        seen[key] += 1
        if seen[key] <= per_kind and len(shown) < total:
            shown.append((key, warning))
        else:
            more[key] += 1
    last = {key: i for i, (key, _) in enumerate(shown)}
    lines = []
    for i, (key, warning) in enumerate(shown):
        lines.append(warning)
        if last[key] == i and more[key]:
            like = "it" if seen[key] - more[key] == 1 else "these"
            lines.append(f"… and {more.pop(key):,} more like {like}")
    if rest := sum(more.values()):
        lines.append(f"… and {rest:,} more warning(s)")
    return lines
