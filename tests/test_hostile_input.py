"""Malformed values in get_status, list-tasks, events.jsonl and a live coordinator's answers: each
reads, or is one `zdebug: error:` line with exit 3, never an internal error (exit 70).

The numbers JSON and Python reprs can hold but no count or time can be (`1e400`, `Infinity`, `NaN`,
a 4301-digit integer that CPython refuses to convert), shapes of the wrong type (`workers: [1]`,
`stage: ["a"]`), a repr nested 1,000 deep, an unreadable file, and bad HTTP answers; then
hypothesis over JSON types and values, written as raw JSON text (json.dumps cannot write them all).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fuzz_corpus import check, run_inprocess

ZDEBUG = [sys.executable, "-m", "zephyr_debug.cli"]
SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
HUGE = "9" * 4301  # CPython refuses int() of more than 4300 digits
STATUS = '{"stage": "stage0-Map", "completed": 3, "total": 8, %s}'
REPR = "JobStatus(stage='stage0-Map', completed=3, total=8, %s)"

BAD_FILES = {
    "completed-1e400.json": '{"stage": "s", "completed": 1e400, "total": 8}',
    "retries-infinity.json": STATUS % '"retries": Infinity',
    "completed-nan.json": '{"stage": "s", "completed": NaN, "total": 8}',
    "completed-4301-digits.json": '{"stage": "s", "completed": ' + HUGE + ', "total": 8}',
    "workers-list.json": STATUS % '"workers": [1]',
    "stage-list.json": '{"stage": ["a"], "completed": 3, "total": 8}',
    "worker-state-list.json": STATUS % '"workers": {"w0": {"state": ["busy"]}}',
    "worker-age-string.json": STATUS % '"workers": {"w0": {"state": "busy", "last_seen_ago": "1s"}}',
    "done-string.json": STATUS % '"done": "yes"',
    "repr-1e400.txt": REPR % "retries=1e400",
    "repr-inf.txt": REPR % "in_flight=inf",
    "repr-4301-digits.txt": REPR % f"queue_depth={HUGE}",
    "repr-stage-list.txt": "JobStatus(stage=['a'], completed=1, total=2)",
    "repr-nested-1000.txt": REPR % ("workers={'w0': " + "[" * 1000 + "]" * 1000 + "}"),
    "repr-calls-1000.txt": REPR % ("workers=" + "W(a=" * 1000 + "1" + ")" * 1000),
    "json-string-repr-1e400.json": json.dumps(REPR % "completed=1e400"),
    "tasks-usage-list.json": '{"tasks": [{"task_id": "/u/j/0", "state": "RUNNING", "resource_usage": [1]}]}',
    "tasks-memory-1e400.json": '{"tasks": [{"task_id": "/u/j/0", "resource_usage": {"memory_mb": 1e400}}]}',
    "tasks-memory-string-inf.json": '{"tasks": [{"task_id": "/u/j/0", "resource_usage": {"memory_mb": "Infinity"}}]}',
    "tasks-cpu-400-digits.json": '{"tasks": [{"task_id": "/u/j/0", "resource_usage": {"cpu_millicores": %s}}]}'
    % ("9" * 400),
    "counters-400-digits.json": '{"zephyr/items": %s}' % ("9" * 400),
}


def one_line_error(argv: list[str]) -> str:
    """Run zdebug in this process; assert exit 3 and one error line; return it."""
    code, out, err = run_inprocess(argv)
    problem = check(argv, code, out, err)
    assert problem is None, problem
    assert code == 3, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zdebug: error: "), err
    return lines[0]


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_a_malformed_value_is_one_line_exit_3(tmp_path, name):
    path = tmp_path / name
    path.write_text(BAD_FILES[name])
    for command in ("status", "workers"):
        error = one_line_error([command, str(path)])
        assert name in error and "Traceback" not in error


def test_a_malformed_file_among_good_ones_is_a_warning(tmp_path):
    """In a directory of evidence, the bad file is named in a warning and the rest still read."""
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(Path(__file__).parent / "data" / "formats" / "coordinator_pypi.log", logs / "coordinator.log")
    (logs / "get_status.json").write_text(BAD_FILES["completed-1e400.json"])
    code, out, err = run_inprocess(["status", str(logs), "--json"])
    assert code == 0, err
    [warning] = [w for w in json.loads(out)["warnings"] if "get_status.json" in w]
    assert "completed is inf" in warning


def test_an_unreadable_file_is_one_line_exit_3(tmp_path):
    """EACCES: root reads any file, so zdebug runs without the capabilities that let it (setpriv)."""
    path = tmp_path / "status.json"
    path.write_text(STATUS % '"retries": 0')
    path.chmod(0)
    prefix: list[str] = []
    if os.access(path, os.R_OK):
        if os.geteuid() != 0 or not shutil.which("setpriv"):
            pytest.skip("this user can read a mode-000 file")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    proc = subprocess.run([*prefix, *ZDEBUG, "status", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.strip() == f"zdebug: error: {path}: cannot read (Permission denied)"


ODD_BUT_READABLE = {
    "lone-surrogates.json": STATUS.replace("stage0", "\\ud800") % '"workers": {"\\udc00": {"state": "\\ud800"}}',
    "repr-lone-surrogate.txt": REPR % "fatal_error='\\ud800 boom \\U99999999'",
    "repr-whole-float.txt": REPR % "retries=2.0",
}


@pytest.mark.parametrize("name", sorted(ODD_BUT_READABLE))
def test_odd_but_readable_values_read(tmp_path, name):
    """Lone surrogates (`\\ud800`: no output can encode them) read as U+FFFD; a whole float is a count."""
    path = tmp_path / name
    path.write_text(ODD_BUT_READABLE[name])
    outs = []
    for argv in (["status", str(path), "--json"], ["status", str(path)], ["workers", str(path)]):
        code, out, err = run_inprocess(argv)
        assert code == 0 and check(argv, code, out, err) is None, err
        outs.append(out)
    s = json.loads(outs[0])
    if "surrogate" in name:
        assert "\ufffd" in json.dumps(s, ensure_ascii=False)
    else:
        assert s["retries"] == 2


def test_lone_surrogates_in_events_jsonl_read(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    lines = [
        '{"ts": 1, "type": "job_start", "execution_id": "\\ud800"}',
        '{"ts": 2, "type": "stage_start", "stage": "\\udfff", "index": 0, "total": 1}',
        '{"ts": 3, "type": "job_end", "state": "\\ud800"}',
    ]
    (job / "events.jsonl").write_text("\n".join(lines) + "\n")
    for command in ("status", "diagnose", "workers"):
        for extra in ([], ["--json"]):
            argv = [command, str(job), *extra]
            code, out, err = run_inprocess(argv)
            assert code == 0 and check(argv, code, out, err) is None, err


def test_an_iris_reply_with_a_4301_digit_integer_is_left_out_with_a_warning(tmp_path):
    """An actor reply (a pickle) may hold any int; JSON cannot write one of 4301 digits."""
    from zephyr_debug.sources import evidencedir, iris_snapshot

    got = iris_snapshot.Fetched(
        "http://127.0.0.1:1", "/u/job", status={"stage": "s", "completed": 10**4301, "total": 1}, counters={"a/b": 1}
    )
    saved = iris_snapshot.save(got, tmp_path)
    assert not (saved / "get_status.json").exists() and (saved / "get_counters.json").exists()
    assert got.warnings == ["coordinator get_status ignored: it holds a number of more than 4,300 digits"]
    ev = evidencedir.load(saved)
    assert ev is not None and ev.live is None and ev.counters == {"a/b": 1.0}


class _Answers:
    """What the fake coordinator says: path -> (status, headers, body)."""

    routes: ClassVar[dict[str, tuple[int, dict[str, str], bytes]]] = {}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        status, headers, body = _Answers.routes.get(self.path, (404, {}, b"no such page"))
        self.send_response(status)
        for key, value in {**headers, "Content-Length": str(len(body))}.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def coordinator() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _serve(status: bytes, *, code: int = 200, headers: dict[str, str] | None = None) -> None:
    ok = (200, {}, b"{}")
    _Answers.routes = {
        "/job": (200, {}, b'{"execution_id": "hostile"}'),
        "/status": (code, headers or {}, status),
        "/workers": ok,
        "/counters": ok,
    }


BAD_ANSWERS = {
    "302": (302, {"Location": "http://127.0.0.1:9/elsewhere"}, b"", "HTTP 302"),
    "404": (404, {}, b"not here", "HTTP 404"),
    "500": (500, {}, b"{}", "HTTP 500"),
    "not-json": (200, {}, b"<html>hello</html>", "not JSON"),
    "a-list": (200, {}, b"[1, 2]", "unexpected answer"),
    "4301-digits": (200, {}, (STATUS % f'"retries": {HUGE}').encode(), "4,300 digits"),
    "1e400": (200, {}, b'{"stage": "s", "completed": 1e400, "total": 8}', "completed"),
    "infinity": (200, {}, (STATUS % '"retries": Infinity').encode(), "retries"),
    "huge-int": (200, {}, (STATUS % f'"queue_depth": {"9" * 40}').encode(), "queue_depth"),
    "workers-list": (200, {}, (STATUS % '"workers": [1]').encode(), "workers"),
    "stage-list": (200, {}, b'{"stage": ["a"], "completed": 3, "total": 8}', "stage"),
    "worker-state-list": (200, {}, (STATUS % '"workers": {"w0": {"state": [1]}}').encode(), "state"),
    "nested": (200, {}, b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
}


@pytest.mark.parametrize("name", sorted(BAD_ANSWERS))
def test_a_bad_coordinator_answer_is_one_line_exit_3(coordinator, name):
    """HTTP 302/404/500, not JSON, not an object, malformed values: unreadable evidence (3), not a usage error (2)."""
    code, headers, body, needle = BAD_ANSWERS[name]
    _serve(body, code=code, headers=headers)
    error = one_line_error(["status", coordinator, "--timeout", "10"])
    assert f"{coordinator}/status" in error and needle in error, error


def test_a_good_coordinator_answer_still_reads(coordinator):
    _serve((STATUS % '"workers": {"w0": {"state": "busy", "last_seen_ago": 0.5}}, "done": false').encode())
    code, out, err = run_inprocess(["status", coordinator, "--json", "--timeout", "10"])
    assert code == 0, err
    s = json.loads(out)
    assert (s["state"], s["completed"], s["total"]) == ("running", 3, 8)


# --- hypothesis: JSON types and values, as raw JSON text -----------------------------------------

odd_numbers = st.sampled_from(
    ["1e400", "-1e400", "Infinity", "-Infinity", "NaN", HUGE, "-" + "9" * 400, "9" * 20, "1e-400", "-0", "0.5", "7.0"]
)
json_scalars = st.one_of(
    odd_numbers,
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr).filter(lambda s: s not in ("inf", "-inf")),
    st.sampled_from(["true", "false", "null", '""', '"busy"', '"active"', '"stage0-Map"', '"1e400"', '"Infinity"']),
    st.text(max_size=8).map(json.dumps),
)
json_text = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]")
        | st.dictionaries(st.sampled_from(["state", "last_seen_ago", "a", "memory_mb"]), inner, max_size=3).map(
            lambda d: "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in d.items()) + "}"
        )
    ),
    max_leaves=8,
) | st.integers(1, 1200).map(lambda n: "[" * n + "]" * n)
plausible = {
    "stage": st.just('"stage0-Map"'),
    "completed": st.integers(0, 9).map(str),
    "total": st.integers(0, 9).map(str),
    "done": st.sampled_from(["true", "false"]),
    "workers": st.just('{"w0": {"state": "busy", "last_seen_ago": 1.5}}'),
}
STATUS_FIELDS = ["stage", "completed", "total", "retries", "in_flight", "queue_depth", "done", "fatal_error", "workers"]


def _object(fields: dict[str, str]) -> str:
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in fields.items()) + "}"


@st.composite
def statuses(draw) -> str:
    """A get_status JSON object: every field plausible or any JSON text."""
    fields = {}
    for name in STATUS_FIELDS:
        if name in ("stage", "completed", "total") or draw(st.booleans()):
            good = plausible.get(name)
            fields[name] = draw(good) if good is not None and draw(st.integers(0, 2)) else draw(json_text)
    return _object(fields)


@st.composite
def task_lists(draw) -> str:
    """Iris list-tasks JSON: tasks with any usage values (numbers also as strings, as protobuf writes int64)."""
    tasks = []
    for i in range(draw(st.integers(1, 3))):
        usage = {
            k: draw(json_text | odd_numbers.map(json.dumps))
            for k in draw(st.lists(st.sampled_from(["memory_mb", "memory_peak_mb", "disk_mb", "cpu_millicores"])))
        }
        task = {"task_id": json.dumps(f"/u/j/{i}"), "state": draw(st.just('"TASK_STATE_RUNNING"') | json_text)}
        task["resource_usage"] = _object(usage) if draw(st.integers(0, 3)) else draw(json_text)
        for key in draw(st.lists(st.sampled_from(["worker_id", "exit_code", "error", "task_id"]), max_size=2)):
            task[key] = draw(json_text)
        tasks.append(_object(task))
    return '{"tasks": [' + ", ".join(tasks) + "]}"


EVENT_FIELDS = {
    "job_start": ["execution_id", "pid", "url", "config", "runner", "faults", "memory_limit_mb"],
    "stage_start": ["stage", "index", "total"],
    "status": ["stage", "completed", "total", "in_flight", "queue_depth", "retries", "alive", "progress_time"],
    "assign": ["stage", "shard", "attempt", "worker"],
    "shard_done": ["stage", "shard", "attempt", "worker", "items", "bytes", "elapsed_s", "counters"],
    "shard_failed": ["stage", "shard", "attempt", "worker", "kind", "error", "failure", "crash_file"],
    "heartbeat": ["worker", "stage", "shard", "items", "rss_bytes", "cpu_pct", "disk_bytes", "pid"],
    "worker_state": ["worker", "state", "reason", "pid"],
    "abort": ["fatal_error"],
    "job_end": ["state", "fatal_error", "completed", "total"],
}
GOOD_EVENT = {
    "stage": '"stage0-Map"',
    "index": "0",
    "total": "4",
    "shard": "1",
    "attempt": "0",
    "worker": '"w0"',
    "kind": '"task"',
    "state": '"succeeded"',
}


@st.composite
def event_logs(draw) -> str:
    """events.jsonl: a plausible job whose events carry any JSON text in any field."""
    lines = []
    for n in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(sorted(EVENT_FIELDS)))
        fields = {"ts": draw(st.just(str(1000 + n)) | json_text), "type": json.dumps(kind)}
        for name in EVENT_FIELDS[kind]:
            good = GOOD_EVENT.get(name)
            fields[name] = good if good is not None and draw(st.integers(0, 3)) else draw(json_text)
        lines.append(_object(fields))
    return "\n".join(lines) + "\n"


COMMANDS = ["status", "workers"]


def _reads_or_fails_in_one_line(argv: list[str]) -> None:
    code, out, err = run_inprocess(argv)
    problem = check(argv, code, out, err)
    assert problem is None, problem
    assert code in (0, 3), (code, err[-400:])


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hostile")


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)
@given(text=statuses(), form=st.sampled_from(["json", "repr", "json-string"]), command=st.sampled_from(COMMANDS))
def test_any_get_status(scratch, text, form, command):
    if form != "json":  # the same values in the Python repr (JSON's literals spelt as Python's)
        py = text.replace("true", "True").replace("false", "False").replace("null", "None")
        text = "JobStatus(" + ", ".join(f"{k}={v}" for k, v in _fields_of(py)) + ")"
        text = json.dumps(text) if form == "json-string" else text
    path = scratch / ("get_status.json" if form != "repr" else "status.txt")
    path.write_text(text)
    _reads_or_fails_in_one_line([command, str(path), "--json"])


def _fields_of(obj: str) -> list[tuple[str, str]]:
    """The top-level `"key": value` pairs of an object `_object` wrote."""
    body, out, depth, start, key = obj[1:-1], [], 0, 0, None
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == '"':
            end = i + 1
            while body[end] != '"':
                end += 2 if body[end] == "\\" else 1
            if depth == 0 and key is None:
                key = json.loads(body[i : end + 1])
                start = end + 3  # past `": `
            i = end + 1
            continue
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            out.append((key, body[start:i].strip()))
            key = None
        i += 1
    if key is not None:
        out.append((key, body[start:].strip()))
    return out


@settings(max_examples=40, **SETTINGS)
@given(text=task_lists(), command=st.sampled_from(["status", "workers"]))
def test_any_list_tasks(scratch, text, command):
    path = scratch / "tasks.json"
    path.write_text(text)
    _reads_or_fails_in_one_line([command, str(path), "--json"])


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)
@given(text=event_logs(), command=st.sampled_from(["status", "workers", "diagnose", "stragglers"]))
def test_any_events_jsonl(scratch, text, command):
    job = scratch / "job"
    job.mkdir(exist_ok=True)
    (job / "events.jsonl").write_text(text)
    _reads_or_fails_in_one_line([command, str(job), "--json"])


def test_repeated_warnings_are_capped_and_shown_escaped(tmp_path):
    """300 files zdebug cannot read: the first 3 warnings and `… and 297 more like these` on
    stderr, every one in --json; a file name's markup and escape sequences are shown, not run."""
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(Path(__file__).parent / "data" / "formats" / "coordinator_pypi.log", logs / "coordinator.log")
    for i in range(300):
        (logs / f"notes-{i:03}.txt").write_text("not a log\n")
    (logs / "a[red]y\x1b[2J.txt").write_text("not a log either\n")  # sorts first: shown
    code, out, err = run_inprocess(["status", str(logs)])
    assert code == 0 and check(["status"], code, out, err) is None, err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) <= 5, err
    err = err.replace("\n", "")  # the console wraps long lines
    assert "a[red]y\\x1b[2J.txt" in err and "\x1b" not in err
    assert "notes-001.txt" in err and "notes-002.txt" not in err
    assert "… and 298 more like these" in err
    code, out, err = run_inprocess(["status", str(logs), "--json"])
    assert code == 0 and len([w for w in json.loads(out)["warnings"] if w.startswith("ignored ")]) == 301


def test_capped_keeps_each_kind_first_and_counts_the_rest():
    from zephyr_debug.render.warnings import capped

    warnings = [f"ignored f{i}.txt:1: binary data" for i in range(5)]
    warnings += ["events.jsonl: skipped 2 unparseable line(s) (line 3, 4)", "ignored g.txt:1: binary data"]
    assert capped(warnings, per_kind=2) == [
        "ignored f0.txt:1: binary data",
        "ignored f1.txt:1: binary data",
        "… and 4 more like these",
        "events.jsonl: skipped 2 unparseable line(s) (line 3, 4)",
    ]
    assert capped(warnings, per_kind=1, total=1) == [
        "ignored f0.txt:1: binary data",
        "… and 5 more like it",
        "… and 1 more warning(s)",
    ]
    assert capped(["a", "b"]) == ["a", "b"]


def test_numbers_no_table_can_hold_skip_their_line_and_say_so(tmp_path):
    """A shard number past int64 or a `done in 1.2.3s` (both match their line's pattern) skips that
    line with a warning; the rest of the log reads (was: an internal error for the whole log)."""
    from zephyr_debug import zephyrlog

    stamp, w = zephyrlog.timestamp, " INFO zephyr.worker: "
    lines = [
        f"{stamp(1_796_200_000)} INFO zephyr.execution: " + zephyrlog.PIPELINE.format(exec="zephyr-x"),
        f"{stamp(1_796_200_001)}{w}" + zephyrlog.EXECUTING.format(worker="w-1", stage="s0", shard="9" * 23, attempt=0),
        f"{stamp(1_796_200_002)}{w}" + zephyrlog.EXECUTING.format(worker="w-1", stage="s0", shard=3, attempt=0),
        f"{stamp(1_796_200_003)}{w}[w-1] Shard 3 done in 1.2.3s",
        f"{stamp(1_796_200_004)}{w}" + zephyrlog.EXECUTING.format(worker="w-2", stage="s0", shard=4, attempt=0),
    ]
    path = tmp_path / "coordinator.log"
    path.write_text("\n".join(lines) + "\n")
    for argv in (["status", str(path), "--json"], ["diagnose", str(path)], ["stragglers", str(path)]):
        code, out, err = run_inprocess(argv)
        assert code == 0 and check(argv, code, out, err) is None, err
    report = json.loads(run_inprocess(["status", str(path), "--json"])[1])
    assert "skipped 2 unparseable lines" in report["warnings"]
