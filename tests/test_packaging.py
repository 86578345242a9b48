"""The wheel as a user gets it: built from the sdist, installed into a fresh venv, run from a
directory with no checkout on sys.path."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CRASH = """Traceback (most recent call last):
  File "/srv/app/pipeline.py", line 12, in transform
    return record["user_id"]
KeyError: 'user_id'
"""


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, **kwargs)
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_checkout(tmp_path):
    dist = tmp_path / "dist"
    # sdist, then the wheel built from that sdist: whatever the sdist forgets, the wheel lacks
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(REPO))
    wheel = next(dist.glob("zephyr_debug-*.whl"))
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", str(venv))
    site = Path(
        run(str(venv / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    )
    # the dependencies come from this environment's site-packages (a plain path: its .pth files,
    # such as the editable install of the checkout, are not run)
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(venv / "bin/python"),
        "install",
        "-q",
        "--no-deps",
        "--no-index",
        str(wheel),
    )
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ZDEBUG_HOME")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    zdebug = str(venv / "bin/zdebug")

    where = run(str(venv / "bin/python"), "-c", "import zephyr_debug; print(zephyr_debug.__file__)", cwd=cwd, env=env)
    assert where.stdout.strip().startswith(str(site)), where.stdout  # the installed copy, not the checkout
    from zephyr_debug import __version__

    assert run(zdebug, "--version", cwd=cwd, env=env).stdout.strip() == f"zdebug {__version__}"
    listed = run(zdebug, "playbook", "--json", cwd=cwd, env=env).stdout
    assert '"oom-crash-loop"' in listed and '"straggler-tail"' in listed
    crash = cwd / "worker.log"
    crash.write_text(CRASH)
    out = run(zdebug, "crashes", str(crash), "--dedupe", "--json", cwd=cwd, env=env).stdout
    assert "KeyError" in out
