"""80 columns (#30 item 3): every command's text at 80 and 120 columns (COLUMNS), real processes
over real jobs: no line wider than the screen, and no id (job, worker) cut at a line's end.

A `next:` command is printed unwrapped on purpose (a hard-wrapped command cannot be pasted): a
line that holds one may be wider; so may a log's own line that `zdebug logs` prints (`FILE:N: …`).
`playbook NAME` piped is the Markdown source (a file), not a view.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len

from zephyr_debug.sources import load

ZDEBUG = [sys.executable, "-m", "zephyr_debug.cli"]
CAPTURES = Path(__file__).parent / "data" / "realcaptures"
BORDER = " │┃║|"
EVIDENCE_LINE = re.compile(r"^[\w./-]+:\d+: ")  # `zdebug logs`: a log's own line, never wrapped


def text(args: list[str], width: int, home: Path) -> str:
    env = {**os.environ, "COLUMNS": str(width), "ZDEBUG_HOME": str(home)}
    proc = subprocess.run([*ZDEBUG, *args], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, (args, proc.stderr)
    return proc.stdout


def check(out: str, width: int, ids: set[str], what: str) -> None:
    for line in out.splitlines():
        if "zdebug " not in line and not EVIDENCE_LINE.match(line):
            assert cell_len(line) <= width, f"{what} at {width}: {line!r}"
        end = line.rstrip(BORDER)
        for i in ids:
            cut = [k for k in range(6, len(i)) if end.endswith(i[:k])]
            assert not cut, f"{what} at {width} cuts {i!r}: {line!r}"


def ids_of(target: str) -> set[str]:
    ev = load(target)
    return {ev.job, *map(str, ev.workers["worker"])} - {""}


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 120])
def test_every_command_fits_and_keeps_ids_whole(reference_job, jobs_root, width):
    result = reference_job("crash-loop:2", workers=2, shards=4, stages=1)
    job, home = result.execution_id, jobs_root.parent
    ids = ids_of(str(result.job_dir))
    jobs = text(["jobs"], width, home)
    check(jobs, width, ids, "jobs")
    assert job in jobs  # the id whole, on one line, copyable (one `zdebug jobs` process, checked twice)
    for args in (
        ["status", job],
        ["diagnose", job],
        ["stragglers", job],
        ["workers", job],
        ["crashes", job],
        ["crashes", job, "--dedupe"],
        ["counters", job],
        ["watch", job, "--once"],
        ["playbook"],
        ["logs", job, "--shard", "2"],
    ):
        check(text(args, width, home), width, ids, " ".join(args))


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 120])
def test_real_captures_fit(tmp_path, width):
    for name, commands in {
        "counters": (["counters"], ["status"]),
        "oom": (["status"], ["diagnose"], ["crashes", "--dedupe"], ["workers"]),
        "skew": (["diagnose"], ["stragglers"]),
    }.items():
        target = str(CAPTURES / name)
        ids = ids_of(target)
        for args in commands:
            check(text([args[0], target, *args[1:]], width, tmp_path), width, ids, f"{args[0]} {name}")


def test_counters_keep_names_whole_and_gauges_have_no_rate(tmp_path):
    out = text(["counters", str(CAPTURES / "counters")], 80, tmp_path)
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("zephyr/worker/")}
    assert {"zephyr/worker/cpu_pct_average", "zephyr/worker/mem_current_bytes", "zephyr/worker/cpu_time"} <= set(rows)
    for gauge in ("zephyr/worker/cpu_pct_average", "zephyr/worker/mem_current_bytes", "zephyr/worker/mem_peak_bytes"):
        assert rows[gauge][2:4] == ["-", "-"], rows[gauge]  # no /s, no /item
    assert rows["zephyr/worker/cpu_time"][2] != "-"  # a counter keeps its rate


@pytest.mark.slow
def test_watch_failures_keep_worker_and_kind_whole(reference_job, jobs_root):
    result = reference_job("crash-loop:2", workers=2, shards=4, stages=1)
    out = text(["watch", result.execution_id, "--once"], 80, jobs_root.parent)
    head = next(line for line in out.splitlines() if "when" in line and "shard" in line and "error" in line)
    assert "worker" in head and "kind" in head and "w…" not in out
    rows = out[out.index("newest failures") :].splitlines()[2:]
    assert any(" task " in r for r in rows), rows
