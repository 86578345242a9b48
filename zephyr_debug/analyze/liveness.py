"""Who is alive: the worker pool's counts, each shard holder's state, and a pool with no one left."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zephyr_debug.model import ALIVE_STATES, HEARTBEAT_TIMEOUT_S, Evidence
from zephyr_debug.zephyrlog import ABORT_SHARD_RE, FAILURE_KINDS

NO_WORKERS_SIGNS = ("No alive workers", "registered workers are dead/failed")
OOM_EXIT = 137  # Iris task exit code of a kernel OOM kill (#3009)
OOM_RE = next(rx for rx, kind in FAILURE_KINDS if kind == "oom")


@dataclass(frozen=True)
class Pool:
    """Worker counts as the job's own status says them (the last status line or get_status)."""

    alive: int
    dead: int
    registered: int | None
    counted_from: str  # "get_status" | "status line" | "worker list"
    all_dead: bool
    all_dead_evidence: tuple[str, ...] = ()


def heartbeat_timeout(ev: Evidence) -> float:
    return float(ev.config.get("heartbeat_timeout") or HEARTBEAT_TIMEOUT_S)


def _alive_mask(ev: Evidence) -> pd.Series:
    w = ev.workers.drop_duplicates("worker", keep="last").set_index("worker")
    alive = w["state"].isin(ALIVE_STATES)
    if not ev.heartbeat_ages:
        return alive
    return alive & ~(pd.to_numeric(w["last_seen_ago"], errors="coerce") > heartbeat_timeout(ev))


def pool(ev: Evidence) -> Pool:
    """Counts from get_status; from a log, its last status line (it counts every worker, the log
    names only some); else the worker list of a heartbeat source (a re-registered worker is one row)."""
    unfinished = ev.state in ("running", "interrupted", "failed")
    if ev.live is not None and ev.live.workers:  # a snapshot listing no worker counts none
        states = [str(v.get("state")) for v in ev.live.workers.values()]
        alive = sum(s in ALIVE_STATES for s in states)
        counts = (alive, len(states) - alive, len(states), "get_status")
    elif (
        _status_counts_all(ev)
        and len(ev.status)
        and (alive_now := _num(ev.status["alive"].iloc[-1])) is not None
        and not math.isnan(alive_now)
    ):  # a log names only some workers: its status line counts them all
        last = ev.status.iloc[-1]
        counts = (int(alive_now), int(_num(last["dead"], 0) or 0), int(_num(last["registered"], 0) or 0), "status line")
    else:
        mask = _alive_mask(ev) if len(ev.workers) else pd.Series(dtype=bool)
        counts = (int(mask.sum()), int((~mask).sum()), len(mask), "worker list")
    alive, dead, registered, source = counts
    evidence: list[str] = []
    fatal = ev.fatal_error or ""
    if any(sign in fatal for sign in NO_WORKERS_SIGNS):
        evidence.append("aborted: " + fatal.strip().splitlines()[0])
    # An abort that names its own cause (a shard that crashed its workers) is that cause: the pool
    # it emptied on the way is its evidence, not a second root cause.
    other_abort = ev.state == "failed" and not evidence and bool(ABORT_SHARD_RE.search(fatal))
    waits = ev.config.get("all_dead_ts") or []
    if (
        len(waits) >= 2
        and (ev.progress_time is None or waits[-1] > ev.progress_time)
        and unfinished
        and not other_abort
        and not _back_after(ev, waits[-1])
    ):
        evidence.append(
            f"'All workers are dead/failed. Waiting for workers to recover...' {len(waits)} times, "
            f"the last {ev.now - waits[-1]:.0f}s before the end of the evidence, no progress since"
        )
    # a worker list of a heartbeat source: workers told to stop (`done`) were shut down, not lost
    shut_down = source == "worker list" and bool((ev.workers["state"] == "done").any())
    # a log's status lines: the pool stays dead to the end of the evidence (no worker re-registered
    # or took a shard after the first of the last lines counting none)
    if (
        registered
        and alive == 0
        and unfinished
        and ev.state != "succeeded"
        and not shut_down
        and not other_abort
        and not (source == "status line" and _back_after(ev, _dead_since(ev)))
    ):
        evidence.append(f"{source}: 0/{registered} workers alive, {dead} dead")
    return Pool(alive, dead, registered, source, bool(evidence), tuple(evidence))


def _dead_since(ev: Evidence) -> float:
    """The first of the trailing status lines that count no worker alive (the last line's time
    when the last line counts some)."""
    alive = pd.to_numeric(ev.status["alive"], errors="coerce").to_numpy(dtype=float)
    ts = pd.to_numeric(ev.status["ts"], errors="coerce").to_numpy(dtype=float)
    k = len(alive)
    while k > 0 and alive[k - 1] == 0:
        k -= 1
    return float(ts[k]) if k < len(ts) else float(ts[-1]) if len(ts) else ev.now


def _back_after(ev: Evidence, t: float) -> bool:
    """A worker registered again, or a worker took a shard (its requeue ran), after `t`: the pool
    was empty for a moment (one frozen process misses every heartbeat at once), not for good.
    (A requeue alone is not: Zephyr requeues the shards of workers that died.)"""
    if any(ts > t and event in ("registered", "reregistered") for ts, _worker, event in ev.worker_events):
        return True
    a = ev.attempts
    start = pd.to_numeric(a["start_ts"], errors="coerce").to_numpy(dtype=float) if len(a) else np.array([])
    return bool((start > t).any())


def _status_counts_all(ev: Evidence) -> bool:
    """The status line counts workers the evidence does not list: a log, or a worker list shorter
    than the line's registered count."""
    if not ev.heartbeat_ages or not len(ev.workers) or not len(ev.status):
        return True
    registered = _num(ev.status["registered"].iloc[-1])
    return registered is not None and registered > ev.workers["worker"].nunique()


def add_holders(shards: pd.DataFrame, ev: Evidence) -> pd.DataFrame:
    """Adds the state of each shard's holder (its newest attempt's worker): `holder_state`,
    `holder_seen_ago` (s) and `holder_alive` (alive state and heard from within the timeout)."""
    n = len(shards)
    if not len(ev.workers) or not hasattr(shards["worker"], "cat"):
        return shards.assign(
            holder_state=pd.Categorical([None] * n),
            holder_seen_ago=np.full(n, np.nan),
            holder_alive=np.zeros(n, dtype=bool),
            holder_known=np.zeros(n, dtype=bool),
        )
    w = ev.workers.drop_duplicates("worker", keep="last").set_index("worker")
    names = shards["worker"].cat.categories
    code = shards["worker"].cat.codes.to_numpy()
    known = code >= 0
    pick = np.where(known, code, 0)
    holder = w.reindex(names)
    state_code, state_names = pd.factorize(holder["state"])  # codes: a million strings would be slow
    states = np.where(known, state_code[pick], -1) if len(names) else np.full(n, -1)
    seen = pd.to_numeric(holder["last_seen_ago"], errors="coerce").to_numpy(dtype=float)
    alive = _alive_mask(ev).reindex(names, fill_value=False).to_numpy(dtype=bool)
    listed = holder["state"].notna().to_numpy(dtype=bool)
    return shards.assign(
        holder_state=pd.Categorical.from_codes(states, state_names),
        holder_seen_ago=np.where(known, seen[pick] if len(names) else np.nan, np.nan),
        holder_alive=np.where(known, alive[pick] if len(names) else False, False),
        holder_known=np.where(known, listed[pick] if len(names) else False, False),
    )


def _num(value, default: float | None = math.nan) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(number) else number


def listing(ev: Evidence) -> list[dict]:
    """Every worker once: `{worker, state, last_seen_ago}` (get_status when there is one)."""
    if ev.live is not None and ev.live.workers:  # a snapshot listing no worker counts none
        return [
            {"worker": w, "state": v.get("state"), "last_seen_ago": v.get("last_seen_ago")}
            for w, v in sorted(ev.live.workers.items())
        ]
    w = ev.workers.drop_duplicates("worker", keep="last").sort_values("worker")
    return [
        {"worker": r.worker, "state": r.state, "last_seen_ago": _num(r.last_seen_ago, None)} for r in w.itertuples()
    ]


def oom_killed_workers(ev: Evidence) -> set[str]:
    """Zephyr worker ids whose Iris task ended OOM-killed (error text or exit 137): the reason a
    coordinator log shows only as a heartbeat timeout (#3009)."""
    w = ev.workers
    if "error" not in w and "exit_code" not in w:
        return set()
    err = w["error"].astype(str) if "error" in w else pd.Series("", index=w.index)
    code = pd.to_numeric(w["exit_code"], errors="coerce") if "exit_code" in w else pd.Series(dtype=float)
    hit = err.str.contains(OOM_RE) | (code == OOM_EXIT)
    return {zephyr_id(str(x)) for x in w.loc[hit.fillna(False), "worker"]}


def zephyr_id(task: str) -> str:
    """Iris task `/user/<group>/<i>` -> Zephyr worker `<group>-<i>:0` (other names unchanged)."""
    parts = task.rstrip("/").split("/")
    return f"{parts[-2]}-{parts[-1]}:0" if len(parts) >= 3 and parts[-1].isdigit() else task
