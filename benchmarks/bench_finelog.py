"""Reading Zephyr's finelog telemetry at cluster scale: 10M `zephyr.worker` rows (50,000 shards
x 200 rows) in a local EmbeddedServer, read into the analysis (targets: < 5 s, < 500 MB RSS;
`--quick`: 50 shards).

The rows have Zephyr's `ZephyrWorkerStat` schema (START, RUNNING every 5 s, END per shard; one of
the last shards has 8x the items at the normal rate; one zephyr.stage row) and go through
finelog's own client: the namespace is registered by `Table.write` / `flush`, the rest is sent as
Arrow batches of BATCH_ROWS rows with the client's WriteRows call (`LogClient._stats_flush`, what
a Table's flush thread sends; one row object per row would take minutes at 10M). Measured in the
same run, both as real processes (`zdebug stragglers finelog://… --json`, wall time and wait4
peak RSS, bench_memory's launcher): the summarised read (`ZDEBUG_FINELOG_READ=summary`: one
GROUP BY on the server, the default from finelog_summary.SUMMARY_ROWS rows on) against the
raw-row read as the baseline (`ZDEBUG_FINELOG_READ=raw`: every row, paged by seq), and whether
both name the same findings.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

from benchmarks.bench_memory import peak_rss

TARGET_S, TARGET_MB = 5.0, 500
SAMPLES, SAMPLE_S = 200, 5.0
BATCH_ROWS = 80_000  # ~11 MB of Arrow IPC: under the server's 16 MiB WriteRows limit
EXEC = "bench-20260101-000000-0000beef"
SKEW_X = 8
# exec the command with its JSON to a file: no extra process in the measured tree
TO_FILE = 'out="$1"; shift; exec "$@" > "$out"'


def skewed(shards: int) -> int:
    """The shard with SKEW_X the items at the normal rate: one of the last to start, so it holds
    the stage's tail (an early one would end long before the stage and cost nothing)."""
    return shards - 3


def write_rows(url: str, shards: int) -> int:
    """`shards` x SAMPLES zephyr.worker rows and one zephyr.stage row; returns the row count."""
    import numpy as np
    import pyarrow as pa
    from finelog.client import LogClient
    from finelog.client.log_client import schema_from_dataclass
    from finelog.schema import schema_to_arrow
    from zephyr.stats import ZephyrStageStat, ZephyrWorkerStat

    client = LogClient.connect(url)
    base = datetime(2026, 1, 1)
    table = client.get_table("zephyr.worker", ZephyrWorkerStat)
    # Shard 0 through the Table (registers the namespace), the rest in Arrow batches.
    first = _shard_rows(0, base)
    table.write(ZephyrWorkerStat(EXEC, "stage0-Map", 0, *row) for row in first)
    if table.flush(timeout=120) != "succeeded":
        raise RuntimeError("finelog flush did not succeed")
    schema = schema_to_arrow(schema_from_dataclass(ZephyrWorkerStat))
    per = max(1, BATCH_ROWS // SAMPLES)
    step = np.timedelta64(1, "us")
    for lo in range(1, shards, per):
        shard = np.repeat(np.arange(lo, min(lo + per, shards)), SAMPLES)
        i = np.tile(np.arange(SAMPLES), len(shard) // SAMPLES)
        n = len(shard)
        slow = np.where(shard == skewed(shards), SKEW_X, 1)  # 8x the items at the normal rate: 8x as long
        items = i * 10 * slow
        cols = {
            "execution_id": pa.array([EXEC] * n),
            "stage_name": pa.array(["stage0-Map"] * n),
            "shard_idx": shard,
            "status": np.where(i == 0, "START", np.where(i == SAMPLES - 1, "END", "RUNNING")),
            "ts": np.datetime64(base, "us") + (shard * 200_000 + i * int(SAMPLE_S * 1e6) * slow) * step,
            "items": items,
            "bytes_processed": items * 100,
            "item_rate": np.full(n, 2.0),
            "byte_rate": np.full(n, 200.0),
            "cpu_time_total": i * 4.0,
            "cpu_current_pct": np.full(n, 80.0),
            "cpu_avg_pct": np.full(n, 80.0),
            "mem_current_bytes": np.full(n, 200 << 20),
            "mem_avg_bytes": np.full(n, 200 << 20),
            "mem_peak_bytes": np.full(n, 210 << 20),
        }
        batch = pa.RecordBatch.from_arrays([pa.array(cols[f.name]).cast(f.type) for f in schema], schema=schema)
        client._stats_flush("zephyr.worker", batch)
    end_s = skewed(shards) * 0.2 + SKEW_X * SAMPLES * SAMPLE_S
    stage = client.get_table("zephyr.stage", ZephyrStageStat)
    stage.write(
        [
            ZephyrStageStat(
                EXEC,
                "stage0-Map",
                "END",
                base + timedelta(seconds=end_s),
                end_s,
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
    if stage.flush(timeout=120) != "succeeded":
        raise RuntimeError("finelog flush did not succeed")
    client.close()
    return shards * SAMPLES


def _shard_rows(shard: int, base: datetime) -> list[tuple]:
    """The ZephyrWorkerStat fields after (execution, stage, shard) of one shard's rows."""
    start = base + timedelta(seconds=shard * 0.2)
    out = []
    for i in range(SAMPLES):
        status = "START" if i == 0 else "END" if i == SAMPLES - 1 else "RUNNING"
        items = i * 10  # shard 0: not the skewed one
        out.append(
            (
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
    return out


def _read(target: str, how: str, out: Path) -> tuple[float, float]:
    """(peak RSS MB, wall s) of `zdebug stragglers target --json` reading `how` (raw | summary)."""
    os.environ["ZDEBUG_FINELOG_READ"] = how
    try:
        cmd = [sys.executable, "-m", "zephyr_debug.cli", "stragglers", target, "--json"]
        rss, wall, _ = peak_rss(["sh", "-c", TO_FILE, "sh", str(out), *cmd])
    finally:
        del os.environ["ZDEBUG_FINELOG_READ"]
    return rss, wall


def _found(out: Path) -> list[tuple]:
    return sorted((f["kind"], f.get("shard"), f.get("cause")) for f in json.loads(out.read_text())["findings"])


def run(quick: bool = False) -> dict:
    import time

    from finelog_server import EmbeddedServer

    shards = 50 if quick else 50_000
    with (
        tempfile.TemporaryDirectory(prefix="zdebug-bench-finelog-") as tmp,
        EmbeddedServer(log_dir=tmp, host="127.0.0.1", port=0) as srv,
    ):
        t0 = time.perf_counter()
        n = write_rows(srv.address, shards)
        write_s = time.perf_counter() - t0
        target = f"finelog://127.0.0.1:{srv.port}/{EXEC}"
        out_sum, out_raw = Path(tmp) / "summary.json", Path(tmp) / "raw.json"
        runs = [_read(target, "summary", out_sum) for _ in range(1 if quick else 3)]
        rss, wall = min(runs, key=lambda r: r[1])
        raw_rss, raw_wall = _read(target, "raw", out_raw)
        same = _found(out_sum) == _found(out_raw)
        skew = [f for f in _found(out_sum) if f[1] == skewed(shards)]
    label = f"{n:,} rows"
    print(
        f"finelog: {label} written in {write_s:.1f} s; `zdebug stragglers` summarised on the server "
        f"{wall:.2f} s (best of {len(runs)}), peak RSS {rss:.0f} MB; raw rows {raw_wall:.2f} s, "
        f"{raw_rss:.0f} MB (targets {TARGET_S:g} s, {TARGET_MB} MB); same findings: {same} "
        f"(shard {skewed(shards)}: {skew})"
    )
    return {
        "finelog_summary_read_s": {
            "value": wall,
            "unit": f"s ({label}, best of {len(runs)}; same findings as raw: {same})",
            "baseline": "raw rows",
            "baseline_value": raw_wall,
            "ratio": wall / raw_wall,
            "target": f"< {TARGET_S:g} s",
            "meets": wall < TARGET_S and same,
        },
        "finelog_summary_read_rss_mb": {
            "value": rss,
            "unit": f"MB ({label})",
            "baseline": "raw rows",
            "baseline_value": raw_rss,
            "ratio": rss / raw_rss,
            "target": f"< {TARGET_MB} MB",
            "meets": rss < TARGET_MB,
        },
    }
