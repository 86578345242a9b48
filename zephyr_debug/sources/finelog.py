"""Zephyr's own per-shard telemetry in finelog: `finelog://HOST:PORT/<execution_id>`.

Zephyr (`zephyr/stats.py`, `StatsWriter`) writes two finelog tables: `zephyr.worker` (per
shard: START, RUNNING every sample interval, END / FAILED) and `zephyr.stage` (per stage at
END / FAILED). They are read with `LogClient.query`, filtered by execution id, only the needed
columns, in pages keyed on finelog's `seq` column (a 1M-row job is five requests, each well
under the server's 64 MiB reply limit), and mapped onto the tables every source fills: START
opens an attempt, RUNNING rows are progress samples, END / FAILED close the attempt. The rows
name no worker; `merge` attaches them to a log's attempts of the same (stage, shard) whose time
span holds them and so names the worker on the samples too. An execution of
finelog_summary.SUMMARY_ROWS rows or more is summarised per shard on the server instead
(`finelog_summary`): the same rows' schema, a shard whose samples no rule needs one by one comes
as three rows.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zephyr_debug.errors import EvidenceError, UsageError
from zephyr_debug.model import (
    ATTEMPT_COLUMNS,
    HEARTBEAT_TIMEOUT_S,
    SAMPLE_COLUMNS,
    TASK,
    Evidence,
    StageInfo,
)
from zephyr_debug.zephyrlog import STAGE_INDEX_RE

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa

SCHEME = "finelog://"
PROVENANCE = "finelog"
WORKER_TABLE, STAGE_TABLE = "zephyr.worker", "zephyr.stage"  # Zephyr's namespaces
STATUSES = ("START", "RUNNING", "END", "FAILED")  # ZephyrWorkerStatStatus
START, RUNNING, END, FAILED = range(len(STATUSES))  # as decoded here
# zephyr.worker column -> our name; what the analysis needs, nothing more.
WORKER_FIELDS = {
    "stage_name": "stage",
    "shard_idx": "shard",
    "status": "status",
    "ts": "ts",
    "items": "items",
    "bytes_processed": "bytes",
    "cpu_time_total": "cpu_time_s",
    "cpu_current_pct": "cpu_pct",
    "mem_current_bytes": "rss_bytes",
    "mem_peak_bytes": "rss_peak_bytes",
}
STAGE_FIELDS = {
    "stage_name": "stage",
    "status": "status",
    "ts": "ts",
    "elapsed": "elapsed_s",
    "items": "items",
    "bytes_processed": "bytes",
    "total_shards": "total_shards",
    "cpu_time_total": "cpu_time_s",
    "cpu_pct_avg": "cpu_pct_avg",
    "mem_bytes_avg": "mem_avg_bytes",
    "mem_peak_bytes_max": "mem_peak_bytes",
}
# Zero in these = not sampled: this release's inline runner samples in a thread that does not
# see the shard's counters, so its RUNNING rows carry 0 (END rows are sampled in the shard's own).
RESOURCES = ("cpu_time_s", "cpu_pct", "rss_bytes", "rss_peak_bytes")
PAGE_ROWS = 250_000  # ~100 bytes a row: 25 MB a reply (finelog's limit: 64 MiB)
FETCH_THREADS = 2
REQUEST_TIMEOUT_MS = 30_000
DEADLINE_S = 120.0  # for all pages of one read (plus at most one request timeout)
MATCH_SLACK_S = 2.0  # log prefixes have 1 s resolution
_EXEC_RE = re.compile(r"^[\w.:-]+$")


def is_target(target: str) -> bool:
    return target.startswith(SCHEME)


def parse(target: str) -> tuple[str, str]:
    """`finelog://HOST:PORT/<execution_id>` -> (`http://HOST:PORT`, execution id)."""
    rest = target[len(SCHEME) :]
    host, _, execution_id = rest.partition("/")
    if not host or not execution_id:
        raise UsageError(f"{target}: expected finelog://HOST:PORT/<execution_id>")
    return server_url(host), execution_id


def server_url(url: str) -> str:
    """`HOST:PORT`, `http://HOST:PORT` or `finelog://HOST:PORT` -> `http://HOST:PORT`."""
    url = url.removeprefix(SCHEME).rstrip("/")
    return url if url.startswith(("http://", "https://")) else f"http://{url}"


@dataclass
class Rows:
    """The raw rows of one execution: Arrow tables, with the server they came from."""

    url: str
    execution_id: str
    worker: pa.Table
    stage: pa.Table | None
    warnings: list[str]


def fetch(url: str, execution_id: str, deadline_s: float = DEADLINE_S) -> Rows:
    """Both tables' rows of `execution_id`; EvidenceError when the server or its zephyr.worker
    rows cannot be read, a warning when only zephyr.stage is missing."""
    if not _EXEC_RE.match(execution_id):
        raise UsageError(f"{execution_id!r}: not an execution id (letters, digits, '_.:-')")
    client = _client(url)
    deadline = time.monotonic() + deadline_s
    warnings: list[str] = []
    try:
        worker = _read(client, url, WORKER_TABLE, WORKER_FIELDS, execution_id, deadline, warnings, summarise=True)
        try:
            stage = _read(client, url, STAGE_TABLE, STAGE_FIELDS, execution_id, deadline, warnings)
        except _NoTable:
            stage = None
            warnings.append(f"{url}: no {STAGE_TABLE} table: no per-stage totals")
    except _NoTable:
        raise EvidenceError(f"{url}: no {WORKER_TABLE} table (no Zephyr run wrote telemetry here)") from None
    finally:
        client.close()
    if not worker.num_rows:
        raise EvidenceError(f"{url}: no {WORKER_TABLE} rows for execution {execution_id}{_known_executions(url)}")
    return Rows(url, execution_id, worker, stage, warnings)


def _client(url: str):
    """A LogClient whose INFO lines ("LogClient resolved ...") stay off the user's stderr."""
    import logging

    from finelog.client import LogClient

    logging.getLogger("finelog.client.log_client").setLevel(logging.ERROR)
    return LogClient.connect(url, timeout_ms=REQUEST_TIMEOUT_MS)


def _read(
    client,
    url: str,
    table: str,
    fields: dict[str, str],
    execution_id: str,
    deadline: float,
    warnings: list[str],
    summarise: bool = False,
) -> pa.Table:
    """The rows of `table` for one execution, the columns of `fields` it has, in ranges of `seq`
    holding about PAGE_ROWS rows each, FETCH_THREADS at a time (a range the server finds too big
    for one reply is halved). With `summarise`, a large execution (finelog_summary.wanted) of
    Zephyr's column types comes summarised on the server instead (finelog_summary)."""
    import pyarrow as pa

    from zephyr_debug.sources import finelog_summary

    schema = _query(client, url, f'SELECT * FROM "{table}" LIMIT 0', deadline).schema
    have = set(schema.names)
    if "execution_id" not in have or "seq" not in have:
        raise EvidenceError(f"{url}: table {table} has no execution_id/seq column: not Zephyr's")
    missing = [c for c in fields if c not in have]
    if missing:
        warnings.append(f"{url}: {table} lacks column(s) {', '.join(missing)}: left empty")
    cols = ", ".join(["seq", *(f'"{c}"' for c in fields if c in have)])
    select = f"SELECT {cols} FROM \"{table}\" WHERE execution_id = '{execution_id}'"

    def query(sql: str) -> pa.Table:
        return _query(client, url, sql, deadline)

    lo, hi, count = _bounds(client, url, table, execution_id, "", deadline)
    if not count:
        return query(f"{select} LIMIT 0")
    if summarise and finelog_summary.wanted(count) and finelog_summary.usable(schema):
        try:
            summary = finelog_summary.summary(query, table, execution_id)
        except EvidenceError as exc:  # a server that cannot run it: every row, unless forced
            if finelog_summary.mode() == "summary" or time.monotonic() > deadline:
                raise
            warnings.append(f"{url}: no per-shard summary ({exc.message}): every row read")
        else:
            picked = pa.schema([schema.field(c).with_nullable(True) for c in ["seq", *fields]])

            def rows_where(where: str) -> pa.Table:
                bounds = _bounds(client, url, table, execution_id, where, deadline)
                return _pages(
                    url, table, f"{select} AND ({where})", bounds, deadline, f"{select} AND ({where}) LIMIT 0"
                )

            return finelog_summary.read(query, rows_where, table, execution_id, summary, count, picked)
    return _pages(url, table, select, (lo, hi, count), deadline, f"{select} LIMIT 0")


def _bounds(client, url: str, table: str, execution_id: str, where: str, deadline: float) -> tuple[int, int, int]:
    """min(seq), max(seq), count(*) of the execution's rows (and `where`)."""
    also = f" AND ({where})" if where else ""
    lo, hi, count = (
        c[0].as_py()
        for c in _query(
            client,
            url,
            f"SELECT min(seq), max(seq), count(*) FROM \"{table}\" WHERE execution_id = '{execution_id}'{also}",
            deadline,
        ).columns
    )
    return lo, hi, count


def _pages(url: str, table: str, select: str, bounds: tuple[int, int, int], deadline: float, empty: str) -> pa.Table:
    """The rows of `select` (a query ending in its WHERE clause) in `seq` ranges of about PAGE_ROWS rows."""
    import math
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa

    lo, hi, count = bounds
    if not count:
        return _query_once(url, empty, deadline)
    width = math.ceil((hi - lo + 1) / math.ceil(count / PAGE_ROWS))
    ranges = [(start, min(start + width, hi)) for start in range(lo - 1, hi, width)]

    def fetch_range(bounds: tuple[int, int]) -> list[pa.Table]:
        after, upto = bounds
        own = _client(url)
        try:
            return [_query(own, url, f"{select} AND seq > {after} AND seq <= {upto}", deadline)]
        except _TooBig:
            if upto - after < 2:
                raise EvidenceError(f"{url}: one {table} row is over finelog's reply limit") from None
            mid = (after + upto) // 2
            return fetch_range((after, mid)) + fetch_range((mid, upto))
        finally:
            own.close()

    with ThreadPoolExecutor(FETCH_THREADS) as pool:
        pages = [page for part in pool.map(fetch_range, ranges) for page in part]
    return pa.concat_tables(pages) if len(pages) > 1 else pages[0]


def _query_once(url: str, sql: str, deadline: float) -> pa.Table:
    """`sql` on a client of its own (clients are not shared between threads)."""
    own = _client(url)
    try:
        return _query(own, url, sql, deadline)
    finally:
        own.close()


class _TooBig(Exception):
    """The reply would exceed the server's message limit."""


class _NoTable(Exception):
    """The namespace is not registered on the server."""


_NO_TABLE_RE = re.compile(r"table '[^']*' not found|namespace .* not found", re.I)


def _query(client, url: str, sql: str, deadline: float) -> pa.Table:
    from finelog.client import NamespaceNotFoundError

    if time.monotonic() > deadline:
        raise EvidenceError(f"{url}: finelog read took over {DEADLINE_S:.0f}s; gave up")
    try:
        return client.query(sql, max_rows=1 << 62)  # the server's reply limit bounds a page
    except Exception as exc:  # connect errors, timeouts, SQL errors: one line
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        if isinstance(exc, NamespaceNotFoundError) or _NO_TABLE_RE.search(reason):
            raise _NoTable(reason) from None
        if "exceeds" in reason and "message limit" in reason:
            raise _TooBig(reason) from None
        raise EvidenceError(f"{url}: finelog query failed: {reason}") from None


def _known_executions(url: str) -> str:
    """`; it holds: a, b` (a few execution ids the server does have), or ''."""
    client = _client(url)
    try:
        ids = client.query(f'SELECT DISTINCT execution_id FROM "{WORKER_TABLE}" LIMIT 5').column(0).to_pylist()
    except Exception:  # a hint only
        return ""
    finally:
        client.close()
    return f"; it holds: {', '.join(map(str, ids))}" if ids else ""


def _columns(table: pa.Table, fields: dict[str, str], warnings: list[str], where: str) -> tuple[dict, np.ndarray]:
    """Arrow -> numpy arrays under our names, and the stage names: `stage` as codes into those
    names, `status` as an index into STATUSES, numbers as float (wrongly typed -> the row is
    skipped and counted), `ts` as unix seconds (finelog stores Zephyr's naive-UTC datetimes).
    Vectorised in Arrow: a million rows of strings cost no Python loop."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    out: dict = {"seq": _numbers(table.column("seq"))[0]}
    bad = np.zeros(n, dtype=bool)
    names = np.zeros(0, dtype=object)
    for name, ours in fields.items():
        col = table.column(name) if name in table.column_names else pa.chunked_array([pa.nulls(n)])
        if ours == "stage":
            out[ours], names = _strings(col)
            bad |= out[ours] < 0
        elif ours == "status":
            codes, labels = _strings(col)
            lut = np.array([STATUSES.index(v) if v in STATUSES else -1 for v in labels] + [-1], dtype=np.int8)
            out[ours] = lut[codes]
            bad |= out[ours] < 0
        elif ours == "ts" and pa.types.is_timestamp(col.type):
            out[ours] = pc.cast(pc.cast(col, pa.timestamp("us")), pa.int64()).to_numpy(zero_copy_only=False) / 1e6
        else:
            out[ours], wrong = _numbers(col)
            bad |= wrong
    bad |= np.isnan(out["ts"])
    if "shard" in out:
        bad |= np.isnan(out["shard"])
    if "rss_bytes" in out:  # no RSS = no resource sample in the row (START; RUNNING rows of the inline runner)
        unsampled = ~(out["rss_bytes"] > 0)
        for col in RESOURCES:
            out[col] = np.where(unsampled, np.nan, out[col])
    if bad.any():
        warnings.append(f"{where}: skipped {int(bad.sum())} row(s) with missing or wrongly typed fields")
        out = {k: v[~bad] for k, v in out.items()}
    return out, names


def _strings(col: pa.ChunkedArray):
    """(codes, names): codes index names, -1 for nulls; all -1 for a column of another type."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)) or not len(col):
        return np.full(len(col), -1, dtype=np.int64), np.zeros(0, dtype=object)
    enc = pc.dictionary_encode(col).combine_chunks()
    codes = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, np.array(enc.dictionary.to_pylist(), dtype=object)


def _numbers(col: pa.ChunkedArray):
    """(float array, wrongly-typed mask): nulls are NaN; strings are parsed, unparseable ones flagged."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_null(col.type):
        return pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False), np.zeros(len(col), dtype=bool)
    values = pd.to_numeric(pd.Series(col.to_pylist(), dtype=object), errors="coerce").to_numpy(dtype=float)
    return values, np.isnan(values) & ~col.is_null().to_numpy(zero_copy_only=False)


def to_evidence(rows: Rows) -> Evidence:
    """The attempts, samples and stages of one execution's telemetry."""
    import numpy as np
    import pandas as pd

    warnings = list(rows.warnings)
    w, stage_names = _columns(rows.worker, WORKER_FIELDS, warnings, f"{rows.url} {WORKER_TABLE}")
    st = _stage_rows(rows, warnings)
    order = np.lexsort((w["seq"], w["ts"], w["shard"], w["stage"]))  # only the keys are reordered
    n = len(order)
    status, ts, stage_code, shard = (w[c][order] for c in ("status", "ts", "stage", "shard"))
    new_shard = np.r_[True, (stage_code[1:] != stage_code[:-1]) | (shard[1:] != shard[:-1])] if n else np.zeros(0, bool)
    # Attempt n of a shard = its rows from its n-th START on (rows before any START: attempt 0).
    serial = np.cumsum((status == START) | new_shard) - 1
    attempt = serial - np.maximum.accumulate(np.where(new_shard, serial, 0))
    firsts = np.flatnonzero(np.r_[True, serial[1:] != serial[:-1]]) if n else np.zeros(0, dtype=int)
    lasts = np.r_[firsts[1:] - 1, n - 1] if n else firsts
    last_status = status[lasts]
    start_ts, end_ts = ts[firsts], np.where(np.isin(last_status, (END, FAILED)), ts[lasts], np.nan)
    outcome = np.where(last_status == END, "done", np.where(last_status == FAILED, "failed", "running"))
    attempts = pd.DataFrame(
        {
            "stage": stage_names[stage_code[firsts]],
            "shard": shard[firsts],
            "attempt": attempt[firsts].astype(float),
            "worker": None,
            "start_ts": start_ts,
            "end_ts": end_ts,
            "outcome": outcome.astype(object),
            # numpy stubs reject None, which np.where takes as an object scalar
            "kind": np.where(last_status == FAILED, TASK, None).astype(object),  # type: ignore[call-overload]
            "elapsed_s": end_ts - start_ts,
            "items": w["items"][order[lasts]],
            "bytes": w["bytes"][order[lasts]],
            "peak_rss_bytes": np.fmax.reduceat(w["rss_peak_bytes"][order], firsts) if n else np.zeros(0),
            "cpu_time_s": w["cpu_time_s"][order[lasts]],
        }
    ).reindex(columns=ATTEMPT_COLUMNS)
    for col in ("stage", "worker", "outcome", "kind", "error", "crash_file"):
        attempts[col] = attempts[col].astype(object)
    running = w["status"] == RUNNING  # samples keep the server's (seq) order
    samples = pd.DataFrame(
        {
            c: w[c][running] if c in w else np.full(int(running.sum()), np.nan)
            for c in SAMPLE_COLUMNS
            if c not in ("worker", "stage")
        }
    )
    samples.insert(
        SAMPLE_COLUMNS.index("stage") - 1,
        "stage",
        pd.Series(stage_names[w["stage"][running]], index=samples.index, dtype=object),
    )
    samples.insert(SAMPLE_COLUMNS.index("worker"), "worker", pd.Series(None, index=samples.index, dtype=object))
    # An unsampled RUNNING row (no RSS: this release's inline runner) carries 0 items too: not a stall.
    samples.loc[samples["rss_bytes"].isna(), ["items", "bytes"]] = np.nan
    last_ts = float(ts.max()) if n else float("nan")
    stage_end = float(st["ts"].max()) if len(st) else float("nan")
    last = float(np.nanmax([last_ts, stage_end]))
    open_attempts = bool((outcome == "running").any())
    live = open_attempts and time.time() - last < HEARTBEAT_TIMEOUT_S
    if (st["status"] == STATUSES[FAILED]).any():
        state = "failed"
    elif open_attempts:
        state = "running" if live else "interrupted"
    elif len(st) and set(attempts["stage"]) <= set(st.loc[st["status"] == STATUSES[END], "stage"]):
        state = "succeeded"
    else:
        state = "unknown"
    ev = Evidence(
        job=rows.execution_id,
        source=f"{SCHEME}{rows.url.split('://', 1)[1]}/{rows.execution_id}",
        now=time.time() if live else last,
        state=state,
        attempts=attempts,
        samples=samples,
        stages=_stages(attempts, st),
        warnings=warnings,
        provenance=[PROVENANCE],
    )
    interval = _saved_interval(rows.worker)
    if interval is None:
        interval = _sample_interval(ts[status == RUNNING], np.cumsum(new_shard)[status == RUNNING])
    if interval:
        ev.config["heartbeat_interval"] = interval
    return ev


def _stage_rows(rows: Rows, warnings: list[str]) -> pd.DataFrame:
    """The zephyr.stage rows, one DataFrame row each (stage and status as strings)."""
    import numpy as np
    import pandas as pd

    if rows.stage is None:
        return pd.DataFrame({c: [] for c in STAGE_FIELDS.values()})
    cols, names = _columns(rows.stage, STAGE_FIELDS, warnings, f"{rows.url} {STAGE_TABLE}")
    cols["stage"], cols["status"] = names[cols["stage"]], np.array(STATUSES, dtype=object)[cols["status"]]
    return pd.DataFrame(cols)


def _saved_interval(worker: pa.Table) -> float | None:
    """0 for none: a summarised read measured the interval on the server (its metadata says it),
    else None."""
    from zephyr_debug.sources.finelog_summary import META_INTERVAL

    saved = (worker.schema.metadata or {}).get(META_INTERVAL)
    return None if saved is None else float(saved) if saved else 0.0


def _sample_interval(ts, shard_serial) -> float | None:
    """The median gap between a shard's consecutive RUNNING rows (`ts` sorted within each shard;
    Zephyr samples at its heartbeat cadence, 5 s): the rows name no worker, so the analysis
    cannot measure it per worker."""
    import numpy as np

    gaps = np.diff(ts)[(shard_serial[1:] == shard_serial[:-1])] if len(ts) > 1 else np.zeros(0)
    gaps = gaps[gaps > 0]
    return round(float(np.median(gaps)), 3) if len(gaps) else None


def _stages(attempts: pd.DataFrame, st: pd.DataFrame) -> list[StageInfo]:
    """One StageInfo per stage seen, ordered by Zephyr's `stage<N>-` label (else by first start),
    with the zephyr.stage row's totals when there is one."""
    first = attempts.groupby("stage", sort=False)["start_ts"].min()
    shards = attempts.groupby("stage", sort=False)["shard"].nunique()
    rows = st.drop_duplicates("stage", keep="last").set_index("stage") if len(st) else None
    names = list(dict.fromkeys([*first.index, *([] if rows is None else rows.index)]))

    def order(name: str) -> tuple[int, float]:
        m = STAGE_INDEX_RE.match(name)
        return (int(m.group(1)) if m else 1 << 30, float(first.get(name, float("inf"))))

    out = []
    for i, name in enumerate(sorted(names, key=order)):
        row = rows.loc[name] if rows is not None and name in rows.index else None
        total = row["total_shards"] if row is not None and row["total_shards"] == row["total_shards"] else None
        info = StageInfo(
            name=name,
            index=i,
            total=int(total if total is not None else shards.get(name, 0)),
            start_ts=_float(first.get(name)),
        )
        if row is not None:
            info.end_ts = _float(row["ts"]) if row["status"] == STATUSES[END] else None
            info.totals = {
                k: float(row[k])
                for k in STAGE_FIELDS.values()
                if k not in ("stage", "status", "ts") and row[k] == row[k]
            }
            if info.start_ts is None and info.end_ts is not None and "elapsed_s" in info.totals:
                info.start_ts = info.end_ts - info.totals["elapsed_s"]
        out.append(info)
    return out


def _float(value) -> float | None:
    return None if value is None or value != value else float(value)


def load(target: str) -> Evidence:
    url, execution_id = parse(target)
    return to_evidence(fetch(url, execution_id))


def merge(ev: Evidence, url: str, execution_id: str | None = None) -> Evidence:
    """`ev` with the telemetry of its execution (or `execution_id`) from the finelog server at
    `url` merged in (`attach`); an unreadable server is a warning, never a lost `ev`."""
    try:
        tel = to_evidence(fetch(server_url(url), execution_id or ev.job))
    except EvidenceError as exc:
        ev.warnings.append(f"finelog telemetry not merged: {exc}")
        return ev
    return attach(ev, tel)


def attach(ev: Evidence, tel: Evidence) -> Evidence:
    """Telemetry `tel` merged into `ev` (in place): each telemetry attempt joins the attempt of
    `ev` of the same (stage, shard) whose span holds its start (merge_asof), fills that attempt's
    missing items / bytes / peak memory / CPU time and names the worker on its samples; attempts
    of shards `ev` does not know are added. What `ev` had is never overwritten."""
    import numpy as np
    import pandas as pd

    if not len(ev.attempts):
        ev.attempts, ev.samples = (
            tel.attempts,
            pd.concat([ev.samples, tel.samples], ignore_index=True) if len(ev.samples) else tel.samples,
        )
        matched = pd.Series(dtype=bool)
    else:
        a = ev.attempts.reset_index(drop=True)
        t = tel.attempts.reset_index(drop=True)
        left = pd.DataFrame(
            {
                "stage": t["stage"].astype(object),
                "shard": t["shard"].astype(float),
                "ts": t["start_ts"].astype(float),
                "t": np.arange(len(t)),
                "attempt": t["attempt"].astype(float),
            }
        )
        right = pd.DataFrame(
            {
                "stage": a["stage"].astype(object),
                "shard": pd.to_numeric(a["shard"], errors="coerce").astype(float),
                "ts": pd.to_numeric(a["start_ts"], errors="coerce") - MATCH_SLACK_S,
                "end": pd.to_numeric(a["end_ts"], errors="coerce") + MATCH_SLACK_S,
                "a": np.arange(len(a)),
                "attempt": pd.to_numeric(a["attempt"], errors="coerce"),
            }
        ).dropna(subset=["shard", "ts"])
        # The same attempt number first: a fast-failing attempt's START row comes seconds after the
        # log's `Executing` line, inside the next attempt's span. Then time alone, for the rest.
        same = left.merge(right, on=["stage", "shard", "attempt"], suffixes=("", "_a"))
        same = same[(same["ts"] >= same["ts_a"]) & ~(same["ts"] > same["end"])].drop_duplicates("a")
        rest = pd.merge_asof(
            left[~left["t"].isin(same["t"])].drop(columns="attempt").sort_values("ts"),
            right[~right["a"].isin(same["a"])].drop(columns="attempt").sort_values("ts"),
            on="ts",
            by=["stage", "shard"],
            direction="backward",
        )
        rest = rest[rest["a"].notna() & ~(rest["ts"] > rest["end"])]
        pairs = pd.concat([same[["t", "a"]], rest[["t", "a"]]]).drop_duplicates("a")  # one per log attempt
        ai, ti = pairs["a"].to_numpy(dtype=int), pairs["t"].to_numpy(dtype=int)
        for col in ("items", "bytes", "peak_rss_bytes", "cpu_time_s"):
            if col not in a:
                a[col] = np.nan
            have = pd.to_numeric(a[col], errors="coerce").to_numpy(dtype=float, copy=True)
            have[ai] = np.where(np.isnan(have[ai]), t[col].to_numpy(dtype=float)[ti], have[ai])
            a[col] = have
        known = pd.MultiIndex.from_frame(right[["stage", "shard"]])
        new = ~pd.MultiIndex.from_frame(left[["stage", "shard"]]).isin(known)
        matched = pd.Series(False, index=t.index)
        matched[ti] = True
        unmatched = int((~matched & ~new).sum())
        if unmatched:
            ev.warnings.append(
                f"{tel.source}: {unmatched} telemetry attempt(s) match no attempt of "
                f"{ev.source} in time; their numbers were left out"
            )
        ev.attempts = pd.concat([a, t[new]], ignore_index=True) if new.any() else a
        # The samples of a matched attempt get its worker.
        s = tel.samples
        worker_of = pd.Series(
            a["worker"].to_numpy(dtype=object)[ai],
            index=pd.MultiIndex.from_arrays(
                [
                    t["stage"].to_numpy(dtype=object)[ti],
                    t["shard"].to_numpy(dtype=float)[ti],
                    t["attempt"].to_numpy(dtype=float)[ti],
                ]
            ),
        )
        s_attempt = _sample_attempts(s, t)
        at = worker_of.index.get_indexer(
            pd.MultiIndex.from_arrays([s["stage"].to_numpy(dtype=object), s["shard"].to_numpy(dtype=float), s_attempt])
        )
        s = s.copy()
        s["worker"] = np.where(at >= 0, worker_of.to_numpy(dtype=object)[np.maximum(at, 0)], None)
        ev.samples = pd.concat([ev.samples, s], ignore_index=True) if len(ev.samples) else s
    names = {info.name: info for info in ev.stages}
    for info in tel.stages:
        mine = names.get(info.name)
        if mine is None:
            info.index = len(ev.stages)
            ev.stages.append(info)
        else:
            mine.totals = info.totals
            mine.start_ts = mine.start_ts if mine.start_ts is not None else info.start_ts
            mine.end_ts = mine.end_ts if mine.end_ts is not None else info.end_ts
    if ev.state == "unknown":
        ev.state = tel.state
    if ev.state not in ("running",):
        ev.now = max(ev.now, tel.now)
    ev.config.setdefault("heartbeat_interval", tel.config.get("heartbeat_interval"))
    if ev.config["heartbeat_interval"] is None:
        del ev.config["heartbeat_interval"]
    ev.warnings.extend(tel.warnings)
    ev.provenance = [*ev.provenance, PROVENANCE]
    return ev


def _sample_attempts(samples: pd.DataFrame, attempts: pd.DataFrame):
    """The attempt number of each telemetry sample: the last attempt of its shard started at or
    before it."""
    import numpy as np
    import pandas as pd

    if not len(samples):  # an empty side would not infer pandas' str dtype: merge_asof refuses the pair
        return np.zeros(0)
    left = pd.DataFrame(
        {
            "stage": samples["stage"].to_numpy(dtype=object),
            "shard": samples["shard"].to_numpy(float),
            "ts": samples["ts"].to_numpy(float),
            "i": np.arange(len(samples)),
        }
    )
    right = pd.DataFrame(
        {
            "stage": attempts["stage"].to_numpy(dtype=object),
            "shard": attempts["shard"].to_numpy(float),
            "ts": attempts["start_ts"].to_numpy(float),
            "attempt": attempts["attempt"].to_numpy(float),
        }
    )
    got = pd.merge_asof(left.sort_values("ts"), right.sort_values("ts"), on="ts", by=["stage", "shard"])
    return got.sort_values("i")["attempt"].to_numpy(dtype=float)
