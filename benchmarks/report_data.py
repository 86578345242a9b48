"""For `zdebug report` tests and benchmark: a generated job of production size (default 5,000
shards x 200 workers) and a headless Debian chromium that loads a page with no network, either
once (`chromium`: DOM, log, screenshot) or driven over the DevTools protocol (`Browser`: run
JS, click, screenshot a region)."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd

from zephyr_debug.model import ATTEMPT_COLUMNS, SAMPLE_COLUMNS, STATUS_COLUMNS, Evidence, StageInfo

T0 = 1_800_000_000.0
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def big_evidence(
    shards: int = 5_000,
    workers: int = 200,
    heartbeat: float = 2.0,
    status_every: float = 1.0,
    straggler: int | tuple[int, ...] = 4_321,
    seed: int = 7,
) -> Evidence:
    """One stage; shard i runs on worker i % workers back to back; each `straggler` takes 12x
    the median and runs last on its worker; every 97th shard fails once (task) and succeeds on a
    later attempt."""
    rng = np.random.default_rng(seed)
    secs = rng.lognormal(np.log(30), 0.2, shards)
    slow = np.atleast_1d(straggler)
    secs[slow] *= 12
    shard = np.arange(shards)
    worker = shard % workers
    failed = shard[(shard % 97 == 5) & ~np.isin(shard, slow)]
    # Each worker's queue: its shards, then the retries of its failed ones.
    runs = pd.DataFrame(
        {
            "shard": np.r_[shard, failed],
            "attempt": np.r_[np.zeros(shards, int), np.ones(len(failed), int)],
            "secs": np.r_[secs, secs[failed]],
            "worker": np.r_[worker, (failed + 1) % workers],
        }
    )
    runs["secs"] = runs["secs"].where(~((runs["attempt"] == 0) & runs["shard"].isin(failed)), runs["secs"] / 3)
    runs["last"] = runs["shard"].isin(slow)  # the straggler runs last on its worker: it holds the stage's end
    runs = runs.sort_values(["worker", "last", "attempt", "shard"], kind="stable")
    runs["end"] = T0 + runs.groupby("worker")["secs"].cumsum()
    runs["start"] = runs["end"] - runs["secs"]
    bad = (runs["attempt"] == 0) & runs["shard"].isin(failed)
    names = np.array([f"zephyr-job-p0-workers-{w}" for w in range(workers)])
    attempts = pd.DataFrame(
        {
            "stage": "Map",
            "shard": runs["shard"],
            "attempt": runs["attempt"],
            "worker": names[runs["worker"]],
            "start_ts": runs["start"],
            "end_ts": runs["end"],
            "outcome": np.where(bad, "failed", "done"),
            "kind": np.where(bad, "task", None),
            "elapsed_s": runs["secs"],
            "items": 1000.0,
            "bytes": 5e4,
            "error": np.where(bad, "ValueError: bad record", None),
        }
    ).reindex(columns=ATTEMPT_COLUMNS)
    end = float(runs["end"].max())
    ts = np.arange(T0, end + status_every, status_every)
    starts, ends = np.sort(runs["start"].to_numpy()), np.sort(runs["end"][~bad].to_numpy())
    completed = np.searchsorted(ends, ts, side="right")
    started = np.searchsorted(starts, ts, side="right")
    ended_all = np.searchsorted(np.sort(runs["end"].to_numpy()), ts, side="right")
    status = pd.DataFrame(
        {
            "ts": ts,
            "stage": "Map",
            "completed": completed,
            "total": shards,
            "in_flight": started - ended_all,
            "queue_depth": np.maximum(shards - completed - (started - ended_all), 0),
            "retries": 0,
            "alive": workers,
            "registered": workers,
            "dead": 0,
        }
    ).reindex(columns=STATUS_COLUMNS)
    hb = np.arange(T0, end, heartbeat)
    w = np.repeat(np.arange(workers), len(hb))
    t = np.tile(hb, workers)
    samples = pd.DataFrame(
        {
            "ts": t,
            "worker": names[w],
            "stage": "Map",
            "rss_bytes": (200 + 50 * np.sin(t / 60 + w) + w) * 2**20,
            "disk_bytes": (t - T0) * 1e4 * (1 + w % 5),
        }
    ).reindex(columns=SAMPLE_COLUMNS)
    workers_frame = pd.DataFrame({"worker": names, "state": "done", "last_seen_ago": 1.0})
    return Evidence(
        job="big-job",
        source="<generated>",
        now=end,
        state="succeeded",
        stages=[StageInfo("Map", 0, shards, T0, end)],
        status=status,
        attempts=attempts,
        samples=samples,
        workers=workers_frame,
        config={"heartbeat_interval": heartbeat},
    )


def chromium(page: Path, workdir: Path, timeout: float = 300) -> tuple[str, str, Path, float]:
    """Load `page` from file:// in a fresh profile: (DOM after the scripts ran, browser log
    with console messages, screenshot path, seconds)."""
    if not Path(CHROMIUM).exists():
        raise FileNotFoundError("chromium is missing (apt-get install chromium; .ci/run does)")
    shot = workdir / f"{page.stem}.png"
    argv = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={workdir / (page.stem + '-profile')}",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1400,2400",
        f"--screenshot={shot}",
        "--dump-dom",
        page.resolve().as_uri(),
    ]
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout, proc.stderr, shot, seconds


def draw_ms(dom: str) -> float | None:
    """The page's own measure of drawing its charts (its footer), None if they were not all drawn."""
    found = re.search(r'id="render-ms">(\d+) ms', dom)
    return float(found.group(1)) if found else None


class Browser:
    """Headless chromium driven over the DevTools protocol on a pipe (fds 3/4, NUL-framed JSON):
    no websocket, no network. `with Browser(workdir) as b: b.open(page); b.js("1 + 1")`."""

    def __init__(self, workdir: Path, width: int = 1400, height: int = 1600, timeout: float = 120):
        if not Path(CHROMIUM).exists():
            raise FileNotFoundError("chromium is missing (apt-get install chromium; .ci/run does)")
        self.width, self.height, self.timeout, self.next_id = width, height, timeout, 0
        to_child, self._w = os.pipe()  # chromium reads commands on fd 3
        self._r, from_child = os.pipe()  # and writes replies and events on fd 4
        argv = [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-sync",
            "--disable-background-networking",
            "--disable-component-update",
            "--hide-scrollbars",
            f"--user-data-dir={workdir / 'cdp-profile'}",
            "--remote-debugging-pipe",
            "about:blank",
        ]

        def wire() -> None:  # in the child: the pipe ends onto fds 3 and 4, via fds clear of both
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child, from_child)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            argv, pass_fds=(3, 4), preexec_fn=wire, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        os.close(to_child)
        os.close(from_child)
        self._buf, self.events = b"", []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page.enable", "Runtime.enable"):
            self.call(domain, session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        os.close(self._w)
        os.close(self._r)

    def call(self, method: str, session: bool = False, **params) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            while b"\0" not in self._buf:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)
        raise TimeoutError(method)

    def js(self, expression: str):
        """The value of `expression` in the page (promises awaited)."""
        result = self.call(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, page: Path) -> None:
        """Load `page` and wait until its script says every chart is drawn."""
        self.call("Page.navigate", session=True, url=page.resolve().as_uri())
        deadline = time.monotonic() + self.timeout
        while not self.js("document.body && document.body.dataset.rendered || ''"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{page}: charts not drawn")
            time.sleep(0.1)

    def console(self) -> list[dict]:
        """Console calls and uncaught exceptions seen so far."""
        return [ev for ev in self.events if ev.get("method") in ("Runtime.consoleAPICalled", "Runtime.exceptionThrown")]

    def click(self, x: float, y: float) -> None:
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", session=True, type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: Path) -> Path:
        """The viewport as PNG."""
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", session=True, format="png")["data"]))
        return path
