"""Which shards hold a stage up, and why.

A shard is a straggler when its elapsed time exceeds BOTH `multiplier` x the median of its
stage's finished peers (Flink's slow-task rule) AND their `quantile`, once at least
`min_finished` of the stage has finished (Spark's speculation gate), and it is at least
`min_excess_heartbeats` heartbeat intervals above the median (differences below the
heartbeat's resolution are noise). Failures, dead holders and stalls are findings whatever
the peers say. Each finding names its causes (CAUSES, most specific first), the numbers
behind them and the next command to run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from zephyr_debug.analyze.tail import episodes, stage_bounds
from zephyr_debug.model import (
    ALIVE_STATES,
    HEARTBEAT_INTERVAL_S,
    HEARTBEAT_TIMEOUT_S,
    INFRA,
    MAX_SHARD_FAILURES,
    MAX_SHARD_INFRA_FAILURES,
    TASK,
    Evidence,
)

# Primary cause = the first of a finding's causes in this order.
CAUSES = ["all-workers-dead", "oom", "crash-loop", "dead-holder", "stuck", "slow-worker", "data-skew"]


@dataclass(frozen=True)
class Thresholds:
    """The knobs (the CLI flags of `zdebug stragglers`)."""

    multiplier: float = 1.5  # elapsed > multiplier x median of finished peers (Flink: 1.5)
    quantile: float = 0.75  # ... and > this quantile of finished peers
    min_finished: float = 0.75  # judge elapsed only once this share of the stage finished (Spark: 0.75)
    min_excess_heartbeats: float = 4.0  # ... and elapsed - median >= this many heartbeat intervals
    stuck_heartbeats: int = 8  # items unchanged for this many heartbeat intervals = stuck
    skew_items: float = 1.5  # items >= this x the stage median = far more data
    normal_rate: float = 0.67  # rate >= this x the stage median rate = normal speed
    memory_near: float = 0.9  # RSS >= this x the memory limit = near the limit
    repeated_failures: int = 2  # failed attempts of one shard that make a crash loop
    skew_cpu: float = 1.25  # CPU >= this x the stage median = expensive records (when the worker is unknown)


def analyze(ev: Evidence, th: Thresholds = Thresholds()) -> dict:
    """`{"job", "stages", "tail", "findings", "thresholds"}` (the --json contract)."""
    hb = _heartbeat_interval(ev)
    shards = _shards(ev, hb, th)
    stages = _stage_stats(ev, shards)
    shards = _judge(ev, shards, stages, hb, th)
    findings = [_finding(ev, row, hb, th) for row in shards[shards["flag"]].itertuples()]
    findings.sort(key=lambda f: (CAUSES.index(f["cause"]), -(f["elapsed_s"] or 0)))
    return {"job": ev.job, "state": ev.state, "source": ev.source,
            "stages": stages.reset_index().to_dict("records"), "tail": episodes(ev), "findings": findings,
            "thresholds": {**asdict(th), "heartbeat_interval_s": hb}, "warnings": ev.warnings}


def _heartbeat_interval(ev: Evidence) -> float:
    """Configured, else the median gap between one worker's samples, else Zephyr's 5 s."""
    value = ev.config.get("heartbeat_interval")
    if value:
        return float(value)
    s = ev.samples
    if len(s) > 1:
        gaps = pd.to_numeric(s["ts"], errors="coerce").groupby(s["worker"]).diff().dropna()
        if len(gaps) and gaps.median() > 0:
            return float(gaps.median())
    return HEARTBEAT_INTERVAL_S


def _num(frame: pd.DataFrame, col: str) -> pd.Series:
    if col not in frame:
        return pd.Series(np.nan, index=frame.index, dtype=float)
    return pd.to_numeric(frame[col], errors="coerce")


def _progress(ev: Evidence, hb: float) -> pd.DataFrame:
    """Per (stage, shard, worker) from heartbeat samples: last items/ts, longest and current
    no-progress span (seconds), peak RSS and mean CPU while holding the shard."""
    s = ev.samples
    cols = ["stage", "shard", "worker", "last_ts", "last_items", "plateau_s", "plateau_now_s", "rss_max", "cpu"]
    if not len(s):
        empty = pd.DataFrame({c: pd.Series(dtype=float if i > 2 else object) for i, c in enumerate(cols)})
        return empty.set_index(["stage", "shard", "worker"])
    s = pd.DataFrame({"stage": s["stage"], "shard": _num(s, "shard"), "worker": s["worker"], "ts": _num(s, "ts"),
                      "items": _num(s, "items"), "rss": _num(s, "rss_bytes"), "cpu": _num(s, "cpu_pct")})
    s = s.dropna(subset=["shard", "ts"]).sort_values(["worker", "ts"], kind="stable")
    key = (s["worker"] != s["worker"].shift()) | (s["shard"] != s["shard"].shift()) | (s["stage"] != s["stage"].shift())
    # A gap of several heartbeats (the worker died and came back) also ends a no-progress span.
    gap = s["ts"].diff() > 3 * hb
    moved = key | gap | (s["items"] != s["items"].shift()) | s["items"].isna()
    s["run"] = moved.cumsum()
    span = s.groupby("run")["ts"].agg(["first", "last"])
    s["plateau"] = s["run"].map(span["last"] - span["first"])
    g = s.groupby(["stage", "shard", "worker"], sort=False)
    out = g.agg(last_ts=("ts", "last"), last_items=("items", "last"), plateau_s=("plateau", "max"),
                plateau_now_s=("plateau", "last"), rss_max=("rss", "max"), cpu=("cpu", "mean"))
    out.index = out.index.set_levels(out.index.levels[1].astype(int), level=1)
    return out


def _shards(ev: Evidence, hb: float, th: Thresholds) -> pd.DataFrame:
    """One row per (stage, shard): span, attempts, failures, and its current/last attempt."""
    a = ev.attempts
    cols = ["stage", "shard"]
    if not len(a):
        return pd.DataFrame(columns=cols + ["done", "elapsed_s"]).set_index(cols)
    a = pd.DataFrame({
        "stage": a["stage"], "shard": _num(a, "shard"), "attempt": _num(a, "attempt").fillna(0),
        "worker": a["worker"], "start": _num(a, "start_ts"), "end": _num(a, "end_ts"), "outcome": a["outcome"],
        "kind": a["kind"], "secs": _num(a, "elapsed_s"), "items": _num(a, "items"), "bytes": _num(a, "bytes"),
        "peak": _num(a, "peak_rss_bytes"), "rc": _num(a, "returncode"),
        "failure": a["failure"] if "failure" in a else None, "reason": a["reason"] if "reason" in a else None})
    a = a.dropna(subset=["shard"])
    a["shard"] = a["shard"].astype(int)
    running = a["outcome"] == "running"
    failed = a["outcome"] == "failed"
    a["secs"] = a["secs"].fillna(a["end"] - a["start"]).where(~running, ev.now - a["start"])
    progress = _progress(ev, hb)
    a = a.join(progress["rss_max"], on=["stage", "shard", "worker"])
    a["rss_max"] = np.fmax(a["rss_max"], a["peak"])
    limit = ev.config.get("memory_limit_mb")
    near = (a["rss_max"] >= th.memory_near * float(limit) * (1 << 20)) if limit else False
    a["oom"] = failed & ((a["failure"] == "oom") | (a["rc"] == -9) | near)
    a["task_fail"] = failed & (a["kind"] == TASK)
    a["infra_fail"] = failed & (a["kind"] == INFRA)
    a["burned"] = a["secs"].where(failed, 0.0)
    a["is_done"] = a["outcome"] == "done"
    a = a.sort_values(["stage", "shard", "attempt"], kind="stable")
    g = a.groupby(cols, sort=False)
    out = g.agg(first_start=("start", "min"), last_end=("end", "max"), done=("is_done", "any"),
                attempts=("attempt", "size"), task_failures=("task_fail", "sum"),
                infra_failures=("infra_fail", "sum"), oom_attempts=("oom", "sum"), burned_s=("burned", "sum"),
                secs_total=("secs", "sum"), rss_max=("rss_max", "max"))
    last = a.drop_duplicates(cols, keep="last").set_index(cols)
    out = out.join(last[["worker", "outcome", "start", "secs", "items", "bytes", "reason"]])
    span_end = out["last_end"].where(out["done"], ev.now)
    out["elapsed_s"] = (span_end - out["first_start"]).fillna(out["secs_total"])
    out["failed_workers"] = a[a["task_fail"] | a["infra_fail"]].groupby(cols)["worker"].nunique()
    out["failed_workers"] = out["failed_workers"].fillna(0).astype(int)
    out = out.join(progress.drop(columns="rss_max"), on=["stage", "shard", "worker"])
    # Progress so far of a running attempt comes from its heartbeat samples.
    live = out["outcome"] == "running"
    since = (out["last_ts"] - out["start"]).where(out["last_ts"] >= out["start"])
    out["items"] = out["items"].where(~live, out["last_items"].where(since.notna()))
    out["rate_secs"] = out["secs"].where(~live, since)
    out["rate"] = out["items"] / out["rate_secs"].where(out["rate_secs"] > 0)
    return out


def _stage_stats(ev: Evidence, shards: pd.DataFrame) -> pd.DataFrame:
    """Per stage: totals and the finished shards' elapsed median/p90/p99, items and rate medians."""
    bounds = stage_bounds(ev)
    totals = {s.name: s.total for s in ev.stages}
    if not len(shards):
        return pd.DataFrame(columns=["stage", "total", "done", "running"]).set_index("stage")
    by = shards.groupby(level="stage", sort=False)
    done = shards[shards["done"]].groupby(level="stage")
    st = pd.DataFrame({"seen": by.size(), "done": by["done"].sum().astype(int),
                       "running": by["outcome"].apply(lambda o: int((o == "running").sum()))})
    st["total"] = [max(totals.get(name, 0), seen) for name, seen in zip(st.index, st["seen"])]
    st["median_s"] = done["elapsed_s"].median()
    st["p90_s"] = done["elapsed_s"].quantile(0.9)
    st["p99_s"] = done["elapsed_s"].quantile(0.99)
    st["median_items"] = done["items"].median()
    st["median_rate"] = done["rate"].median()
    st["median_cpu"] = done["cpu"].median()
    st["wall_s"] = bounds["wall_s"].reindex(st.index)
    order = {s.name: s.index for s in ev.stages}
    st = st.drop(columns="seen").sort_index(key=lambda idx: idx.map(lambda n: order.get(n, len(order))))
    st.index.name = "stage"
    return st.round(4)


def _loo_quantile(sorted_vals: np.ndarray, drop_rank: np.ndarray, q: float) -> np.ndarray:
    """Quantile q of `sorted_vals` without the element at `drop_rank` (len(vals) = drop none),
    vectorised over drop_rank; linear interpolation as numpy's default."""
    n = len(sorted_vals) - (drop_rank < len(sorted_vals))
    pos = q * (n - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, n - 1)

    def at(i):
        i = i + (i >= drop_rank)
        return sorted_vals[np.clip(i, 0, len(sorted_vals) - 1)]

    frac = pos - lo
    return np.where(n > 0, at(lo) * (1 - frac) + at(hi) * frac, np.nan)


def _judge(ev: Evidence, shards: pd.DataFrame, stages: pd.DataFrame, hb: float, th: Thresholds) -> pd.DataFrame:
    """Adds the peer statistics (leave-one-out), the elapsed flag and the non-elapsed flags."""
    if not len(shards):
        return shards.assign(flag=pd.Series(dtype=bool))
    out = shards.copy()
    n = len(out)
    stage_code, stage_names = pd.factorize(out.index.get_level_values("stage"))
    st = stages.reindex(stage_names)

    def per_stage(col: str) -> np.ndarray:
        return st[col].to_numpy(dtype=float)[stage_code]

    done = out["done"].to_numpy(dtype=bool)
    elapsed = out["elapsed_s"].to_numpy(dtype=float)
    names = {"median_s": 0.5, "p90_s": 0.9, "p99_s": 0.99, "q_s": th.quantile}
    stats = {name: np.full(n, np.nan) for name in [*names, "peers"]}
    order = np.argsort(stage_code, kind="stable")
    bounds = np.searchsorted(stage_code[order], np.arange(len(stage_names) + 1))
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        idx = order[lo:hi]
        fin = done[idx] & ~np.isnan(elapsed[idx])
        finished = np.sort(elapsed[idx][fin])
        if not len(finished):
            continue
        rank = np.where(fin, np.searchsorted(finished, elapsed[idx]), len(finished))
        for name, q in names.items():
            stats[name][idx] = _loo_quantile(finished, rank, q)
        stats["peers"][idx] = len(finished) - fin
    for name, values in stats.items():
        out[name] = values
    med = stats["median_s"]
    gate = (stats["peers"] >= 1) & (per_stage("done") >= th.min_finished * per_stage("total"))
    with np.errstate(invalid="ignore", divide="ignore"):
        out["ratio_to_median"] = np.where(med > 0, elapsed / med, np.nan)
        out["slow"] = (gate & (elapsed > th.multiplier * med) & (elapsed > stats["q_s"])
                       & (elapsed - med >= th.min_excess_heartbeats * hb))
        # Rates relative to the stage's finished shards; a worker's speed = geometric mean of its
        # other finished shards' speed (rate ratio, or median/elapsed without item counts).
        out["items_ratio"] = out["items"].to_numpy(dtype=float) / per_stage("median_items")
        rate_ratio = out["rate"].to_numpy(dtype=float) / per_stage("median_rate")
        out["rate_ratio"] = rate_ratio
        out["cpu_ratio"] = out["cpu"].to_numpy(dtype=float) / per_stage("median_cpu")
        speed = np.where(np.isnan(rate_ratio), med / elapsed, rate_ratio)
        log = np.where(done & (speed > 0), np.log(np.where(speed > 0, speed, 1.0)), np.nan)
    worker_code, worker_names = pd.factorize(out["worker"])
    own = ~np.isnan(log) & (worker_code >= 0)
    wsum = np.bincount(worker_code[own], weights=log[own], minlength=len(worker_names))
    wcount = np.bincount(worker_code[own], minlength=len(worker_names))
    known = worker_code >= 0
    others = np.where(known, wcount[worker_code] - own, 0)
    out["worker_shards"] = others
    with np.errstate(invalid="ignore", divide="ignore"):
        out["worker_speed"] = np.where(others > 0, np.exp((wsum[worker_code] - np.where(own, log, 0.0)) / others),
                                       np.nan)
    # Holders and liveness.
    timeout = float(ev.config.get("heartbeat_timeout") or HEARTBEAT_TIMEOUT_S)
    w = ev.workers.drop_duplicates("worker", keep="last").set_index("worker")
    w_seen = pd.to_numeric(w["last_seen_ago"], errors="coerce")
    w_alive = w["state"].isin(ALIVE_STATES) & ~(w_seen > timeout)
    holder = w.reindex(worker_names)
    pick = np.where(known, worker_code, 0)
    out["holder_state"] = np.where(known, holder["state"].to_numpy(dtype=object)[pick] if len(holder) else None,
                                   None)
    out["holder_seen_ago"] = np.where(known, w_seen.reindex(worker_names).to_numpy(dtype=float)[pick]
                                      if len(holder) else np.nan, np.nan)
    out["holder_alive"] = np.where(known, w_alive.reindex(worker_names, fill_value=False).to_numpy(dtype=bool)[pick]
                                   if len(holder) else False, False)
    active = ev.state in ("running", "interrupted")
    lost_all = len(w) > 0 and not w_alive.any() and not (w["state"] == "done").all() and ev.state != "succeeded"
    running = (out["outcome"] == "running").to_numpy(dtype=bool)
    starts = out["first_start"]
    current = ev.stages[-1].name if ev.stages else (starts.idxmax() if starts.notna().any() else out.index[-1])[0]
    out["all_dead"] = lost_all & ~done & (stage_names[stage_code] == current)
    out["dead_now"] = active & running & ~out["holder_alive"]
    out["stuck_now"] = active & running & out["holder_alive"] & (out["plateau_now_s"] >= th.stuck_heartbeats * hb)
    out["crash_loop"] = out["task_failures"] + out["infra_failures"] >= th.repeated_failures
    out["flag"] = (out["slow"] | out["all_dead"] | out["dead_now"] | out["stuck_now"] | out["crash_loop"]
                   | (out["oom_attempts"] > 0) | (out["infra_failures"] > 0))
    return out


def _finding(ev: Evidence, r, hb: float, th: Thresholds) -> dict:
    """Causes, evidence sentences and the next command for one flagged shard."""
    job, stage, shard = ev.job, r.Index[0], int(r.Index[1])
    worker = r.worker if isinstance(r.worker, str) else None
    causes: dict[str, str] = {}
    ev_lines: list[str] = []
    if r.slow:
        ev_lines.append(f"elapsed {r.elapsed_s:.1f}s = {r.ratio_to_median:.1f}x the median {r.median_s:.1f}s of "
                        f"{int(r.peers)} finished peer(s), above their p{th.quantile * 100:g} {r.q_s:.1f}s "
                        f"(p90 {r.p90_s:.1f}s, p99 {r.p99_s:.1f}s)")
    task_max = int(ev.config.get("max_task_failures") or MAX_SHARD_FAILURES)
    infra_max = int(ev.config.get("max_infra_failures") or MAX_SHARD_INFRA_FAILURES)
    crash_next = f"zdebug crashes {job} --shard {shard} --dedupe"
    if r.all_dead:
        causes["all-workers-dead"] = "zdebug playbook all-workers-dead"
        ev_lines.append(f"no live worker left ({len(ev.workers)} registered, none alive): the shard cannot finish")
    if r.oom_attempts > 0:
        causes["oom"] = crash_next
        limit = ev.config.get("memory_limit_mb")
        peak = f", peak RSS {r.rss_max / (1 << 20):.0f} MB" if r.rss_max == r.rss_max else ""
        ev_lines.append(f"{int(r.oom_attempts)} attempt(s) ended by SIGKILL/MemoryError or at the memory limit"
                        f"{peak}{f' of {limit} MB' if limit else ''}")
    if r.crash_loop or (r.slow and r.task_failures > 0):
        causes["crash-loop"] = crash_next
        ev_lines.append(f"failed {int(r.task_failures)}/{task_max} TASK and {int(r.infra_failures)}/{infra_max} "
                        f"INFRA times on {int(r.failed_workers)} worker(s); "
                        f"{r.burned_s:.1f}s ({r.burned_s / 3600:.4f} worker-hours) burned on failed attempts")
    if r.dead_now or r.infra_failures > 0:
        causes["dead-holder"] = f"zdebug workers {job} --sort memory"
        if r.dead_now:
            ev_lines.append(f"holder {worker} is {r.holder_state}, last seen {r.holder_seen_ago:.1f}s ago")
        if r.infra_failures > 0:
            reason = r.reason if isinstance(r.reason, str) and r.outcome == "failed" else "worker lost"
            ev_lines.append(f"{int(r.infra_failures)} attempt(s) lost with their worker (last: {reason}); "
                            f"the shard was requeued")
    stuck_s = r.plateau_now_s if r.stuck_now else r.plateau_s
    if r.stuck_now or (r.slow and not r.dead_now and stuck_s >= th.stuck_heartbeats * hb):
        causes["stuck"] = f"zdebug dump {worker} --job {job}"
        ev_lines.append(f"no progress for {stuck_s:.1f}s ({stuck_s / hb:.0f} heartbeats) at "
                        f"{_count(r.last_items)} items while {worker} stayed alive"
                        + ("" if r.stuck_now else " (it resumed later)"))
    if r.slow and not causes:
        causes.update(_rate_causes(job, worker, r, th, ev_lines))
    if not causes:  # flagged by elapsed alone with no better explanation
        causes["data-skew" if (r.items_ratio or 0) >= th.skew_items else "slow-worker"] = \
            f"zdebug profile {worker} --job {job}"
    ordered = sorted(causes, key=CAUSES.index)
    return {"shard": shard, "worker": worker, "stage": stage, "cause": ordered[0], "causes": ordered,
            "elapsed_s": _round(r.elapsed_s), "ratio_to_median": _round(r.ratio_to_median),
            "evidence": ev_lines, "next": causes[ordered[0]],
            "metrics": {k: _round(getattr(r, k)) for k in (
                "median_s", "p90_s", "p99_s", "peers", "items", "items_ratio", "rate", "rate_ratio",
                "worker_speed", "worker_shards", "cpu", "cpu_ratio", "task_failures", "infra_failures", "attempts", "burned_s",
                "plateau_s", "rss_max")} | {"done": bool(r.done), "holder_state": r.holder_state}}


def _rate_causes(job: str, worker: str | None, r, th: Thresholds, lines: list[str]) -> dict[str, str]:
    """data-skew vs slow-worker from the shard's rate, item count and its worker's other shards.

    A normal rate on far more items is data-skew. A low rate on a worker that is slow on its
    other shards too is slow-worker; a low rate on a worker that is normal elsewhere means the
    shard's records are expensive (a slow-shard): that is data-skew too, a skew of per-record
    cost, never slow-worker. Without item counts, only the worker comparison decides; with no
    other shard on the worker, CPU decides: a shard burning more CPU than the stage's shards
    has expensive records (data-skew), otherwise the worker is slow.
    """
    profile = f"zdebug profile {worker} --job {job}"
    worker_known = r.worker_shards > 0 and r.worker_speed == r.worker_speed
    # The worker is slow when its other shards look more like this one than like the stage.
    worker_slow = worker_known and r.worker_speed < (1 + min(r.rate_ratio if r.rate == r.rate else
                                                             1 / r.ratio_to_median, 1)) / 2
    if worker_known:
        lines.append(f"{worker} runs its {r.worker_shards} other finished shard(s) at {r.worker_speed:.2f}x "
                     f"the stage speed")
    else:
        worker_slow = not (r.cpu_ratio >= th.skew_cpu)
        cpu = "" if r.cpu_ratio != r.cpu_ratio else f"; the shard used {r.cpu_ratio:.1f}x the stage's median CPU"
        lines.append(f"{worker} finished no other shard to compare with{cpu}")
    if r.rate != r.rate:
        lines.append("no item counts in the evidence: the rate cannot be compared")
        return {"slow-worker": profile} if worker_slow else {"data-skew": profile}
    lines.append(f"{_count(r.items)} items ({r.items_ratio:.1f}x the stage median) at {r.rate:.0f} items/s "
                 f"({r.rate_ratio:.2f}x the stage median rate)")
    causes = {}
    if r.items_ratio >= th.skew_items and r.rate_ratio >= th.normal_rate:
        causes["data-skew"] = "zdebug playbook straggler-tail"
    if r.rate_ratio < th.normal_rate:
        if worker_slow:
            causes["slow-worker"] = profile
        else:
            if worker_known:
                lines.append("same worker is normal elsewhere: the shard's records are expensive (per-record cost skew)")
            causes["data-skew"] = profile
    return causes


def _round(value):
    if value is None or isinstance(value, str):
        return value
    value = float(value)
    if np.isnan(value) or np.isinf(value):
        return None
    return int(value) if value.is_integer() else round(value, 3)


def _count(value) -> str:
    return "?" if value != value or value is None else f"{int(value):,}"
