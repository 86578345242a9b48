"""Peak memory of real `zdebug` processes analysing a 1 GB log (target: < 300 MB RSS).

The log is bench_logparse's 12 h incident tail (`ZDEBUG_BENCH_LOG_MB`, default 1024; `--quick` 64).
Each command runs as `python -m zephyr_debug.cli … --json` from a small launcher; its peak RSS is
`ru_maxrss` from `os.wait4` (the process and every child it waited for: the log scan's parallel
ranges; the largest of them, not their sum).
Baseline, measured in the same run: a process that reads the whole file into memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import bench_logparse

TARGET_MB = 300
COMMANDS = [["status"], ["stragglers"], ["crashes", "--dedupe"]]
NAIVE = "import sys; data = open(sys.argv[1], 'rb').read(); print(data.count(b'complete, '))"


# Runs argv and reports its wait4 rusage. A small launcher of its own, because a forked child's
# ru_maxrss starts at its parent's RSS (Linux keeps the pre-exec high-water mark): launched from
# this process, which holds the other benchmarks' data, every command would read ~400 MB.
LAUNCHER = """
import json, os, subprocess, sys, time
start = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = proc.stderr.read().decode(errors="replace")
_, status, usage = os.wait4(proc.pid, 0)
print(json.dumps({"maxrss_kb": usage.ru_maxrss, "wall_s": time.perf_counter() - start,
                  "code": os.waitstatus_to_exitcode(status), "err": err[-300:]}))
"""


def peak_rss(argv: list[str]) -> tuple[float, float, int]:
    """(peak RSS in MB, wall seconds, exit status) of one real process, from wait4."""
    out = subprocess.run([sys.executable, "-c", LAUNCHER, *argv], capture_output=True, text=True, check=True).stdout
    r = json.loads(out)
    if r["code"] != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({r['code']}): {r['err'].strip()}")
    return r["maxrss_kb"] / 1024, r["wall_s"], r["code"]


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
                "value": round(rss, 1),
                "unit": f"MB peak RSS ({size_mb:.0f} MiB log, {wall:.0f}s)",
                "baseline": "read the whole file",
                "baseline_value": round(naive, 1),
                "ratio": round(rss / naive, 4),
                "target": f"< {TARGET_MB} MB",
                "meets": rss < TARGET_MB,
            }
    return results


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
