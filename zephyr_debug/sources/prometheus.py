"""Prometheus source: one run's Evidence rebuilt from the coordinator's metrics.

Target: `prometheus+http://HOST:9090[/prefix]?run=EXEC_ID[&window=7d]` (no `run`: the run that
progressed last). Raw samples (range selectors, one row per scrape) give the status series
and the per-worker samples; the per-attempt gauges' last values give the attempts. The
sampling resolution is the scrape interval, so `config["heartbeat_interval"]` is at least
that. Prometheus holds no traceback text, so `crashes` stays empty.
"""

from __future__ import annotations

import functools
import itertools
import re
import time
from urllib.parse import parse_qs, urlencode, urlsplit

import numpy as np
import pandas as pd

from zephyr_debug.errors import EvidenceError, UsageError
from zephyr_debug.model import (
    ATTEMPT_COLUMNS,
    SAMPLE_COLUMNS,
    STATUS_COLUMNS,
    WORKER_COLUMNS,
    Evidence,
    JobStatus,
    StageInfo,
    frame,
)
from zephyr_debug.sources import http

PREFIX = "prometheus+"
DEFAULT_WINDOW = "7d"
SHARD_METRICS = {
    "start_ts": "zephyr_shard_start_time_seconds",
    "elapsed_s": "zephyr_shard_elapsed_seconds",
    "done": "zephyr_shard_done",
    "items": "zephyr_shard_items",
    "bytes": "zephyr_shard_bytes",
    "kind": "zephyr_shard_attempt_failed",
}  # the last one's value is 1; its `kind` label counts
# Per-worker gauge -> SAMPLE_COLUMNS name.
WORKER_METRICS = {
    "zephyr_worker_memory_bytes": "rss_bytes",
    "zephyr_worker_memory_peak_bytes": "rss_peak_bytes",
    "zephyr_worker_disk_bytes": "disk_bytes",
    "zephyr_worker_cpu_percent": "cpu_pct",
    "zephyr_worker_shard": "shard",
    "zephyr_worker_shard_items": "items",
    "zephyr_worker_shard_bytes": "bytes",
}
RUN_RE = re.compile(r"^[\w.:-]{1,200}$")
WINDOW_RE = re.compile(r"^\d+[smhdwy]$")
STAGE_RE = re.compile(r"^stage(\d+)-")


def is_target(target: str) -> bool:
    return target.startswith(PREFIX)


def target(url: str, run: str | None = None) -> str:
    """The load() target for a Prometheus URL and an optional run."""
    return PREFIX + url.rstrip("/") + (f"?{urlencode({'run': run})}" if run else "")


def parse(spec: str) -> tuple[str, str | None, str]:
    """`prometheus+URL?run=R&window=W` -> (URL, run or None, window)."""
    parts = urlsplit(spec.removeprefix(PREFIX))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"{spec}: expected prometheus+http://HOST:PORT[?run=EXEC_ID]")
    query = parse_qs(parts.query)
    unknown = set(query) - {"run", "window"}
    if unknown:
        raise UsageError(f"{spec}: unknown parameter(s) {', '.join(sorted(unknown))} (run, window)")
    run = query.get("run", [None])[-1]
    window = query.get("window", [DEFAULT_WINDOW])[-1]
    if run is not None and not RUN_RE.match(run):
        raise UsageError(f"{spec}: run {run[:60]!r} is not an execution id")
    if not WINDOW_RE.match(window):
        raise UsageError(f"{spec}: window {window[:20]!r} is not a Prometheus duration like 6h or 7d")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}", run, window


class Client:
    """The one Prometheus HTTP API call this source needs (an instant query), with one-line errors."""

    def __init__(self, url: str):
        self.url = url

    def query(self, promql: str) -> list[dict]:
        reply = http.get(self.url + "/api/v1/query", {"query": promql}, what="Prometheus")
        body = reply.json("Prometheus answer")
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            raise EvidenceError(f"{self.url}: query failed: HTTP {reply.status}: {str(error or body)[:200]}")
        data = body.get("data")
        result = data.get("result") if isinstance(data, dict) else None
        if not isinstance(result, list):
            raise EvidenceError(f"{self.url}: query failed: no result list in the answer")
        return result


def load(spec: str) -> Evidence:
    url, run, window = parse(spec)
    client = Client(url)
    if run is None:
        latest = client.query(f"topk(1, max by (run) (max_over_time(progress_time_seconds[{window}])))")
        if not latest:
            raise EvidenceError(f"{url}: no Zephyr run (progress_time_seconds) in the last {window}")
        run = latest[0]["metric"]["run"]
    sel = f'run="{run}"'
    shard_names = "|".join(SHARD_METRICS.values())  # read as last values below, not raw
    raw = _samples(client.query(f'{{{sel}, __name__!~"{shard_names}"}}[{window}]'))
    if raw.empty or "zephyr_stage_index" not in set(raw["name"]):
        raise EvidenceError(f"{url}: no samples of run {run} in the last {window} (is it scraped?)")
    shards = _shard_rows(client, sel, window)
    present = bool(client.query(f"zephyr_pipeline_done{{{sel}}}"))
    return _evidence(f"{PREFIX}{url}?run={run}", run, raw, shards, present)


def _samples(result: list[dict]) -> pd.DataFrame:
    """Matrix result -> one row per sample: name, the labels we use, ts, value."""
    cols: dict[str, list] = {
        k: [] for k in ("name", "stage", "worker", "state", "kind", "setting", "shard", "ts", "value")
    }
    for series in result:
        labels, values = series["metric"], series.get("values", [])
        for key in ("stage", "worker", "state", "kind", "setting", "shard"):
            cols[key].extend([labels.get(key)] * len(values))
        cols["name"].extend([labels.get("__name__")] * len(values))
        cols["ts"].extend(float(ts) for ts, _ in values)
        cols["value"].extend(float(v) for _, v in values)
    return pd.DataFrame(cols)


def _shard_rows(client: Client, sel: str, window: str) -> pd.DataFrame:
    """Last value of each per-attempt gauge, one row per (stage, shard, attempt, worker)."""
    keys = ["stage", "shard", "attempt", "worker"]
    parts = []
    for column, metric in SHARD_METRICS.items():
        rows = [
            {
                **{k: s["metric"].get(k) for k in keys},
                column: s["metric"].get("kind") if column == "kind" else float(s["value"][1]),
            }
            for s in client.query(f"last_over_time({metric}{{{sel}}}[{window}])")
        ]
        parts.append(pd.DataFrame(rows, columns=keys + [column]))
    merged = functools.reduce(lambda left, right: left.merge(right, on=keys, how="outer"), parts)
    merged["shard"] = merged["shard"].astype(int)
    merged["attempt"] = merged["attempt"].astype(int)
    return merged


def _evidence(source: str, run: str, raw: pd.DataFrame, shards: pd.DataFrame, present: bool) -> Evidence:
    by_name = dict(tuple(raw.groupby("name")))

    def series(name: str) -> pd.DataFrame:
        return by_name.get(name, raw.iloc[0:0])

    def last(name: str, default: float = 0.0) -> float:
        s = series(name)
        return float(s.loc[s["ts"].idxmax(), "value"]) if len(s) else default

    last_ts = float(raw["ts"].max())
    ev = Evidence(job=run, source=source, now=time.time() if present else last_ts)
    ev.config = {r.setting: r.value for r in series("zephyr_coordinator_setting").sort_values("ts").itertuples()}
    scrape = float(np.median(np.diff(np.unique(series("zephyr_stage_index")["ts"])))) if len(raw) > 1 else 0.0
    ev.config.update(
        scrape_interval=scrape, heartbeat_interval=max(ev.config.get("heartbeat_interval", 0.0), np.nan_to_num(scrape))
    )
    ev.progress_time = last("progress_time_seconds") if len(series("progress_time_seconds")) else None
    ev.counters = {
        name: float(s.loc[s["ts"].idxmax(), "value"])
        for name, s in by_name.items()
        if not name.startswith("zephyr_") and name != "progress_time_seconds"
    }
    ev.status = _status(series)
    ev.stages = _stages(series)
    done, failed = last("zephyr_pipeline_done"), last("zephyr_pipeline_failed")
    complete = (
        bool(len(ev.status))
        and last("zephyr_stage_index") == last("zephyr_stages") - 1
        and ev.status["completed"].iloc[-1] == ev.status["total"].iloc[-1]
    )
    if failed:
        ev.state, ev.fatal_error = (
            "failed",
            "pipeline aborted (Prometheus holds no error text: see the coordinator log)",
        )
    elif done or (complete and not present):  # finished, maybe between the last two scrapes
        ev.state = "succeeded"
        # The last completion set progress_time; without a scrape after it, the last scrape is the bound.
        ev.stages[-1].end_ts = ev.progress_time if done else last_ts
    else:
        ev.state = "running" if present else "interrupted"
    ev.attempts = _attempts(shards, ev.stages)
    ev.samples = _worker_samples(series, ev.status)
    ev.workers = _workers(series, ev.now)
    if ev.state == "running" and len(ev.status):
        row = ev.status.iloc[-1]
        ev.live = JobStatus(
            stage=row["stage"],
            completed=int(row["completed"]),
            total=int(row["total"]),
            retries=int(row["retries"]),
            in_flight=int(row["in_flight"]),
            queue_depth=int(row["queue_depth"]),
            done=False,
            workers={w.worker: {"state": w.state, "last_seen_ago": w.last_seen_ago} for w in ev.workers.itertuples()},
        )
    ev.warnings.append("Prometheus holds no crash texts: read tracebacks from the job dir or the logs")
    return ev


def _status(series) -> pd.DataFrame:
    """One row per scrape: the current stage's counts and the workers by state."""
    keys = ["ts", "stage"]
    cur = series("zephyr_shards_in_flight")[keys + ["value"]].rename(columns={"value": "in_flight"})
    for name, column in (
        ("zephyr_queue_depth", "queue_depth"),
        ("zephyr_stage_retries", "retries"),
        ("zephyr_shards_completed", "completed"),
        ("zephyr_shards_total", "total"),
    ):
        cur = cur.merge(series(name)[keys + ["value"]].rename(columns={"value": column}), on=keys, how="left")
    workers = series("zephyr_workers").pivot_table(index="ts", columns="state", values="value", aggfunc="last")
    counts = pd.DataFrame({"alive": workers.get("active", 0), "registered": workers.sum(axis=1)}, index=workers.index)
    counts["dead"] = counts["registered"] - counts["alive"]
    out = cur.merge(counts, left_on="ts", right_index=True, how="left").sort_values("ts")
    return frame(out.to_dict("records"), STATUS_COLUMNS)


def _stages(series) -> list[StageInfo]:
    totals = series("zephyr_shards_total").sort_values("ts").groupby("stage")["value"].last()
    starts = series("zephyr_stage_start_time_seconds").groupby("stage")["value"].min()
    stages: list[StageInfo] = []
    for name, total in totals.items():
        match = STAGE_RE.match(name)
        start = starts.get(name)
        stages.append(
            StageInfo(
                name,
                int(match[1]) if match else len(stages),
                int(total),
                start_ts=None if start is None else float(start),
            )
        )
    stages.sort(key=lambda s: s.index)
    for before, after in itertools.pairwise(stages):
        before.end_ts = after.start_ts
    return stages


def _attempts(shards: pd.DataFrame, stages: list[StageInfo]) -> pd.DataFrame:
    """One row per attempt series; an attempt whose stage ended after its last scrape is done."""
    if shards.empty:
        return frame([], ATTEMPT_COLUMNS)
    a = shards.copy()
    ended = pd.Series({s.name: s.end_ts for s in stages if s.end_ts is not None}, dtype=float)
    stage_end = a["stage"].map(ended)
    latest = a.groupby(["stage", "shard"])["attempt"].transform("max")
    done, failed = a["done"] == 1, a["kind"].notna() | (a["attempt"] < latest)
    late = ~done & ~failed & stage_end.notna()
    a["outcome"] = np.select([done | late, failed], ["done", "failed"], "running")
    a["end_ts"] = (a["start_ts"] + a["elapsed_s"]).where(done | failed, stage_end)
    a["elapsed_s"] = (a["end_ts"] - a["start_ts"]).where(a["outcome"] != "running")
    a["worker"] = a["worker"].replace("", None)
    a[["items", "bytes"]] = a[["items", "bytes"]].where(a["outcome"] != "failed")  # as the job dir: unknown
    return frame(a.sort_values(["stage", "shard", "attempt"]).to_dict("records"), ATTEMPT_COLUMNS)


def _worker_samples(series, status: pd.DataFrame) -> pd.DataFrame:
    parts = [series(name)[["ts", "worker", "value"]].assign(column=column) for name, column in WORKER_METRICS.items()]
    long = pd.concat(parts)
    if long.empty:
        return frame([], SAMPLE_COLUMNS)
    wide = long.pivot_table(index=["ts", "worker"], columns="column", values="value", aggfunc="last").reset_index()
    active = series("zephyr_worker_last_seen_seconds")
    active = active[active["state"] == "active"][["ts", "worker"]]
    wide = wide.merge(active, on=["ts", "worker"])  # only while the worker is alive, like heartbeats
    wide = wide.merge(status[["ts", "stage"]], on="ts", how="left")
    return frame(wide.to_dict("records"), SAMPLE_COLUMNS)


def _workers(series, now: float) -> pd.DataFrame:
    seen = series("zephyr_worker_last_seen_seconds").sort_values("ts").groupby("worker").last()
    rows = []
    for worker, r in seen.iterrows():

        def latest(name: str, scale: float = 1.0, worker=worker):
            s = series(name)
            s = s[s["worker"] == worker]
            return None if s.empty else round(float(s.loc[s["ts"].idxmax(), "value"]) / scale, 2)

        held = series("zephyr_worker_shard")
        held = held[(held["worker"] == worker) & (held["ts"] == r["ts"])]
        rows.append(
            {
                "worker": worker,
                "state": r["state"],
                "last_seen_ago": round(r["value"] + now - r["ts"], 3),
                "memory_mb": latest("zephyr_worker_memory_bytes", 1 << 20),
                "memory_peak_mb": latest("zephyr_worker_memory_peak_bytes", 1 << 20),
                "disk_mb": latest("zephyr_worker_disk_bytes", 1 << 20),
                "cpu": latest("zephyr_worker_cpu_percent"),
                "shard": int(held["value"].iloc[0]) if len(held) else None,
            }
        )
    return frame(rows, WORKER_COLUMNS)
