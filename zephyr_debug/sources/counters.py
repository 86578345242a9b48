"""`get_counters` JSON (`{"zephyr/item_count": 10, …}`) -> Evidence.counters."""

from __future__ import annotations


def is_counters(data) -> bool:
    """A non-empty flat object of numbers whose names look like counters (`zephyr/…`, `a/b`, `a_b`)."""
    return (
        isinstance(data, dict)
        and bool(data)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in data.values())
        and any("/" in k or "_" in k for k in data)
    )


def counters(data: dict) -> dict[str, float]:
    return {str(k): float(v) for k, v in data.items()}
