"""Live Iris source: `iris://HOST:PORT/<job-id>` (or `iris://https://HOST/<job-id>`) -> Evidence.

zdebug does the stitching a user does by hand with the Iris CLI. The parts:
`iris_client` (the marin-iris Connect calls), `iris_snapshot` (one round of calls, saved as
files that `evidencedir` reads back), `iris_workers` (the Iris job state and task resources laid
over the Zephyr evidence), `unpickle` (actor replies), `profile.iris_task` (profile-task).
"""

from __future__ import annotations

import time

from zephyr_debug import jobstore
from zephyr_debug.errors import EvidenceError, UsageError
from zephyr_debug.model import Evidence
from zephyr_debug.sources import evidencedir, iris_snapshot, iris_workers

SCHEME = "iris://"


def is_target(target: str) -> bool:
    return target.startswith(SCHEME)


def parse_target(target: str) -> tuple[str, str]:
    """`iris://HOST:PORT/user/job` -> (`http://HOST:PORT`, `/user/job`)."""
    rest = target[len(SCHEME) :]
    scheme = "http://"
    for prefix in ("http://", "https://"):
        if rest.startswith(prefix):
            scheme, rest = prefix, rest[len(prefix) :]
    host, _, job = rest.partition("/")
    if not host or not job.strip("/"):
        raise UsageError(f"{target}: expected iris://HOST:PORT/<job-id>, e.g. iris://127.0.0.1:10000/alice/my-job")
    return scheme + host, "/" + job.strip("/")


def load(target: str) -> Evidence:
    return load_fetched(target)[0]


def load_fetched(target: str) -> tuple[Evidence, iris_snapshot.Fetched]:
    """The Evidence of an Iris job, and the Iris replies it was built from."""
    url, job = parse_target(target)
    got = iris_snapshot.fetch(url, job)
    now = time.time()
    if not got.coordinator and not any(" zephyr." in e.data or "Zephyr" in e.data for e in got.logs):
        raise EvidenceError(
            f"{target}: no Zephyr coordinator in Iris job {job} "
            f"(no `-coord` endpoint, no Zephyr lines in {len(got.logs)} log lines)"
        )
    saved = iris_snapshot.save(got, jobstore.home() / "iris")
    ev = evidencedir.load(saved)
    if ev is None or not (ev.stages or ev.live):
        raise EvidenceError(
            f"{target}: no Zephyr coordinator in Iris job {job} "
            f"(its logs and endpoints hold no Zephyr pipeline; fetched to {saved})"
        )
    ev.job = ev.source = target  # `next` commands then point back at the live job
    ev.warnings += got.warnings
    if not got.coordinator:
        ev.warnings.append("no live Zephyr coordinator endpoint (pipeline finished?): status comes from the logs")
    iris_workers.apply_job_state(ev, got, now)
    ev.workers = iris_workers.zephyr_workers(ev.workers, got)
    ev.config.setdefault("iris_evidence_dir", str(saved))
    return ev, got
