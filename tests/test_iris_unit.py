"""The Iris source's pure parts: target parsing and the restricting reader for actor replies."""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass

import pytest

from zephyr_debug.errors import ZdebugError
from zephyr_debug.sources import iris, unpickle


@dataclass
class JobStatus:  # stands in for zephyr.execution.JobStatus: pickled by reference, like the real reply
    stage: str
    completed: int
    workers: dict
    fatal_error: str | None = None


class Exploit:
    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return os.system, (f"touch {self.path}",)


@pytest.mark.parametrize(
    "target, expected",
    [
        ("iris://127.0.0.1:10000/alice/job", ("http://127.0.0.1:10000", "/alice/job")),
        ("iris://https://iris.example.com/alice/job/", ("https://iris.example.com", "/alice/job")),
        ("iris://http://10.0.0.1:8080/root/p/zephyr-x-p0-a0", ("http://10.0.0.1:8080", "/root/p/zephyr-x-p0-a0")),
    ],
)
def test_parse_target(target, expected):
    assert iris.parse_target(target) == expected


@pytest.mark.parametrize("target", ["iris://", "iris://127.0.0.1:10000", "iris://127.0.0.1:10000/"])
def test_parse_target_needs_host_and_job(target):
    with pytest.raises(ZdebugError, match="expected iris://HOST:PORT/<job-id>"):
        iris.parse_target(target)


def test_actor_reply_becomes_plain_data():
    status = JobStatus("stage1-Map \u2192 Write", 3, {"w-0:0": {"state": "busy", "last_seen_ago": 0.5}})
    assert unpickle.plain_data(pickle.dumps(status, protocol=5)) == {
        "stage": "stage1-Map \u2192 Write",
        "completed": 3,
        "fatal_error": None,
        "workers": {"w-0:0": {"state": "busy", "last_seen_ago": 0.5}},
    }
    assert unpickle.plain_data(pickle.dumps({"zephyr/item_count": 7, "n": {1, 2}})) == {
        "zephyr/item_count": 7,
        "n": [1, 2],
    }


def test_actor_reply_never_runs_code(tmp_path):
    marker = tmp_path / "pwned"
    for protocol in (2, 5):
        unpickle.plain_data(pickle.dumps(Exploit(str(marker)), protocol=protocol))
    assert not marker.exists()
    with pytest.raises(ZdebugError, match="unreadable actor reply"):
        unpickle.plain_data(b"\x80\x05not a pickle")
