"""Telemetry as code: generated dashboards/alert rules match the committed files, and the
alert rules pass promtool's check and unit tests (each alert firing and not firing)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from zephyr_debug.dashboards import alerts, exporter, grafana
from zephyr_debug.dashboards.__main__ import main as generate
from zephyr_debug.reference.metrics import METRICS, metric_name

DASHBOARDS = Path(__file__).resolve().parent.parent / "dashboards"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool missing (.ci/run installs `prometheus`)")


def promtool(*args: str, cwd: Path = DASHBOARDS) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_committed_files_are_what_the_code_generates(tmp_path):
    assert generate(["--check", str(DASHBOARDS)]) == 0, "run `make dashboards`"
    copy = tmp_path / "d"
    shutil.copytree(DASHBOARDS, copy)
    board = copy / f"{grafana.UID}.json"
    board.write_text(board.read_text().replace("Progress per stage", "Progress"))
    assert generate(["--check", str(copy)]) == 1


def test_dashboard_has_the_panels_and_variables_debugging_needs():
    board = grafana.dashboard()
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource", "run"]
    titles = {p["title"] for p in board["panels"]}
    for needed in (
        "Progress per stage",
        "Tail: in flight > 0 and queue empty",
        "Time since last progress",
        "Top workers by memory",
        "Top workers by disk",
        "Failures by kind",
        "Retries (current stage)",
        "Workers alive / dead",
    ):
        assert needed in titles
    for title, expr in grafana.queries(board):
        assert "$run" in expr, title
    assert all(p["datasource"]["uid"] == "${datasource}" for p in board["panels"])
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])


def test_every_metric_in_panels_and_rules_is_exported():
    exprs = [e for _, e in grafana.queries(grafana.dashboard())]
    exprs += [r["expr"] for r in alerts.rules()["groups"][0]["rules"]]
    used = {m for e in exprs for m in re.findall(r"\b(zephyr_\w+|progress_time_seconds)\b", e)}
    assert used and used <= METRICS, used - METRICS
    ours = {m for e in exprs for m in re.findall(r"\b(zdebug_\w+)\b", e)}  # `zdebug watch --metrics-port`
    assert ours and ours <= exporter.METRICS, ours - exporter.METRICS


def test_counters_become_gauges_with_zephyrs_names():
    assert metric_name("zephyr/worker/mem_peak_bytes") == "worker_mem_peak_bytes"
    assert metric_name("my-counter.rows") == "my_counter_rows"


def test_test_sized_rules_keep_the_production_expressions():
    small = alerts.rules(alerts.thresholds(stall_s=4, stall_for="2s", interval="1s"))["groups"][0]
    prod = alerts.rules()["groups"][0]
    assert small["interval"] == "1s" and prod["interval"] == "1m"
    stalled = next(r for r in small["rules"] if r["alert"] == "ZephyrPipelineProgressStalled")
    assert stalled["expr"] == prod["rules"][0]["expr"].replace(">= 2700", ">= 4") and stalled["for"] == "2s"
    assert [r["alert"] for r in small["rules"]] == alerts.NAMES


@needs_promtool
def test_promtool_checks_and_unit_tests_pass():
    check = promtool("check", "rules", "alerts.yml")
    assert check.returncode == 0 and f"{len(alerts.NAMES)} rules found" in check.stdout, check.stdout + check.stderr
    unit = promtool("test", "rules", "alerts_test.yml")
    assert unit.returncode == 0, unit.stdout + unit.stderr
    tested = set(re.findall(r"alertname: (\w+)", (DASHBOARDS / "alerts_test.yml").read_text()))
    assert tested == set(alerts.NAMES)


@needs_promtool
@pytest.mark.parametrize(
    "change",
    [
        {"stall_s": 3600},
        {"tail_for": "45m"},
        {"dead_for": "10m"},
        {"crash_loop_failures": 4},
        {"crash_loop_for": "5m"},
        {"finding_for": "10m"},
    ],
)
def test_promtool_unit_tests_catch_a_changed_threshold(tmp_path, change):
    import yaml

    shutil.copy(DASHBOARDS / "alerts_test.yml", tmp_path)
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(alerts.rules(alerts.thresholds(**change))))
    unit = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert unit.returncode != 0 and "FAILED" in unit.stdout + unit.stderr
