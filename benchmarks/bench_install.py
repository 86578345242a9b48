"""Install size (issue 30 item 8): what `pip install zephyr-debug` (no extras) puts on disk.

Measured from the installed distributions of this environment (their RECORD files): the core
dependency closure, and the closure without each heavy dependency, as a ratio of the core. The
rule we hold: a dependency only one command needs goes behind an extra when the core then drops
by half. pyarrow stays core (the demo pipeline writes Parquet with it, finelog reads Arrow, and
pandas keeps its strings in Arrow with it: the load figures depend on it); plotly is the report's.
"""

from __future__ import annotations

import contextlib
import importlib.metadata as md
import re

from packaging.requirements import Requirement

DIST = "zephyr-debug"
HEAVY = (("plotly",), ("pyarrow",), ("plotly", "pyarrow"))
TARGET = 0.5  # moving a dependency behind an extra is worth it below this ratio of the core


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _size(dist: md.Distribution) -> int:
    total = 0
    for f in dist.files or ():
        with contextlib.suppress(OSError):  # a file RECORD lists but that is gone
            total += f.locate().stat().st_size  # type: ignore[union-attr]
    return total


def closure(names: list[str]) -> dict[str, md.Distribution]:
    """Every installed distribution `names` need (extras not asked for left out)."""
    seen: dict[str, md.Distribution] = {}
    stack = list(names)
    while stack:
        name = stack.pop()
        if _key(name) in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen[_key(name)] = dist
        for text in dist.requires or ():
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                stack.append(req.name)
    return seen


def _core(without: tuple[str, ...] = ()) -> tuple[int, int]:
    """(bytes, distributions) of the core install, `without` some of its direct dependencies."""
    direct = [
        r.name
        for r in map(Requirement, md.distribution(DIST).requires or ())
        if r.marker is None and r.name not in without
    ]
    dists = closure(direct)
    return sum(_size(d) for d in dists.values()), len(dists)


def run(quick: bool = False) -> dict:
    core, count = _core()
    out = {
        "install_core": {
            "value": core / 1e6,
            "unit": f"MB in {count} distributions",
            "baseline": "n/a",
            "baseline_value": None,
            "ratio": None,
            "target": "report only",
            "meets": True,
        }
    }
    for drop in HEAVY:
        size, _ = _core(drop)
        out[f"install_without_{'_'.join(drop)}"] = {
            "value": size / 1e6,
            "unit": "MB",
            "baseline": "core install (MB)",
            "baseline_value": core / 1e6,
            "ratio": size / core,
            "target": f"an extra only if <= {TARGET:g}x",
            "meets": True,  # a measurement to decide on, not a goal
        }
    return out


if __name__ == "__main__":
    for key, r in run().items():
        print(f"{key}: {r['value']:.0f} {r['unit']}" + (f" ({r['ratio']:.2f}x core)" if r["ratio"] else ""))
