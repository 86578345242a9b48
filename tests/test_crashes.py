"""zdebug crashes: parsing, normalizing and fingerprinting real crash text (raised here or
produced by real child processes), the CLI on files, directories and stdin, and bad input."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from zephyr_debug import cli
from zephyr_debug.crashes import inputs
from zephyr_debug.crashes.fingerprint import Fingerprinter
from zephyr_debug.crashes.parse import Stats, coalesce, split

CORPUS = Path(__file__).parent / "data" / "crashes"
LABELS = json.loads((CORPUS / "labels.json").read_text())


@pytest.fixture
def zdebug(capsysbinary, monkeypatch):
    """Runs the real CLI entry point in-process: `zdebug(*args, stdin=b"")` -> (code, stdout, stderr)."""

    def run(*args: str, stdin: bytes = b"") -> tuple[int, bytes, bytes]:
        monkeypatch.setattr(sys, "argv", ["zdebug", *args])
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        try:
            cli.main()
            code = 0
        except SystemExit as exc:
            code = exc.code or 0
        out, err = capsysbinary.readouterr()
        return code, out, err

    return run


def _raised(fn) -> str:
    try:
        fn()
    except BaseException:
        return traceback.format_exc()
    raise AssertionError("did not raise")


def _lookup(record: dict) -> str:
    return record["user_id"]


def _wrapped(record: dict) -> str:
    try:
        return _lookup(record)
    except KeyError as exc:
        raise ValueError(f"bad record {record}") from exc


def _handler_bug(record: dict) -> str:
    try:
        return _lookup(record)
    except KeyError:
        return record["fallback"]


def _group(n: int) -> None:
    raise ExceptionGroup(f"{n} rows failed", [ValueError(f"row {i}") for i in range(n)] + [TypeError("x")])


def test_chained_exception_groups_by_root_cause_and_shows_the_wrapper():
    fp = Fingerprinter()
    plain = fp.signature(_raised(lambda: _lookup({"id": 1})))
    wrapped = fp.signature(_raised(lambda: _wrapped({"id": 2, "tmp": "/tmp/tmpa81kf2"})))
    handled = fp.signature(_raised(lambda: _handler_bug({"id": 3})))
    assert wrapped.exception == "KeyError" and wrapped.wrapper.startswith("ValueError: bad record")
    assert wrapped.frames[0].endswith("test_crashes:_lookup")
    assert plain.fingerprint == wrapped.fingerprint == handled.fingerprint  # the root cause decides
    assert plain.wrapper is None and handled.wrapper.startswith("KeyError")


def test_values_paths_and_addresses_do_not_split_a_group_but_code_locations_do():
    fp = Fingerprinter()
    a = fp.signature(_raised(lambda: _lookup({"id": 1, "at": hex(id(object()))})))
    b = fp.signature(_raised(lambda: _lookup({})))
    other_line = fp.signature(_raised(lambda: {}["user_id"]))  # same type and message, other code
    assert a.fingerprint == b.fingerprint and a.message == "<str>"
    assert other_line.fingerprint != a.fingerprint


def test_exception_groups_name_their_leaves():
    fp = Fingerprinter()
    three, five = fp.signature(_raised(lambda: _group(3))), fp.signature(_raised(lambda: _group(5)))
    assert three.exception == "ExceptionGroup[TypeError,ValueError]"
    assert three.message == "<num> rows failed (<num> sub-exceptions)"
    assert three.fingerprint == five.fingerprint


def test_in_app_rules_pick_library_frames_only_when_asked():
    import pandas as pd

    text = _raised(lambda: pd.DataFrame({"a": [1]})["missing"])
    default, pandas_in_app = Fingerprinter().signature(text), Fingerprinter(in_app=("pandas",)).signature(text)
    assert default.frames[0].endswith("test_crashes:<lambda>")
    assert pandas_in_app.frames[0].startswith("pandas.")
    assert default.fingerprint != pandas_in_app.fingerprint


def test_faulthandler_dump_of_a_real_segfault_groups_by_the_crashing_thread(tmp_path):
    script = tmp_path / "crasher.py"
    script.write_text(
        "import ctypes, threading, time\n"
        "def idle():\n    time.sleep(30)\n"
        "def decode():\n    ctypes.string_at(0)\n"
        "threading.Thread(target=idle, daemon=True).start()\ntime.sleep(0.05)\ndecode()\n"
    )
    dumps = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-X", "faulthandler", str(script)], capture_output=True, text=True)
        assert proc.returncode == -11
        dumps.append(proc.stderr)
    log = "\n".join(
        [
            "2026-12-02 21:59:16,743 INFO zephyr.worker: [w-1] Executing stage stage0-Map shard 7 (attempt 2)",
            dumps[0],
            "I20261202 21:59:18 140415056467648 zephyr.execution something else",
        ]
    )
    crashes = list(coalesce(split(log.splitlines(), "w.log")))
    assert len(crashes) == 1 and (crashes[0].shard, crashes[0].attempt, crashes[0].worker) == (7, 2, "w-1")
    fp = Fingerprinter()
    sigs = [fp.signature(d) for d in (crashes[0].text, dumps[1])]
    assert sigs[0].kind == "segv" and sigs[0].exception == "SIGSEGV"
    assert sigs[0].frames[0] == "crasher:decode" and "crasher:idle" not in sigs[0].frames
    assert sigs[0].fingerprint == sigs[1].fingerprint


def test_mixed_log_yields_exactly_the_labeled_reports():
    stats = Stats()
    found = [c.line for c in inputs.stream(str(CORPUS / "logs" / "mixed.log"), stats)]
    expected = sorted(int(k.rsplit(":", 1)[1]) for k in LABELS if k.startswith("logs/mixed.log:"))
    assert found == expected
    assert stats.skipped == 0


def test_cli_dedupe_on_a_directory_of_crash_files_matches_the_json_contract(zdebug):
    code, out, err = zdebug("crashes", str(CORPUS / "files"), "--dedupe", "--json")
    assert code == 0, err
    data = json.loads(out)
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
    }
    assert data["groups"] and all(keys <= set(g) for g in data["groups"])
    files = {k for k in LABELS if k.startswith("files/")}
    assert sum(g["count"] for g in data["groups"]) == len(files)
    bugs = {LABELS[k] for k in files}
    assert len(bugs) <= len(data["groups"]) <= len(bugs) + 2
    members = [m for g in data["groups"] for m in g["members"]]
    assert sorted(Path(m).name for m in members) == sorted(Path(k).name for k in files)
    assert {g["kind"] for g in data["groups"]} >= {"task", "segv", "oom", "exit"}


def test_cli_reads_stdin_rows_and_shard_filter(zdebug):
    log = (CORPUS / "logs" / "mixed.log").read_bytes()
    rows = json.loads(zdebug("crashes", "-", "--json", stdin=log)[1])["crashes"]
    assert len(rows) == sum(1 for k in LABELS if k.startswith("logs/mixed.log:"))
    stdin = {r["source"].rsplit(":", 1)[0] for r in rows}  # `<stdin>`, or the file the CLI saved stdin to
    assert len(stdin) == 1 and ("<stdin>" in stdin or "pasted" in next(iter(stdin)))
    shard = rows[0]["shard"]
    only = json.loads(zdebug("crashes", "-", "--json", "--shard", str(shard), stdin=log)[1])["crashes"]
    assert only and all(r["shard"] == shard for r in only)
    grouped = json.loads(zdebug("crashes", "-", "--dedupe", "--json", stdin=log)[1])["groups"]
    assert grouped and all(":" in m for g in grouped for m in g["members"])  # line numbers inside a log


def test_normalize_masks_what_varies_and_keeps_code_locations(zdebug):
    crash = next(k for k, v in LABELS.items() if k.startswith("files/") and v == "arrow-missing-file")
    code, out, err = zdebug("crashes", "normalize", str(CORPUS / crash), "--json")
    assert code == 0, err
    (report,) = json.loads(out)["reports"]
    text = report["normalized"]
    assert "/tmp/" not in text and "<tmp>" in text and "<site>/pyarrow/" in text
    assert ", line " in text and "in load_split" in text  # frames stay readable
    code, out, _ = zdebug("crashes", "normalize", str(CORPUS / crash))
    assert code == 0 and b"<tmp>" in out


@pytest.mark.parametrize(
    "content",
    [
        os.urandom(4096),
        b"\x00\x01garbage\xff" * 50,
        b"",
        b"\n\n",
        b"lorem ipsum dolor sit amet\nconsectetur adipiscing elit\n" * 20,
        bytes(range(256)) * 8,
    ],
    ids=["random-bytes", "nul-garbage", "empty", "blank-lines", "random-text", "all-bytes"],
)
def test_unreadable_evidence_exits_3_with_one_line_naming_the_file(zdebug, tmp_path, content):
    path = tmp_path / "bad.log"
    path.write_bytes(content)
    for args in ([], ["--dedupe"], ["--dedupe", "--json"], ["--group", "ab"]):
        code, out, err = zdebug("crashes", str(path), *args)
        assert code == 3, (args, out, err)
        assert err.count(b"\n") == 1 and err.startswith(b"zdebug: error:") and str(path).encode() in err, err
        assert b"Traceback" not in err and (json.loads(out)["exit_code"] == 3 if "--json" in args else not out)
    code, _, err = zdebug("crashes", "-", "--dedupe", stdin=content)
    assert code == 3 and err.count(b"\n") == 1  # names <stdin>, or the file stdin was saved to
    code, _, err = zdebug("crashes", "normalize", str(path))
    assert code == 3 and err.count(b"\n") == 1 and str(path).encode() in err
    (tmp_path / "crashes").mkdir()
    (tmp_path / "crashes" / "0-0.txt").write_bytes(content)
    code, _, err = zdebug("crashes", str(tmp_path / "crashes"), "--dedupe")
    assert code == 3 and err.count(b"\n") == 1 and b"crashes" in err


def test_a_cut_traceback_and_a_log_without_crashes_are_readable(zdebug, tmp_path):
    cut = tmp_path / "cut.log"
    cut.write_bytes(b'Traceback (most recent call last):\n  File "x.py", line 1, in f\n')
    code, out, err = zdebug("crashes", str(cut), "--dedupe", "--json")
    assert code == 0 and b"Traceback" not in err
    assert sum(g["count"] for g in json.loads(out)["groups"]) == 1
    quiet = tmp_path / "worker.log"
    quiet.write_text("2026-12-02 21:59:16,743 INFO zephyr.worker: [w-1] Executing stage s0 shard 7 (attempt 0)\n")
    code, out, err = zdebug("crashes", str(quiet), "--json")
    assert code == 0 and json.loads(out)["crashes"] == []
    mixed = tmp_path / "mixed.log"  # binary lines in a log with crashes: skipped and counted
    mixed.write_bytes((CORPUS / "logs" / "mixed.log").read_bytes() + b"\x00\x01garbage\xff\n" * 5)
    code, out, err = zdebug("crashes", str(mixed), "--dedupe", "--json")
    assert code == 0 and json.loads(out)["skipped_lines"] == 5 and json.loads(out)["warnings"]


def test_missing_inputs_are_one_line_errors(zdebug, tmp_path):
    (tmp_path / "empty").mkdir()
    for args, exit_code in (
        (["crashes", str(tmp_path / "nope.log")], 3),
        (["crashes", "normalize", str(tmp_path / "nope.txt")], 3),
        (["crashes", str(tmp_path / "empty")], 3),
        (["crashes", "a", "b"], 2),
    ):
        code, _, err = zdebug(*args)
        assert code == exit_code, args
        assert err.count(b"\n") == 1 and err.startswith(b"zdebug: error:"), err


def test_the_installed_entry_point_prints_one_line_errors(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "zephyr_debug.cli", "crashes", str(tmp_path / "nope.log")],
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == 3 and proc.stderr.count(b"\n") == 1 and b"nope.log" in proc.stderr


def test_iris_get_task_logs_json_goes_through_the_evidence_loader(zdebug, tmp_path):
    lines = (CORPUS / "logs" / "mixed.log").read_text().splitlines()
    entries = [
        {"data": line, "level": "INFO", "source": "stdout", "timestamp": {"epoch_ms": "1796268231000"}, "attempt_id": 0}
        for line in lines
    ]
    path = tmp_path / "task-logs.json"
    path.write_text(json.dumps({"task_logs": [{"task_id": "/root/job/0", "logs": entries}]}))
    code, out, err = zdebug("crashes", str(path), "--dedupe", "--json")
    assert code == 0, err
    groups = json.loads(out)["groups"]
    from_log = json.loads(zdebug("crashes", str(CORPUS / "logs" / "mixed.log"), "--dedupe", "--json")[1])["groups"]
    # The loader ties crashes to `error on shard` lines: the corpus' bare dumps have none.
    tracebacks = [g for g in from_log if g["kind"] != "segv"]
    assert sorted(g["fingerprint"] for g in groups) == sorted(g["fingerprint"] for g in tracebacks)
    assert sum(g["count"] for g in groups) == sum(g["count"] for g in tracebacks)


def test_a_traceback_restated_after_last_error_is_not_a_new_crash(tmp_path):
    tb = 'Traceback (most recent call last):\n  File "/app/job.py", line 3, in run\n    f()\nValueError: bad record 2\n'
    log = tmp_path / "coordinator.log"
    log.write_text(
        "E20261203 05:22:57 1400 zephyr.execution Worker w-0 error on shard 2\n"
        + tb
        + "E20261203 05:23:00 1400 zephyr.execution Shard 2 failed 3 times (max 3).\nLast error:\n"
        + tb
    )
    found = list(inputs.stream(str(log), Stats()))
    assert len(found) == 1 and found[0].line == 2


def test_a_file_of_iris_job_log_lines_is_a_log_not_json(zdebug, tmp_path):
    """`[hh:mm:ss] task=… |` starts like a JSON list; it must still be split as log text."""
    lines = (CORPUS / "logs" / "mixed.log").read_bytes().splitlines(keepends=True)
    iris = tmp_path / "iris-job.log"
    iris.write_bytes(b"".join(line for line in lines if line.startswith(b"[")))
    code, out, err = zdebug("crashes", str(iris), "--json")
    assert code == 0, err
    assert len(json.loads(out)["crashes"]) == len(list(inputs.stream(str(iris), Stats())))
    assert json.loads(out)["crashes"]
