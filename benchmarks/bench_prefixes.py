"""Read rate of every line prefix form (zephyrlog.PREFIXES), and the size of the prefix property
suites. Each form gets the same generated job (tests/logmaker, canonical Python logging lines,
repeated to ~`SIZE_MB`) under its own prefix (outer forms before the Python one); the rate of
`logtext.load` is reported against `grep -c ' complete, '` over the same file in the same run.
A new form must not make the common form slower: the Python form's ratio is the one to watch.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from zephyr_debug import zephyrlog
from zephyr_debug.sources import logtext

SIZE_MB = 24
TARGET = 0.05  # per-line reading (no bulk path: mixed forms) vs grep's plain count


def _suite_sizes() -> dict[str, int]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import test_prefixes as tp  # the property suite's own forms

    return {
        "inner forms": len(tp.INNER),
        "outer x inner": len(tp.OUTER) * 3,
        "mixed-form examples": 25,
        "record exports": 3,
    }


def run(quick: bool = False) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import test_prefixes as tp
    from logmaker import make_job

    (canonical,) = make_job(tp.JOB).values()
    size = (4 if quick else SIZE_MB) << 20
    out: dict = {}
    work = Path(tempfile.mkdtemp(prefix="zdebug-bench-prefixes-"))
    try:
        for p in zephyrlog.PREFIXES:
            outer = p if p.outer else None
            inner = zephyrlog.PREFIXES[0] if p.outer else p
            text = tp._reprefix(canonical, lambda ts, o=outer, i=inner: ((o.format(ts) if o else ""), i.format(ts)))
            path = work / f"{p.name}.log"
            with open(path, "w", encoding="utf-8") as fh:
                for _ in range(max(1, size // len(text.encode()))):
                    fh.write(text)
            mb = path.stat().st_size / 1e6
            t = time.perf_counter()
            subprocess.run(["grep", "-c", " complete, ", str(path)], capture_output=True, check=False)
            grep_s = time.perf_counter() - t
            t = time.perf_counter()
            logtext.load([path], "bench")
            read_s = time.perf_counter() - t
            ratio = grep_s / read_s
            out[f"prefix_{p.name}"] = {
                "value": mb / read_s,
                "unit": "MB/s",
                "baseline": "grep -c MB/s",
                "baseline_value": mb / grep_s,
                "ratio": ratio,
                "target": f">= {TARGET:g} of grep",
                "meets": ratio >= TARGET,
            }
            path.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sizes = _suite_sizes()
    out["prefix_property_cases"] = {
        "value": sum(sizes.values()),
        "unit": "cases (" + ", ".join(f"{k} {v}" for k, v in sizes.items()) + ")",
        "baseline": "forms declared",
        "baseline_value": len(zephyrlog.PREFIXES),
        "ratio": sum(sizes.values()) / len(zephyrlog.PREFIXES),
        "target": "every form covered",
        "meets": sizes["inner forms"] + len(tp.OUTER) == len(zephyrlog.PREFIXES),
    }
    return out
