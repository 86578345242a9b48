"""Run every benchmarks/bench_*.py, print a table of ratios, write benchmarks/results.json.

Each module's `run(quick: bool) -> dict` returns
{"<benchmark>": {"value", "unit", "baseline", "baseline_value", "ratio", "target", "meets"}}.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import sys
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
    table = Table(title=f"benchmarks ({out})")
    for col in ("benchmark", "value", "baseline", "ratio", "target", "meets"):
        table.add_column(col)
    for name, r in results.items():
        table.add_row(
            name,
            f"{_g(r['value'], 4)} {r['unit']}",
            f"{r['baseline']}: {_g(r['baseline_value'], 4)}",
            _g(r["ratio"], 3),
            str(r["target"]),
            "yes" if r["meets"] else "NO",
        )
    Console().print(table)
    return 0


def _g(value: float | None, digits: int) -> str:
    """A number to `digits` significant digits; n/a where a baseline could not run (e.g. drain3 missing)."""
    return "n/a" if value is None else f"{value:.{digits}g}"


if __name__ == "__main__":
    sys.exit(main())
