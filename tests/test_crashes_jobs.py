"""zdebug crashes on real reference jobs: subprocess-runner crash files (task, segv, oom, a
crash-looping shard), inline-runner deaths found in worker logs and kernel.log."""

from __future__ import annotations

import json

import pytest

from zephyr_debug.commands.demo import FOLLOW_UPS

pytestmark = pytest.mark.slow


def _run(capsys, *args: str) -> dict:
    from zephyr_debug.cli import app

    app(list(args), standalone_mode=False)
    return json.loads(capsys.readouterr().out)


def _by_kind(groups: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for g in groups:
        out.setdefault(g["kind"], []).append(g)
    return out


def test_subprocess_job_groups_task_segv_oom_and_flags_the_crash_loop(reference_job, capsys):
    job = reference_job("crash-loop:1", "segfault:2", "oom:4", runner="subprocess", stages=1, shards=6)
    groups = _run(capsys, "crashes", str(job.job_dir), "--dedupe", "--json")["groups"]
    kinds = _by_kind(groups)
    loop = next(g for g in kinds["task"] if 1 in g["shards"])
    assert loop["count"] >= 2 and "ArrowInvalid" in loop["exception"] and loop["frames"]
    assert [d["shard"] for d in loop["deterministic"]] == [1]
    assert all(m.endswith(".txt") for m in loop["members"])
    (segv,) = kinds["segv"]
    assert segv["shards"] == [2] and segv["exception"] == "SIGSEGV" and segv["frames"][0].endswith("_native_decode")
    (oom,) = kinds["oom"]
    assert oom["shards"] == [4] and oom["exception"] == "MemoryError" and not oom["deterministic"]
    rows = _run(capsys, "crashes", str(job.job_dir), "--json", "--shard", "1")["crashes"]
    assert len(rows) == loop["count"] and {r["fingerprint"] for r in rows} == {loop["fingerprint"]}


def test_inline_worker_deaths_get_their_reason_from_worker_logs_and_kernel_log(reference_job, capsys):
    job = reference_job("segfault:2", "oom:4", runner="inline", stages=1, shards=6)
    groups = _run(capsys, "crashes", str(job.job_dir), "--dedupe", "--json")["groups"]
    kinds = _by_kind(groups)
    (segv,) = kinds["segv"]
    assert segv["shards"] == [2] and segv["frames"][0].endswith("_native_decode")
    assert ".log:" in segv["members"][0] and "Current thread <addr>" in segv["example"]
    (oom,) = kinds["oom"]
    assert oom["shards"] == [4] and "Killed process <pid>" in oom["message"]
    assert "infra" not in kinds  # both worker losses explained


def test_demo_follows_up_with_crash_groups():
    assert ["crashes", "--dedupe"] in FOLLOW_UPS
