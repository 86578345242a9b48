"""Build the second labeled crash corpus, `variations/` (run: `.venv/bin/python tests/data/crashes/variations.py`):
what varies across a real cluster while the bug stays the same. Every report comes from real
code that really fails (varlib.py's bugs, run from four run directories):

- one raise site with varied argument lists, nested quotes and `sh -c '…'` (real failing
  gzip / zstd / sh commands), a bare unquoted path under varied roots, names and extensions
  (pyarrow's FileNotFoundError), input-dependent phrases of json, codecs, pyarrow and pandas;
- real segfaults / aborts in a `python -X faulthandler` child, followed by the runner's bare
  `RuntimeError: Subprocess for shard N exited with code -11; …` line (or its traceback),
  with and without log lines and a requeue line around them;
- the same exit code from several run directories in both forms, and different exit codes
  from one site (each its own bug);
- every log prefix style around them: none, Python logging, glog-like, Iris `job logs`.

Writes variations/files/NNN.txt (one report each) and variations/labels.json
({"files/NNN.txt": bug id}).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "variations"
sys.path.insert(0, str(HERE.parents[2]))

from zephyr_debug import zephyrlog  # noqa: E402

REPS = 3  # reports per (root, entry point, bug)
CHILD_REPS = 2  # runner reports per (root, child bug)
PY_CHILD = """
import json, random, sys, tempfile, traceback
sys.path.insert(0, sys.argv[1])
import varlib
rng = random.Random(int(sys.argv[2]))
scratch = tempfile.mkdtemp(dir=sys.argv[3])
out = []
for bug, (entries, make) in varlib.BUGS.items():
    for entry in entries:
        for _ in range(int(sys.argv[4])):
            try:
                getattr(varlib, entry)(*make(rng, scratch))
            except Exception:
                out.append([bug, traceback.format_exc()])
            else:
                raise SystemExit(f"{bug} via {entry} did not fail")
print(json.dumps(out))
"""
T0 = 1796268231.0  # prefix times are printed in UTC


def make_roots(tmp: Path, home: Path) -> list[Path]:
    """Run directories as schedulers make them: run ids, Ray's package dirs, scratch job dirs."""
    rng = random.Random(11)
    ray = "ray/session_2026-12-02_21-59-16_{:06d}_{}/runtime_resources/working_dir_files/_ray_pkg_{:016x}"
    roots = [tmp / f"run-{rng.getrandbits(24):06x}",
             tmp / ray.format(rng.randint(0, 999_999), rng.randint(100, 9999), rng.getrandbits(64)),
             home / "jobs" / f"{rng.getrandbits(48):012x}" / f"run-{rng.getrandbits(24):06x}",
             home / ray.format(rng.randint(0, 999_999), rng.randint(100, 9999), rng.getrandbits(64))]
    for root in roots:
        root.mkdir(parents=True)
        for name in ("varlib.py", "run_shard.py"):
            shutil.copy(HERE / name, root / name)
    return roots


def python_bugs(roots: list[Path], tmp: Path) -> list[tuple[str, str]]:
    out = []
    for seed, root in enumerate(roots):
        proc = subprocess.run([sys.executable, "-c", PY_CHILD, str(root), str(seed), str(tmp), str(REPS)],
                              capture_output=True, text=True, check=True)
        out += [(bug, text) for bug, text in json.loads(proc.stdout)]
    return out


def child_bugs(roots: list[Path], rng: random.Random) -> list[tuple[str, str, str, str]]:
    """(bug, child stderr, parent traceback, parent one-line error) of real failing children."""
    sys.path.insert(0, str(roots[0]))
    from varlib import CHILD

    out = []
    for root in roots:
        for bug, (entry, code) in CHILD.items():
            for _ in range(CHILD_REPS):
                args = [] if code is None else [str(code)]
                proc = subprocess.run([sys.executable, str(root / "run_shard.py"), zephyrlog.EXIT_ERROR,
                                       str(rng.randint(0, 4999)), entry, *args], capture_output=True, text=True)
                reply = json.loads(proc.stdout)
                assert (code is None) == ("Fatal Python error" in proc.stderr), (bug, proc.stderr)
                out.append((bug, proc.stderr, reply["traceback"], reply["line"]))
    return out


class Prefixes:
    """The log prefix styles of one cluster's output, with a clock that moves on."""

    def __init__(self, rng: random.Random):
        self.rng, self.t = rng, T0
        self.task = "/alice/job/0"

    def report(self) -> None:
        """A new report: Iris prints one task's lines."""
        self.task = f"/alice/job/{self.rng.randint(0, 63)}"

    def line(self, style: str, level: str, logger: str, text: str) -> str:
        self.t += self.rng.uniform(0.001, 0.5)
        t = time.gmtime(self.t)
        if style == "logging":
            return f"{time.strftime('%Y-%m-%d %H:%M:%S', t)},{self.rng.randint(0, 999):03d} {level} {logger}: {text}"
        if style == "glog":
            return f"{level[0]}{time.strftime('%Y%m%d %H:%M:%S', t)} {self.rng.getrandbits(47)} {logger} {text}"
        if style == "iris":
            return f"[{time.strftime('%H:%M:%S', t)}] task={self.task} | {text}"
        return text

    def raw(self, style: str, text: str) -> list[str]:
        """Raw process output (a traceback, a dump): only Iris prefixes every line."""
        lines = text.rstrip("\n").splitlines()
        return [self.line("iris", "", "", line) for line in lines] if style == "iris" else lines


def _worker(rng: random.Random) -> str:
    return f"zephyr-{rng.choice(['', 'tok'])}-{rng.getrandbits(32):08x}-p0-workers-a0-{rng.randint(0, 40)}:0"


def python_report(text: str, rng: random.Random, clock: Prefixes) -> str:
    """A traceback as it reaches a crash file: alone, or logged (`logging.exception`) among lines."""
    style = rng.choice(["none", "logging", "glog", "iris"])
    clock.report()
    if style == "none" and rng.random() < 0.5:
        return text
    worker, shard = _worker(rng), rng.randint(0, 4999)
    lines = [clock.line(style, "INFO", "zephyr.worker", f"[{worker}] Executing stage stage0-Map shard {shard} "
                                                        f"(attempt {rng.randint(0, 2)})")]
    if style in ("logging", "glog"):  # logging.exception: the message line, then the traceback
        lines.append(clock.line(style, "ERROR", "zephyr.worker", f"Worker {worker} error on shard {shard}"))
    lines += clock.raw(style, text)
    if rng.random() < 0.5:
        lines.append(clock.line(style, "WARNING", "zephyr.execution",
                                zephyrlog.TASK_REQUEUE.format(shard=shard, worker=worker, n=1, max=3)))
    return "\n".join(lines) + "\n"


def child_report(bug: str, stderr: str, parent_tb: str, parent_line: str, rng: random.Random,
                 clock: Prefixes) -> str:
    """A child's failure as the worker log shows it: its dump (if any), then the runner's error
    (the bare line mostly, sometimes its traceback), maybe a requeue line; any prefix style."""
    style = rng.choice(["none", "logging", "glog", "iris"])
    clock.report()
    worker, shard = _worker(rng), int(parent_line.split("shard ")[1].split()[0])
    around = rng.random() < 0.6
    lines = []
    if around:
        lines.append(clock.line(style, "INFO", "zephyr.worker",
                                f"[{worker}] Executing stage stage1-Map → Write shard {shard} (attempt 0)"))
    lines += clock.raw(style, stderr) if stderr else []
    if rng.random() < 0.3 or not stderr and rng.random() < 0.5:
        lines += clock.raw(style, parent_tb)
    else:
        lines.append(clock.line(style, "ERROR", "zephyr.worker", parent_line))
    if around and rng.random() < 0.5:
        lines.append(clock.line(style, "WARNING", "zephyr.execution",
                                zephyrlog.TASK_REQUEUE.format(shard=shard, worker=worker, n=1, max=3)))
    return "\n".join(lines) + "\n"


def main() -> None:
    rng = random.Random(16)
    shutil.rmtree(OUT, ignore_errors=True)
    (OUT / "files").mkdir(parents=True)
    home = Path.home() / ".cache" / f"zd-variations-{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="zd-var-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            roots = make_roots(tmp, home)
            py = python_bugs(roots, tmp)
            children = child_bugs(roots, rng)
        finally:
            shutil.rmtree(home, ignore_errors=True)
    clock = Prefixes(rng)
    reports = [(bug, python_report(text, rng, clock)) for bug, text in py]
    reports += [(bug, child_report(bug, *texts, rng, clock)) for bug, *texts in children]
    rng.shuffle(reports)
    labels = {}
    for i, (bug, text) in enumerate(reports):
        name = f"files/{i:03d}.txt"
        (OUT / name).write_text(text)
        labels[name] = bug
    (OUT / "labels.json").write_text(json.dumps(labels, indent=1, sort_keys=True) + "\n")
    print(f"{len(labels)} labeled crashes, {len(set(labels.values()))} bugs")


if __name__ == "__main__":
    main()
