"""The Prometheus source's target syntax and errors, and `zdebug observe` end to end."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
import requests

from zephyr_debug.commands.common import job_target
from zephyr_debug.dashboards.local import LocalPrometheus, free_port
from zephyr_debug.errors import ZdebugError
from zephyr_debug.sources import load, prometheus

needs_prometheus = pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="prometheus missing (.ci/run installs it)"
)


def test_targets_round_trip_and_bad_ones_are_one_line_errors():
    spec = prometheus.target("http://127.0.0.1:9090/prom/", "20261203-032904-2d03707b")
    assert spec == "prometheus+http://127.0.0.1:9090/prom?run=20261203-032904-2d03707b"
    assert prometheus.parse(spec) == ("http://127.0.0.1:9090/prom", "20261203-032904-2d03707b", "7d")
    assert prometheus.parse("prometheus+https://p:9090?window=2h") == ("https://p:9090", None, "2h")
    for bad, needle in [
        ("prometheus+ftp://x", "expected prometheus+http"),
        ("prometheus+http://x:1?run=a&limit=3", "unknown parameter(s) limit"),
        ('prometheus+http://x:1?run=a"}or{x="', "is not an execution id"),
        ("prometheus+http://x:1?window=5", "not a Prometheus duration"),
    ]:
        with pytest.raises(ZdebugError) as err:
            load(bad)
        assert needle in str(err.value) and "\n" not in str(err.value)


def test_job_or_prometheus_options():
    assert job_target(None, "http://p:9090", "r1") == "prometheus+http://p:9090?run=r1"
    assert job_target("latest") == "latest"
    for args, needle in [(("latest", "http://p:9090"), "not both"), (("latest", None, "r1"), "--run needs")]:
        with pytest.raises(ZdebugError, match=needle):
            job_target(*args)
    assert job_target(None) == "latest"  # status and stragglers default to the newest job


def test_unreachable_prometheus_is_a_one_line_error():
    port = free_port()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "zephyr_debug.cli",
            "stragglers",
            "--prometheus",
            f"http://127.0.0.1:{port}",
            "--run",
            "x-20261203-032904-2d03707b",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3 and proc.stdout == ""  # unreachable source
    assert proc.stderr.count("\n") == 1 and "Prometheus unreachable" in proc.stderr and "Traceback" not in proc.stderr


@needs_prometheus
def test_a_run_prometheus_never_saw_is_named_in_the_error(tmp_path):
    with LocalPrometheus(tmp_path) as prom:
        with pytest.raises(ZdebugError, match="no samples of run nosuch-run"):
            load(prometheus.target(prom.url, "nosuch-run"))
        with pytest.raises(ZdebugError, match="no Zephyr run"):
            load(prometheus.target(prom.url))


@pytest.mark.slow
@needs_prometheus
def test_observe_serves_the_demo_run_until_ctrl_c(tmp_path):
    env = {**os.environ, "ZDEBUG_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zephyr_debug.cli",
            "observe",
            "--port",
            "0",
            "--json",
            "--workers",
            "2",
            "--shards",
            "4",
            "--rows",
            "2000",
            "-f",
            "exception:1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        lines = []
        while not lines or lines[-1] != "}\n":  # the JSON, printed when the job ends
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            lines.append(line)
        info = json.loads("".join(lines))
        assert info["state"] == "succeeded" and (tmp_path / "prometheus" / "prometheus.yml").is_file()
        ev = load(info["zdebug"])  # Prometheus still answers, with the whole run
        assert ev.job == info["job"] and ev.state == "succeeded"
        assert ev.attempts["outcome"].value_counts().to_dict() == {"done": 5, "failed": 1}
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    with pytest.raises(requests.ConnectionError):
        requests.get(info["prometheus"] + "/-/ready", timeout=5)
