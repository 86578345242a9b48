"""Build the labeled crash corpus from REAL failures (run: `.venv/bin/python tests/data/crashes/generate.py`).

- userlib.py's bugs raised in child processes from three checkout roots (two temp dirs and one
  under the home dir), through several call paths, with different values each time;
- real native crashes (ctypes NULL reads/writes, os.abort) in `python -X faulthandler` children
  with a second thread running;
- real SIGKILLs and a real exit code, turned into Zephyr's MemoryError / RuntimeError text by the
  reference runner's own code;
- real reference-pipeline jobs (subprocess and inline runners) with exception, crash-loop, oom and
  segfault faults.

Writes files/*.txt (one crash each), logs/*.log (crashes among log lines, both Zephyr log formats)
and labels.json ({"files/x.txt" or "logs/y.log:LINE": true bug id}).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from conftest import run_reference  # noqa: E402
from zephyr_debug.reference.runners import _raised_text  # noqa: E402

REPS = 2  # instances per (root, call path)
PY_CHILD = """
import json, random, sys, traceback
sys.path.insert(0, sys.argv[1])
from pipeline import userlib
rng = random.Random(int(sys.argv[2]))
out = []
for bug, entries in userlib.BUGS.items():
    for entry in entries:
        for _ in range({reps}):
            try:
                getattr(userlib, entry)(*userlib.args_for(bug, rng, sys.argv[3]))
            except Exception:
                out.append([bug, traceback.format_exc()])
            else:
                raise SystemExit(f"{{bug}} via {{entry}} did not fail")
print(json.dumps(out))
"""
NATIVE_CHILD = "import sys; sys.path.insert(0, sys.argv[1]); from pipeline import userlib; " \
               "userlib.with_background_thread(getattr(userlib, sys.argv[2]))"
# Reference-pipeline fault -> bug id (the shard code's own functions).
REFERENCE_BUGS = {"exception": "ref-validate-records", "crash-loop": "ref-cast-columns", "oom": "oom-sigkill",
                  "segfault": "ref-native-decode-segv"}


def make_roots(tmp: Path) -> list[Path]:
    roots = [Path(tempfile.mkdtemp(prefix="ckout-", dir=tmp)), Path(tempfile.mkdtemp(dir=tmp)) / "src" / "app",
             Path.home() / ".cache" / f"zd-corpus-{os.getpid()}" / "work"]
    for root in roots:
        (root / "pipeline").mkdir(parents=True, exist_ok=True)
        (root / "pipeline" / "__init__.py").write_text("")
        shutil.copy(HERE / "userlib.py", root / "pipeline" / "userlib.py")
    return roots


def python_bugs(roots: list[Path], tmp: Path) -> list[tuple[str, str]]:
    out = []
    for seed, root in enumerate(roots):
        scratch = tempfile.mkdtemp(prefix="scratch-", dir=tmp)
        proc = subprocess.run([sys.executable, "-c", PY_CHILD.format(reps=REPS), str(root), str(seed), scratch],
                              capture_output=True, text=True, check=True)
        out += [tuple(item) for item in json.loads(proc.stdout)]
    return out


def native_crashes(roots: list[Path]) -> list[tuple[str, str]]:
    sys.path.insert(0, str(roots[0]))
    from pipeline.userlib import NATIVE

    out = []
    for root in roots:
        for bug, entries in NATIVE.items():
            for entry in entries:
                proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", NATIVE_CHILD, str(root), entry],
                                      capture_output=True, text=True)
                assert proc.returncode < 0 and "Fatal Python error" in proc.stderr, (entry, proc.returncode)
                out.append((bug, proc.stderr))
    return out


def killed_children(rng: random.Random) -> list[tuple[str, str]]:
    """Real SIGKILLs of a growing child, and a real exit code, as Zephyr's runner reports them."""
    out = []
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, "-c", "import time\nb = []\nwhile True:\n"
                                 "    b.append(bytearray(8 << 20)); time.sleep(0.01)"])
        time.sleep(0.3)
        os.kill(proc.pid, signal.SIGKILL)
        out.append(("oom-sigkill", _raised_text(rng.randint(0, 4999), proc.wait())))
    for _ in range(3):
        code = subprocess.run([sys.executable, "-c", "import sys; sys.exit(3)"]).returncode
        out.append(("exit-code-3", _raised_text(rng.randint(0, 4999), code)))
    return out


def reference_jobs(tmp: Path) -> tuple[list[tuple[str, str]], list[Path]]:
    """Crash files of real reference jobs, and the worker logs holding inline faulthandler dumps."""
    crashes, dump_logs = [], []
    sub = run_reference(tmp / "jobs", ("exception:1", "crash-loop:3", "oom:5", "segfault:6"), runner="subprocess",
                        stages=1, shards=8, workers=3)
    inline = run_reference(tmp / "jobs", ("segfault:2", "exception:4"), runner="inline", stages=1, shards=6)
    for result, faults in ((sub, {1: "exception", 3: "crash-loop", 5: "oom", 6: "segfault"}),
                           (inline, {4: "exception"})):
        for path in sorted((result.job_dir / "crashes").glob("*.txt")):
            shard = int(path.stem.split("-")[1])
            crashes.append((REFERENCE_BUGS[faults[shard]], path.read_text()))
    for log in sorted((inline.job_dir / "workers").glob("*.log")):
        if "Fatal Python error" in log.read_text():
            dump_logs.append(log)
    return crashes, dump_logs


def mixed_log(crashes: list[tuple[str, str]], rng: random.Random) -> tuple[list[str], dict[int, str]]:
    """Crashes among coordinator/worker lines in both Zephyr log formats; labels by line number."""
    lines, labels = [], {}
    t = time.mktime((2026, 12, 2, 21, 59, 16, 0, 0, -1))
    for i, (bug, text) in enumerate(crashes):
        t += rng.uniform(0.1, 5)
        worker = f"zephyr--{rng.getrandbits(32):08x}-p0-workers-a0-{rng.randint(0, 40)}:0"
        shard = rng.randint(0, 4999)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f",{rng.randint(0, 999):03d}"
        glog = "I" + time.strftime("%Y%m%d %H:%M:%S", time.localtime(t)) + f" {rng.getrandbits(47)}"
        lines.append(f"{stamp} INFO zephyr.worker: [{worker}] Executing stage stage0-Map shard {shard} (attempt 0)")
        lines.append(f"{glog} zephyr.execution [run] [stage0-Map] {i}/5000 complete, 3 in-flight, 9 queued, "
                     "40/40 workers alive, 0 dead; items=1.09K (72.8/s), bytes_processed=71.88 KiB (13.08 KiB/s)")
        if text.startswith("Fatal Python error"):  # a dump: raw stderr, no log prefix
            labels[len(lines) + 1] = bug
            lines += text.rstrip("\n").splitlines()
        else:
            lines.append(f"{stamp} ERROR zephyr.worker: Worker {worker} error on shard {shard}")
            labels[len(lines) + 1] = bug
            iris = i % 7 == 3  # some come through Iris' `job logs`, every line prefixed
            prefix = f"[{time.strftime('%H:%M:%S', time.localtime(t))}] task=/root/job/{shard} | " if iris else ""
            lines += [prefix + line for line in text.rstrip("\n").splitlines()]
        lines.append(f"{glog} zephyr.worker [{worker}] Shard {shard + 1} done in {rng.uniform(1, 9):.2f}s")
    return lines, labels


def main() -> None:
    rng = random.Random(5)
    for sub in ("files", "logs"):
        shutil.rmtree(HERE / sub, ignore_errors=True)
        (HERE / sub).mkdir()
    labels: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="zd-corpus-") as tmp_name:
        tmp = Path(tmp_name)
        roots = make_roots(tmp)
        try:
            py = python_bugs(roots, tmp)
            native = native_crashes(roots)
        finally:
            shutil.rmtree(roots[2].parent, ignore_errors=True)
        killed = killed_children(rng)
        ref, dump_logs = reference_jobs(tmp)
        in_files = py[::2] + native[::2] + killed + ref
        in_log = py[1::2] + native[1::2]
        for i, (bug, text) in enumerate(in_files):
            name = f"files/{i:03d}.txt"
            (HERE / name).write_text(text)
            labels[name] = bug
        lines, line_labels = mixed_log(in_log, rng)
        (HERE / "logs" / "mixed.log").write_text("\n".join(lines) + "\n")
        labels.update({f"logs/mixed.log:{n}": bug for n, bug in line_labels.items()})
        for i, log in enumerate(dump_logs):
            name = f"logs/inline-worker-{i}.log"
            text = log.read_text()
            shutil.copy(log, HERE / name)
            start = text.splitlines().index("Fatal Python error: Segmentation fault") + 1
            labels[f"{name}:{start}"] = REFERENCE_BUGS["segfault"]
    (HERE / "labels.json").write_text(json.dumps(labels, indent=1, sort_keys=True) + "\n")
    print(f"{len(labels)} labeled crashes, {len(set(labels.values()))} bugs")


if __name__ == "__main__":
    main()
