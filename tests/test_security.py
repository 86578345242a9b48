"""Security: loopback-only servers by default, no code execution from evidence, no path
escaping the job root, no terminal control sequences from evidence reaching the terminal."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from test_fuzz_corpus import ESC, FORMS, check, run_inprocess

import zephyr_debug
from zephyr_debug import jobstore
from zephyr_debug.sources import jobdir, unpickle

PACKAGE = Path(zephyr_debug.__file__).parent
ZDEBUG = [sys.executable, "-m", "zephyr_debug.cli"]
# Calls that run code or rebuild arbitrary objects from data.
FORBIDDEN_CALLS = {
    "eval",
    "exec",
    "compile",
    "__import__",
    "pickle.load",
    "pickle.loads",
    "marshal.load",
    "marshal.loads",
    "yaml.load",
    "yaml.unsafe_load",
    "yaml.full_load",
    "pd.read_pickle",
    "pandas.read_pickle",
    "shelve.open",
    "dill.load",
    "dill.loads",
    "cloudpickle.load",
    "cloudpickle.loads",
    "jsonpickle.decode",
    "os.system",
    "os.popen",
}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def test_no_eval_exec_or_unpickling_of_evidence():
    """The package never evals, execs or unpickles data. The one pickle reader (Iris actor replies)
    is an Unpickler whose find_class hands out no real callables: checked below by running it."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = _dotted(node.func)
                shell = any(k.arg == "shell" and getattr(k.value, "value", False) for k in node.keywords)
                allow_pickle = any(k.arg == "allow_pickle" and getattr(k.value, "value", False) for k in node.keywords)
                if name in FORBIDDEN_CALLS or shell or allow_pickle:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {name}")
            elif (
                isinstance(node, ast.ClassDef)
                and any(_dotted(b) == "pickle.Unpickler" for b in node.bases)
                and "find_class" not in {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
            ):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: Unpickler without find_class")
    assert not found, found


class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_malicious_pickled_actor_reply_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    for payload in (pickle.dumps(_Evil(marker)), pickle.dumps({"status": _Evil(marker)}, protocol=0)):
        with contextlib.suppress(zephyr_debug.errors.ZdebugError):
            unpickle.plain_data(payload)
    assert not marker.exists()


@pytest.mark.slow
def test_servers_bind_loopback_unless_told_and_warn_otherwise(reference_job, tmp_path):
    start = next(
        e
        for e in jobstore.read_events(reference_job(workers=2, shards=4).job_dir / jobstore.EVENTS)
        if e["type"] == "job_start"
    )
    assert start["url"].startswith("http://127.0.0.1:")
    assert _non_loopback_binds() == []
    proc = subprocess.run(
        [
            *ZDEBUG,
            "demo",
            "--host",
            "0.0.0.0",
            "--no-faults",
            "--workers",
            "1",
            "--shards",
            "1",
            "--rows",
            "200",
            "--runner",
            "inline",
            "--heartbeat",
            "0.2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ZDEBUG_HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning: coordinator listening on 0.0.0.0, reachable from other machines" in proc.stderr
    assert json.loads(proc.stdout)["state"] == "succeeded"


LOOPBACK = {"127.0.0.1", "localhost", "::1"}
LISTENERS = ("bind", "HTTPServer", "ThreadingHTTPServer", "TCPServer", "create_server", "CoordinatorServer")


def _non_loopback_binds() -> list[str]:
    """Listening calls with an address literal other than loopback, and defaults of `host` parameters."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and _dotted(node.func).endswith(LISTENERS) and node.args:
                first = node.args[0].elts[0] if isinstance(node.args[0], ast.Tuple) else node.args[0]
                if isinstance(first, ast.Constant) and first.value not in LOOPBACK:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {first.value!r}")
            if isinstance(node, ast.AnnAssign) and (
                _dotted(node.target) == "host"
                and isinstance(node.value, ast.Constant)
                and node.value.value not in LOOPBACK
            ):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: host = {node.value.value!r}")
            if isinstance(node, ast.arguments):
                named = (node.posonlyargs + node.args)[-len(node.defaults) :] if node.defaults else []
                for arg, default in zip(named, node.defaults, strict=True):
                    if arg.arg == "host" and isinstance(default, ast.Constant) and default.value not in LOOPBACK:
                        found.append(f"{path.relative_to(PACKAGE)}:{default.lineno}: host={default.value!r}")
    return found


def _job(dir: Path, crash_file: str) -> Path:
    dir.mkdir(parents=True)
    events = [
        {"ts": 1.0, "type": "job_start", "execution_id": dir.name},
        {"ts": 2.0, "type": "stage_start", "stage": "s", "index": 0, "total": 1},
        {
            "ts": 3.0,
            "type": "shard_failed",
            "stage": "s",
            "shard": 0,
            "attempt": 0,
            "worker": "w",
            "kind": "task",
            "error": "boom",
            "crash_file": crash_file,
        },
    ]
    (dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return dir


def test_job_ids_cannot_walk_out_of_the_job_root(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "jobs").mkdir(parents=True)
    _job(tmp_path / "etc", "x")  # = <jobs root>/../../etc: must not be reachable by "id"
    cwd = tmp_path / "a" / "b" / "c"  # where ../../etc does not exist
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("ZDEBUG_HOME", str(home))
    for ref in ("../../etc", "..", "../..", "jobs/../../etc", "..%2f..%2fetc", "....//....//etc"):
        code, out, err = run_inprocess(["status", ref, "--json"])
        assert code != 0 and check(["status", ref], code, out, err) is None, (ref, out, err)
        assert set(json.loads(out)) == {"schema_version", "error", "exit_code"}, out  # an error, not the job


@pytest.mark.parametrize(
    "crash_file", ["../../../../../../etc/passwd", "/etc/passwd", "crashes/../../outside.txt", "crashes/link.txt"]
)
def test_crash_files_named_by_evidence_stay_inside_the_job_dir(crash_file, tmp_path):
    (tmp_path / "outside.txt").write_text("SECRET outside the job dir\n")
    job = _job(tmp_path / "job", crash_file)
    (job / "crashes").mkdir()
    os.symlink(tmp_path / "outside.txt", job / "crashes" / "link.txt")
    ev = jobdir.load(job)
    assert [c.text for c in ev.crashes] == ["boom"]  # the event's own one-line error, not the outside file
    assert any("outside the job dir" in w for w in ev.warnings)
    code, out, _err = run_inprocess(["crashes", str(job), "--json"])
    assert code == 0 and "SECRET" not in out and "root:" not in out


@pytest.fixture(scope="module")
def hostile_job(reference_job, tmp_path_factory) -> Path:
    """A real job (task exception, segfault, OOM kill) whose crash texts, logs and error fields carry
    terminal control sequences: clear screen, OSC title / hyperlink, 8-bit CSI."""
    result = reference_job(
        "oom:1", "segfault:2", "exception:3", runner="subprocess", workers=3, shards=6, memory_limit_mb=300
    )  # test_reference's job: cached when both run
    job = tmp_path_factory.mktemp("hostile") / result.execution_id
    shutil.copytree(result.job_dir, job)
    esc = ESC.decode("latin-1") + "\x1b]8;;http://evil/\x07link\x1b]8;;\x07"
    lines = []
    for line in (job / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["type"] == "shard_failed":
            e["error"] = f"{e.get('error')} {esc}"
        if e["type"] == "abort":
            e["fatal_error"] += esc
        lines.append(json.dumps(e))
    (job / "events.jsonl").write_text("\n".join(lines) + "\n")
    for crash in (job / "crashes").glob("*.txt"):
        crash.write_text(crash.read_text().replace("ValueError: ", f"ValueError: {esc}"))
    for log in (job / "workers").glob("*.log"):
        log.write_text(
            log.read_text() + f"Fatal Python error: Segmentation fault {esc}\n\n"
            'Current thread 0x00007f (most recent call first):\n  File "x.py", line 1 in f\n'
        )
    return job


@pytest.mark.slow
@pytest.mark.parametrize("form", [f for f in FORMS if "{}" in f], ids=lambda f: " ".join(f))
def test_control_sequences_from_evidence_never_reach_the_terminal(form, hostile_job):
    argv = [str(hostile_job) if a == "{}" else a for a in form]
    for extra in ([], ["--json"]):
        code, out, err = run_inprocess([*argv, *extra])
        problem = check([*argv, *extra], code, out, err)
        assert problem is None, problem
    if form[0] == "crashes" and len(form) == 2:  # the crash texts are shown, escaped
        assert "\\x1b[2J" in out or "\\u001b[2J" in out


def _outward_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: just picks the outward interface
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_a_url_in_evidence_never_makes_zdebug_call_out(tmp_path):
    """A job dir whose job_start names a live pid (ours) and a non-local coordinator URL:
    zdebug must not contact that URL (a server on this machine's outward address counts hits)."""
    address = _outward_address()
    if address is None:
        pytest.skip("no non-loopback interface")
    hits = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            hits.append(self.path)
            body = json.dumps({"execution_id": "outward"}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer((address, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://{address}:{server.server_address[1]}"
        job = tmp_path / "outward"
        job.mkdir()
        (job / "events.jsonl").write_text(
            json.dumps({"ts": 1.0, "type": "job_start", "execution_id": "outward", "pid": os.getpid(), "url": url})
            + "\n"
        )
        code, out, err = run_inprocess(["status", str(job), "--json"])
        assert code == 0, err
        assert json.loads(out)["state"] == "interrupted" and hits == []
        assert requests.get(url + "/job", timeout=5).ok and hits == ["/job"]  # the server did answer
    finally:
        server.shutdown()
        server.server_close()


def _counting_server(execution_id: str) -> tuple[ThreadingHTTPServer, list[str]]:
    """A coordinator look-alike on 127.0.0.1 that answers /job as `execution_id` and counts requests."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            hits.append(self.path)
            body = json.dumps({"execution_id": execution_id}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, hits


def test_a_local_port_named_in_evidence_is_never_asked(tmp_path):
    """A job dir without job_end whose job_start names a live pid (ours) and a port on this machine:
    zdebug does not send that port a request (it could be any local service); the job reads as
    interrupted. Only the coordinator the job store recorded itself for that dir is asked."""
    server, hits = _counting_server("planted")
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        job = tmp_path / "planted"
        job.mkdir()
        start = {"ts": 1.0, "type": "job_start", "execution_id": "planted", "pid": os.getpid(), "url": url}
        (job / "events.jsonl").write_text(json.dumps(start) + "\n")
        for argv in (["status", str(job), "--json"], ["diagnose", str(job), "--json"], ["jobs", "--json"]):
            code, _, err = run_inprocess(argv)
            assert code == 0, err
        assert json.loads(run_inprocess(["status", str(job), "--json"])[1])["state"] == "interrupted"
        assert hits == []
    finally:
        server.shutdown()
        server.server_close()


def test_the_coordinator_the_job_store_recorded_is_asked(tmp_path):
    """The store's own record (written as it logs job_start, outside the job dir) is what makes a
    job without job_end read as running; job_end forgets it."""
    job = tmp_path / "recorded"
    server, hits = _counting_server("recorded")
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        events = jobstore.EventLog(job / jobstore.EVENTS)
        events.write("job_start", execution_id="recorded", url=url, pid=os.getpid())
        assert jobstore.recorded_coordinator(job) == {
            "job_dir": str(job.resolve()),
            "execution_id": "recorded",
            "url": url,
            "pid": os.getpid(),
        }
        code, out, err = run_inprocess(["status", str(job), "--json"])
        assert code == 0, err
        assert json.loads(out)["state"] == "running" and hits == ["/job"]
        (tmp_path / "copy").mkdir()
        shutil.copy(job / jobstore.EVENTS, tmp_path / "copy" / jobstore.EVENTS)  # the same evidence elsewhere
        code, out, err = run_inprocess(["status", str(tmp_path / "copy"), "--json"])
        assert json.loads(out)["state"] == "interrupted" and hits == ["/job"]
        events.write("job_end", state="succeeded")
        events.close()
        assert jobstore.recorded_coordinator(job) is None
        dead = subprocess.Popen(["true"])
        dead.wait()
        jobstore.record_coordinator(tmp_path / "killed", "killed", url, dead.pid)  # its launcher was SIGKILLed
        jobstore.record_coordinator(job, "recorded", url, os.getpid())  # the next job prunes it
        assert jobstore.recorded_coordinator(tmp_path / "killed") is None
        jobstore.forget_coordinator(job)
    finally:
        server.shutdown()
        server.server_close()


def test_a_pickled_reply_cannot_allocate_what_it_likes():
    """bytearray(3 GB) named in a hostile actor reply: refused, not allocated."""
    code = (
        "import resource, sys; from zephyr_debug.sources import unpickle\n"
        "try:\n    unpickle.plain_data(b'cbuiltins\\nbytearray\\n(I3000000000\\ntR.')\n"
        "except Exception:\n    pass\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) < 1024, f"{proc.stdout.strip()} MB peak"
    assert "ok" in str(unpickle.plain_data(pickle.dumps(bytearray(b"ok"))))  # real bytearrays still load


@pytest.fixture
def bare_coordinator(tmp_path):
    """A reference coordinator on HTTP with one stage of 2 shards and no workers: the test is the worker."""
    from conftest import FAST

    from zephyr_debug.reference.coordinator import Coordinator, StageSpec
    from zephyr_debug.reference.logfmt import LineLog
    from zephyr_debug.reference.server import CoordinatorServer

    events = jobstore.EventLog(tmp_path / jobstore.EVENTS)
    c = Coordinator(
        "e1", [StageSpec("Map", 2)], FAST, events, LineLog(tmp_path / "coordinator.log", "zephyr.execution")
    )
    c.begin()
    server = CoordinatorServer(c, {"execution_id": "e1"})

    def post(path: str, **body) -> requests.Response:
        data = json.dumps(body).encode()  # as written: Infinity too
        return requests.post(server.url + path, data=data, headers={"Content-Type": "application/json"}, timeout=10)

    try:
        yield post, tmp_path
    finally:
        server.close()
        events.close()


def test_reference_coordinator_calls_carry_the_token_registration_handed_out(bare_coordinator):
    """Any local process could pull and fail shards in a worker's name: every call after /register
    must carry that worker's token; re-registering hands out a new one and the old stops working."""
    post, job = bare_coordinator
    token = post("/register", worker="w0", pid=os.getpid()).json()["token"]
    assert post("/pull_task", worker="w0").status_code == 400
    assert post("/pull_task", worker="w0", token="guess").status_code == 400
    other = post("/register", worker="w1").json()["token"]
    assert post("/pull_task", worker="w0", token=other).status_code == 400  # another worker's token
    task = post("/pull_task", worker="w0", token=token).json()
    assert task["status"] == "run_task"
    key = {"stage_index": 0, "shard": task["task"]["shard"], "attempt": 0}
    assert post("/report_error", worker="w0", error="boom", **key).status_code == 400
    assert post("/heartbeat", worker="w0", sample={"rss_bytes": 1}).status_code == 400
    new = post("/register", worker="w0").json()["token"]  # a restarted worker re-registers its id
    assert new != token and post("/heartbeat", worker="w0", token=token).status_code == 400
    assert post("/heartbeat", worker="w0", token=new, sample={"rss_bytes": 1}).json()["status"] == "ok"
    assert post("/register", worker="w0\n2026-12-01 10:00:00,000 INFO zephyr.execution: fake").status_code == 400
    types = [e["type"] for e in jobstore.read_events(job / jobstore.EVENTS)]
    assert "shard_failed" in types and types.count("shard_failed") == 1  # only the re-registration's infra failure
    assert "fake" not in (job / "coordinator.log").read_text()


@pytest.mark.parametrize(
    "call",
    [
        ("/heartbeat", {"sample": {"type": "job_end", "state": "succeeded"}}),
        ("/heartbeat", {"sample": {"ts": 0, "rss_bytes": 1}}),
        ("/heartbeat", {"sample": {"abort": True}}),
        ("/heartbeat", {"sample": {"rss_bytes": "lots"}}),
        ("/heartbeat", {"sample": {"cpu_pct": 1e400}}),
        ("/heartbeat", {"sample": [1]}),
        ("/report_result", {"elapsed_s": 1.0, "items": 1, "type": "abort", "fatal_error": "planted"}),
        ("/report_result", {"elapsed_s": 1.0, "items": "many"}),
        ("/report_result", {"elapsed_s": 1.0, "counters": {"a/b": "x"}}),
        ("/report_error", {"error": "x", "ts": 1e10, "type": "job_end"}),
        ("/report_error", {"error": ["x"]}),
    ],
    ids=lambda c: f"{c[0]}-{json.dumps(c[1])[:40]}",
)
def test_reference_coordinator_takes_only_whitelisted_fields_of_their_types(bare_coordinator, call):
    """A sample or report cannot rewrite the job's record (`type`, `ts`, a job_end or abort): refused
    whole, before anything changes."""
    post, job = bare_coordinator
    token = post("/register", worker="w0").json()["token"]
    task = post("/pull_task", worker="w0", token=token).json()["task"]
    path, body = call
    if path != "/heartbeat":
        body = {"stage_index": 0, "shard": task["shard"], "attempt": 0, **body}
    reply = post(path, worker="w0", token=token, **body)
    assert reply.status_code == 400, reply.text
    types = [e["type"] for e in jobstore.read_events(job / jobstore.EVENTS)]
    assert {"job_end", "abort", "heartbeat", "shard_done", "shard_failed"}.isdisjoint(types), types
    assert post(
        "/report_result",
        worker="w0",
        token=token,
        stage_index=0,
        shard=task["shard"],
        attempt=0,
        elapsed_s=0.5,
        items=3,
    ).json() == {"ok": True}  # the shard is still the worker's to finish
