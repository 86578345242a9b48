"""Iris's view laid over the Zephyr evidence: the job's state, and each Iris task's resource
usage carried to the Zephyr workers it hosts."""

from __future__ import annotations

from zephyr_debug.model import DEAD_STATES, Evidence
from zephyr_debug.sources.iris_snapshot import Fetched

# Iris job states -> Evidence.state (anything else: still running).
JOB_STATES = {
    "SUCCEEDED": "succeeded",
    "FAILED": "failed",
    "WORKER_FAILED": "failed",
    "UNSCHEDULABLE": "failed",
    "KILLED": "interrupted",
}
RESOURCE_COLUMNS = ["memory_mb", "memory_peak_mb", "disk_mb", "cpu"]


def apply_job_state(ev: Evidence, got: Fetched, now: float) -> None:
    """The Iris job's own state: while it runs the evidence is as of now; once it ended, its end
    (succeeded / failed / killed) is the job's, unless Zephyr's logs already said it failed."""
    top = next((j for j in got.jobs if j["job_id"] == got.job), {})  # {}: a prefix of several jobs
    state = JOB_STATES.get(str(top.get("state", "")).removeprefix("JOB_STATE_"))
    if state is None:
        ev.now = now
        if ev.state in ("unknown", "succeeded") and not (ev.live and ev.live.done):
            ev.state = "running"
    elif ev.state not in ("failed",):
        ev.state = state
    if top.get("error") and not ev.fatal_error and state == "failed":
        ev.fatal_error = top["error"]


def zephyr_workers(workers, got: Fetched):
    """Iris task rows carry their resource usage over to the Zephyr workers they host; the other
    tasks (the driver, the coordinator) are not Zephyr workers and leave the table."""
    if not len(workers):
        return workers
    bases = got.worker_ids()
    task_rows = workers[workers["worker"].isin(bases.keys())]
    rest = workers[~workers["worker"].isin({t["task_id"] for t in got.tasks})].copy()
    names = rest["worker"].astype(str)
    stripped = names.str.replace(r":\d+$", "", regex=True)  # `BASE:N` -> BASE, once for all tasks
    for _, row in task_rows.iterrows():
        base = bases[row["worker"]]
        mine = (names == base) | (stripped == base)
        if not mine.any():
            continue
        for col in RESOURCE_COLUMNS:
            if col in rest and row.get(col) is not None:
                rest.loc[mine, col] = row[col]
        if row.get("state") in DEAD_STATES:  # the Iris task ended: so did the worker it hosted
            rest.loc[mine, "state"] = row["state"]
    return rest.reset_index(drop=True)
