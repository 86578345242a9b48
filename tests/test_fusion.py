"""One job's sources fused (sources/fusion.py, workerid.py): the same evidence split over several
sources, in every form a user fetches it, reads to the same findings as in one file; adding a
source never loses a true finding nor adds a false one (generated jobs, every subset of
sources); every form of a worker's name is one worker."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest

from benchmarks.prodjobs import BY_NAME, generate
from benchmarks.prodjobs.split import FORMS, split
from benchmarks.score import findings_of, score
from zephyr_debug import workerid
from zephyr_debug.findings import INFO
from zephyr_debug.sources import load

SCENARIOS = ("infra-crash", "task-crash", "subprocess-oom", "dead-holder", "stuck", "size-skew", "healthy-50")
EXTRAS = ("list-tasks.json", "get_status.json")


def _problems(evidence: Path) -> set[tuple]:
    return {
        (f.stage, shard, cause)
        for f in findings_of(load(str(evidence)))
        if f.severity != INFO
        for shard in (f.all_shards or (None,))
        for cause in f.causes or (f.kind,)
    }


@pytest.fixture(scope="module", params=SCENARIOS)
def job(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    (job,) = generate(out, BY_NAME[request.param], variants=("full+status",))
    return job


def _dir(root: Path, name: str, files: list[Path]) -> Path:
    d = root / name
    d.mkdir()
    for f in files:
        shutil.copy(f, d / f.name)
    return d


@pytest.mark.slow
@pytest.mark.parametrize("form", FORMS)
def test_split_sources_read_as_one_log(job, form, tmp_path):
    """coordinator.log + worker logs (+ every subset of list-tasks / get_status) == job.log (+ the
    same extras): nothing lost or added by where the lines came from."""
    import json

    truth = json.loads((job / "truth.json").read_text(encoding="utf-8"))
    evidence = job / "evidence"
    parts = split(evidence / "job.log", tmp_path / "split", form)
    coord_only = _problems(_dir(tmp_path, "coord", parts[:1]))
    true = {(e["stage"], e["shard"], e["cause"]) for e in truth["expect"]}
    for n in range(len(EXTRAS) + 1):
        for extras in itertools.combinations(EXTRAS, n):
            tag = "-".join(extras) or "none"
            more = [evidence / x for x in extras]
            whole = _problems(_dir(tmp_path, f"whole-{tag}", [evidence / "job.log", *more]))
            fused = _problems(_dir(tmp_path, f"fused-{tag}", [*parts, *more]))
            assert fused == whole, (form, extras, fused ^ whole)
            assert coord_only & true <= fused, (form, extras, (coord_only & true) - fused)
            if truth["healthy"]:
                assert not score(truth, findings_of(load(str(tmp_path / f"fused-{tag}")))).fp, (form, extras)


def test_seed_crasher_full_evidence_is_crash_loop_and_oom(tmp_path):
    """The 4999/5000 shape from the log alone and from log + task logs + list-tasks + status:
    `crash-loop` + `oom` on the culprit shard either way (the task logs once erased its failures)."""
    (job,) = generate(tmp_path / "g", BY_NAME["infra-crash"], variants=("full+status",))
    evidence = job / "evidence"
    parts = split(evidence / "job.log", tmp_path / "split", "task-logs")
    full = _problems(_dir(tmp_path, "full", [*parts, evidence / "list-tasks.json", evidence / "get_status.json"]))
    stage = "stage0-Map → Write"
    assert {(stage, 321, "crash-loop"), (stage, 321, "oom")} <= full, full
    f = next(f for f in findings_of(load(str(tmp_path / "full"))) if f.kind == "crash-loop")
    assert dict(f.metrics)["infra_failures"] == 20


@pytest.mark.parametrize(
    "names",
    [
        ("/u/job/zephyr-p-workers/57", "zephyr-p-workers-57", "zephyr-p-workers-a0-57:0", "zephyr-p-workers-a2-57:1"),
        ("/alice/zephyr--e3-p0-workers-a0/7", "zephyr--e3-p0-workers-a0-7:0", "zephyr--e3-p0-workers-7"),
    ],
)
def test_every_form_of_a_worker_name_is_one_worker(names):
    assert len({workerid.key(n) for n in names}) == 1, [workerid.key(n) for n in names]


def test_other_workers_stay_apart():
    names = ("zephyr-p-workers-a0-5:0", "zephyr-p-workers-a0-57:0", "zephyr-q-workers-5", "w-1")
    keys = [workerid.key(n) for n in names]
    assert len(set(keys)) == len(keys)
