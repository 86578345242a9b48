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

SHARD_KEYS = ["stage", "shard"]
STAGE_COLUMNS = ["total", "done", "running", "median_s", "p90_s", "p99_s", "median_items", "median_rate",
                 "median_cpu", "wall_s"]
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
    stages = _judge(ev, shards, hb, th)
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
    if pd.api.types.is_float_dtype(frame[col]):
        return frame[col]
    return pd.to_numeric(frame[col], errors="coerce").astype(float)


def _progress(ev: Evidence, hb: float, keys: _Keys, finished_items: pd.Series) -> pd.DataFrame:
    """Per (stage, shard, worker) key from heartbeat samples: last items/ts, longest and current
    no-progress span (seconds; a gap of several heartbeats ends a span: the worker died and
    came back), peak RSS and mean CPU while holding the shard. `finished_items` (by key) is
    the item count a done attempt reported: the last heartbeat may predate the end."""
    s = ev.samples
    cols = ["last_ts", "last_items", "plateau_s", "stalled_s", "plateau_now_s", "rss_max", "cpu"]
    empty = pd.DataFrame({c: pd.Series(dtype=float) for c in cols})
    if not len(s):
        return empty
    shard, ts = _num(s, "shard").to_numpy(), _num(s, "ts").to_numpy()
    key = keys.encode(s["stage"], shard, s["worker"])
    ok = (key >= 0) & ~np.isnan(ts)
    if not ok.any():
        return empty
    key, ts = key[ok], ts[ok]
    items, rss, cpu = (_num(s, c).to_numpy()[ok] for c in ("items", "rss_bytes", "cpu_pct"))
    order = np.lexsort((ts, key))
    key, ts, items, rss, cpu = key[order], ts[order], items[order], rss[order], cpu[order]
    moved = np.ones(len(key), dtype=bool)
    moved[1:] = (key[1:] != key[:-1]) | (np.diff(ts) > 3 * hb) | (items[1:] != items[:-1]) | np.isnan(items[1:])
    starts = np.flatnonzero(moved)
    run = np.cumsum(moved) - 1
    plateau = (np.maximum.reduceat(ts, starts) - ts[starts])[run]
    frame = pd.DataFrame({"key": key, "ts": ts, "items": items, "plateau": plateau, "rss": rss, "cpu": cpu})
    # A span at the shard's last item count is it finishing (writing output, exiting), not a stall.
    final = np.fmax(frame.groupby("key", sort=False)["items"].transform("max"), frame["key"].map(finished_items))
    frame["midway"] = frame["plateau"].where(frame["items"] < final, 0.0)
    frame["stalled"] = frame["midway"].where(moved, 0.0)  # each span counted once
    return frame.groupby("key", sort=False).agg(
        last_ts=("ts", "last"), last_items=("items", "last"), plateau_s=("midway", "max"),
        stalled_s=("stalled", "sum"),
        plateau_now_s=("plateau", "last"), rss_max=("rss", "max"), cpu=("cpu", "mean"))


class _Keys:
    """Integer codes for (stage, shard, worker): the analysis groups on ints, not strings."""

    def __init__(self, stages: pd.Index, workers: pd.Index, width: int):
        self.stages, self.workers, self.width = stages, workers, width  # width > every shard number

    def encode(self, stage, shard: np.ndarray, worker) -> np.ndarray:
        """(stage * width + shard) * (workers + 1) + worker + 1; -1 when unknown."""
        sc = self.stages.get_indexer(pd.Index(stage))
        wc = self.workers.get_indexer(pd.Index(worker)) + 1
        ok = (sc >= 0) & ~np.isnan(shard) & (shard >= 0) & (shard < self.width)
        key = (sc * self.width + np.nan_to_num(shard).astype(np.int64)) * (len(self.workers) + 1) + wc
        return np.where(ok, key, -1)


def _col(a: pd.DataFrame, name: str) -> np.ndarray:
    return a[name].to_numpy(dtype=object) if name in a else np.full(len(a), None, dtype=object)


def _shards(ev: Evidence, hb: float, th: Thresholds) -> pd.DataFrame:
    """One row per (stage, shard): span, attempts, failures, and its current/last attempt."""
    a = ev.attempts
    shard = _num(a, "shard").to_numpy()
    rows = np.flatnonzero(~np.isnan(shard))  # positions in ev.attempts
    if len(rows) < len(a):
        a, shard = a.iloc[rows], shard[rows]
    if not len(a):
        return pd.DataFrame(columns=[*SHARD_KEYS, "done", "elapsed_s"])
    stage_code, stage_names = pd.factorize(a["stage"].fillna(""))
    worker_code, worker_names = pd.factorize(a["worker"])
    width = int(max(shard.max(), _num(ev.samples, "shard").max() if len(ev.samples) else 0)) + 1
    keys = _Keys(pd.Index(stage_names), pd.Index(worker_names), width)
    shard = shard.astype(np.int64)
    key = stage_code * width + shard
    key3 = key * (len(worker_names) + 1) + worker_code + 1
    outcome, kind = a["outcome"], a["kind"]
    running = (outcome == "running").to_numpy(dtype=bool)
    failed = (outcome == "failed").to_numpy(dtype=bool)
    is_done = (outcome == "done").to_numpy(dtype=bool)
    start, end, secs = (_num(a, c).to_numpy() for c in ("start_ts", "end_ts", "elapsed_s"))
    secs = np.where(running, ev.now - start, np.where(np.isnan(secs), end - start, secs))
    items = _num(a, "items").to_numpy()
    progress = _progress(ev, hb, keys, pd.Series(np.where(is_done, items, np.nan)).groupby(key3).max())
    at = pd.Index(progress.index).get_indexer(key3)
    seen = at >= 0

    def sampled(col: str, rows: np.ndarray) -> np.ndarray:
        values = progress[col].to_numpy(dtype=float)
        return np.where(at[rows] >= 0, values[np.maximum(at[rows], 0)], np.nan) if seen.any() else \
            np.full(len(rows), np.nan)

    every = np.arange(len(a))
    # The limit is per process: a subprocess attempt's own peak (wait4) is the number to compare; the
    # heartbeat samples add the worker's RSS to its child's, so they stand in only when there is none.
    peak = _num(a, "peak_rss_bytes").to_numpy()
    rss = np.where(np.isnan(peak), sampled("rss_max", every), peak)
    limit = ev.config.get("memory_limit_mb")
    near = rss >= th.memory_near * float(limit) * (1 << 20) if limit else np.zeros(len(a), dtype=bool)
    oom = failed & ((pd.Series(_col(a, "failure")) == "oom").to_numpy() | (_num(a, "returncode").to_numpy() == -9)
                    | near)
    task_fail = failed & (kind == TASK).to_numpy(dtype=bool)
    infra_fail = failed & (kind == INFRA).to_numpy(dtype=bool)
    order = np.lexsort((_num(a, "attempt").fillna(0).to_numpy(), key))
    ks = key[order]
    first = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    last = order[np.r_[first[1:] - 1, len(order) - 1]]
    group = np.empty(len(a), dtype=np.int64)
    group[order] = np.repeat(np.arange(len(first)), np.diff(np.r_[first, len(order)]))

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(group, weights=values, minlength=len(first))

    failed_at = np.maximum.reduceat(np.where(failed[order], np.arange(len(order)), -1), first)
    lost = np.unique(group[task_fail | infra_fail] * (len(worker_names) + 1) + worker_code[task_fail | infra_fail])
    out = pd.DataFrame({
        "stage": pd.Categorical.from_codes(stage_code[last], stage_names), "shard": shard[last],
        "worker": pd.Categorical.from_codes(worker_code[last], worker_names),
        "running": running[last],
        "first_start": np.fmin.reduceat(start[order], first), "last_end": np.fmax.reduceat(end[order], first),
        "done": total(is_done) > 0, "attempts": np.bincount(group, minlength=len(first)),
        "task_failures": total(task_fail).astype(int), "infra_failures": total(infra_fail).astype(int),
        "oom_attempts": total(oom).astype(int), "burned_s": total(np.where(failed, np.nan_to_num(secs), 0.0)),
        "secs_total": total(np.nan_to_num(secs)), "rss_max": np.fmax.reduceat(rss[order], first),
        "failed_workers": np.bincount(lost // (len(worker_names) + 1), minlength=len(first)),
        "start": start[last], "secs": secs[last], "items": items[last],
        # how long the finished attempt ran (its peers' yardstick), and the newest failed attempt
        "run_s": np.where(is_done[last], np.where(np.isnan(end - start), secs, end - start)[last], np.nan),
        "failed_row": np.where(failed_at >= 0, rows[order[np.maximum(failed_at, 0)]], -1)}, copy=False)
    for col in ("last_ts", "last_items", "plateau_s", "stalled_s", "plateau_now_s", "cpu"):
        out[col] = sampled(col, last)
    span_end = np.where(out["done"], out["last_end"], ev.now)
    elapsed = span_end - out["first_start"].to_numpy()
    out["elapsed_s"] = np.where(np.isnan(elapsed), out["secs_total"], elapsed)
    # Progress so far of a running attempt comes from its heartbeat samples.
    live = out["running"].to_numpy()
    since = out["last_ts"].to_numpy() - out["start"].to_numpy()
    since = np.where(since >= 0, since, np.nan)
    out["items"] = np.where(live, np.where(np.isnan(since), np.nan, out["last_items"]), out["items"])
    out["rate_secs"] = np.where(live, since, out["secs"])
    with np.errstate(invalid="ignore", divide="ignore"):
        out["rate"] = np.where(out["rate_secs"] > 0, out["items"] / out["rate_secs"], np.nan)
    return out


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


def _judge(ev: Evidence, out: pd.DataFrame, hb: float, th: Thresholds) -> pd.DataFrame:
    """Adds to the shard table, in place, the peer statistics (leave-one-out), the elapsed flag and
    the non-elapsed flags; returns the stage table (totals, elapsed quantiles, medians)."""
    if not len(out):
        out["flag"] = pd.Series(dtype=bool)
        return pd.DataFrame(columns=["stage", *STAGE_COLUMNS]).set_index("stage")
    n = len(out)
    stage_code, stage_names = out["stage"].cat.codes.to_numpy(), out["stage"].cat.categories
    done = out["done"].to_numpy(dtype=bool)
    elapsed = out["elapsed_s"].to_numpy(dtype=float)
    run = out["run_s"].to_numpy(dtype=float)
    medians = {c: out[c].to_numpy(dtype=float) for c in ("items", "rate", "cpu")}
    names = {"median_s": 0.5, "p90_s": 0.9, "p99_s": 0.99, "q_s": th.quantile}
    stats = {name: np.full(n, np.nan) for name in [*names, "peers"]}
    totals = {s.name: s.total for s in ev.stages}
    rows = []
    order = np.argsort(stage_code, kind="stable")
    bounds = np.searchsorted(stage_code[order], np.arange(len(stage_names) + 1))
    for code, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        idx = order[lo:hi]
        # Peers' yardstick: how long their finished attempt ran (retries are not a shard's size).
        fin = done[idx] & ~np.isnan(run[idx])
        fin_run = run[idx][fin]
        by_run = np.argsort(fin_run)
        finished = fin_run[by_run]
        row = {"stage": stage_names[code], "total": max(totals.get(stage_names[code], 0), len(idx)),
               "done": int(done[idx].sum()), "running": int(out["running"].to_numpy()[idx].sum()),
               **dict(zip(("median_s", "p90_s", "p99_s"), _quantiles(finished, (0.5, 0.9, 0.99)))),
               **{f"median_{c}": _median(v[idx][done[idx]]) for c, v in medians.items()}}
        rows.append(row)
        if not len(finished):
            continue
        rank = np.full(len(idx), len(finished))  # each finished shard's place among them
        rank[np.flatnonzero(fin)[by_run]] = np.arange(len(finished))
        for name, q in names.items():
            stats[name][idx] = _loo_quantile(finished, rank, q)
        stats["peers"][idx] = len(finished) - fin
    for name, values in stats.items():
        out[name] = values
    st = pd.DataFrame(rows).set_index("stage")
    st["wall_s"] = stage_bounds(ev)["wall_s"].reindex(st.index)

    def per_stage(col: str) -> np.ndarray:
        return st[col].to_numpy(dtype=float)[stage_code]

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
    worker_code = out["worker"].cat.codes.to_numpy()
    worker_names = out["worker"].cat.categories
    own = ~np.isnan(log) & (worker_code >= 0)
    wsum = np.bincount(worker_code[own], weights=log[own], minlength=len(worker_names) + 1)  # +1: no worker known
    wcount = np.bincount(worker_code[own], minlength=len(worker_names) + 1)
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
    state_code, state_names = pd.factorize(holder["state"])  # codes: a million strings would be slow
    codes = np.where(known, state_code[pick], -1) if len(holder) else np.full(n, -1)
    out["holder_state"] = pd.Categorical.from_codes(codes, state_names)
    out["holder_seen_ago"] = np.where(known, w_seen.reindex(worker_names).to_numpy(dtype=float)[pick]
                                      if len(holder) else np.nan, np.nan)
    out["holder_alive"] = np.where(known, w_alive.reindex(worker_names, fill_value=False).to_numpy(dtype=bool)[pick]
                                   if len(holder) else False, False)
    active = ev.state in ("running", "interrupted")
    # A log may name only some workers: its last status line's alive count overrules the table.
    alive_now = pd.to_numeric(ev.status["alive"], errors="coerce").iloc[-1] if len(ev.status) else np.nan
    lost_all = (len(w) > 0 and not w_alive.any() and not (w["state"] == "done").all() and ev.state != "succeeded"
                and not alive_now > 0)
    running = out["running"].to_numpy(dtype=bool)
    starts = out["first_start"]
    current = ev.stages[-1].name if ev.stages else out["stage"].iloc[starts.idxmax() if starts.notna().any() else -1]
    out["all_dead"] = lost_all & ~done & (stage_code == stage_names.get_indexer([current])[0])
    out["dead_now"] = active & running & known & ~out["holder_alive"]  # an unknown holder is not a dead one
    out["stuck_now"] = active & running & out["holder_alive"] & (out["plateau_now_s"] >= th.stuck_heartbeats * hb)
    out["crash_loop"] = out["task_failures"] + out["infra_failures"] >= th.repeated_failures
    out["flag"] = (out["slow"] | out["all_dead"] | out["dead_now"] | out["stuck_now"] | out["crash_loop"]
                   | (out["oom_attempts"] > 0) | (out["infra_failures"] > 0))
    rank_of = {s.name: s.index for s in ev.stages}
    st = st.sort_index(key=lambda idx: idx.map(lambda name: rank_of.get(name, len(rank_of))), kind="stable")
    return st[STAGE_COLUMNS].round(4)


def _quantiles(sorted_vals: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    return list(np.quantile(sorted_vals, qs)) if len(sorted_vals) else [np.nan] * len(qs)


def _median(values: np.ndarray) -> float:
    values = values[~np.isnan(values)]
    return float(np.median(values)) if len(values) else np.nan


def _finding(ev: Evidence, r, hb: float, th: Thresholds) -> dict:
    """Causes, evidence sentences and the next command for one flagged shard."""
    job, stage, shard = ev.job, r.stage, int(r.shard)
    worker = r.worker if isinstance(r.worker, str) else None
    causes: dict[str, str] = {}
    ev_lines: list[str] = []
    if r.slow:
        ev_lines.append(f"elapsed {r.elapsed_s:.1f}s = {r.ratio_to_median:.1f}x the median run {r.median_s:.1f}s of "
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
            failed_row = ev.attempts.iloc[r.failed_row]
            reason = failed_row.get("reason")
            reason = reason if isinstance(reason, str) else "worker lost"
            reason += f" on {failed_row['worker']}"
            ev_lines.append(f"{int(r.infra_failures)} attempt(s) lost with their worker (last: {reason}); "
                            f"the shard was requeued")
    # A finished shard was late for being stuck when stalls make up half of its excess time.
    stalled_late = (r.slow and not r.dead_now and r.plateau_s >= th.stuck_heartbeats * hb
                    and r.stalled_s >= 0.5 * (r.elapsed_s - r.median_s))
    if r.stuck_now:
        causes["stuck"] = f"zdebug dump {worker} --job {job}"
        ev_lines.append(f"no progress for {r.plateau_now_s:.1f}s ({r.plateau_now_s / hb:.0f} heartbeats) at "
                        f"{_count(r.last_items)} items while {worker} stays alive")
    elif stalled_late:
        causes["stuck"] = f"zdebug dump {worker} --job {job}"
        ev_lines.append(f"stalled {r.stalled_s:.1f}s in all (longest {r.plateau_s:.1f}s = "
                        f"{r.plateau_s / hb:.0f} heartbeats with no new items) while {worker} stayed alive")
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
                "plateau_s", "stalled_s", "rss_max")} | {"done": bool(r.done),
                                                   "holder_state": r.holder_state if isinstance(r.holder_state, str) else None}}


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
