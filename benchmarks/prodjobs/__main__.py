"""`python -m benchmarks.prodjobs OUTDIR [--scenario NAME]… [--seed N]`: writes the job dirs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.prodjobs import BY_NAME, SCENARIOS, generate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.prodjobs", description=__doc__)
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--scenario", action="append", choices=sorted(BY_NAME), help="repeatable; default all")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for sc in [BY_NAME[n] for n in args.scenario] if args.scenario else SCENARIOS:
        for job in generate(args.outdir, sc, args.seed):
            print(job)
    return 0


if __name__ == "__main__":
    sys.exit(main())
