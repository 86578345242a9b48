"""One loader over every kind of evidence: `load(target) -> Evidence`.

`target` is a live coordinator URL, an Iris job (`iris://HOST:PORT/<job-id>`), a run in
Prometheus (`prometheus+URL?run=ID`), a job dir, Zephyr's telemetry in finelog
(`finelog://HOST:PORT/<execution_id>`), an execution id (or unique prefix, or `latest`) in the
job store, or a file / directory of other evidence (`evidencedir`: content decides the format).
"""

from __future__ import annotations

from pathlib import Path

from zephyr_debug import jobstore, streams
from zephyr_debug.errors import EvidenceError
from zephyr_debug.model import Evidence
from zephyr_debug.sources import evidencedir, finelog, iris, jobdir, live, prometheus


def load(target: str, finelog_url: str | None = None) -> Evidence:
    """The evidence of `target`; with `finelog_url`, Zephyr's telemetry of the same execution merged in."""
    kind, ev = _load(target)
    ev.warnings += streams.NOTES
    streams.NOTES.clear()
    ev.provenance = ev.provenance if ev.provenance[:1] == [kind] else [kind, *ev.provenance]
    return finelog.merge(ev, finelog_url) if finelog_url else ev


def _load(target: str) -> tuple[str, Evidence]:
    """(what the evidence is built from, the evidence)."""
    if finelog.is_target(target):  # finelog://HOST:PORT/<execution_id>: Zephyr's own telemetry
        return "finelog", finelog.load(target)
    if prometheus.is_target(target):  # prometheus+http://HOST:9090?run=EXEC_ID
        return "prometheus", prometheus.load(target)
    if iris.is_target(target):  # iris://HOST:PORT/<job-id>: a live Iris cluster
        return "iris", iris.load(target)
    if target.startswith(("http://", "https://")):
        return "coordinator", live.load(target)
    path = Path(target)
    if path.is_file():
        path = streams.plain(path)  # a compressed log: its decompressed copy
    if path.is_dir() and jobstore.is_job_dir(path):
        return "job-dir", jobdir.load(path)
    if path.exists():
        evidence = evidencedir.load(path)
        if evidence is not None:
            return "zephyr-output", evidence
        kind = "directory" if path.is_dir() else "file"
        raise EvidenceError(f"{target}: {kind} holds no evidence zdebug can read (no events.jsonl, no Zephyr logs)")
    return "job-dir", jobdir.load(jobstore.resolve_job(target))
