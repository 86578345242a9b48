"""One worker, every name it goes by: the Iris task path (`/alice/zephyr-x-workers/57`), the
task name (`zephyr-x-workers-57`), Zephyr's worker id (`zephyr--<hex>-p0-workers-a0-57:0`: the
job attempt `-aN` and slot `:N` change when the task restarts) all share one `key`."""

from __future__ import annotations

import re

_SLOT = re.compile(r":\d+$")
_ATTEMPT = re.compile(r"-a\d+$")
_INDEX = re.compile(r"^(?P<group>.+?)[-/](?P<index>\d+)$")


def key(name: str) -> str:
    """`<worker group>/<task index>` for any form of a worker's name (the name itself, stripped,
    when it has no task index)."""
    text = _SLOT.sub("", str(name).strip().rstrip("/"))
    m = _INDEX.match(text)
    if m is None:
        return text
    group = _ATTEMPT.sub("", m["group"].rsplit("/", 1)[-1])
    return f"{group}/{int(m['index'])}"
