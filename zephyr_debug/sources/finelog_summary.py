"""A large execution's `zephyr.worker` rows summarised on the finelog server.

Reading every row of a 10M-row job costs minutes and gigabytes; the analysis needs far less. One
`GROUP BY stage_name, shard_idx` query returns per shard what `finelog.to_evidence` derives from
its rows, and the shard is handed on as three rows in the raw rows' own schema: its START row,
one RUNNING row standing for all its samples, its END / FAILED row. `to_evidence` reads them as
it reads raw rows, so attempts, samples, merge and the Iris snapshot need no second code path.

The summary RUNNING row carries the last sample's time, items and bytes (none when that sample
carried no RSS, as raw rows are read), the highest sampled RSS and peak RSS, and the mean sampled
CPU: exactly what `shardtable._progress` takes from the samples of a shard whose item count never
repeats (last items / time, peak RSS, mean CPU, and no no-progress span). A shard is summarised
only when that holds and its rows are plain: one START first, one END / FAILED last (strictly by
time), every row readable, no two sampled RUNNING rows with the same item count (the only way a
plateau, and so a stall, can show). Every other shard (running, retried, with a repeated count,
odd rows) is read row by row, so the stall / plateau / progress rules see all its samples.

The heartbeat interval (the median gap between a shard's consecutive RUNNING rows) is handed on
in the table's metadata: up to GAP_ROWS rows measured exactly as on raw rows (a window over the
RUNNING rows, on the server); above, the median of the shards' mean gaps (span of its RUNNING rows
over their count - 1, each shard counted once per gap), since that window alone costs seconds at
10M rows.

Not exact: merged into evidence with samples of its own (a job dir's heartbeats), a no-progress
span that a heartbeat and a collapsed telemetry row of the same count would have formed is not
seen (on the reference job: the same findings, plateau seconds a few milliseconds apart; a stall
seen only across the two sources could be missed).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

SUMMARY_ROWS = 500_000  # executions with at least this many zephyr.worker rows are summarised
READ_ENV = "ZDEBUG_FINELOG_READ"  # auto (default) | raw | summary: force either path
GAP_ROWS = 250_000  # up to this many rows, the heartbeat interval is measured exactly (a window)
META_INTERVAL = b"zdebug.heartbeat_interval"  # seconds, or "" when no gap was seen
META_SUMMARY = b"zdebug.summarised_shards"
_NUMERIC = ("items", "bytes_processed", "cpu_time_total", "cpu_current_pct", "mem_current_bytes", "mem_peak_bytes")
_ENDED = "status IN ('END', 'FAILED')"
_SAMPLED = "status = 'RUNNING' AND mem_current_bytes > 0"


def mode() -> str:
    value = os.environ.get(READ_ENV, "auto").strip().lower() or "auto"
    return value if value in ("auto", "raw", "summary") else "auto"


def wanted(rows: int) -> bool:
    """Whether an execution of `rows` zephyr.worker rows is read summarised."""
    m = mode()
    return m == "summary" or (m == "auto" and rows >= SUMMARY_ROWS)


def usable(schema: pa.Schema) -> bool:
    """Zephyr's own column types (anything else is read raw, where odd values are counted)."""
    import pyarrow as pa

    def typed(name: str, check) -> bool:
        return name in schema.names and check(schema.field(name).type)

    return (
        typed("seq", pa.types.is_integer)
        and typed("shard_idx", pa.types.is_integer)
        and typed("ts", pa.types.is_timestamp)
        and all(typed(c, pa.types.is_string) for c in ("stage_name", "status"))
        and all(typed(c, lambda t: pa.types.is_integer(t) or pa.types.is_floating(t)) for c in _NUMERIC)
    )


def _select(table: str, execution_id: str, part: tuple[int, int]) -> str:
    t = "CAST(ts AS BIGINT)"  # the stored unit (microseconds); scaled to seconds where read
    modulo, rest = part
    where = f"execution_id = '{execution_id}'"
    if modulo > 1:  # one part of the shards (negative ones too; rows with no shard in part 0)
        also = " OR shard_idx IS NULL" if rest == 0 else ""
        where += f" AND ((shard_idx % {modulo} + {modulo}) % {modulo} = {rest}{also})"
    return f"""SELECT stage_name, shard_idx, count(*) AS n, min(seq) AS first_seq,
  sum(CASE WHEN status = 'START' THEN 1 ELSE 0 END) AS n_start,
  sum(CASE WHEN {_ENDED} THEN 1 ELSE 0 END) AS n_end,
  sum(CASE WHEN status = 'RUNNING' THEN 1 ELSE 0 END) AS n_running,
  sum(CASE WHEN ts IS NULL OR status IS NULL OR status NOT IN ('START', 'RUNNING', 'END', 'FAILED')
      THEN 1 ELSE 0 END) AS n_odd,
  max(CASE WHEN status = 'START' THEN {t} END) AS start_t,
  min(CASE WHEN status <> 'START' THEN {t} END) AS after_start_t,
  max(CASE WHEN status = 'START' THEN seq END) AS start_seq,
  max(CASE WHEN status = 'START' THEN mem_current_bytes END) AS start_mem,
  max(CASE WHEN status = 'START' THEN mem_peak_bytes END) AS start_peak,
  max(CASE WHEN {_ENDED} THEN {t} END) AS end_t,
  max(CASE WHEN NOT ({_ENDED}) THEN {t} END) AS before_end_t,
  max(CASE WHEN {_ENDED} THEN seq END) AS end_seq,
  max(CASE WHEN {_ENDED} THEN status END) AS end_status,
  max(CASE WHEN {_ENDED} THEN items END) AS end_items,
  max(CASE WHEN {_ENDED} THEN bytes_processed END) AS end_bytes,
  max(CASE WHEN {_ENDED} THEN cpu_time_total END) AS end_cpu_time,
  max(CASE WHEN {_ENDED} THEN mem_current_bytes END) AS end_mem,
  max(CASE WHEN {_ENDED} THEN mem_peak_bytes END) AS end_peak,
  max(CASE WHEN status = 'RUNNING' THEN seq END) AS run_seq,
  min(CASE WHEN status = 'RUNNING' THEN {t} END) AS run_first_t,
  max(CASE WHEN status = 'RUNNING' THEN {t} END) AS run_t,
  last_value(CASE WHEN mem_current_bytes > 0 THEN items END ORDER BY ts, seq)
      FILTER (WHERE status = 'RUNNING') AS run_items,
  last_value(CASE WHEN mem_current_bytes > 0 THEN bytes_processed END ORDER BY ts, seq)
      FILTER (WHERE status = 'RUNNING') AS run_bytes,
  max(CASE WHEN {_SAMPLED} THEN mem_current_bytes END) AS run_rss,
  max(CASE WHEN {_SAMPLED} THEN mem_peak_bytes END) AS run_peak,
  avg(CASE WHEN {_SAMPLED} THEN cpu_current_pct END) AS run_cpu,
  count(CASE WHEN {_SAMPLED} THEN items END) AS run_counted,
  count(DISTINCT CASE WHEN {_SAMPLED} THEN items END) AS run_distinct
FROM "{table}" WHERE {where} GROUP BY stage_name, shard_idx"""


def _gap_sql(table: str, execution_id: str) -> str:
    """The median gap (microseconds) between a shard's consecutive RUNNING rows, as to_evidence
    measures it on raw rows."""
    return f"""SELECT median(CAST(g AS DOUBLE)) AS gap FROM (
  SELECT CAST(ts AS BIGINT) - lag(CAST(ts AS BIGINT)) OVER (PARTITION BY stage_name, shard_idx ORDER BY ts, seq) AS g
  FROM "{table}" WHERE execution_id = '{execution_id}' AND status = 'RUNNING' AND ts IS NOT NULL
    AND stage_name IS NOT NULL AND shard_idx IS NOT NULL
) WHERE g > 0"""


def read(query, read_rows, table: str, execution_id: str, s: pa.Table, rows: int, schema: pa.Schema) -> pa.Table:
    """The execution's zephyr.worker rows (`rows` of them) in the raw rows' schema, the plain
    shards of its summary `s` condensed. `query(sql)` runs one query (finelog._query's errors);
    `read_rows(where)` reads the raw rows matching a predicate, paged (finelog._read)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def col(name: str) -> np.ndarray:
        return pc.cast(s.column(name), pa.float64()).to_numpy(zero_copy_only=False)

    counted, distinct = col("run_counted"), col("run_distinct")
    plain = (
        s.column("stage_name").is_valid().to_numpy(zero_copy_only=False)
        & s.column("shard_idx").is_valid().to_numpy(zero_copy_only=False)
        & (col("n_start") == 1)
        & (col("n_end") == 1)
        & (col("n_odd") == 0)
        & (col("start_t") < col("after_start_t"))
        & (col("end_t") > col("before_end_t"))
        & (distinct == counted)
    )
    if rows <= GAP_ROWS:  # exact, and cheap at this size
        gap_us = query(_gap_sql(table, execution_id)).column(0)[0].as_py()
    else:
        gap_us = _mean_gaps(col("run_first_t"), col("run_t"), col("n_running"))
    parts = [_condensed(s.filter(pa.array(plain)), schema)]
    odd = s.filter(pa.array(~plain))
    if odd.num_rows:
        parts.append(read_rows(_shards_where(odd)).select(schema.names).cast(schema))
    out = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    out = out.take(pc.sort_indices(out, [("seq", "ascending")]))  # the server's order, as raw pages come
    interval = "" if gap_us is None else repr(round(gap_us / 1e6, 3))
    meta = {
        **(out.schema.metadata or {}),
        META_INTERVAL: interval.encode(),
        META_SUMMARY: str(int(plain.sum())).encode(),
    }
    return out.replace_schema_metadata(meta)


def _mean_gaps(first: np.ndarray, last: np.ndarray, n: np.ndarray) -> float | None:
    """The median of every shard's mean gap between its RUNNING rows, each counted once per gap
    (microseconds; None without a gap): a window over every RUNNING row costs seconds at 10M."""
    import numpy as np

    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (last - first) / (n - 1)
    ok = (n >= 2) & (mean > 0)
    if not ok.any():
        return None
    mean, weight = mean[ok], (n - 1)[ok]
    order = np.argsort(mean, kind="stable")
    cum = np.cumsum(weight[order])
    return float(mean[order][np.searchsorted(cum, cum[-1] / 2)])


def summary(query, table: str, execution_id: str) -> pa.Table:
    """One row per (stage, shard) of the execution (`_select`'s columns), in parts (shard_idx
    modulo a power of two) when one reply is too big; `query(sql)` runs one query with
    finelog._query's errors."""
    import pyarrow as pa

    from zephyr_debug.errors import EvidenceError
    from zephyr_debug.sources.finelog import _TooBig

    parts, done = [(1, 0)], []
    while parts:
        modulo, rest = parts.pop()
        try:
            done.append(query(_select(table, execution_id, (modulo, rest))))
        except _TooBig:
            if modulo >= 1 << 12:
                raise EvidenceError(f"{table}: per-shard summary over finelog's reply limit") from None
            parts += [(2 * modulo, rest), (2 * modulo, rest + modulo)]
    return pa.concat_tables(done) if len(done) > 1 else done[0]


def _condensed(s: pa.Table, schema: pa.Schema) -> pa.Table:
    """START, one summary RUNNING row (when the shard had any) and END / FAILED per summarised shard."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = s.num_rows
    has_run = pc.greater(s.column("n_running"), 0).to_numpy(zero_copy_only=False)
    run = np.flatnonzero(has_run)

    pick = pa.array(run, pa.int64())
    every = pa.array(np.arange(n), pa.int64())
    blocks = [  # the START row takes the shard's first seq: stages then come in the raw rows' order
        {
            "seq": s.column("first_seq"),
            "status": pa.array(["START"] * n),
            "ts": s.column("start_t"),
            "mem_current_bytes": s.column("start_mem"),
            "mem_peak_bytes": s.column("start_peak"),
            "idx": every,
        },
        {
            "seq": s.column("run_seq").take(pick),
            "status": pa.array(["RUNNING"] * len(run)),
            "ts": s.column("run_t").take(pick),
            "items": s.column("run_items").take(pick),
            "bytes_processed": s.column("run_bytes").take(pick),
            "cpu_current_pct": s.column("run_cpu").take(pick),
            "mem_current_bytes": s.column("run_rss").take(pick),
            "mem_peak_bytes": s.column("run_peak").take(pick),
            "idx": pick,
        },
        {
            "seq": s.column("end_seq"),
            "status": s.column("end_status"),
            "ts": s.column("end_t"),
            "items": s.column("end_items"),
            "bytes_processed": s.column("end_bytes"),
            "cpu_time_total": s.column("end_cpu_time"),
            "mem_current_bytes": s.column("end_mem"),
            "mem_peak_bytes": s.column("end_peak"),
            "idx": every,
        },
    ]
    ts_type = schema.field("ts").type
    tables = []
    for block in blocks:
        idx = block.pop("idx")
        cols = {
            "stage_name": s.column("stage_name").take(idx),
            "shard_idx": s.column("shard_idx").take(idx),
            **block,
        }
        # the stored ticks back to the column's type
        cols["ts"] = pc.cast(pc.cast(pc.cast(cols["ts"], pa.int64()), pa.timestamp(ts_type.unit)), ts_type)
        k = len(idx)
        arrays = [pc.cast(cols.get(name, pa.nulls(k)), schema.field(name).type) for name in schema.names]
        tables.append(pa.Table.from_arrays(arrays, schema=schema.remove_metadata()))
    return pa.concat_tables(tables)


def _shards_where(odd: pa.Table) -> str:
    """A predicate holding the rows of the shards of `odd` (per stage: shard ranges), and of
    rows with no stage or shard."""
    import numpy as np

    stages = odd.column("stage_name").to_pylist()
    shards = odd.column("shard_idx").to_pylist()
    by_stage: dict[str, list[int]] = {}
    terms: list[str] = []
    for stage, shard in zip(stages, shards, strict=True):
        if stage is None or shard is None:
            if not terms:
                terms.append("stage_name IS NULL OR shard_idx IS NULL")
            continue
        by_stage.setdefault(stage, []).append(int(shard))
    for stage, values in by_stage.items():
        v = np.unique(np.array(values, dtype=np.int64))
        cuts = np.flatnonzero(np.diff(v) != 1) + 1
        ranges = []
        for run in np.split(v, cuts):
            lo, hi = int(run[0]), int(run[-1])
            ranges.append(f"shard_idx = {lo}" if lo == hi else f"shard_idx BETWEEN {lo} AND {hi}")
        name = stage.replace("'", "''")
        terms.append(f"(stage_name = '{name}' AND ({' OR '.join(ranges)}))")
    return " OR ".join(terms)
