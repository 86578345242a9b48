"""One ranked list of what is wrong with a job: the status, the stragglers and the crash
groups, each finding with the playbook that explains it and the exact next command."""

from __future__ import annotations

from zephyr_debug import playbooks
from zephyr_debug.analyze import stragglers
from zephyr_debug.analyze.status import summarize
from zephyr_debug.model import STALL_THRESHOLD_S, Evidence

# Most urgent first; a finding's rank is the index of its cause here.
SEVERITY = ["aborted", "all-workers-dead", "oom", "crash-loop", "stalled", "stuck", "dead-holder", "crash-group",
            "infra-crash", "slow-worker", "data-skew"]


def diagnose(ev: Evidence, crash_groups: list, th: stragglers.Thresholds = stragglers.Thresholds(),
             stall_threshold_s: float = STALL_THRESHOLD_S) -> dict:
    status = summarize(ev, stall_threshold_s)
    job = ev.job
    found: list[dict] = []
    if ev.state == "failed":
        lines = (ev.fatal_error or "unknown reason").strip().splitlines()
        found.append(_finding("aborted", f"job aborted in {status['stage']}: {lines[0]}", lines[1:4],
                              [f"zdebug crashes {job} --dedupe"]))
    if status["stalled"]:
        found.append(_finding("stalled", f"no progress for {status['since_progress_s'] / 60:.1f} min",
                              ["ZephyrPipelineProgressStalled fires at 45 min without progress"],
                              [f"zdebug stragglers {job}"]))
    for f in stragglers.analyze(ev, th)["findings"]:
        nxt = f["next"] if isinstance(f["next"], list) else [f["next"]]
        found.append(_finding(f["cause"], f"shard {f['shard']} of {f['stage']}: {', '.join(f['causes'])}",
                              f["evidence"], nxt, shard=f["shard"], worker=f["worker"], stage=f["stage"],
                              elapsed_s=f["elapsed_s"]))
    for g in crash_groups:
        cause = "infra-crash" if g.kind == "infra" else "crash-group"
        what = ": ".join(x for x in (g.exception, g.message) if x) or g.kind
        evidence = [f"{g.count} crash(es) of kind {g.kind} on shard(s) {_few(list(g.shards))}, "
                    f"worker(s) {_few(list(g.workers))}"]
        evidence += [f"deterministic: shard {d.shard} crashed on {d.attempts} attempts" for d in g.deterministic]
        found.append(_finding(cause, f"{g.count}× {what}", evidence, [f"zdebug crashes {job} --dedupe"],
                              count=g.count, fingerprint=g.fingerprint))
    books = playbooks.for_cause()
    found.sort(key=lambda f: (SEVERITY.index(f["cause"]), -(f.get("count") or 0), -(f.get("elapsed_s") or 0)))
    for rank, f in enumerate(found, 1):
        f["rank"] = rank
        f["playbook"] = books.get(f["cause"])
        if f["playbook"]:
            f["next"].append(f"zdebug playbook {f['playbook']}")
    return {"job": job, "state": ev.state, "source": ev.source, "summary": status["diagnosis"],
            "progress": {k: status[k] for k in ("stage", "completed", "total", "in_flight", "queue_depth")},
            "healthy": not found, "findings": found, "warnings": ev.warnings}


def _finding(cause: str, title: str, evidence: list[str], nxt: list[str], **extra) -> dict:
    return {"cause": cause, "title": title, "evidence": list(evidence), "next": list(dict.fromkeys(nxt)), **extra}


def _few(items: list, n: int = 5) -> str:
    shown = ", ".join(str(i) for i in items[:n])
    return shown + (f" (+{len(items) - n})" if len(items) > n else "") if items else "-"
