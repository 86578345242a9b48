"""The JSON contract of the commands that render one analysis (docs/schemas/): one shape per concept.

`workers` is always the list of workers (`{worker, state, last_seen_ago}`, as `zdebug workers`
lists them), `pool` always the counts; a job that has ended counts its workers `finished`, not
`dead` (the coordinator shut them down).
"""

from __future__ import annotations

from typing import Any

from zephyr_debug.analyze.analysis import Analysis


def pool(a: Analysis) -> dict[str, Any]:
    """`{alive, dead, finished, registered, counted_from}`: a job that ended has neither alive nor
    dead workers, only finished ones (its last status line may still count them alive; a worker
    that died earlier shows in the findings)."""
    p = a.pool
    ended = bool(a.progress.done)
    return {
        "alive": 0 if ended else p.alive,
        "dead": 0 if ended else p.dead,
        "finished": p.alive + p.dead if ended else 0,
        "registered": p.registered,
        "counted_from": p.counted_from,
    }


def status(a: Analysis, workers: list[dict[str, Any]]) -> dict[str, Any]:
    """`zdebug status --json`."""
    return {**a.status_json(workers), "pool": pool(a)}


def diagnose(a: Analysis, workers: list[dict[str, Any]]) -> dict[str, Any]:
    """`zdebug diagnose --json`: the whole analysis, `workers` the list and `pool` the counts as in status."""
    return {**a.to_json(), "workers": workers, "pool": pool(a)}
