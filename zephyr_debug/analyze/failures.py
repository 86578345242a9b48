"""Failed attempts as root causes: one crash loop per bug (all the shards one crash fingerprint
breaks, the aborting shard first), lost holders, and the failures retries absorbed (`recovered`).

A shard is in a crash loop when it is unfinished and failed `repeated_failures` times, or the
job aborted on it; the other unfinished shards that failed with the same fingerprint belong to
the same finding. A shard that failed and then finished is `recovered` information, unless the
stage waited on its retry (it ended last): then its lost holder cost time (`dead-holder`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from zephyr_debug.analyze.nextsteps import Steps
from zephyr_debug.analyze.thresholds import Thresholds
from zephyr_debug.findings import ERROR, INFO, WARNING, Cost, Finding
from zephyr_debug.model import INFRA, MAX_SHARD_FAILURES, MAX_SHARD_INFRA_FAILURES, Evidence
from zephyr_debug.zephyrlog import ABORT_SHARD_RE

MAX_LISTED = 12  # shards named in a finding's evidence


@dataclass
class _Bug:
    fingerprint: str
    kind: str  # crash kind of the group: task | infra | oom | segv | exit
    title: str
    shards: list[tuple[str, int]] = field(default_factory=list)


def aborting_shard(ev: Evidence) -> int | None:
    m = ABORT_SHARD_RE.search(ev.fatal_error or "")
    return int(m.group("shard")) if m else None


def fingerprints(groups) -> dict[tuple[str, int], tuple[str, str, str]]:
    """(stage, shard) -> (fingerprint, crash kind, title) of the crash group holding most of its
    crashes (`crashes.cluster.CrashGroup`s)."""
    best: dict[tuple[str, int], tuple[int, tuple[str, str, str]]] = {}
    for g in groups:
        title = ": ".join(x for x in (g.exception, g.message) if x) or g.kind
        for stage, shard, runs in g.runs:
            key = (stage, shard)
            if shard is not None and (key not in best or runs > best[key][0]):
                best[key] = (runs, (g.fingerprint, g.kind, title))
    return {key: value for key, (_, value) in best.items()}


def findings(
    ev: Evidence, shards: pd.DataFrame, groups, steps: Steps, th: Thresholds, hb: float, idle_hours, solo: dict
) -> tuple[list[Finding], set[tuple[str, int]]]:
    """Crash-loop, dead-holder and recovered findings; and the (stage, shard) keys they cover.
    `solo`: stage -> `progress.Alone`, the stretch its last shard ran alone (a coordinator-only
    log shows a requeued shard's rerun only there)."""
    finished = {s.name for s in ev.stages if s.end_ts is not None}
    failed = shards[(shards["task_failures"] + shards["infra_failures"]) > 0]
    if not len(failed):
        return [], set()
    prints = fingerprints(groups)
    abort = aborting_shard(ev) if ev.state == "failed" else None
    abort_stage = current_stage(ev, shards)
    task_max = int(ev.config.get("max_task_failures") or MAX_SHARD_FAILURES)
    infra_max = int(ev.config.get("max_infra_failures") or MAX_SHARD_INFRA_FAILURES)
    bugs: dict[str, _Bug] = {}
    looping: set[tuple[str, int]] = set()
    recovered = defaultdict(list)
    out: list[Finding] = []
    covered: set[tuple[str, int]] = set()
    for r in failed.itertuples():
        key = (r.stage, int(r.shard))
        fp, kind, title = prints.get(key) or (
            f"{'infra' if r.infra_failures else 'task'}:{r.stage}",
            INFRA if r.infra_failures else "task",
            _error(ev, r),
        )
        if r.done or r.stage in finished:
            waited = _waited(r, solo.get(r.stage), th, hb)
            if r.infra_failures and waited:
                out.append(_lost_holder(ev, r, waited, steps, idle_hours))
                covered.add(key)
            else:
                recovered[(fp, title)].append(key)
            continue
        bug = bugs.setdefault(fp, _Bug(fp, kind, title))
        bug.shards.append(key)
        if r.task_failures + r.infra_failures >= th.repeated_failures or (
            int(r.shard) == abort and r.stage == abort_stage
        ):
            looping.add(key)
    table = shards.set_index(["stage", "shard"], drop=False)
    for bug in bugs.values():
        if not looping.intersection(bug.shards):
            continue
        if bug.kind == INFRA:  # a lost worker says nothing of the bug: preemptions share this fingerprint
            bug.shards = [k for k in bug.shards if k in looping]
        keys = sorted(bug.shards, key=lambda k: (k[1] != abort, k not in looping, k[1]))
        rows = table.loc[keys]
        oom = int(rows["oom_attempts"].sum())
        causes = ("crash-loop", "oom") if oom or bug.kind == "oom" else ("crash-loop",)
        first = rows.iloc[0]
        lines = [
            f"{_failures(first, task_max, infra_max)} on {int(first['failed_workers'])} worker(s)"
            + (
                f"; {oom} attempt(s) with an OOM sign (SIGKILL / MemoryError / exit 137 / RSS at the limit)"
                if oom
                else ""
            )
        ]
        if len(keys) > 1:
            names = ", ".join(str(k[1]) for k in keys[:MAX_LISTED]) + (
                f" (+{len(keys) - MAX_LISTED})" if len(keys) > MAX_LISTED else ""
            )
            lines.append(f"{len(keys)} shards failed with this same crash ({bug.kind}): {names}")
        if abort is not None and keys[0][1] == abort:
            lines.append("aborted the pipeline: " + (ev.fatal_error or "").strip().splitlines()[0])
        held = float(rows["held_s"].max())
        window = (float(rows["expected_end"].min()), float(rows["end"].max()))
        alone = solo.get(first["stage"])
        if alone is not None and len(keys) == 1 and alone.seconds > held:  # no finished peer, but the status
            held, window = alone.seconds, (alone.start, alone.end)  # lines show it alone in flight that long
        burned = float(rows["burned_s"].sum()) / 3600
        idle = idle_hours(first["stage"], *window) if held else 0.0
        stage, shard = keys[0]
        what = (
            (
                f"lost its worker {int(first['infra_failures'])} times (a native crash or OOM in its code, "
                "or preemptions)"
            )
            if bug.kind == INFRA
            else bug.title
        )
        out.append(
            Finding(
                kind="crash-loop",
                causes=causes,
                severity=ERROR,
                stage=stage,
                shard=shard,
                shards=tuple(k[1] for k in keys),
                worker=_worker(first),
                fingerprint=bug.fingerprint,
                title=f"{len(keys)} shard(s) of {stage} in a crash loop: {what}"
                if len(keys) > 1
                else f"shard {shard} of {stage} in a crash loop: {what}",
                evidence=tuple(lines),
                next=tuple(steps.for_failure("oom" if "oom" in causes else "crash-loop", shard)),
                cost=Cost(held_s=held, idle_worker_hours=idle, burned_worker_hours=burned),
                elapsed_s=float(first["elapsed_s"]),
                metrics=(
                    ("task_failures", int(first["task_failures"])),
                    ("infra_failures", int(first["infra_failures"])),
                    ("attempts", int(first["attempts"])),
                    ("oom_attempts", oom),
                    ("rss_max", first["rss_max"]),
                ),
            )
        )
        covered.update(keys)
    if recovered:
        out.append(_recovered(recovered, steps))
    return out, covered


def _waited(r, alone, th: Thresholds, hb: float) -> tuple[float, float, str] | None:
    """(from, to, how we know) when its stage waited on the retry of a shard lost with its worker:
    it ended last by more than an outlier's allowance, or (coordinator-only log) it was requeued
    in the stretch where its stage ran one shard for longer than `alone_shards` typical shards."""
    tick = r.tick_s if r.tick_s == r.tick_s else hb
    allowance = max(th.min_held_heartbeats * tick, r.allow_s if r.allow_s == r.allow_s else 0.0)
    if r.done and r.last_s >= allowance and r.last_s > 0:
        return float(r.end) - float(r.last_s), float(r.end), f"it ended last, {r.last_s:.0f}s after every other shard"
    if r.done or alone is None or not alone.seconds >= th.alone_shards * alone.shard_s:
        return None
    failed_at = float(r.last_end) if r.last_end == r.last_end else np.nan  # no done attempt: its failure's end
    if alone.start - alone.shard_s <= failed_at <= alone.end:
        return (
            alone.start,
            alone.end,
            (
                f"it was requeued while its stage waited {alone.seconds:.0f}s on one shard "
                f"({alone.seconds / alone.shard_s:.1f}x a typical shard's run)"
            ),
        )
    return None


def _lost_holder(ev: Evidence, r, waited: tuple[float, float, str], steps: Steps, idle_hours) -> Finding:
    reason = _reason(ev, r)
    t0, t1, how = waited
    cost = Cost(
        held_s=t1 - t0, idle_worker_hours=idle_hours(r.stage, t0, t1), burned_worker_hours=float(r.burned_s) / 3600
    )
    return Finding(
        kind="dead-holder",
        causes=("dead-holder",),
        severity=WARNING,
        stage=r.stage,
        shard=int(r.shard),
        worker=_lost_worker(ev, r),
        title=f"shard {int(r.shard)} of {r.stage}: lost with its worker, the stage waited on its retry",
        evidence=(f"{int(r.infra_failures)} attempt(s) lost with their worker ({reason}); {how}",),
        next=tuple(steps.for_workers("dead-holder")),
        cost=cost,
        elapsed_s=float(r.elapsed_s),
    )


def _recovered(recovered: dict, steps: Steps) -> Finding:
    keys = [k for ks in recovered.values() for k in ks]
    lines = [
        f"{len(ks)} shard(s): {title} (fingerprint {fp[:12]})"
        for (fp, title), ks in sorted(recovered.items(), key=lambda kv: -len(kv[1]))[:MAX_LISTED]
    ]
    stage = min(k[0] for k in keys)  # not the row order: the same evidence gives the same finding
    return Finding(
        kind="recovered",
        causes=("recovered",),
        severity=INFO,
        stage=stage,
        shard=None,
        shards=tuple(sorted(k[1] for k in keys)),
        title=f"{len(keys)} shard(s) failed and then succeeded on retry (absorbed)",
        evidence=tuple(lines),
        next=(steps.crashes(),),
        metrics=(("shards", len(keys)),),
    )


def _failures(row, task_max: int, infra_max: int) -> str:
    return (
        f"failed {int(row['task_failures'])}/{task_max} TASK and {int(row['infra_failures'])}/{infra_max} "
        f"INFRA times in {int(row['attempts'])} attempt(s)"
    )


def _error(ev: Evidence, r) -> str:
    if r.failed_row < 0:
        return "task error"
    error = ev.attempts.iloc[int(r.failed_row)].get("error")
    return re.sub(r"\s+", " ", error)[:120] if isinstance(error, str) else "task error"


def _reason(ev: Evidence, r) -> str:
    if r.failed_row < 0:
        return "worker lost"
    row = ev.attempts.iloc[int(r.failed_row)]
    reason = row.get("reason")
    return (reason if isinstance(reason, str) else "worker lost") + f" on {row['worker']}"


def _lost_worker(ev: Evidence, r) -> str | None:
    """The worker the shard was lost with (its last lost attempt's), not the one that finished it."""
    if r.failed_row < 0:
        return None
    worker = ev.attempts.iloc[int(r.failed_row)]["worker"]
    return worker if isinstance(worker, str) else None


def _worker(r) -> str | None:
    worker = r["worker"] if isinstance(r, pd.Series) else r.worker
    return worker if isinstance(worker, str) else None


def current_stage(ev: Evidence, shards: pd.DataFrame) -> str | None:
    """The stage running last: the newest StageInfo, else the stage of the newest attempt."""
    if ev.stages:
        return ev.stages[-1].name
    if not len(shards):
        return None
    starts = shards["first_start"].to_numpy(dtype=float)
    return shards["stage"].iloc[int(np.nanargmax(starts))] if not np.isnan(starts).all() else shards["stage"].iloc[-1]
