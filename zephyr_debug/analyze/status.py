"""Job status plus a one-paragraph diagnosis: tail, stall, dead workers, abort reason."""

from __future__ import annotations

import math

from zephyr_debug.analyze import stragglers
from zephyr_debug.model import ALIVE_STATES, STALL_THRESHOLD_S, Evidence

MAX_NAMED_STRAGGLERS = 3


def latest_status(ev: Evidence) -> dict:
    """The newest JobStatus-like view: the live get_status when there is one, else the last
    status row, with the counts of the job's end state when it finished."""
    if ev.live is not None:
        row = ev.live.to_dict()
    elif len(ev.status):
        last = ev.status.iloc[-1]
        row = {k: _num(last[k]) for k in ("completed", "total", "in_flight", "queue_depth", "retries")}
        row["stage"] = last["stage"]
    else:
        row = {"stage": "", "completed": 0, "total": 0, "in_flight": 0, "queue_depth": 0, "retries": 0}
    if ev.state in ("succeeded", "failed") and ev.live is None and ev.stages:
        # The status line is periodic; the events know the final counts.
        stage = ev.stages[-1]
        done = ev.attempts[(ev.attempts["stage"] == stage.name) & (ev.attempts["outcome"] == "done")]
        running = ev.attempts[(ev.attempts["stage"] == stage.name) & (ev.attempts["outcome"] == "running")]
        row.update(stage=stage.name, total=stage.total, completed=int(done["shard"].nunique()),
                   in_flight=0 if ev.state == "succeeded" else len(running),
                   queue_depth=0 if ev.state == "succeeded" else row.get("queue_depth", 0))
    row["done"] = ev.state in ("succeeded", "failed")
    row["fatal_error"] = ev.fatal_error
    return row


def _num(value) -> int:
    return 0 if value is None or (isinstance(value, float) and math.isnan(value)) else int(value)


def summarize(ev: Evidence, stall_threshold_s: float = STALL_THRESHOLD_S) -> dict:
    status = latest_status(ev)
    workers = ev.workers
    alive = int(workers["state"].isin(ALIVE_STATES).sum()) if len(workers) else 0
    failed = int(workers["state"].isin({"failed", "dead"}).sum()) if len(workers) else 0
    if ev.live is None and len(ev.status) and _num(ev.status.iloc[-1]["registered"]) > len(workers):
        # A log names only some workers; its last status line counts them all.
        alive, failed = _num(ev.status.iloc[-1]["alive"]), _num(ev.status.iloc[-1]["dead"])
    since = None if ev.progress_time is None else max(ev.now - ev.progress_time, 0.0)
    tail = status["in_flight"] > 0 and status["queue_depth"] == 0 and not status["done"]
    stalled = since is not None and since >= stall_threshold_s and ev.state in ("running", "interrupted")
    sentences, next_steps = [], []
    job = ev.job
    if ev.state == "succeeded":
        sentences.append(f"Job finished: all {len(ev.stages)} stage(s) completed.")
    elif ev.state == "failed":
        reason = (ev.fatal_error or "unknown reason").strip().splitlines()[0]
        sentences.append(f"Job aborted in {status['stage']}: {reason}")
        next_steps.append(f"zdebug crashes {job} --dedupe")
    elif ev.state == "interrupted":
        sentences.append("Job was interrupted: the coordinator stopped without finishing or aborting "
                         f"({status['completed']}/{status['total']} shards of {status['stage']} done).")
    else:
        sentences.append(f"{status['stage']}: {status['completed']}/{status['total']} complete, "
                         f"{status['in_flight']} in-flight, {status['queue_depth']} queued.")
    if tail and ev.state != "succeeded":
        sentences.append(f"The stage is in its tail: {status['in_flight']} shard(s) in flight and none queued, "
                         "so it waits on stragglers.")
        next_steps.append(f"zdebug stragglers {job}")
    if stalled:
        sentences.append(f"No progress for {since / 60:.0f} min (threshold {stall_threshold_s / 60:.0f} min): "
                         "ZephyrPipelineProgressStalled would fire.")
        next_steps.append(f"zdebug stragglers {job}")
    if failed:
        sentences.append(f"{failed} worker(s) failed or dead, {alive} alive.")
    if (len(workers) or failed) and alive == 0 and ev.state in ("running", "interrupted"):
        sentences.append("No worker is alive: nothing can finish the queued shards.")
    findings = stragglers.analyze(ev)["findings"] if ev.state != "succeeded" or tail else []
    if findings:
        named = "; ".join(_straggler(f) for f in findings[:MAX_NAMED_STRAGGLERS])
        more = len(findings) - MAX_NAMED_STRAGGLERS
        sentences.append(f"Stragglers: {named}{f' and {more} more' if more > 0 else ''}.")
        next_steps[:0] = [f["next"] for f in findings[:MAX_NAMED_STRAGGLERS]]
    return {**status, "job": job, "state": ev.state, "source": ev.source,
            "workers": _workers(ev), "alive": alive, "failed": failed,
            "progress_time": ev.progress_time, "since_progress_s": since, "tail": bool(tail),
            "stalled": bool(stalled), "diagnosis": " ".join(sentences),
            "stragglers": [{k: f[k] for k in ("shard", "stage", "worker", "cause", "elapsed_s", "next")}
                           for f in findings],
            "next": list(dict.fromkeys(next_steps)), "warnings": ev.warnings}


def _straggler(f: dict) -> str:
    ratio = f", {f['ratio_to_median']:.1f}x the median" if f["ratio_to_median"] else ""
    return f"shard {f['shard']} of {f['stage']} is {f['cause']} ({f['elapsed_s']:.0f}s{ratio})"


def _workers(ev: Evidence) -> dict:
    if ev.live is not None:
        return ev.live.workers
    return {r.worker: {"state": r.state, "last_seen_ago": r.last_seen_ago} for r in ev.workers.itertuples()}
