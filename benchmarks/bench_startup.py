"""Start-up: `zdebug --help` and `zdebug jobs` (empty store) against `python -c "import typer, rich"`.

Wall time of whole processes, interleaved, median of N rounds (target: within 2x).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 2.0


def _zdebug() -> list[str]:
    script = Path(sys.executable).parent / "zdebug"
    return [str(script)] if script.exists() else [sys.executable, "-m", "zephyr_debug.cli"]


def _wall(cmd: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True, timeout=120)
    return time.perf_counter() - start


def run(quick: bool = False) -> dict:
    rounds = 3 if quick else 15
    home = tempfile.mkdtemp(prefix="zdebug-bench-home-")
    env = {**os.environ, "ZDEBUG_HOME": home}
    cmds = {
        "baseline": [sys.executable, "-c", "import typer, rich"],
        "help": [*_zdebug(), "--help"],
        "jobs": [*_zdebug(), "jobs"],
    }
    times: dict[str, list[float]] = {name: [] for name in cmds}
    try:
        for cmd in cmds.values():  # warm the page cache once
            _wall(cmd, env)
        for _ in range(rounds):
            for name, cmd in cmds.items():
                times[name].append(_wall(cmd, env))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    base = statistics.median(times["baseline"])
    out = {}
    for name in ("help", "jobs"):
        value = statistics.median(times[name])
        out[f"startup_{name}"] = {
            "value": value,
            "unit": "s",
            "baseline": "import typer, rich",
            "baseline_value": base,
            "ratio": value / base,
            "target": f"<= {TARGET:g}x",
            "meets": value / base <= TARGET,
        }
    return out


if __name__ == "__main__":
    for key, r in run().items():
        print(f"{key}: {r['value']:.3f} s vs {r['baseline_value']:.3f} s -> {r['ratio']:.2f}x")
