"""`iris job summary` as users paste it: the text Iris's own CLI renders (and its --json) reads as
the job's tasks, the same rows list-tasks gives; beside a coordinator log it loses no finding."""

from __future__ import annotations

import json
import shutil
import warnings

import pandas as pd
import pytest

from benchmarks.prodjobs import BY_NAME, generate
from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.errors import EvidenceError
from zephyr_debug.sources import evidencedir, load

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from google.protobuf import json_format
    from iris.cli.job import _render_job_summary_text, build_job_summary
    from iris.rpc import job_pb2


def _summary(list_tasks: dict) -> dict:
    """Iris's own summary of the tasks list-tasks printed."""
    tasks = [json_format.ParseDict(t, job_pb2.TaskStatus(), ignore_unknown_fields=True) for t in list_tasks["tasks"]]
    status = job_pb2.JobStatus(job_id=tasks[0].task_id.rsplit("/", 1)[0], state=job_pb2.JOB_STATE_RUNNING)
    return build_job_summary(status, tasks)


def _tasks(finished: bool) -> dict:
    states = ["TASK_STATE_SUCCEEDED", "TASK_STATE_FAILED", "TASK_STATE_RUNNING", "TASK_STATE_WORKER_FAILED"]
    return {
        "tasks": [
            {
                "task_id": f"/alice/zephyr-abc-p0-workers/{i}",
                "state": states[i % 4] if finished else "TASK_STATE_RUNNING",
                "worker_id": f"iris-w-{i}",
                "exit_code": 137 if i % 4 == 1 else 0,
                "error": "OOM killed (container exceeded its memory limit)" if i % 4 == 1 else "",
                "resource_usage": {"memory_mb": str(1000 + i), "memory_peak_mb": str(2000 + 10 * i)},
            }
            for i in range(12)
        ]
    }


@pytest.mark.parametrize("finished", [True, False])
def test_text_and_json_read_as_list_tasks_does(tmp_path, finished):
    data = _tasks(finished)
    summary = _summary(data)
    (tmp_path / "summary.txt").write_text(_render_job_summary_text(summary) + "\n")
    (tmp_path / "summary.json").write_text(json.dumps(summary, default=str))
    (tmp_path / "list-tasks.json").write_text(json.dumps(data))
    kinds = {p.name: evidencedir.classify(p) for p in tmp_path.iterdir()}
    assert {k for k, _ in kinds.values()} == {"tasks"}
    want = kinds["list-tasks.json"][1]
    for name in ("summary.txt", "summary.json"):
        got = kinds[name][1]
        assert list(got["worker"]) == list(want["worker"]), name
        assert list(got["state"]) == list(want["state"]), name
        assert [str(e or "") for e in got["error"]] == [str(e or "") for e in want["error"]], name
        assert got["memory_peak_mb"].round(-1).tolist() == want["memory_peak_mb"].round(-1).tolist(), name
    text = kinds["summary.txt"][1]
    assert [None if pd.isna(c) else int(c) for c in text["exit_code"]] == [
        (137 if i % 4 == 1 else 0) if finished and i % 4 != 2 else None for i in range(12)
    ]


def test_a_summary_beside_the_log_loses_no_finding(tmp_path):
    """The seed's crasher, coordinator log alone and with Iris's summary of its tasks."""
    (full,) = [d for d in generate(tmp_path / "jobs", BY_NAME["infra-crash"]) if d.name.endswith(".full+status")]
    alone, both = tmp_path / "alone", tmp_path / "both"
    for d in (alone, both):
        d.mkdir()
        shutil.copy(full / "evidence" / "job.log", d / "job.log")
    summary = _summary(json.loads((full / "evidence" / "list-tasks.json").read_text()))
    (both / "summary.txt").write_text(_render_job_summary_text(summary) + "\n")

    def kinds(d):
        return {(f.kind, f.shard) for f in analyze(load(str(d))).problems}

    assert kinds(alone) <= kinds(both) and ("crash-loop", 321) in kinds(both)


def test_a_cut_table_names_its_line(tmp_path):
    text = _render_job_summary_text(_summary(_tasks(True)))
    path = tmp_path / "summary.txt"
    path.write_text(text + "\n  3  runn\n")
    with pytest.raises(EvidenceError, match=r"summary.txt:\d+: not a task row"):
        evidencedir.classify(path)
