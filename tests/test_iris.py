"""zdebug against a REAL local Iris cluster running a REAL Zephyr pipeline.

`iris --config <yaml> cluster start --local` runs the controller, autoscaler and workers in one
process (tasks are its subprocesses, using this venv); it is stopped by its pid at the end. The
pipeline (tests/iris_pipeline.py) is submitted through fray's Iris client: shard 4 is slow, shard 2
raises twice. The commands run as a user would, through the `zdebug` CLI, on `iris://HOST:PORT/<job>`.

The controller refuses top-level jobs from a client build older than 14 days, and this pinned
marin-iris wheel is older: `submit` pins the client's build date (`iris.version`) to today, in
the test process only.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.errors import ZdebugError
from zephyr_debug.sources import iris_finelog, load

pytestmark = [pytest.mark.slow, pytest.mark.iris]

BIN = Path(sys.executable).parent
TESTS = Path(__file__).parent
SLOW_SHARD, CRASH_SHARD = 4, 2
CLUSTER_YAML = """\
auth: {static: {tokens: {dev-token-123: developer}}}
platform: {local: {}}
controller: {local: {port: 0}}
worker_provider: {}
scale_groups:
  cpu:
    num_vms: 1
    resources: {cpu: 8, ram: 16GB, disk: 20GB, device_type: cpu, device_variant: cpu, capacity_type: on-demand}
    buffer_slices: 0
    max_slices: 1
    slice_template: {num_vms: 1, local: {}}
"""


class PeakRss(threading.Thread):
    """Peak summed RSS of a process tree, sampled every 0.5 s."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.root, self.peak, self.stop = psutil.Process(pid), 0, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            total = 0
            for proc in procs:
                with contextlib.suppress(psutil.NoSuchProcess):
                    total += proc.memory_info().rss
            self.peak = max(self.peak, total)


@contextlib.contextmanager
def running_cluster(root: Path, config: str):
    """`iris --config <yaml> cluster start --local` in `root`; yields (url, peak RSS sampler)."""
    (root / "cluster.yaml").write_text(config)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}  # py-spy for profile-task
    with open(root / "cluster.log", "wb") as log:
        proc = subprocess.Popen(
            [str(BIN / "iris"), "--config", "cluster.yaml", "cluster", "start", "--local"],
            cwd=root,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    rss = PeakRss(proc.pid)
    rss.start()
    try:
        deadline = time.time() + 90
        while not (found := re.search(r"Controller started at (http://\S+)", (root / "cluster.log").read_text())):
            assert proc.poll() is None and time.time() < deadline, (root / "cluster.log").read_text()[-2000:]
            time.sleep(0.5)
        yield found.group(1), rss
    finally:
        _stop(proc)
        rss.stop.set()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("iris-cluster"), CLUSTER_YAML) as (url, rss):
        yield SimpleNamespace(url=url, rss=rss, started=time.time())
    print(f"\niris cluster: peak RSS of the cluster process tree {rss.peak / 2**20:.0f} MiB")


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the cluster (it closes its workers), then SIGKILL whatever it started that is left."""
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()


def submit(url: str, name: str, argv: list[str], env: dict[str, str]) -> str:
    """A top-level Iris job via fray's Iris client: `python ARGV` with `env`."""
    import iris.version
    from fray.iris_backend import FrayIrisClient
    from fray.types import Entrypoint, EnvironmentConfig, JobRequest, ResourceConfig

    iris.version._CACHED = datetime.date.today().isoformat()  # see the module docstring
    request = JobRequest(
        name=name,
        entrypoint=Entrypoint.from_binary("python", argv),
        resources=ResourceConfig(cpu=0.5, ram="1g"),
        environment=EnvironmentConfig(workspace=str(TESTS), env_vars=env),
    )
    return str(FrayIrisClient(url).submit(request).job_id)


def zdebug(home: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "zdebug"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ZDEBUG_HOME": str(home), "COLUMNS": "200"},
    )


def target(url: str, job: str) -> str:
    return "iris://" + url.removeprefix("http://") + job


def test_live_zephyr_job_on_iris(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("ZDEBUG_HOME", str(tmp_path))  # where in-process loads save what they fetch
    marks = tmp_path / "marks"
    marks.mkdir()
    job = submit(
        cluster.url,
        f"zdebug-test-{os.getpid()}",
        ["-m", "iris_pipeline"],
        {"PYTHONPATH": str(TESTS), "ZDEBUG_TEST_MARKS": str(marks), "ZDEBUG_TEST_SLOW_S": "180"},
    )
    plain = submit(cluster.url, f"plain-{os.getpid()}", ["-c", "print('no zephyr here')"], {})
    live = target(cluster.url, job)

    # Poll in-process (cheaper than a CLI start every 2 s) until shard 4 is flagged as a straggler;
    # until the coordinator is up, loading says there is none.
    deadline, findings, error = time.time() + 150, [], None
    while not any(f["shard"] == SLOW_SHARD for f in findings):
        assert time.time() < deadline, f"no straggler on shard {SLOW_SHARD}: {findings or error}"
        time.sleep(2)
        try:
            findings = analyze(load(live)).stragglers_json()["findings"]
        except ZdebugError as exc:
            assert "no Zephyr coordinator" in exc.message, exc.message
            error = exc.message
    flagged = time.time() - cluster.started

    # The commands as a user runs them, side by side (each fetches its own snapshot).
    runs = {
        cmd: zdebug(tmp_path, cmd, live, "--json", *extra)
        for cmd, *extra in [("stragglers",), ("status",), ("crashes", "--dedupe"), ("workers",)]
    }
    unknown_job = zdebug(tmp_path, "status", target(cluster.url, "/root/no-such-job"))
    out = {}
    for cmd, run in runs.items():
        stdout, stderr = run.communicate(timeout=180)
        assert run.returncode == 0, f"zdebug {cmd}: {stderr}"
        out[cmd] = json.loads(stdout)
    findings = out["stragglers"]["findings"]
    slow = next(f for f in findings if f["shard"] == SLOW_SHARD)
    assert slow["stage"] == "stage0-Map" and slow["cause"] in ("undetermined", "stuck", "slow-worker", "data-skew"), (
        slow
    )
    # against finished peers it runs far longer (before any peer finished, only a stall can show: no ratio yet)
    assert slow["ratio_to_median"] is None or slow["ratio_to_median"] >= 2, slow
    assert live in " ".join(slow["next"] if isinstance(slow["next"], list) else [slow["next"]])

    status = out["status"]
    assert status["state"] == "running" and status["source"] == live
    assert status["stage"] == "stage0-Map" and status["total"] == 6 and status["in_flight"] >= 1
    assert any(s["shard"] == SLOW_SHARD for s in status["stragglers"]), status

    groups = out["crashes"]["groups"]
    assert [(g["count"], g["exception"]) for g in groups] == [(2, "ValueError")], groups
    assert "schema mismatch" in groups[0]["message"] and groups[0]["shards"] == [CRASH_SHARD]
    for member in groups[0]["members"]:  # file:line of the worker's error line in the fetched logs
        file, line = member.rsplit(":", 1)
        assert f"error on shard {CRASH_SHARD}" in Path(file).read_text().splitlines()[int(line) - 1], member

    ev = load(live)
    assert ev.live is not None and not ev.warnings, ev.warnings  # get_status, worker usage, telemetry: all fetched
    _assert_telemetry(ev)
    workers = out["workers"]["workers"]
    assert len(workers) == 2 and all(w["worker"].startswith("zephyr-zdebug-test-") for w in workers), workers
    assert max(w["memory_mb"] or 0 for w in workers) > 50, workers  # from the Iris worker's own list-tasks

    speedscope_file = tmp_path / "iris.speedscope.json"
    run = zdebug(tmp_path, "profile", "--straggler", live, "--duration", "2", "-o", str(speedscope_file), "--json")
    stdout, stderr = run.communicate(timeout=180)
    assert run.returncode == 0, stderr
    assert json.loads(stdout)["file"] == str(speedscope_file)
    frames = {f["name"] for f in json.loads(speedscope_file.read_text())["shared"]["frames"]}
    assert "work" in frames, sorted(frames)[:40]  # py-spy, run by Iris, saw the user function of the slow shard

    for bad, message in [
        (target(cluster.url, "/root/no-such-job"), "not found"),
        (target(cluster.url, plain), "no Zephyr coordinator"),
        ("iris://127.0.0.1:9/root/job", "unreachable"),
    ]:
        with pytest.raises(ZdebugError, match=message):
            load(bad)
    stdout, stderr = unknown_job.communicate(timeout=120)
    assert unknown_job.returncode != 0 and stdout == "" and stderr.count("\n") == 1, stderr
    assert cluster.rss.peak < 3 * 2**30, f"cluster tree peak RSS {cluster.rss.peak / 2**20:.0f} MiB"
    print(
        f"\nstraggler flagged {flagged:.0f}s after the cluster came up; peak RSS so far "
        f"{cluster.rss.peak / 2**20:.0f} MiB"
    )


def _assert_telemetry(ev) -> None:
    """Zephyr's own rows from the cluster's finelog (`/system/log-server`, the controller's embedded
    server), merged into the logs' attempts and saved in the snapshot, where an offline read sees them."""
    assert ev.provenance == ["iris", "finelog"], ev.provenance
    a = ev.attempts
    done = a[(a["outcome"] == "done") & (a["stage"] == "stage0-Map")]
    assert len(done) >= 4 and (done["items"] == 1).all() and done["peak_rss_bytes"].notna().all(), done
    running = a[(a["shard"] == SLOW_SHARD) & (a["outcome"] == "running")]
    assert len(running) == 1 and running["worker"].notna().all(), a
    assert (ev.samples["shard"] == SLOW_SHARD).any() and ev.samples["worker"].notna().any()
    snapshot = Path(ev.config["iris_evidence_dir"])
    assert (snapshot / iris_finelog.FILES["worker"]).stat().st_size > 0
    offline = load(str(snapshot))
    assert offline.provenance == ["zephyr-output", "finelog"], offline.provenance
    assert offline.attempts["items"].sum() == a["items"].sum()


def test_auth_required(cluster, tmp_path):
    """The cluster has token auth. A loopback caller without a token is trusted as admin (so the
    other test needs none); a token that `iris login` stored for it and the controller rejects is
    how to be refused here."""
    from iris.cluster.token_store import cluster_name_from_url, store_token

    home = tmp_path / "home"
    store_token(
        cluster_name_from_url(cluster.url),
        cluster.url,
        "not-a-valid-token",
        store_path=home / ".iris" / "tokens.sqlite",
    )
    run = subprocess.run(
        [str(BIN / "zdebug"), "status", target(cluster.url, "/developer/job")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(home), "ZDEBUG_HOME": str(tmp_path)},
    )
    assert run.returncode != 0 and run.stderr.count("\n") == 1, run.stderr
    assert "requires authentication" in run.stderr and "iris --controller-url" in run.stderr, run.stderr
