"""crashes.fingerprint / parse / cluster on real failures: the message is not the key of an
in-app crash, a dump + the runner's bare exit line is one crash, exits are keyed by their code,
run directories leave module names, one prefix time is one epoch whatever TZ says, and the
typed groups serialize to the `crashes --json` contract."""

from __future__ import annotations

import calendar
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from zephyr_debug import zephyrlog
from zephyr_debug.crashes import inputs
from zephyr_debug.crashes.cluster import SCHEMA_VERSION, cluster
from zephyr_debug.crashes.fingerprint import Fingerprinter
from zephyr_debug.crashes.parse import Stats, coalesce, split
from zephyr_debug.model import Crash, Evidence

VARIATIONS = Path(__file__).parent / "data" / "crashes" / "variations"
LABELS = json.loads((VARIATIONS / "labels.json").read_text())


def _raised(fn, *args) -> str:
    try:
        fn(*args)
    except Exception:
        return traceback.format_exc()
    raise AssertionError("did not raise")


def _decode(text: str):
    return json.loads(text)


def _files(bug: str) -> list[Path]:
    return [VARIATIONS / name for name, b in LABELS.items() if b == bug]


def test_an_in_app_site_is_one_group_whatever_its_message_and_keeps_the_variants():
    fp = Fingerprinter()
    texts = [_raised(_decode, t) for t in ('{"a": 1 "b"}', "{a: 1}", '{"a": "x', '{"a": 1} x', "")]
    sigs = [fp.signature(t) for t in texts]
    assert len({s.fingerprint for s in sigs}) == 1
    assert len({s.raw for s in sigs}) == 5  # five different phrases of json
    other_site = fp.signature(_raised(lambda t: json.loads(t), "{a: 1}"))
    assert other_site.fingerprint != sigs[0].fingerprint  # the context line tells sites apart
    (group,) = cluster([Crash(text=t, source=f"f{i}") for i, t in enumerate(texts)], fp)
    assert group.count == 5 and sum(v.n for v in group.variants) == 5
    assert {v.example for v in group.variants} <= {s.raw for s in sigs}
    assert group.raw_message == sigs[-1].raw and group.message == "<json-error>: line <num> column <num> (char <num>)"


@pytest.mark.parametrize(
    "family, make",
    [
        ("json", lambda: [_raised(json.loads, t) for t in ('{"a" 1}', "[1,]", '{"x": "y', "{} {}")]),
        ("codec", lambda: [_raised(bytes.decode, b) for b in (b"\xff", b"\xc3\x28", b"ab\xe2\x82")]),
        ("arrow", lambda: [_raised(__import__("pyarrow").array, v) for v in ([1.5, "x"], [1, "y"], [True, "z"])]),
        (
            "merge",
            lambda: [
                _raised(
                    lambda a, b: (
                        __import__("pandas").DataFrame({"k": a}).merge(__import__("pandas").DataFrame({"k": b}), on="k")
                    ),
                    *ab,
                )
                for ab in (([1], ["1"]), (["1"], [1]))
            ],
        ),
    ],
)
def test_input_dependent_phrases_of_the_libraries_share_one_template(family, make):
    fp = Fingerprinter()
    templates = {fp.norm.message(fp.signature(t).raw) for t in make()}
    assert len(templates) == 1, (family, templates)


def test_printed_commands_paths_and_run_ids_are_masked_in_templates():
    norm = Fingerprinter().norm
    commands = [
        subprocess.CalledProcessError(1, cmd)
        for cmd in (["gzip", "-t", "/d/a b.gz"], ["sh", "-c", "gzip -t '/d/x.zst'"], "sh -c 'zstd -t /x'")
    ]
    assert len({norm.message(str(e)) for e in commands}) == 1
    paths = [
        "/mnt/data/clicks/2026-01-02/part-00016.parquet",
        "/mnt/scratch/bob/jobs/8fa3b2c1d4e5/run-8485d7/x.pq",
        "/tmp/ray/session_1/runtime_resources/working_dir_files/_ray_pkg_8a9f0b/data/shard-3.arrow",
    ]
    assert {norm.message(p) for p in paths} == {"<path>"}


def test_run_directories_leave_module_names():
    fp = Fingerprinter()
    for path in (
        "/srv/run-9b436b/run_shard.py",
        "/x/working_dir_files/_ray_pkg_4f2a9c01/run_shard.py",
        "/mnt/scratch/ann/jobs/8fa3b2c1d4e5/run_shard.py",
    ):
        assert fp.module(path) == ("run_shard", "app"), path


def test_a_dump_and_the_runners_bare_exit_line_are_one_crash_in_every_prefix_style():
    files = _files("segv-decode-block")
    assert len(files) >= 8
    sigs = set()
    for path in files:
        (crash,) = inputs.stream(str(path), Stats())  # one crash per report file, requeue line or not
        sig = Fingerprinter().signature(crash.text)
        assert (sig.kind, sig.exception, sig.exit_code, sig.signal) == ("segv", "SIGSEGV", -11, "SIGSEGV")
        assert sig.frames[0] == "varlib:decode_block"
        sigs.add(sig.fingerprint)
    assert len(sigs) == 1


def test_exits_are_keyed_by_code_and_both_forms_meet():
    fp = Fingerprinter()
    by_code = {}
    for bug in ("exit-1", "exit-code-3", "exit-75"):
        crashes = [c for path in _files(bug) for c in inputs.stream(str(path), Stats())]
        forms = {c.text.startswith("Traceback") for c in crashes}
        assert forms == {True, False}, bug  # the corpus holds both forms
        sigs = {fp.signature(c.text) for c in crashes}
        assert len({s.fingerprint for s in sigs}) == 1 and {s.kind for s in sigs} == {"exit"}
        by_code[bug] = sigs.pop()
    assert sorted(s.exit_code for s in by_code.values()) == [1, 3, 75]
    assert len({s.fingerprint for s in by_code.values()}) == 3


def test_one_prefix_time_is_one_epoch_under_any_tz():
    line = "2026-12-02 21:59:16,743 INFO zephyr.worker: [w-1] Executing stage stage0-Map shard 7 (attempt 0)"
    script = (
        "import sys; from zephyr_debug.crashes.parse import split; lines = [sys.argv[1], "
        "'RuntimeError: Subprocess for shard 7 exited with code 3; see worker stderr above'];"
        "print(next(iter(split(lines, 'x.log'))).ts)"
    )
    seen = set()
    for tz in ("UTC", "America/New_York"):
        env = {**os.environ, "TZ": tz}
        env.pop(zephyrlog.TZ_ENV, None)
        out = subprocess.run([sys.executable, "-c", script, line], capture_output=True, text=True, env=env, check=True)
        seen.add(float(out.stdout))
    assert seen == {float(calendar.timegm((2026, 12, 2, 21, 59, 16)))}


def test_groups_serialize_to_the_json_contract():
    proc = subprocess.run(
        [sys.executable, "-m", "zephyr_debug.cli", "crashes", str(VARIATIONS / "files"), "--dedupe", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["schema_version"] == SCHEMA_VERSION
    keys = {
        "fingerprint",
        "count",
        "kind",
        "exception",
        "message",
        "frames",
        "shards",
        "workers",
        "first_seen",
        "last_seen",
        "members",
        "example",
        "deterministic",
        "variants",
        "exit_code",
        "signal",
        "raw_message",
    }
    assert all(keys <= set(g) for g in data["groups"])
    assert sum(g["count"] for g in data["groups"]) == len(LABELS)
    for g in data["groups"]:
        assert sum(v["count"] for v in g["variants"]) == g["count"]
    exits = sorted(g["exit_code"] for g in data["groups"] if g["kind"] == "exit")
    assert exits == [1, 3, 75]


def test_the_job_input_copies_crashes_and_leaves_the_evidence_alone():
    text = (
        'Traceback (most recent call last):\n  File "/a/b.py", line 1, in f\n    g()\nValueError: x\nlog line\n'
        "Traceback (most recent call last):\n  File \"/a/b.py\", line 2, in h\n    k()\nKeyError: 'y'\n"
    )
    crash = Crash(text=text, source="/nowhere", shard=1, kind="task")
    ev = Evidence(job="j", source="/nowhere", now=0.0, crashes=[crash])
    (found,) = inputs.job(ev, Stats())
    assert "KeyError" not in found.text and ev.crashes[0].text == text and found is not crash


@pytest.mark.slow
def test_text_output_shows_the_raw_message_not_its_template_and_1_based_attempts():
    log = (
        "2026-12-02 21:59:16,743 INFO zephyr.worker: [w-1] Executing stage stage0-Map shard 7 (attempt 0)\n"
        + _raised(lambda r: r["user_id"], {})
    )

    def run(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "zephyr_debug.cli", "crashes", "-", *args],
            input=log,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "COLUMNS": "80"},
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    text = run("--dedupe")
    assert "KeyError: 'user_id'" in text and "<str>" not in text and "template" not in text
    assert "stage0-Map: shard 7" in text and "attempts 0 " in text
    assert 'lambda r: r["user_id"]' in text  # the in-app frame with its source line
    assert max(map(len, text.splitlines())) <= 80
    (group,) = json.loads(run("--dedupe", "--json"))["groups"]
    assert group["message"] == "<str>" and group["variants"][0]["template"] == "<str>"
    assert group["raw_message"] == "'user_id'" and group["stages"] == ["stage0-Map"]


def test_split_and_coalesce_keep_a_dump_with_its_traceback_form_too():
    files = _files("abort-verify-footer")
    crashes = [c for path in files for c in coalesce(split(path.read_text().splitlines(), str(path)))]
    assert len(crashes) == len(files)
    assert {Fingerprinter().signature(c.text).exception for c in crashes} == {"SIGABRT"}
