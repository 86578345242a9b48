"""`watch` on a growing log (issue 28 item 5): a refresh folds only what was appended.

An event-dense coordinator log (bench_logdense's generator) is read once by the follower; then
1 MiB and 8 MiB are appended and each refresh is timed against a full read of the same file in
the same run (the baseline: what every refresh cost before). Set ZDEBUG_BENCH_FOLLOW_MB for the size.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from benchmarks.bench_logdense import generate
from zephyr_debug.sources import load
from zephyr_debug.sources.follow import LogFollower

APPENDS_MB = (1, 8)
TARGET_RATIO = 0.25  # a 1 MiB refresh at most this share of a full read


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run(quick: bool = False) -> dict:
    mb = int(os.environ.get("ZDEBUG_BENCH_FOLLOW_MB", 16 if quick else 256))
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="zdebug-bench-") as tmp:
        whole, path = Path(tmp) / "whole.log", Path(tmp) / "coordinator.log"
        generate(whole, mb << 20)
        data = whole.read_bytes()
        at = data.rfind(b"\n", 0, len(data) - (sum(APPENDS_MB) << 20)) + 1
        path.write_bytes(data[:at])
        follower = LogFollower(path)
        first_s, _ = _timed(follower.evidence)
        for add in APPENDS_MB:
            cut = data.rfind(b"\n", 0, at + (add << 20)) + 1
            with open(path, "ab") as fh:
                fh.write(data[at:cut])
            at = cut
            refresh_s, ev = _timed(follower.evidence)
            full_s, full = _timed(lambda: load(str(path)))
            same = len(ev.attempts) == len(full.attempts) and len(ev.status) == len(full.status)
            ratio = refresh_s / full_s
            meets = same and follower.full_reads == 1 and (add > 1 or ratio <= TARGET_RATIO)
            out[f"follow_refresh_{add}mib"] = {
                "value": round(refresh_s, 3),
                "unit": f"s wall to refresh after {add} MiB appended to a {path.stat().st_size >> 20} MiB log "
                f"(first read {first_s:.2f} s; {len(ev.attempts):,} attempts; same counts as a full read: {same})",
                "baseline": "a full read of the same file",
                "baseline_value": round(full_s, 3),
                "ratio": round(ratio, 3),
                "target": f"<= {TARGET_RATIO} of a full read" if add == 1 else "report only",
                "meets": meets,
            }
    return out
