"""Property: whatever the evidence holds, every command ends with a result or a one-line error,
never an internal error. Hypothesis writes events.jsonl files, Zephyr-like logs, coordinator
replies and fault specs; commands are drawn from every leaf of cli.COMMANDS."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fuzz_corpus import FORMS, check, run_inprocess

from zephyr_debug import jobstore
from zephyr_debug.errors import ZdebugError
from zephyr_debug.reference import parse_fault

SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
JOB_FORMS = [f for f in FORMS if "{}" in f]
EVENT_TYPES = sorted(
    {
        "job_start",
        "stage_start",
        "stage_end",
        "status",
        "assign",
        "shard_done",
        "shard_failed",
        "heartbeat",
        "worker_registered",
        "worker_state",
        "abort",
        "job_end",
        "requeue",
    }
)
FIELDS = sorted(jobstore.FIELD_TYPES)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 10**6)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["stage0-Map", "w0", "w1", "task", "infra", "oom", "done", "active"])
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
# Mostly plausible values (the right type, small ranges) so events get deep into the analyzers.
plausible = {
    "ts": st.floats(0, 2e9) | st.integers(0, 50),
    "stage": st.sampled_from(["stage0-Map", "stage1-Write", "", "x" * 300]),
    "shard": st.integers(-1, 6),
    "attempt": st.integers(0, 3),
    "worker": st.sampled_from(["w0", "w1", "w:2/x", ""]),
    "index": st.integers(-1, 2),
    "total": st.integers(0, 7),
    "completed": st.integers(0, 7),
    "kind": st.sampled_from(["task", "infra", "other"]),
    "state": st.sampled_from(["active", "failed", "done", "succeeded"]),
}


@st.composite
def events(draw) -> dict:
    event = {"ts": draw(plausible["ts"]), "type": draw(st.sampled_from(EVENT_TYPES))}
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=8)):
        event[name] = draw(plausible.get(name, json_values) if draw(st.integers(0, 4)) else json_values)
    return event


lines = st.one_of(
    events().map(lambda e: json.dumps(e)),
    events().map(lambda e: json.dumps(e)),
    st.binary(max_size=60).map(lambda b: b.decode("latin-1")),
    st.text(max_size=60),
)

TEMPLATES = [
    "{d} INFO zephyr.execution: [{eid}] [{stage}] {n}/{m} complete, {k} in-flight, {q} queued, "
    "{a}/{r} workers alive, {x} dead",
    "{d} INFO zephyr.execution: [{eid}] Starting stage {stage} (Map) with {m} tasks",
    "{d} INFO zephyr.worker: [{w}] Executing stage {stage} shard {n} (attempt {k})",
    "{d} INFO zephyr.worker: [{w}] Shard {n} done in {f}s",
    "{d} ERROR zephyr.worker: Worker {w} error on shard {n}",
    "{d} WARNING zephyr.execution: Shard {n} requeued from worker {w} due to infra failure (preemption/heartbeat). "
    "Total generation: {k}, task errors so far: {q}/3, infra-while-in-flight: {a}/20.",
    "{d} WARNING zephyr.execution: Zephyr worker {w} failed to heartbeat within timeout ({f}s)",
    "Traceback (most recent call last):",
    '  File "{w}.py", line {n}, in {stage}',
    "ValueError: {w}",
    "Fatal Python error: Segmentation fault",
    "Current thread 0x{n:x} (most recent call first):",
]
dates = st.sampled_from(
    [
        "2026-12-01 10:00:00,000",
        "2026-12-01 10:00:05,500",
        "1970-01-01 00:00:00,000",
        "9999-12-31 23:59:59,999",
        "2026-13-45 99:99:99,000",
        "I20261201 10:00:01.5 1 zephyr.x",
    ]
)
words = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)


@st.composite
def log_lines(draw) -> str:
    template = draw(st.sampled_from(TEMPLATES))
    ints = st.integers(-2, 10**12)
    return template.format(
        d=draw(dates),
        eid=draw(words),
        stage=draw(words | st.just("stage0-Map")),
        n=draw(ints),
        m=draw(ints),
        k=draw(ints),
        q=draw(ints),
        a=draw(ints),
        r=draw(ints),
        x=draw(ints),
        w=draw(words),
        f=draw(st.floats(allow_nan=True)),
    )


@pytest.fixture(scope="module")
def scratch() -> Path:
    """A scratch dir, also the working dir (files commands write by default land there)."""
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="zdebug-hyp-") as tmp:
        os.chdir(tmp)
        try:
            yield Path(tmp)
        finally:
            os.chdir(cwd)


def _assert_clean(argv: list[str]) -> None:
    code, out, err = run_inprocess(argv)
    problem = check(argv, code, out, err)
    assert problem is None, problem


@pytest.mark.slow
@settings(max_examples=80, **SETTINGS)
@given(body=st.lists(lines, max_size=25), form=st.sampled_from(JOB_FORMS), as_json=st.booleans())
def test_any_events_jsonl(scratch, body, form, as_json):
    job = scratch / "job"
    job.mkdir(exist_ok=True)
    (job / "events.jsonl").write_text("\n".join(body) + "\n", encoding="utf-8", errors="surrogateescape")
    _assert_clean([str(job) if a == "{}" else a for a in form] + ["--json"] * as_json)


@settings(max_examples=40, **SETTINGS)
@given(
    body=st.lists(log_lines() | st.text(max_size=40), min_size=1, max_size=30),
    form=st.sampled_from([f for f in JOB_FORMS if f[0] in ("status", "stragglers", "crashes", "workers", "diagnose")]),
)
def test_any_zephyr_like_log(scratch, body, form):
    log = scratch / "worker.log"
    log.write_text("\n".join(body) + "\n", encoding="utf-8", errors="surrogateescape")
    _assert_clean([str(log) if a == "{}" else a for a in form])


class _Replies:
    """A fake coordinator: serves whatever JSON the example put in `routes`."""

    routes: ClassVar[dict[str, bytes]] = {}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        body = _Replies.routes.get(self.path, b'{"error": "not found"}')
        self.send_response(200 if self.path in _Replies.routes else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def fake_coordinator():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


replies = st.one_of(
    st.dictionaries(
        st.sampled_from(
            [
                "stage",
                "completed",
                "total",
                "done",
                "fatal_error",
                "workers",
                "execution_id",
                "job_dir",
                "in_flight",
                "w0",
                "state",
            ]
        ),
        json_values,
        max_size=6,
    ),
    json_values,
    st.dictionaries(st.text(max_size=4), json_values, max_size=3),
)


# Well-formed shapes with odd values, so examples also get past the reply checks.
good_status = st.fixed_dictionaries(
    {
        "stage": st.text(max_size=8),
        "completed": st.integers(-1, 10),
        "total": st.integers(-1, 10),
        "done": st.booleans(),
        "fatal_error": st.none() | st.text(max_size=10),
        "in_flight": st.integers(-1, 5),
        "workers": st.dictionaries(
            st.text(max_size=3), st.fixed_dictionaries({"state": st.sampled_from(["active", "x"])}), max_size=3
        ),
    }
)
good_workers = st.dictionaries(
    st.text(max_size=4),
    st.fixed_dictionaries(
        {
            "state": st.sampled_from(["active", "failed", "done", "x"]),
            "pid": st.integers(0, 10),
            "last_seen_ago": st.floats(-1, 1e6),
        },
        optional={"rss_bytes": st.integers(0, 2**40), "shard": json_values},
    ),
    max_size=4,
)


@settings(max_examples=40, **SETTINGS)
@given(job=replies, status=good_status | replies, workers=good_workers | replies, counters=replies)
def test_any_coordinator_reply(fake_coordinator, job, status, workers, counters):
    _Replies.routes = {
        p: json.dumps(v).encode()
        for p, v in {"/job": job, "/status": status, "/workers": workers, "/counters": counters}.items()
    }
    _assert_clean(["status", fake_coordinator, "--json"])


def test_a_null_worker_in_a_reply_is_named(fake_coordinator):
    _Replies.routes = {"/job": b"{}", "/status": b"{}", "/workers": b'{"w7": null}', "/counters": b"{}"}
    code, _out, err = run_inprocess(["status", fake_coordinator, "--json"])
    assert code != 0 and "/workers: worker 'w7' is NoneType" in err and "internal error" not in err


@settings(max_examples=200, **SETTINGS)
@given(
    spec=st.text(max_size=30)
    | st.builds(
        lambda k, rest: f"{k}:{rest}",
        st.sampled_from(["oom", "hang", "slow-shard", "kill-worker", "bogus"]),
        st.text(alphabet="0123456789:x.=-alwystimesc", max_size=15),
    )
)
def test_any_fault_spec(spec):
    try:
        parse_fault(spec)
    except ZdebugError as exc:  # the CLI prints it on one line
        assert spec.partition(":")[0] in exc.message
