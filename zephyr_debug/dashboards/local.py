"""A local Prometheus (the `prometheus` binary) scraping reference coordinators.

Used by `zdebug observe` and the telemetry tests: its own config, TSDB dir and loopback
port, the alert rules rendered from `alerts.RULES`, and file-based discovery so targets
can be added while it runs.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import requests

from zephyr_debug.dashboards import alerts
from zephyr_debug.errors import ZdebugError

READY_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalPrometheus:
    """`with LocalPrometheus(workdir) as prom: prom.add_target(job.url)`; `prom.url` is its API."""

    def __init__(
        self,
        workdir: Path,
        *,
        scrape_interval: str = "1s",
        thresholds: alerts.Thresholds = alerts.PRODUCTION,
        port: int | None = None,
    ):
        binary = shutil.which("prometheus")
        if binary is None:
            raise ZdebugError("prometheus: not found on PATH (Debian/Ubuntu: apt-get install prometheus)")
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.targets: list[dict] = []
        self._targets_file = self.workdir / "targets.json"
        self._write_targets()
        # JSON is YAML: no YAML library needed at run time.
        (self.workdir / "alerts.yml").write_text(json.dumps(alerts.rules(thresholds), indent=1))
        config = {
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": thresholds.interval},
            "rule_files": ["alerts.yml"],
            "scrape_configs": [
                {
                    "job_name": "zephyr",
                    "scrape_timeout": scrape_interval,
                    "file_sd_configs": [{"files": [self._targets_file.name], "refresh_interval": "1s"}],
                }
            ],
        }
        (self.workdir / "prometheus.yml").write_text(json.dumps(config, indent=1))
        self._log = open(self.workdir / "prometheus.log", "ab")
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={self.workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                f"--web.external-url={self.url}",
                "--storage.tsdb.retention.time=1d",
                "--log.level=warn",
            ],
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        try:
            self._poll(lambda: requests.get(self.url + "/-/ready", timeout=1).status_code == 200, "not ready")
        except ZdebugError:
            self.close()
            raise

    def _poll(self, ok, what: str, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until `ok()` (a call to Prometheus's API) holds; Prometheus exiting, or `timeout_s`
        passing, is a one-line error."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (self.workdir / "prometheus.log").read_text(errors="replace").strip().splitlines()[-1:]
                raise ZdebugError(f"prometheus exited with code {self.proc.returncode}: {' '.join(tail)}")
            try:
                if ok():
                    return
            except (requests.RequestException, ValueError, KeyError):
                pass
            time.sleep(0.2)
        raise ZdebugError(f"prometheus on {self.url} {what} after {timeout_s:.0f}s")

    def _write_targets(self) -> None:
        tmp = self._targets_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.targets))
        tmp.replace(self._targets_file)  # atomic: Prometheus never reads half a file

    def add_target(self, url: str, **labels: str) -> None:
        """Scrape `url`'s /metrics from now on (picked up within a second)."""
        self.targets.append({"targets": [urlsplit(url).netloc], "labels": labels})
        self._write_targets()

    def wait_scraped(self, url: str, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until Prometheus has scraped `url` once: the run's first seconds are then on record."""
        netloc = urlsplit(url).netloc

        def scraped() -> bool:
            targets = requests.get(self.url + "/api/v1/targets", timeout=1).json()["data"]["activeTargets"]
            return any(t.get("health") == "up" and urlsplit(t.get("scrapeUrl", "")).netloc == netloc for t in targets)

        self._poll(scraped, f"has not scraped {url}", timeout_s)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def __enter__(self) -> LocalPrometheus:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
