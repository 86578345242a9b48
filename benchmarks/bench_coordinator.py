"""Coordinator pull/report path: calls per second in-process (target >= 10k/s), against the
same calls over its HTTP API from one client in the same run."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import requests

from zephyr_debug.jobstore import EventLog
from zephyr_debug.reference.coordinator import Coordinator, CoordinatorConfig, StageSpec
from zephyr_debug.reference.logfmt import LineLog
from zephyr_debug.reference.server import CoordinatorServer

TARGET = 10_000


def _coordinator(tmp: Path, shards: int) -> Coordinator:
    c = Coordinator(
        "bench-20260101-000000-00000000",
        [StageSpec("Map", shards)],
        CoordinatorConfig(),
        EventLog(tmp / "events.jsonl"),
        LineLog(tmp / "coordinator.log", "zephyr.execution"),
    )
    c.begin()
    return c


def in_process(tmp: Path, shards: int, workers: int = 100) -> float:
    c = _coordinator(tmp, shards)
    ids = [f"w{i}" for i in range(workers)]
    for w in ids:
        c.register(w)
    calls, start = 0, time.perf_counter()
    while not c.done:
        for w in ids:
            reply = c.pull_task(w)
            calls += 1
            if reply["status"] == "run_task":
                t = reply["task"]
                c.report_result(w, t["stage_index"], t["shard"], t["attempt"], elapsed_s=0.1, items=10, bytes=100)
                calls += 1
    return calls / (time.perf_counter() - start)


def over_http(tmp: Path, shards: int) -> float:
    c = _coordinator(tmp, shards)
    server = CoordinatorServer(c, {"execution_id": c.execution_id})
    http = requests.Session()
    try:
        token = http.post(server.url + "/register", json={"worker": "w0"}).json()["token"]
        calls, start = 0, time.perf_counter()
        while not c.done:
            reply = http.post(server.url + "/pull_task", json={"worker": "w0", "token": token}).json()
            calls += 1
            if reply["status"] == "run_task":
                t = reply["task"]
                http.post(
                    server.url + "/report_result",
                    json={
                        "worker": "w0",
                        "token": token,
                        "stage_index": t["stage_index"],
                        "shard": t["shard"],
                        "attempt": t["attempt"],
                        "elapsed_s": 0.1,
                        "items": 10,
                        "bytes": 100,
                    },
                )
                calls += 1
    finally:
        server.close()
    return calls / (time.perf_counter() - start)


def run(quick: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        rate = in_process(Path(tmp) / "a", 5_000 if quick else 100_000)
        http_rate = over_http(Path(tmp) / "b", 200 if quick else 2_000)
    return {
        "coordinator_calls_per_s": {
            "value": rate,
            "unit": "calls/s",
            "baseline": "same calls over HTTP",
            "baseline_value": http_rate,
            "ratio": rate / http_rate,
            "target": f">= {TARGET} calls/s in-process",
            "meets": rate >= TARGET,
        }
    }
