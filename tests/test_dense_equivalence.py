"""The bulk ("dense") log fold gives the same Evidence as the per-line fold (issue 21 part 3).

Every log-text file in tests/data, production-shaped jobs (benchmarks/prodjobs), the event-dense
benchmark log and random jobs (tests/logmaker.py) are loaded with `dense=False` and `dense=True`:
`evidence_diff` must be empty (or both loads raise the same EvidenceError). The bulk path is also
run with its knobs turned down (every file read in bulk, small chunks, short batches, several
processes) so that batches, chunk borders and range borders fall inside these small logs.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import logmaker
import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from logmaker import Knobs, evidence_diff, write_job

from benchmarks import bench_logdense
from benchmarks.prodjobs import BY_NAME, generate
from zephyr_debug import zephyrlog
from zephyr_debug.errors import EvidenceError
from zephyr_debug.model import Evidence
from zephyr_debug.sources import densefold, evidencedir, logtext

DATA = Path(__file__).parent / "data"
DATA_FILES = sorted(p for p in DATA.rglob("*") if p.is_file() and p.suffix != ".py")


@contextmanager
def bulk(chunk: int | None = None, batch: int | None = None, processes: int = 0, force: bool = True):
    """The bulk path with smaller knobs: `force` reads every file in bulk (not only mostly-event
    ones), `chunk` bytes per bulk split, `batch` rows before a run is folded at once, `processes`
    (bytes) splits files of that size and more into ranges of that size parsed by several processes. Yields a
    Counter of what the bulk fold did (chunks parsed in this process, ranges handed to other
    processes, rows folded, batches applied at once)."""
    seen: Counter = Counter()
    chunks, fold, applied, ranges = logtext.dense_chunks, densefold.fold, densefold._batch, logtext._ranges

    def counted_chunks(path, start, end, chunk_bytes=chunk or logtext.DENSE_CHUNK_BYTES):
        for rows in chunks(path, start, end, chunk_bytes):
            seen["chunks"] += 1
            yield rows

    def counted_fold(tl, rows, lo, hi, source):
        seen["rows"] += hi - lo
        fold(tl, rows, lo, hi, source)

    def counted_ranges(path, parts):
        out = ranges(path, parts)
        seen["ranges"] += len(out)
        return out

    def counted_batch(*args):
        done = applied(*args)
        seen["batches"] += done
        return done

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(logtext, "dense_chunks", counted_chunks)
        mp.setattr(densefold, "fold", counted_fold)
        mp.setattr(densefold, "_batch", counted_batch)
        mp.setattr(logtext, "_ranges", counted_ranges)
        if force:
            mp.setattr(logtext, "DENSE_SHARE", 0.0)
        if batch is not None:
            mp.setattr(densefold, "MIN_BATCH", batch)
        if processes:
            mp.setattr(logtext, "PARALLEL_MIN_BYTES", processes)
            mp.setattr(logtext, "DENSE_RANGE_BYTES", processes)
        yield seen


def per_line(paths: list[Path]) -> Evidence | EvidenceError:
    """The per-line load, or the EvidenceError it raises."""
    try:
        return logtext.load(paths, "job", dense=False)
    except EvidenceError as exc:
        return exc


def bulk_diff(paths: list[Path], slow: Evidence | EvidenceError, **knobs) -> tuple[list[str], Counter]:
    """(evidence_diff of the per-line load `slow` and the bulk load, what the bulk fold did); when
    the per-line load raised EvidenceError the bulk load must raise the same message."""
    if isinstance(slow, EvidenceError):
        with bulk(**knobs) as seen, pytest.raises(EvidenceError) as bulk_exc:
            logtext.load(paths, "job", dense=True)
        return ([] if str(bulk_exc.value) == str(slow) else [f"error {slow} != {bulk_exc.value}"]), seen
    with bulk(**knobs) as seen:
        fast = logtext.load(paths, "job", dense=True)
    return evidence_diff(slow, fast), seen


def both_ways(paths: list[Path], **knobs) -> tuple[list[str], Counter]:
    return bulk_diff(paths, per_line(paths), **knobs)


# -- evidence_diff itself ------------------------------------------------------------------------
def test_evidence_diff_finds_each_kind_of_difference(tmp_path):
    paths = write_job(Knobs(seed=5, task_errors=0.2, infra=0.1), tmp_path)
    a, b = (logtext.load(paths, "job", dense=False) for _ in range(2))
    assert evidence_diff(a, b) == []
    b.status = b.status.astype({"completed": float})  # same values, another dtype: equal
    b.attempts.loc[3, "end_ts"] += 0.001
    b.workers.loc[0, "last_seen_ago"] = None
    b.stages[0].end_ts = None
    b.crashes[0] = dataclasses.replace(b.crashes[0], line=(b.crashes[0].line or 0) + 1)
    b.log_facts.status_exec[-1] = b.log_facts.status_exec[-1]._replace(alive=-1)
    b.worker_events = b.worker_events[:-1]
    b.counters["x"] = 1.0
    b.progress_time = (a.progress_time or 0.0) + 1
    diff = evidence_diff(a, b)
    for needle in (
        "attempts[3].end_ts",
        "workers[0].last_seen_ago",
        "stages[0].end_ts",
        "crashes[0].line",
        "log_facts.status_exec[",
        "worker_events: ",
        "counters: key 'x' only in b",
        "progress_time",
    ):
        assert any(line.startswith(needle) for line in diff), (needle, diff)
    assert not any(line.startswith("status") for line in diff), diff
    assert len(diff) == 8, diff


# -- the generator's logs exercise the bulk path ---------------------------------------------------
def test_generated_logs_form_batches_and_cross_chunk_borders(tmp_path):
    paths = write_job(Knobs(seed=1, shards=60, workers=6, worker_files=2, odd=0.05), tmp_path)
    assert sum(len(p.read_text().splitlines()) for p in paths) > 400
    diff, seen = both_ways(paths, chunk=500, batch=4)
    assert diff == []
    assert seen["chunks"] > 50 and seen["batches"] > 5 and seen["rows"] > 100, seen


# -- files in tests/data -----------------------------------------------------------------------------
@pytest.mark.parametrize("path", DATA_FILES, ids=lambda p: str(p.relative_to(DATA)))
def test_data_files(path):
    slow = per_line([path])
    for knobs in ({}, {"chunk": 512, "batch": 2}):  # every file read in bulk
        diff, _ = bulk_diff([path], slow, **knobs)
        assert diff == [], (knobs, diff)


def test_data_files_are_read_in_bulk():
    """The bulk path really runs on the real captures (their Python-logging lines)."""
    captures = sorted(DATA.glob("realcaptures/*/coordinator.log"))
    assert len(captures) >= 9
    with bulk(batch=2) as seen:
        for path in captures:
            logtext.load([path], "job", dense=True)
    assert seen["rows"] > 50 and seen["batches"] > 10, seen  # glog after the first shard: few rows


# -- production-shaped jobs --------------------------------------------------------------------------
PROD = [  # (scenario, line prefix): python is the prefix the bulk path reads
    ("healthy-50", "python"),
    ("stuck", "python"),
    ("infra-crash", "python"),
    ("task-crash", "python"),
    ("subprocess-oom", "python"),
    ("all-dead", "python"),
    ("size-skew-reduce", "python"),
    ("preempt-abort", "python"),
    ("duplicate-execution", "python"),
    ("stale-coordinator", "python"),
    ("dispatch-stall", "python"),
    ("last-stage-shutdown", "python"),
    ("stuck", None),  # its own prefix: python until the first shard is done, then glog
    ("healthy-multistage", None),  # iris
    ("dispatch-stall", None),  # ray
]


@pytest.fixture(scope="module")
def prodjobs(tmp_path_factory) -> dict[str, list[Path]]:
    out = tmp_path_factory.mktemp("prodjobs")
    jobs = {}
    for name, prefix in PROD:
        sc = BY_NAME[name]
        sc = dataclasses.replace(sc, prefix=prefix or sc.prefix)
        for job in generate(out / sc.prefix, sc, seed=2, variants=("full", "coord")):
            jobs[f"{job.name}.{sc.prefix}"] = sorted((job / "evidence").glob("*.log"))
    return jobs


@pytest.mark.parametrize("job", [f"{n}.{v}.{p or BY_NAME[n].prefix}" for n, p in PROD for v in ("full", "coord")])
def test_prodjobs(prodjobs, job):
    paths, slow = prodjobs[job], per_line(prodjobs[job])
    for knobs in ({"force": False}, {"chunk": 16 << 10, "batch": 8}):
        diff, _ = bulk_diff(paths, slow, **knobs)
        assert diff == [], (knobs, diff)


def test_prodjob_in_ranges_of_several_processes(prodjobs):
    """Line numbers of crashes and the fold order survive range borders."""
    paths = prodjobs["infra-crash.full.python"]
    assert paths[0].stat().st_size > 1 << 20
    diff, seen = both_ways(paths, processes=256 << 10, batch=8)
    assert diff == [] and seen["ranges"] >= 4 and seen["batches"] > 0, (seen, diff)


# -- the event-dense benchmark log -------------------------------------------------------------------
@pytest.fixture(scope="module")
def dense_log(tmp_path_factory) -> tuple[Path, object]:
    path = tmp_path_factory.mktemp("dense") / "coordinator.log"
    bench_logdense.generate(path, 6 << 20, shards=6000, workers=150)
    return path, logtext.load([path], "job", dense=False)


def test_dense_log_per_line_references_agree(dense_log):
    """A file of 8 MiB or more is read per line by grep: the same Evidence as the Python scan."""
    path, slow = dense_log
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(logtext, "GREP_MIN_BYTES", 0)
        grep = logtext.load([path], "job", dense=False)
    assert evidence_diff(slow, grep) == []


@pytest.mark.parametrize(
    "knobs",
    [
        {"force": False},
        {"chunk": 64 << 10},
        {"processes": 1 << 20},
        {"chunk": 64 << 10, "batch": 1, "processes": 1 << 20},
    ],
    ids=["defaults", "small-chunks", "processes", "small-chunks-processes"],
)
def test_dense_log(dense_log, knobs):
    path, slow = dense_log
    with bulk(**knobs) as seen:
        fast = logtext.load([path], "job", dense=True)
    assert evidence_diff(slow, fast) == []
    assert seen["batches"] > 0 and seen["rows"] > 0.9 * len(path.read_bytes().splitlines()), seen


# -- random jobs -------------------------------------------------------------------------------------
KNOBS = st.builds(
    Knobs,
    seed=st.integers(0, 2**32 - 1),
    stages=st.integers(1, 3),
    shards=st.integers(1, 80),
    workers=st.integers(1, 8),
    worker_files=st.integers(0, 3),
    task_errors=st.sampled_from([0.0, 0.03, 0.15]),
    infra=st.sampled_from([0.0, 0.03, 0.1]),
    abort=st.sampled_from(["", "task", "infra"]),
    odd=st.sampled_from([0.0, 0.02, 0.1]),
    foreign=st.sampled_from([0.0, 0.1, 0.5]),
    spam=st.sampled_from([0.0, 0.2, 1.0]),
    midnight=st.booleans(),
    shutdown=st.booleans(),
    cut=st.booleans(),
)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],  # a failing example is reported as drawn: shrinking takes minutes
)
@given(
    knobs=KNOBS,
    chunk=st.sampled_from([200, 700, 4096, None]),
    batch=st.sampled_from([1, 3, 16, None]),
    force=st.booleans(),
    processes=st.sampled_from([0] * 9 + [4096]),
    zone=st.sampled_from([None, None, "America/New_York"]),
)
@pytest.mark.slow
def test_random_jobs(knobs, chunk, batch, force, processes, zone):
    before = zephyrlog.zone()
    zephyrlog.set_timezone(zone)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            paths = write_job(knobs, Path(tmp))
            diff, seen = both_ways(paths, chunk=chunk, batch=batch, force=force, processes=processes)
    finally:
        zephyrlog.set_timezone(before)
    event(f"batches applied at once: {min(seen['batches'], 3)}{'+' if seen['batches'] >= 3 else ''}")
    assert diff == [], "\n".join(diff)


def test_long_durations_read_as_float_does(tmp_path):
    """`Shard 9 done in 516391868235349.00s` (17 digits) reads 516391868235349.0 both ways (the
    bulk parse once rounded twice, int64 -> float then / 10**k: 516391868235348.94)."""
    worker, prefix = logmaker.worker_id(0), f"{zephyrlog.timestamp(logmaker.START)} INFO zephyr.worker: "
    lines = [zephyrlog.EXECUTING.format(worker=worker, stage="stage0-Map", shard=9, attempt=0)]
    lines.append(zephyrlog.SHARD_DONE.format(worker=worker, shard=9, secs=516391868235349.0))
    path = tmp_path / "job.log"
    path.write_text("".join(prefix + line + "\n" for line in lines), encoding="utf-8")
    diff, seen = both_ways([path], batch=1)
    assert seen["batches"] == 1 and diff == [], (seen, diff)
    assert logtext.load([path], "job", dense=False).attempts["elapsed_s"].tolist() == [516391868235349.0]


def test_clock_only_line_after_the_clock_went_back_across_midnight(tmp_path):
    """`[23:59:58]` after `… 00:00:01` and `… 23:59:59,500` is 2026-12-02 both ways (per line it once
    took the day of the last newly seen second, 2026-12-03)."""
    status = zephyrlog.STATUS.format(
        exec="ex", stage="stage0-Map", completed=1, total=4, in_flight=1, queued=2, alive=1, registered=1, dead=0
    )
    lines = [
        f"{zephyrlog.timestamp(logmaker.NEAR_MIDNIGHT + dt)} INFO zephyr.execution: {status}" for dt in (19, 21, 19.5)
    ]
    lines.append(f"[23:59:58] task=/alice/mk/0 | {status}")
    path = tmp_path / "job.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    diff, seen = both_ways([path], batch=1)
    assert seen["batches"] == 1 and diff == [], (seen, diff)
    assert logmaker.NEAR_MIDNIGHT + 18 in logtext.load([path], "job", dense=False).status["ts"].tolist()


def test_stage_names_that_decode_alike(tmp_path):
    """Bytes that are not UTF-8 decode alike (U+FFFD): one stage, one attempt both ways."""
    prefix = [f"{zephyrlog.timestamp(logmaker.START + dt)} INFO zephyr.worker: ".encode() for dt in range(4)]
    lines = [
        prefix[0] + b"[w0] Executing stage stage0-M\xfe shard 3 (attempt 0)",
        prefix[1] + b"[w1] Executing stage stage0-M\xff shard 3 (attempt 0)",
        prefix[2] + b"[w0] Shard 3 done in 1.00s",
        prefix[3] + b"[w1] Shard 3 done in 1.00s",
    ]
    path = tmp_path / "job.log"
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert len(logtext.load([path], "job", dense=False).attempts) == 1
    diff, seen = both_ways([path], batch=1)
    assert seen["rows"] == 4 and diff == [], (seen, diff)


# -- a line longer than logtext.MAX_LINE_BYTES ------------------------------------------------------
@pytest.mark.parametrize("way", ["per-line", "grep", "bulk", "bulk-processes"])
def test_a_line_over_the_cap_is_skipped_and_counted(tmp_path, way):
    """A 3 MiB line (an event keyword in it) inside a coordinator log: every read path gives the
    evidence of the log without it, and a note names the file and the count."""
    path = max(write_job(Knobs(seed=3, shards=20), tmp_path), key=lambda p: p.stat().st_size)
    want = logtext.load([path], "job", dense=False)
    lines = path.read_bytes().splitlines(keepends=True)
    at = next(i for i in range(5, len(lines)) if lines[i][:1].isdigit() and lines[i - 1][:1].isdigit())
    junk = b"2026-12-04 12:00:00,000 INFO pull_task " + b"x" * (3 << 20) + b"\n"
    path.write_bytes(b"".join(lines[:at]) + junk + b"".join(lines[at:]) + junk[:-1])  # mid-file, unterminated at end
    with pytest.MonkeyPatch.context() as mp:
        if way == "grep":
            mp.setattr(logtext, "GREP_MIN_BYTES", 0)
        if way.startswith("bulk"):
            with bulk(processes=1 << 20 if way == "bulk-processes" else 0):
                got = logtext.load([path], "job", dense=True)
        else:
            got = logtext.load([path], "job", dense=False)
    assert f"{path.name}: skipped 2 line(s) of more than 1 MiB" in got.warnings
    got.warnings = [n for n in got.warnings if "skipped 2 line" not in n]
    want.crashes = [dataclasses.replace(c, line=c.line + 1) if (c.line or 0) > at else c for c in want.crashes]
    assert evidence_diff(want, got) == []


def test_a_log_that_opens_with_a_long_line_is_still_a_log(tmp_path):
    """The evidence sniffer looks past a first line longer than its window."""
    path = max(write_job(Knobs(seed=3, shards=20), tmp_path), key=lambda p: p.stat().st_size)
    path.write_bytes(b"x" * (3 << 20) + b"\n" + path.read_bytes())
    assert evidencedir.classify(path) == ("log", None)
    path.write_bytes(b"x" * (3 << 20))
    with pytest.raises(EvidenceError, match="unrecognised text"):
        evidencedir.classify(path)


# -- the compiled bulk parse (densearrow) against the re.split one -------------------------------
def _odd_dense_lines() -> list[bytes]:
    """Dense-looking lines at the edges of what the pattern reads (each alone on its line)."""
    w, stage, ex = logmaker.worker_id(1).encode(), b"stage0-Map \xe2\x86\x92 Write", b"20261202-090000-5e6f7a8b"
    counts = b"3/10 complete, 1 in-flight, 6 queued, 2/2 workers alive, 0 dead"
    return [
        b"[" + w + b"] Executing stage " + stage + b" shard 3 (attempt 0)",
        b"[" + w + b"] Executing stage my shard x shard 4 (attempt 0)",  # the first ` shard ` is not the end
        b"[" + w + b"] Executing stage s shard 5 (attempt 0) shard 6 (attempt 1)",
        b"[" + w + b"] Executing stage a\x0bb shard 7 (attempt 0)",  # \v: not \S in Python's bytes
        b"[" + w + b"] Executing stage a\tb shard 7 (attempt 0)",
        b"[" + w + b"] Executing stage a  b shard 7 (attempt 0)",
        b"[" + w + b"] Executing stage shard shard 8 (attempt 0)",
        b"[" + w + b"] Executing stage x shard 123456789012345678 (attempt 0)",
        b"[" + w + b"] Executing stage x shard 1234567890123456789 (attempt 0)",
        b"[" + w + b"] Executing stage x shard 123456789012345678901234 (attempt 0)",
        b"[" + w + b"] Executing stage x shard 9 (attempt 0) and more text",
        b"[" + w + b"] Executing stage x shard 9 (attempt 0)\r",
        b"[w shard 3 (attempt 0)] Executing stage y shard 10 (attempt 0)",
        b"[" + b"w" * 90 + b"] Executing stage z shard 11 (attempt 0)",
        b"[w\x00] Shard 3 done in 1.00s",
        b"[" + w + b"] Shard 3 done in 1.2.3s",
        b"[" + w + b"] Shard 3 done in .5s",
        b"[" + w + b"] Shard 3 done in 5.s",
        b"[" + w + b"] Shard 3 done in 12345678901234567s",
        b"[" + w + b"] Shard 3 done in 1234567890123456.0s",
        b"[" + w + b"] Shard 3 done in 123456789012345.0s",
        b"[" + w + b"] Shard 3 done in 1234567890123456789012.5s",
        b"[" + w + b"] Shard 3 done in 2.50s\r",
        b"[" + w + b"] Shard 3 done in x.5s",
        b"[" + w + b"] Shard  done in 1s",
        b"[" + ex + b"] [" + stage + b"] " + counts + b"; items=32.6M (25.2/s), bytes_processed=3.41 GiB (82.1 KiB/s)",
        b"[" + ex + b"] [" + stage + b"] " + counts + b". items=5K",
        b"[" + ex + b"] [" + stage + b"] " + counts + b"; items=5K (x), bytes_processed=3.41 XiB",
        b"[" + ex + b"] [" + stage + b"] " + counts + b"; items=5K (x), bytes_processed=3. GiB",
        b"[" + ex + b"] [" + stage + b"] " + counts + b"; items=5K (x), bytes_processed=3.x GiB",
        b"[" + ex + b"] [" + stage + b"] " + counts + b"; items=5K (x), bytes_processed=504 bytes",
        b"[" + ex + b"] [" + stage + b"] " + counts + b"; items=5K (no close, bytes_processed=1 KiB",
        b"[" + ex + b"] [" + stage + b"] " + counts + b"; items=12345678901234567890123.5T",
        b"[" + ex + b"] [" + stage + b"] " + counts + b"; items=1K (x), bytes_processed=12345678901234567890123 KiB",
        b"[" + ex + b"] [" + stage + b"] " + counts + b"; items=1K (x), bytes_processed=1.12345678901234567890123 KiB",
        b"[" + ex + b"] [" + stage + b"] " + counts + b"; items=x",
        b"[" + ex + b"] [" + stage + b"] " + counts + b"; items=1..2.",
        b"[" + ex + b"] [" + stage + b"] 3/10 complete, 1 in-flight, 6 queued, 488 workers; items=7",
        b"[" + ex + b"] [" + stage + b"] 3/10 complete, 1 in-flight, 6 queued, 4/2 workers; items=7",
        b"[" + ex + b"] [" + stage + b"] 3/10 complete, 1 in-flight, 6 queued, 2/2 workers alive, 0 deadbeef",
        b"[" + ex + b"] [" + stage + b"] 1234567890123456789/10 complete, 1 in-flight, 6 queued, 2 workers",
        b"[" + stage + b"] " + counts,
        b"[" + ex + b"] [" + stage + b" " + counts,
        b"[" + ex + b"] [" + stage + b"]  " + counts,
        b"[" + ex + b"] [] " + counts,
        b"[" + ex + b"] [" + stage + b"] " + counts + b"\r",
    ]


def _odd_log(tmp_path: Path, evidence: bool = False) -> Path:
    """The odd lines after two line prefixes (`evidence`: without the shard number beyond int64 and
    the duration `1.2.3`, which the per-line reader does not take either)."""
    lines, t = [], logmaker.START
    for i, odd in enumerate(_odd_dense_lines()):
        if evidence and (b"shard 1234567890123456789" in odd or b" 1.2.3s" in odd):
            continue
        for prefix in (b"INFO zephyr.worker: ", b"WARNING a.very-long.logger_name.with.many.parts.and.more: "):
            lines.append(zephyrlog.timestamp(t + i).encode() + b" " + prefix + odd)
    lines.append(b"2026-13-45 25:61:00,000 INFO zephyr.worker: " + _odd_dense_lines()[0])
    lines.append(b"2026-12-02 23:59:61,000 INFO zephyr.worker: " + _odd_dense_lines()[0])
    lines.append(b"")
    path = tmp_path / "odd.log"
    path.write_bytes(b"\n".join(lines))  # the last line unterminated
    return path


def _rows(rows) -> dict[int, tuple]:
    """Each bulk row by its line: every column, names as text."""
    name = [None, *rows.words]
    out = {}
    for j, line in enumerate(rows.line.tolist()):
        ints = tuple(int(v[j]) for v in rows.ints.values())
        floats = tuple(float(c[j]) for c in (rows.ts, rows.day, rows.secs, rows.items, rows.size))
        names = tuple(name[int(c[j]) + 1] for c in (rows.worker, rows.stage, rows.exec))
        out[line] = (int(rows.kind[j]), ints, tuple("nan" if f != f else f for f in floats), names)
    return out


def _both_parses(data: bytes, chunk: int):
    """(re.split rows, densearrow rows) of every chunk of `data`, whole lines at a time."""
    from zephyr_debug.sources import densearrow, denseparse

    pos, before = 0, 0
    while pos < len(data):
        buf = data[pos : pos + chunk]
        if pos + len(buf) < len(data):
            buf = buf[: buf.rfind(b"\n") + 1] or data[pos : data.index(b"\n", pos) + 1]
        read = lambda offset, size: data[offset : offset + size]
        old = denseparse.parse_re(buf, pos, before, logtext._hits, read)
        new = densearrow.parse(buf, pos, before, logtext._hits, read)
        yield old, new
        pos, before = pos + len(buf), before + buf.count(b"\n")


@pytest.mark.parametrize("chunk", [1 << 22, 999, 97])
def test_compiled_parse_reads_odd_lines_as_re_split_does(tmp_path, chunk):
    """Each line densearrow reads in bulk, re.split reads alike; the others go per line (as event
    lines, the same hits); the only lines re.split reads in bulk and densearrow does not are the
    ones whose field ends it does not look for (a stage holding ` shard `, a run of 20+ digits)."""
    data = _odd_log(tmp_path).read_bytes()
    odd = data.split(b"\n")
    for old, new in _both_parses(data, chunk):
        assert new is not None and new.lines == old.lines
        a, b = _rows(old), _rows(new)
        assert {k: a[k] for k in b} == b
        for k in set(a) - set(b):
            assert b" shard x shard " in odd[k] or b"901234567890123" in odd[k], odd[k]
        slow = {h[1] for h in new.slow}
        assert {h for h in old.slow if h[1] in slow} <= set(new.slow)
        assert {h[1] for h in old.slow} | (set(a) - set(b)) >= slow


def test_compiled_parse_odd_lines_evidence(tmp_path):
    path = _odd_log(tmp_path, evidence=True)
    for knobs in ({"batch": 1}, {"chunk": 300, "batch": 2}, {}):
        diff, seen = both_ways([path], **knobs)
        assert diff == [] and seen["rows"] > 40, (knobs, seen, diff)


def test_compiled_parse_matches_re_split_on_real_and_generated_logs(tmp_path, dense_log):
    paths = [dense_log[0], *write_job(Knobs(seed=4, shards=40, workers=5, worker_files=2, odd=0.1), tmp_path)]
    paths += sorted(DATA.glob("realcaptures/*/coordinator.log"))[:4]
    for path in paths:
        data = path.read_bytes()
        for chunk in (1 << 22, 4096):
            for old, new in _both_parses(data, chunk):
                assert new is not None
                assert _rows(new) == _rows(old) and new.slow == old.slow and new.lines == old.lines, path


def test_compiled_parse_reads_dense_logs_and_leaves_other_bytes_to_re(tmp_path, dense_log):
    """A dense log is parsed by densearrow alone; a chunk that is not UTF-8 goes to re.split."""
    from zephyr_debug.sources import denseparse

    calls = Counter()
    parse_re = denseparse.parse_re

    def counted(*args):
        calls["re"] += 1
        return parse_re(*args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(denseparse, "parse_re", counted)
        mp.setattr(denseparse, "ENGINE", "arrow")
        logtext.load([dense_log[0]], "job", dense=True)
        assert calls["re"] == 0
        path = tmp_path / "latin1.log"
        path.write_bytes(dense_log[0].read_bytes()[: 1 << 20].replace(b"stage0-Map", b"stage0-M\xe4p", 1))
        logtext.load([path], "job", dense=True)
        assert calls["re"] == 1
