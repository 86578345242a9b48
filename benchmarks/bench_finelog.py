"""Reading Zephyr's finelog telemetry: 1M `zephyr.worker` rows (5,000 shards x 200 rows) from a
local EmbeddedServer into the analysis (targets: < 5 s, < 1 GB RSS; `--quick`: 50 shards).

The rows are written through finelog's own client with Zephyr's `ZephyrWorkerStat` schema
(START, RUNNING every 5 s, END per shard; one stage row). Measured: `zdebug stragglers
finelog://… --json` as a real process (wall time and wait4 peak RSS, bench_memory's launcher),
against a baseline process that only fetches the same pages with LogClient.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import datetime, timedelta

from benchmarks.bench_memory import peak_rss

TARGET_S, TARGET_MB = 5.0, 1024
SAMPLES, SAMPLE_S = 200, 5.0
EXEC = "bench-20260101-000000-0000beef"
FETCH_ONLY = """
import sys
from zephyr_debug.sources import finelog
rows = finelog.fetch(sys.argv[1], sys.argv[2])
assert rows.worker.num_rows == int(sys.argv[3]), rows.worker.num_rows
"""


def write_rows(url: str, shards: int) -> int:
    """`shards` x SAMPLES zephyr.worker rows and one zephyr.stage row; returns the row count."""
    from finelog.client import LogClient
    from zephyr.stats import ZephyrStageStat, ZephyrWorkerStat

    client = LogClient.connect(url)
    table = client.get_table("zephyr.worker", ZephyrWorkerStat)
    base, rows, n = datetime(2026, 1, 1), [], 0
    for shard in range(shards):
        start = base + timedelta(seconds=shard * 0.2)
        for i in range(SAMPLES):
            status = "START" if i == 0 else "END" if i == SAMPLES - 1 else "RUNNING"
            items = i * 10 * (8 if shard == 7 else 1)
            rows.append(
                ZephyrWorkerStat(
                    EXEC,
                    "stage0-Map",
                    shard,
                    status,
                    start + timedelta(seconds=i * SAMPLE_S),
                    items,
                    items * 100,
                    2.0,
                    200.0,
                    i * 4.0,
                    80.0,
                    80.0,
                    200 << 20,
                    200 << 20,
                    210 << 20,
                )
            )
        if len(rows) >= 10_000:  # the client's buffer holds 10k rows: flush before it drops any
            n += _flush(table, rows)
            rows = []
    n += _flush(table, rows)
    stage = client.get_table("zephyr.stage", ZephyrStageStat)
    stage.write(
        [
            ZephyrStageStat(
                EXEC,
                "stage0-Map",
                "END",
                base + timedelta(seconds=shards * 0.2 + SAMPLES * SAMPLE_S),
                SAMPLES * SAMPLE_S,
                1,
                1,
                1.0,
                1.0,
                shards,
                80.0,
                1.0,
                1,
                1,
            )
        ]
    )
    _flush(stage, [])
    client.close()
    return n


def _flush(table, rows: list) -> int:
    table.write(rows)
    if table.flush(timeout=120) != "succeeded":
        raise RuntimeError("finelog flush did not succeed")
    return len(rows)


def run(quick: bool = False) -> dict:
    from finelog_server import EmbeddedServer

    shards = 50 if quick else 5_000
    with (
        tempfile.TemporaryDirectory(prefix="zdebug-bench-finelog-") as tmp,
        EmbeddedServer(log_dir=tmp, host="127.0.0.1", port=0) as srv,
    ):
        n = write_rows(srv.address, shards)
        target = f"finelog://127.0.0.1:{srv.port}/{EXEC}"
        runs = [
            peak_rss([sys.executable, "-m", "zephyr_debug.cli", "stragglers", target, "--json"])
            for _ in range(1 if quick else 3)
        ]
        rss, wall, _ = min(runs, key=lambda r: r[1])
        _, fetch_s, _ = peak_rss([sys.executable, "-c", FETCH_ONLY, srv.address, EXEC, str(n)])
    label = f"{n:,} rows"
    print(
        f"finelog: {label} read into `zdebug stragglers` in {wall:.2f} s (target {TARGET_S:g} s), "
        f"peak RSS {rss:.0f} MB (target {TARGET_MB} MB); fetch alone {fetch_s:.2f} s"
    )
    return {
        "finelog_read_s": {
            "value": wall,
            "unit": f"s ({label}, best of {len(runs)})",
            "baseline": "fetch only",
            "baseline_value": fetch_s,
            "ratio": wall / fetch_s,
            "target": f"< {TARGET_S:g} s",
            "meets": wall < TARGET_S,
        },
        "finelog_read_rss_mb": {
            "value": rss,
            "unit": f"MB ({label})",
            "baseline": "target",
            "baseline_value": TARGET_MB,
            "ratio": rss / TARGET_MB,
            "target": f"< {TARGET_MB} MB",
            "meets": rss < TARGET_MB,
        },
    }
