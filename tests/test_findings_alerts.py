"""Alerts from the one analysis (issue 28 item 4): the series `zdebug watch --metrics-port` exports,
made from real marin-zephyr captures replayed in log time, run through the shipped `Zdebug*` rules
by promtool; and a real Prometheus scraping `zdebug watch` on a log that grows as the job's did.

Expected alerts come from each capture's truth.json, not from the series: the right alert fires on
the right shard, and no other `Zdebug*` alert fires at any moment of any capture."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml

from benchmarks.bench_early import CAPTURES, TimedLog
from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.dashboards import alerts, exporter
from zephyr_debug.dashboards.local import LocalPrometheus, free_port
from zephyr_debug.errors import EvidenceError
from zephyr_debug.sources import load

STEP = 2  # a capture is analyzed at every STEP-th timed line (a real crash loop is named ~5 before its abort)
MAX_CUTS = 80  # or as often as makes this many cuts
ALERT_OF = {  # truth.json cause -> the alert that names it
    **dict.fromkeys(alerts.CRASHING, "ZdebugShardCrashLoop"),
    **dict.fromkeys(alerts.NOT_MOVING, "ZdebugStuckShard"),
    **dict.fromkeys(alerts.TAILING, "ZdebugStragglerTail"),
}
ZDEBUG_ALERTS = sorted(set(ALERT_OF.values()))
NAMES = ("crashloop", "oom", "stuck", "skew", "hotkey", "healthy", "healthy-wide", "recovered", "alldead")


def truth(name: str) -> dict[str, set[tuple[str, str]]]:
    """alert name -> {(stage, shard)} the capture's truth says it must fire for."""
    out: dict[str, set[tuple[str, str]]] = {}
    for e in json.loads((CAPTURES / name / "truth.json").read_text())["expect"]:
        out.setdefault(ALERT_OF[e["cause"]], set()).add((e["stage"], str(e["shard"])))
    return out


def cut(log: TimedLog, k: int) -> tuple[bytes, float]:
    """The log as a reader of the growing file saw it before its k-th timed line (k = all of
    them: the whole log), and the log time then."""
    return log.data[: log.offsets[k]], float(log.times[k - 1])


def analysis_at(log: TimedLog, k: int, tmp: Path):
    """The one analysis of the log's first k timed lines (None: no Zephyr line yet)."""
    d = tmp / f"cut-{k}"
    d.mkdir(exist_ok=True)
    (d / "coordinator.log").write_bytes(cut(log, k)[0])
    try:
        return analyze(load(str(d)))
    except EvidenceError:
        return None
    finally:
        shutil.rmtree(d)


def replay(name: str, tmp: Path) -> list[dict]:
    """The exporter's samples at every STEP-th timed line of the capture's log (at most MAX_CUTS
    cuts), then at its end."""
    log = TimedLog((CAPTURES / name / "coordinator.log").read_bytes())
    frames = []
    step = max(STEP, -(-len(log.times) // MAX_CUTS))  # at most MAX_CUTS cuts
    for k in [*range(step, len(log.times), step), len(log.times)]:
        a = analysis_at(log, k, tmp)
        empty = {metric: [] for metric in exporter.METRICS}  # no Zephyr line yet: nothing to export
        frames.append(empty if a is None else exporter.samples(a, f"/captures/{name}", cut(log, k)[1], 0.0))
    return frames


def input_series(frames: list[dict]) -> list[dict]:
    """promtool input series: a value per frame; a series gone from a frame is stale (as a scrape
    without it makes it), absent before it first appears."""
    keys: dict[tuple, None] = {}
    for frame in frames:
        for name, rows in frame.items():
            for labels, _ in rows:
                keys[(name, labels)] = None
    series = []
    for name, labels in keys:
        names = exporter.FINDING_LABELS if name == exporter.FINDING else exporter.JOB_LABELS
        values, seen = [], False
        for frame in frames:
            value = dict(frame.get(name, [])).get(labels)
            seen = seen or value is not None
            values.append(f"{value:g}" if value is not None else ("stale" if seen else "_"))
        selector = ",".join(f'{k}="{v}"' for k, v in zip(names, labels, strict=True))
        series.append({"series": f"{name}{{{selector}}}", "values": " ".join(values)})
    return series


def first_firing(frames: list[dict], stage: str, shard: str, kinds: tuple[str, ...]) -> int | None:
    """The first frame whose findings name (stage, shard) with one of `kinds` while running."""
    for i, frame in enumerate(frames):
        running = any(v == 1 for _, v in frame[exporter.RUNNING])
        if running and any(
            lab[2] in kinds and lab[4] == stage and lab[5] == shard for lab, _ in frame[exporter.FINDING]
        ):
            return i
    return None


PROMTOOL = shutil.which("promtool")


def _render(template: str, labels: dict, value: float) -> str:
    """An annotation as Prometheus renders it, for the `{{ $labels.x }}` / `{{ $value }}` it uses."""
    out = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m[1]], template)
    return out.replace("{{ $value }}", f"{value:g}")


@pytest.mark.slow
@pytest.mark.skipif(PROMTOOL is None, reason="promtool missing (.ci/run installs `prometheus`)")
@pytest.mark.parametrize("name", NAMES)
def test_replayed_capture_fires_what_its_truth_names_and_nothing_else(name, tmp_path):
    """Each alert: before the first of its truth shards is named, nothing; then that shard, as
    the rule renders it. One allowance: a shard the truth names for another cause may raise the
    tail alert first (a frozen shard is a tail before it is known stuck); its series are left out
    of that alert's test."""
    frames = replay(name, tmp_path)
    # Production expressions, a cut per evaluation; `for` is 0 (alerts_test.yml tests the wait).
    th = alerts.thresholds(interval="1s", finding_for="0s")
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(alerts.rules(th)))
    shipped = {r["alert"]: r for r in alerts.rules(th)["groups"][0]["rules"]}
    want = truth(name)
    tests = []
    for alert in ZDEBUG_ALERTS:
        kinds = tuple(k for k, a in ALERT_OF.items() if a == alert)
        others = {s for a, shards in want.items() if a != alert for s in shards}
        seen = frames if alert != "ZdebugStragglerTail" else [_without(f, others) for f in frames]
        fire_at = {}
        for stage, shard in want.get(alert, ()):
            i = first_firing(seen, stage, shard, kinds)
            assert i is not None, f"{name}: no cut names {alert} on {stage} shard {shard}"
            fire_at[(stage, shard)] = i
        checks = []
        for i, frame in enumerate(seen):
            due = [key for key, at in fire_at.items() if at == i]
            if due or not fire_at or i < min(fire_at.values()):
                exp = [_expected(shipped[alert], frame, key) for key in due]
                checks.append({"eval_time": f"{i}s", "alertname": alert, "exp_alerts": exp})
        tests.append({"interval": "1s", "input_series": input_series(seen), "alert_rule_test": checks})
    test = {"rule_files": ["alerts.yml"], "evaluation_interval": "1s", "tests": tests}
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, width=10_000))
    run = subprocess.run([PROMTOOL, "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]


def _without(frame: dict, shards: set[tuple[str, str]]) -> dict:
    return frame | {
        exporter.FINDING: [(lab, v) for lab, v in frame[exporter.FINDING] if (lab[4], lab[5]) not in shards]
    }


def _expected(rule: dict, frame: dict, key: tuple[str, str]) -> dict:
    """The alert `rule` raises for (stage, shard) of `frame`: all its labels and annotations."""
    labels, value = next(
        (lab, v) for lab, v in frame[exporter.FINDING] if (lab[4], lab[5]) == key and ALERT_OF[lab[2]] == rule["alert"]
    )
    exp = dict(zip(("job_id", "target", "kind", "level", "stage", "shard"), labels, strict=True))
    exp = {k: v for k, v in exp.items() if k != "level"} | rule["labels"]
    return {"exp_labels": exp, "exp_annotations": {k: _render(t, exp, value) for k, t in rule["annotations"].items()}}


ZDEBUG = str(Path(sys.executable).with_name("zdebug"))


@pytest.mark.slow
def test_metrics_port_refuses_a_single_snapshot_and_a_taken_port(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(CAPTURES / "crashloop" / "coordinator.log", job)

    def zdebug(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([ZDEBUG, "watch", str(job), *args], capture_output=True, text=True, timeout=60)

    once = zdebug("--once", "--metrics-port", "0")
    assert once.returncode == 2 and "--metrics-port" in once.stderr and "Traceback" not in once.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        busy = zdebug("--metrics-port", str(taken))
    assert busy.returncode == 2 and f"127.0.0.1:{taken}" in busy.stderr and len(busy.stderr.splitlines()) == 1


# -- a real Prometheus, scraping `zdebug watch` on a growing log ------------------------------------

LIVE_CUTS = 10


def first_cut(log: TimedLog, ok, tmp: Path) -> int:
    """The fewest timed lines whose analysis `ok` holds for (it must hold for the whole log)."""
    lo, hi = 1, len(log.times)
    while lo < hi:
        mid = (lo + hi) // 2
        a = analysis_at(log, mid, tmp)
        lo, hi = (lo, mid) if a is not None and ok(a) else (mid + 1, hi)
    return lo


def _query(prom: LocalPrometheus, expr: str) -> list[dict]:
    return requests.get(prom.url + "/api/v1/query", params={"query": expr}, timeout=5).json()["data"]["result"]


def _until(ok, what: str, timeout_s: float = 60.0):
    """Poll `ok()` until it returns something truthy (a deadline for a condition, not a speed check)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = ok()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout_s:.0f}s")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus missing (.ci/run installs it)")
def test_prometheus_alerts_on_zdebug_watch_of_a_growing_log(tmp_path):
    """Two `zdebug watch --metrics-port` processes read logs that grow as the real jobs wrote
    them: the crash loop's up to the line that names it, the healthy job's up to its last running
    moment. A real Prometheus with the shipped rules raises ZdebugShardCrashLoop on shard 12 and
    nothing else, pending or firing, for either; when the logs end, both `watch`es exit."""
    th = alerts.thresholds(interval="500ms", finding_for="1s")
    logs = {name: TimedLog((CAPTURES / name / "coordinator.log").read_bytes()) for name in ("crashloop", "healthy")}
    named = {"crash-loop", "oom"}
    stop = {  # timed lines each log grows to while its job runs
        "crashloop": first_cut(logs["crashloop"], lambda a: any(f.kind in named for f in a.problems), tmp_path),
        "healthy": first_cut(logs["healthy"], lambda a: a.state != "running", tmp_path) - 1,
    }
    assert analysis_at(logs["crashloop"], stop["crashloop"], tmp_path).state == "running"
    dirs = {name: tmp_path / name for name in logs}
    (tmp_path / "cut").mkdir()
    watchers, ports = {}, {}
    with LocalPrometheus(tmp_path / "prom", scrape_interval="500ms", thresholds=th) as prom:
        try:
            for name, log in logs.items():
                dirs[name].mkdir()
                (dirs[name] / "coordinator.log").write_bytes(cut(log, first_cut(log, lambda a: True, tmp_path))[0])
                ports[name] = free_port()
                watchers[name] = subprocess.Popen(
                    [ZDEBUG, "watch", str(dirs[name]), "--interval", "0.3", "--metrics-port", str(ports[name])],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    env=os.environ | {"COLUMNS": "80"},
                )
                prom.add_target(f"http://127.0.0.1:{ports[name]}")
            for name in logs:
                prom.wait_scraped(f"http://127.0.0.1:{ports[name]}")
            # Each cut stays until Prometheus has scraped the analysis of it.
            for i in range(1, LIVE_CUTS + 1):
                for name, log in logs.items():
                    text, _ = cut(log, max(1, stop[name] * i // LIVE_CUTS))
                    (tmp_path / "cut" / "coordinator.log").write_bytes(text)
                    t = load(str(tmp_path / "cut")).now  # the log time `watch` will read in it
                    (dirs[name] / "coordinator.log").write_bytes(text)
                    selector = f'zdebug_log_time_seconds{{target="{dirs[name]}"}}'
                    _until(
                        lambda t=t, selector=selector: any(float(r["value"][1]) >= t for r in _query(prom, selector)),
                        f"{name}: the analysis of log time {t:.1f} scraped",
                    )
            crash = _until(
                lambda: _query(prom, 'ALERTS{alertname="ZdebugShardCrashLoop",alertstate="firing"}'),
                "ZdebugShardCrashLoop firing",
            )
            assert [(a["metric"]["target"], a["metric"]["stage"], a["metric"]["shard"]) for a in crash] == [
                (str(dirs["crashloop"]), "stage0-Map", "12")
            ]
            ever = _query(prom, 'max_over_time(ALERTS{alertname=~"Zdebug.*"}[10m])')
            assert {(a["metric"]["alertname"], a["metric"]["target"]) for a in ever} == {
                ("ZdebugShardCrashLoop", str(dirs["crashloop"]))
            }
            for name, log in logs.items():  # the rest of the logs: both jobs end, both `watch`es exit
                (dirs[name] / "coordinator.log").write_bytes(log.data)
            for name, proc in watchers.items():
                assert proc.wait(timeout=60) == 0, (name, proc.stdout.read() if proc.stdout else "")
        finally:
            for proc in watchers.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
