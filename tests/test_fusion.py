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


CAPTURES = Path(__file__).parent / "data" / "realcaptures"
CAPTURE_NAMES = sorted(p.name for p in CAPTURES.iterdir() if (p / "truth.json").is_file())


def _verdict(evidence: Path) -> tuple:
    from zephyr_debug.analyze.analysis import analyze

    a = analyze(load(str(evidence)))
    return a.state, sorted((f.kind, f.stage, f.shard) for f in a.findings), a.progress.completed, a.warnings


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_overlapping_sources_read_as_one(name, tmp_path):
    """A real capture's log as users hold it more than once: the same file twice, and rotated halves
    that share their middle, read as the log alone (each line once), with a warning that says so;
    the one log through the fused path reads as it does alone (its own order, mixed resolutions)."""
    log = CAPTURES / name / "coordinator.log"
    alone = _verdict(_dir(tmp_path, "alone", [log]))
    twice = _dir(tmp_path, "twice", [log])
    shutil.copy(log, twice / "coordinator.log.1")
    lines = log.read_bytes().splitlines(keepends=True)
    cut = [i for i, line in enumerate(lines) if line[:1].isdigit() or line[:1] in b"IWEF"]  # record starts
    lo, hi = cut[len(cut) // 3], cut[2 * len(cut) // 3]
    halves = tmp_path / "halves"
    halves.mkdir()
    (halves / "coordinator.log.1").write_bytes(b"".join(lines[:hi]))
    (halves / "coordinator.log").write_bytes(b"".join(lines[lo:]))
    for d in (twice, halves):
        got = _verdict(d)
        assert got[:3] == alone[:3], (d.name, got[:3], alone[:3])
        assert any("another source already gave" in w for w in got[3]), (d.name, got[3])
    # one log plus a source with no event: the fused fold of the log alone
    empty = _dir(tmp_path, "with-empty", [log])
    (empty / "other.log").write_text("2026-01-01 00:00:00,000 INFO nothing zephyr prints\n")
    assert _verdict(empty)[:3] == alone[:3]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["infra-crash", "size-skew", "healthy-50"])
def test_a_whole_job_log_beside_its_coordinator_part_reads_as_the_log(name, tmp_path):
    """job.log and the coordinator.log split from it (every coordinator line in both): job.log's findings."""
    (job,) = generate(tmp_path / "g", BY_NAME[name], variants=("full",))
    log = job / "evidence" / "job.log"
    coord = split(log, tmp_path / "split", "files")[0]
    assert _problems(_dir(tmp_path, "both", [log, coord])) == _problems(_dir(tmp_path, "log", [log]))


def test_runs_one_after_another_read_the_newest_and_name_the_rest(tmp_path):
    """A log appended to by two runs (`>> job.log`): the newest run is the job, the earlier one is
    named as not read; its shards never mix into the newest's (skew's data-skew then healthy)."""
    both = tmp_path / "job.log"
    both.write_bytes(b"".join((CAPTURES / n / "coordinator.log").read_bytes() for n in ("skew", "healthy")))
    state, findings, completed, warnings = _verdict(both)
    assert (state, findings, completed) == _verdict(CAPTURES / "healthy" / "coordinator.log")[:3]
    (note,) = [w for w in warnings if "runs one after the other" in w]
    skew_log = (CAPTURES / "skew" / "coordinator.log").read_text()
    skew_run = skew_log.split("Starting zephyr pipeline: ", 1)[1].split()[0]
    assert f"not read: {skew_run} (" in note, note
    # the other way round: the failed run is the newest and is what is read
    rev = tmp_path / "rev.log"
    rev.write_bytes(b"".join((CAPTURES / n / "coordinator.log").read_bytes() for n in ("healthy", "crashloop")))
    assert _verdict(rev)[:2] == _verdict(CAPTURES / "crashloop" / "coordinator.log")[:2]


def test_runs_at_the_same_time_are_not_called_healthy(tmp_path):
    """Two jobs' logs in one directory, run side by side (skew's and healthy's): no verdict of health
    on lines whose job cannot be told apart; `cannot_tell` says why and what to give instead."""
    from zephyr_debug.analyze.analysis import analyze

    d = tmp_path / "mixed"
    d.mkdir()
    shutil.copy(CAPTURES / "skew" / "coordinator.log", d / "coordinator.log")
    shutil.copy(CAPTURES / "healthy" / "coordinator.log", d / "coordinator-2.log")
    a = analyze(load(str(d)))
    assert not a.healthy and any("ran at the same time" in b for b in a.cannot_tell), a.cannot_tell
    assert not any("ran at the same time" in b for b in analyze(load(str(CAPTURES / "skew"))).cannot_tell)
