"""Peak memory of real `zdebug` processes analysing a 1 GB log (target: < 300 MB RSS).

The log is bench_logparse's 12 h incident tail (`ZDEBUG_BENCH_LOG_MB`, default 1024; `--quick` 64).
Each command runs as `python -m zephyr_debug.cli … --json`; its peak RSS is `ru_maxrss` from
`os.wait4` (the process and every child it waited for: the log scan's parallel ranges).
Baseline, measured in the same run: a process that reads the whole file into memory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import bench_logparse

TARGET_MB = 300
COMMANDS = [["status"], ["stragglers"], ["crashes", "--dedupe"]]
NAIVE = "import sys; data = open(sys.argv[1], 'rb').read(); print(data.count(b'complete, '))"


def peak_rss(argv: list[str]) -> tuple[float, float, int]:
    """(peak RSS in MB, wall seconds, exit status) of one real process, from wait4."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {err.strip()[-300:]}")
    return usage.ru_maxrss / 1024, time.perf_counter() - start, proc.returncode


def run(quick: bool = False) -> dict:
    mb = int(os.environ.get("ZDEBUG_BENCH_LOG_MB", 64 if quick else 1024))
    results = {}
    with tempfile.TemporaryDirectory(prefix="zdebug-bench-mem-") as tmp:
        log = Path(tmp) / "coordinator.log"
        bench_logparse.generate(log, mb << 20)
        size_mb = log.stat().st_size / (1 << 20)
        naive, _, _ = peak_rss([sys.executable, "-c", NAIVE, str(log)])
        for command in COMMANDS:
            rss, wall, _ = peak_rss([sys.executable, "-m", "zephyr_debug.cli", *command, str(log), "--json"])
            name = "memory_peak_rss_" + command[0]
            results[name] = {
                "value": round(rss, 1), "unit": f"MB peak RSS ({size_mb:.0f} MiB log, {wall:.0f}s)",
                "baseline": "read the whole file", "baseline_value": round(naive, 1),
                "ratio": round(rss / naive, 4), "target": f"< {TARGET_MB} MB", "meets": rss < TARGET_MB}
    return results


if __name__ == "__main__":
    import json

    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
