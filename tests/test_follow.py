"""`watch`'s incremental read of a growing log (issue 28 item 5): after every append, the
follower's Evidence equals a full read of the file as it is then, and it folds only what arrived."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from logmaker import Knobs, evidence_diff, make_job
from test_wrapped import fold

from benchmarks.prodjobs import BY_NAME, generate
from zephyr_debug import streams
from zephyr_debug.errors import EvidenceError
from zephyr_debug.model import Evidence
from zephyr_debug.sources import load
from zephyr_debug.sources.follow import LogFollower


def _grow(data: bytes, path: Path, cuts: list[int]) -> list[tuple[LogFollower, list[str]]]:
    """Writes `data` to `path` in the pieces `cuts` make (anywhere, mid-line too); after each, the
    follower's Evidence against a full read of the file then."""
    follower, out = LogFollower(path), []
    path.write_bytes(b"")
    at = 0
    for cut in [*sorted(cuts), len(data)]:
        with open(path, "ab") as fh:
            fh.write(data[at:cut])
        at = cut
        complete = data[: data.rfind(b"\n", 0, cut) + 1]  # what a full read of complete lines sees
        whole = path.parent / "whole" / path.name
        whole.parent.mkdir(exist_ok=True)
        whole.write_bytes(complete)
        try:
            expected = _renamed(load(str(whole)), str(whole), str(path))
        except EvidenceError:
            with pytest.raises(EvidenceError):
                follower.evidence()
            continue
        out.append((follower, evidence_diff(follower.evidence(), expected)))
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    shards=st.integers(3, 30),
    task_errors=st.sampled_from([0.0, 0.1, 0.3]),
    abort=st.sampled_from(["", "task", "infra"]),
    foreign=st.sampled_from([0.0, 0.3]),
    pieces=st.integers(1, 6),
)
@pytest.mark.slow
def test_every_append_gives_the_full_read(tmp_path, seed, shards, task_errors, abort, foreign, pieces):
    k = Knobs(seed=seed, shards=shards, task_errors=task_errors, abort=abort, foreign=foreign, odd=0.05)
    [text] = make_job(k).values()
    data = text.encode()
    rnd = random.Random(seed)
    cuts = [rnd.randrange(len(data)) for _ in range(pieces)]
    for _, diff in _grow(data, tmp_path / f"job-{seed}.log", cuts):
        assert diff == []


@pytest.mark.slow
@pytest.mark.parametrize("name", ["infra-crash", "healthy-50", "stuck"])
def test_a_production_shaped_log_grown_line_by_line_chunks(tmp_path, name):
    """A coordinator log of a production-shaped job (tracebacks, dumps) cut into 8 appends."""
    coord = next(p for p in generate(tmp_path / "jobs", BY_NAME[name], 0) if p.name.endswith(".coord"))
    log = coord / "evidence" / "coordinator.log"
    data = log.read_bytes()
    rnd = random.Random(1)
    results = _grow(data, tmp_path / "grow.log", [rnd.randrange(len(data)) for _ in range(8)])
    assert results and all(diff == [] for _, diff in results)
    assert results[-1][0].full_reads == 1  # read from its start once, then only what arrived


def test_a_replaced_or_truncated_log_is_read_again(tmp_path):
    [text] = make_job(Knobs(seed=3)).values()
    lines = text.encode().splitlines(keepends=True)
    path = tmp_path / "job.log"
    path.write_bytes(b"".join(lines[: len(lines) // 2]))
    follower = LogFollower(path)
    follower.evidence()
    path.write_bytes(b"".join(lines[: len(lines) // 4]))  # truncated in place (a rotation)
    ev = follower.evidence()
    assert evidence_diff(ev, load(str(path))) == []
    assert follower.full_reads == 2 and follower.offset <= path.stat().st_size


def _renamed(ev: Evidence, old: str, new: str) -> Evidence:
    """`ev` with the file name `old` said as `new` (a full read of a copy of the file)."""

    def swap(v):
        return v.replace(old, new) if isinstance(v, str) else v

    ev.source = swap(ev.source)
    ev.reads = [dataclasses.replace(r, path=swap(r.path)) for r in ev.reads]
    ev.crashes = [dataclasses.replace(c, source=swap(c.source)) for c in ev.crashes]
    ev.warnings = [swap(w) for w in ev.warnings]
    return ev


def test_follows_only_what_a_full_read_takes_as_one_plain_log(tmp_path):
    [text] = make_job(Knobs(seed=4)).values()
    plain = tmp_path / "job.log"
    plain.write_text(text)
    (tmp_path / "status.json").write_text('{"stage": "x"}')
    assert LogFollower.follows(plain)
    assert not LogFollower.follows(tmp_path / "status.json")
    assert not LogFollower.follows(tmp_path)
    assert not LogFollower.follows(tmp_path / "missing.log")
    (tmp_path / "garbage.bin").write_bytes(b"\x00\x01binary")
    assert not LogFollower.follows(tmp_path / "garbage.bin")  # the full read names what is wrong
    wrapped = tmp_path / "wrapped.log"
    capture = (Path(__file__).parent / "data" / "realcaptures" / "crashloop" / "coordinator.log").read_text()
    wrapped.write_text(fold(capture, 80))
    streams.NOTES.clear()
    assert not LogFollower.follows(wrapped) and not streams.NOTES  # says nothing: the full read warns
    assert any("wrapped at 80 columns" in w for w in load(str(wrapped)).warnings)
