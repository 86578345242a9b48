"""Worker churn: re-registrations and heartbeat timeouts per worker and per hour, workers that
keep coming back (flapping), and bursts of shards requeued by infra failures and claimed by
replacement workers. Windows scale with the heartbeat timeout (Zephyr: 120 s; the demo: 5 s)."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from zephyr_debug.analyze.nextsteps import Steps
from zephyr_debug.findings import WARNING, Finding, clean_number
from zephyr_debug.model import HEARTBEAT_TIMEOUT_S, INFRA, Evidence

COMEBACKS = ("reregistered", "heartbeat-timeout")  # a worker that was lost and is back (or lost)
CRASHING = ("crash-loop", "oom")  # findings whose shards kill the workers that run them


@dataclass(frozen=True)
class ChurnRules:
    """When churn is a finding (defaults in docs/counters.md)."""

    flap_count: int = 3  # a worker lost (timeout / re-registration) this many times ...
    flap_window_timeouts: float = 30.0  # ... within this many heartbeat timeouts (Zephyr: 1 h)
    burst_count: int = 5  # this many shards requeued by infra failures ...
    burst_window_timeouts: float = 2.0  # ... within this many heartbeat timeouts
    burst_workers: int = 2  # ... lost from at least this many workers
    false_rate: float = 0.01  # ... and more than the job's own background rate gives by chance this often


@dataclass(frozen=True)
class WorkerChurn:
    worker: str
    reregistered: int
    timeouts: int
    max_per_window: int  # most losses within one flap window
    times: tuple[float, ...]  # each loss

    def to_json(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "reregistered": self.reregistered,
            "heartbeat_timeouts": self.timeouts,
            "max_per_window": self.max_per_window,
            "times": [clean_number(t) for t in self.times],
        }


def timeout_s(ev: Evidence) -> float:
    return float(ev.config.get("heartbeat_timeout") or HEARTBEAT_TIMEOUT_S)


def per_worker(ev: Evidence, rules: ChurnRules = ChurnRules()) -> list[WorkerChurn]:
    """Losses per worker, most first. A timeout followed by the same worker's re-registration
    within one heartbeat timeout is one loss."""
    window = rules.flap_window_timeouts * timeout_s(ev)
    losses: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for ts, worker, event in ev.worker_events:
        if event in COMEBACKS:
            losses[worker].append((float(ts), event))
    out = []
    for worker, events in losses.items():
        times: list[float] = []
        last_timeout = None
        for ts, event in sorted(events):
            if event == "reregistered" and last_timeout is not None and ts - last_timeout <= timeout_s(ev):
                last_timeout = None
                continue
            times.append(ts)
            last_timeout = ts if event == "heartbeat-timeout" else None
        peak = max((sum(1 for u in times if t <= u < t + window) for t in times), default=0)
        out.append(
            WorkerChurn(
                worker,
                sum(e == "reregistered" for _, e in events),
                sum(e == "heartbeat-timeout" for _, e in events),
                peak,
                tuple(times),
            )
        )
    return sorted(out, key=lambda w: (-len(w.times), w.worker))


def per_hour(ev: Evidence) -> list[tuple[float, int, int]]:
    """(hour start, re-registrations, heartbeat timeouts) for each hour with any."""
    counts: dict[float, list[int]] = defaultdict(lambda: [0, 0])
    for ts, _, event in ev.worker_events:
        if event in COMEBACKS:
            counts[float(ts) // 3600 * 3600][COMEBACKS.index(event)] += 1
    return [(h, r, t) for h, (r, t) in sorted(counts.items())]


def requeues(ev: Evidence) -> pd.DataFrame:
    """Infra-failed attempts: stage, shard, lost_from, at, claimed_by (the next attempt's worker)."""
    a = ev.attempts
    cols = ["stage", "shard", "lost_from", "at", "claimed_by"]
    if not len(a) or not (a["kind"] == INFRA).any():
        return pd.DataFrame(columns=cols)
    # only the shards that lost an attempt (a million healthy attempts need no sort)
    keys = a.loc[a["kind"] == INFRA, ["stage", "shard"]].drop_duplicates()
    a = a.merge(keys, on=["stage", "shard"], how="inner")
    a = a.assign(
        shard=pd.to_numeric(a["shard"], errors="coerce"),
        attempt=pd.to_numeric(a["attempt"], errors="coerce"),
        end_ts=pd.to_numeric(a["end_ts"], errors="coerce"),
    ).dropna(subset=["shard", "attempt"])
    a = a.sort_values(["stage", "shard", "attempt"], kind="stable")
    nxt = a.groupby(["stage", "shard"], sort=False)["worker"].shift(-1)
    lost = (a["kind"] == INFRA) & a["end_ts"].notna()
    return (
        pd.DataFrame(
            {
                "stage": a["stage"],
                "shard": a["shard"].astype(int),
                "lost_from": a["worker"],
                "at": a["end_ts"],
                "claimed_by": nxt,
            }
        )[lost]
        .sort_values("at")
        .reset_index(drop=True)
    )


def findings(
    ev: Evidence, steps: Steps, found: Sequence[Finding] = (), rules: ChurnRules = ChurnRules()
) -> list[Finding]:
    """Flapping workers and requeue bursts. Losses that another finding already explains (a
    shard in a crash loop that kills its workers, a dead pool) are left out."""
    if any(f.kind == "all-workers-dead" for f in found):
        return []
    crashing = [f for f in found if f.kind in CRASHING]
    covered = {(f.stage, s) for f in crashing for s in f.all_shards}
    crashers = {f.worker for f in crashing if f.worker}
    lost_on_covered = defaultdict(list)
    rq = requeues(ev)
    for r in rq.itertuples():
        if (r.stage, r.shard) in covered:
            lost_on_covered[r.lost_from].append(float(r.at))
    out = []
    window = rules.flap_window_timeouts * timeout_s(ev)
    for w in per_worker(ev, rules):
        if w.worker in crashers:
            continue
        # a loss within one timeout after the worker lost a shard another finding explains is that finding's
        own = [
            t
            for t in w.times
            if not any(
                0 <= t - u <= timeout_s(ev) or 0 <= u - t <= timeout_s(ev) for u in lost_on_covered.get(w.worker, [])
            )
        ]
        peak = max((sum(1 for u in own if t <= u < t + window) for t in own), default=0)
        if peak >= rules.flap_count:
            out.append(_flapping(w, own, peak, window, steps))
    rq = rq[[(s, sh) not in covered for s, sh in zip(rq["stage"], rq["shard"], strict=True)]] if len(rq) else rq
    out += _bursts(rq, rules.burst_window_timeouts * timeout_s(ev), rules, steps)
    return out


def _flapping(w: WorkerChurn, times: list[float], peak: int, window: float, steps: Steps) -> Finding:
    shown = ", ".join(clock(t) for t in times[:8]) + (" …" if len(times) > 8 else "")
    return Finding(
        kind="flapping-worker",
        causes=("flapping-worker",),
        severity=WARNING,
        worker=w.worker,
        title=f"worker {w.worker} was lost {len(times)} times ({peak} within {_span(window)})",
        evidence=(
            f"{w.reregistered} re-registrations, {w.timeouts} heartbeat timeouts; lost at {shown}",
            "each loss requeues the shard it held (an infra failure) and restarts it elsewhere",
        ),
        next=(
            f"zdebug workers {steps.job} --sort memory",
            f"zdebug counters {steps.job}",
            *steps.playbook("dead-holder"),
        ),
        metrics=(("losses", len(times)), ("max_per_window", peak), ("window_s", window)),
    )


def _burst_floor(rq: pd.DataFrame, window: float, rules: ChurnRules) -> int:
    """Requeues in one window that the job's own background rate explains less than `false_rate`
    of the time over the whole job (Poisson, Bonferroni over its windows): a big fleet's ordinary
    preemptions are not a burst."""
    if len(rq) < 2 or window <= 0:
        return rules.burst_count
    span = float(rq["at"].max() - rq["at"].min()) or window
    lam = len(rq) * window / span
    windows = max(span / window, 1.0)
    k, pmf, tail = 0, math.exp(-lam), 1.0
    while tail > rules.false_rate / windows and k < len(rq):
        tail -= pmf
        k += 1
        pmf *= lam / k
    return max(rules.burst_count, k + 1)


def _bursts(rq: pd.DataFrame, window: float, rules: ChurnRules, steps: Steps) -> list[Finding]:
    out, i = [], 0
    floor = _burst_floor(rq, window, rules)
    rows = rq.to_dict("records")
    while i < len(rows):
        j = i
        while j + 1 < len(rows) and rows[j + 1]["at"] - rows[i]["at"] <= window:
            j += 1
        group = rows[i : j + 1]
        lost_from = sorted({str(r["lost_from"]) for r in group if isinstance(r["lost_from"], str)})
        if len(group) >= floor and len(lost_from) >= rules.burst_workers:
            claimed = sorted({str(r["claimed_by"]) for r in group if isinstance(r["claimed_by"], str)})
            shards = tuple(sorted({int(r["shard"]) for r in group}))
            stage = group[0]["stage"]
            out.append(
                Finding(
                    kind="requeue-burst",
                    causes=("requeue-burst",),
                    severity=WARNING,
                    stage=stage,
                    shard=shards[0],
                    shards=shards,
                    worker=lost_from[0],
                    title=f"{len(group)} shards of {stage} requeued by infra failures within "
                    f"{_span(group[-1]['at'] - group[0]['at'])} ({clock(group[0]['at'])})",
                    evidence=(
                        f"lost from {len(lost_from)} workers: {', '.join(lost_from[:5])}",
                        f"claimed by {len(claimed)} replacements: {', '.join(claimed[:5]) or 'none yet'}",
                        f"shards: {', '.join(str(s) for s in shards[:20])}",
                    ),
                    next=(f"zdebug workers {steps.job} --sort memory", f"zdebug counters {steps.job}"),
                    metrics=(
                        ("requeued", len(group)),
                        ("workers", len(lost_from)),
                        ("start", group[0]["at"]),
                        ("end", group[-1]["at"]),
                    ),
                )
            )
            i = j + 1
        else:
            i += 1
    return out


def _span(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.0f} min"


def clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ts))
