"""Run every benchmarks/bench_*.py, print a table of ratios, write benchmarks/results.json and
append the run to benchmarks/history.jsonl (one line per run, with its commit), so a figure that
got worse than in the last run of the same size shows in the table.

Each module's `run(quick: bool) -> dict` returns
{"<benchmark>": {"value", "unit", "baseline", "baseline_value", "ratio", "target", "meets"}}.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).parent


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("names", nargs="*", help="bench module names (e.g. coordinator); default all")
    parser.add_argument("--quick", action="store_true", help="small inputs (for smoke tests)")
    args = parser.parse_args()
    modules = sorted(p.stem for p in HERE.glob("bench_*.py"))
    if args.names:
        modules = [m for m in modules if m.removeprefix("bench_") in args.names or m in args.names]
    results: dict = {}
    for name in modules:
        module = importlib.import_module(f"benchmarks.{name}")
        params = inspect.signature(module.run).parameters
        results.update(module.run(quick=args.quick) if "quick" in params else module.run())
    out = HERE / "results.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    before = _last_run(args.quick)
    _append_history(results, args.quick)
    table = Table(title=f"benchmarks ({out}; history: {HISTORY.name})")
    for col in ("benchmark", "value", "baseline", "ratio", "last run", "target", "meets"):
        table.add_column(col)
    for name, r in results.items():
        table.add_row(
            name,
            f"{_g(r['value'], 4)} {r['unit']}",
            f"{r['baseline']}: {_g(r['baseline_value'], 4)}",
            _g(r["ratio"], 3),
            _g(before[name]["ratio"], 3) if name in before else "-",
            str(r["target"]),
            "yes" if r["meets"] else "NO",
        )
    Console().print(table)
    return 0


HISTORY = HERE / "history.jsonl"
HISTORY_FIELDS = ("value", "baseline_value", "ratio", "meets")


def _commit() -> str | None:
    try:
        ran = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return ran.stdout.strip() or None


def _append_history(results: dict, quick: bool) -> None:
    line = {
        "ts": round(time.time(), 3),
        "commit": _commit(),
        "quick": quick,
        "results": {k: {f: r.get(f) for f in HISTORY_FIELDS} for k, r in results.items()},
    }
    with open(HISTORY, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


def _last_run(quick: bool) -> dict:
    """Each benchmark's figures in the newest earlier run of the same size (quick or full)."""
    out: dict = {}
    if not HISTORY.exists():
        return out
    for text in HISTORY.read_text(encoding="utf-8").splitlines():
        try:
            run = json.loads(text)
        except ValueError:
            continue  # a line cut short by an interrupted run
        if isinstance(run, dict) and run.get("quick") == quick:
            out.update(run.get("results") or {})
    return out


def _g(value: float | None, digits: int) -> str:
    """A number to `digits` significant digits; n/a where a baseline could not run (e.g. drain3 missing)."""
    return "n/a" if value is None else f"{value:.{digits}g}"


if __name__ == "__main__":
    sys.exit(main())
