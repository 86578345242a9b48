"""Every command against a corpus of nasty inputs: no traceback, no internal error, a one-line
error naming the input (or a result), no terminal control sequence from the evidence.

The corpus is generated at test time (truncated, binary, huge single line, latin-1 / UTF-16,
garbage / deeply nested JSON, empty, wrong field types, a directory where a file was expected,
symlink loops, dangling links, paths through a file). The commands are every leaf of
`cli.COMMANDS` at test time, so new commands are fuzzed without editing this file.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import typer

from zephyr_debug import cli

# Commands that start jobs or servers instead of reading evidence: not given nasty evidence.
STARTS_THINGS = {"demo", "observe"}
# Options that take evidence (a job, a straggler's job).
JOB_OPTIONS = ("--job", "--straggler")
# More argv forms worth fuzzing for some commands (subcommand-like arguments).
EXTRA_FORMS = {"crashes": [["crashes", "--dedupe", "{}"], ["crashes", "normalize", "{}"]]}
HUGE = 3 << 20  # rich took ~10 s to wrap one 3 MB line before clean() cut it
# Job dirs that differ only in what the shared loader (jobstore/jobdir) sees: fed to `status`
# only (every command goes through the same loader; analysing each costs ~1 s per command).
LOADER_ONLY = {
    "job-ok",
    "job-truncated",
    "job-nested",
    "job-utf16",
    "job-latin1",
    "job-huge-line",
    "job-crash-outside",
    "job-crash-absolute",
    "job-crash-is-dir",
}
ESC = b"\x1b[2J\x1b]0;pwned\x07\x9b31m"
GOOD_EVENTS = [
    {"ts": 1.0, "type": "job_start", "execution_id": "fuzz", "pid": 1, "url": "http://127.0.0.1:9", "runner": "inline"},
    {"ts": 2.0, "type": "stage_start", "stage": "stage0-Map", "index": 0, "total": 2},
    {"ts": 3.0, "type": "assign", "stage": "stage0-Map", "shard": 0, "attempt": 0, "worker": "w0"},
    {"ts": 4.0, "type": "heartbeat", "worker": "w0", "stage": "stage0-Map", "shard": 0, "items": 5, "rss_bytes": 100},
    {
        "ts": 5.0,
        "type": "shard_failed",
        "stage": "stage0-Map",
        "shard": 0,
        "attempt": 0,
        "worker": "w0",
        "kind": "task",
        "error": "boom",
        "crash_file": "crashes/a.txt",
    },
    {"ts": 6.0, "type": "shard_done", "stage": "stage0-Map", "shard": 1, "attempt": 0, "worker": "w0", "elapsed_s": 1},
    {"ts": 7.0, "type": "status", "stage": "stage0-Map", "completed": 1, "total": 2},
]
WRONG_TYPES = [
    {**GOOD_EVENTS[0], "ts": "soon", "config": [1]},
    {"ts": 1, "type": ["job_start"]},
    {"ts": 2, "type": "stage_start", "stage": ["a"], "index": "0", "total": None},
    {"ts": 3, "type": "assign", "stage": {}, "shard": "zero", "attempt": None, "worker": 7},
    {"ts": 4, "type": "shard_done"},
    {
        "ts": 5,
        "type": "shard_failed",
        "stage": "s",
        "shard": 1.5,
        "attempt": "a",
        "worker": None,
        "kind": 3,
        "crash_file": 42,
    },
    {"ts": 6, "type": "heartbeat", "worker": ["w"], "rss_bytes": "big"},
    {"ts": 7, "type": "status", "completed": "x"},
    {"ts": 1e308, "type": "job_end", "state": None},
    {"ts": float("nan"), "type": "abort"},
    {"ts": 8, "type": "worker_registered", "worker": "w1", "pid": [1]},
    {"ts": 9, "type": "shard_done", "stage": "s", "shard": 10**30, "attempt": 0, "worker": "w"},
]
CRASH = (
    b"2024-01-01 12:00:00,000 ERROR zephyr.worker: Worker w0 error on shard 1 " + ESC + b"\n"
    b'Traceback (most recent call last):\n  File "x.py", line 1, in f\nValueError: ' + ESC + b"\n"
)


def _lines(events: list[dict]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def build_corpus(root: Path) -> dict[str, Path]:
    """Nasty inputs under `root`, by name: files, job dirs, and paths that are not what they seem."""
    rnd = random.Random(12)
    noise = lambda n: rnd.randbytes(n)
    good = _lines(GOOD_EVENTS)
    items: dict[str, Path] = {}

    def file(name: str, data: bytes) -> None:
        items[name] = root / name
        items[name].write_bytes(data)

    def job(name: str, events: bytes | str | None, extra: dict[str, bytes] | None = None) -> Path:
        d = items[name] = root / name
        d.mkdir()
        if events is not None:
            (d / "events.jsonl").write_bytes(events if isinstance(events, bytes) else events.encode())
        for rel, data in (extra or {}).items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_bytes(data)
        return d

    root.mkdir(parents=True, exist_ok=True)
    file("empty", b"")
    file("binary", noise(1 << 16))
    file("nul-log", b"2024-01-01 00:00:00,000 INFO zephyr.execution: Shard 1\x00\x00 done\n" * 20)
    file("huge-line", b"Traceback (most recent call last):\n" + b"a" * HUGE)
    file("latin1.log", CRASH.replace(b"x.py", "caf\xe9.py".encode("latin-1")) + "na\xefve\n".encode("latin-1"))
    file("utf16.log", CRASH.decode("latin-1").encode("utf-16"))
    file("garbage.json", b'{"a": [1, 2, {"b": nul')
    file("nested.json", b"[" * 200_000 + b"]" * 200_000)
    file("nested-obj.jsonl", b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"\n")
    file("scalar.json", b"42")
    file("crlf.log", b"line\r\r\r\n\r" * 1000)
    file("escapes.log", CRASH * 3)
    file("speedscope-wrong.json", b'{"$schema": "https://www.speedscope.app/file-format-schema.json", "profiles": 5}')
    job("job-ok", good, {"crashes/a.txt": CRASH})
    job("job-truncated", good + _lines(GOOD_EVENTS[-1:])[:-17])
    job("job-empty", b"")
    job("job-binary", noise(4096))
    job("job-nested", b"[" * 100_000 + b"\n" + b'{"ts":1,"type":' * 50_000 + b"\n" + good.encode())
    job("job-utf16", good.encode("utf-16"))
    job("job-latin1", good.replace("boom", "b\xf6\xf6m").encode("latin-1"))
    job("job-wrong-types", _lines(WRONG_TYPES) + good)
    job("job-huge-line", b'{"ts":1,"type":"status","stage":"' + b"s" * HUGE + b'"}\n' + good.encode())
    job(
        "job-escapes",
        _lines(
            [{**e, "error": ESC.decode("latin-1"), "worker": "w\x1b[31m0"} if "worker" in e else e for e in GOOD_EVENTS]
        ),
        {"crashes/a.txt": CRASH, "workers/w0.log": CRASH},
    )
    (job("job-events-dir", None) / "events.jsonl").mkdir()
    os.symlink("events.jsonl", job("job-events-loop", None) / "events.jsonl")
    os.symlink("/nonexistent/events.jsonl", job("job-events-dangling", None) / "events.jsonl")
    job("job-crash-outside", good.replace("crashes/a.txt", "../../../../../../etc/passwd"))
    job("job-crash-absolute", good.replace("crashes/a.txt", "/etc/hostname"))
    job("job-crash-is-dir", good, {"crashes/a.txt/x": b"x"})
    d = job("job-crash-symlinks", good, {"crashes/b.txt": b"x"})
    os.symlink("/etc/passwd", d / "crashes" / "a.txt")
    os.symlink("loop.txt", d / "crashes" / "loop.txt")
    d = job(
        "job-logs-nasty",
        good,
        {
            "workers/w0.log": noise(8192),
            "kernel.log": b"\xff\xfe Killed process abc\n" + b"Killed process 99999999999999999999999\n",
        },
    )
    os.symlink("loop.log", d / "workers" / "loop.log")
    (d / "workers" / "dir.log").mkdir()
    d = items["dir-loop"] = root / "dir-loop"
    d.mkdir()
    os.symlink(".", d / "self")
    os.symlink("self/self/x.log", d / "x.log")
    (root / "plain-file").write_text("x")
    items["path-through-file"] = root / "plain-file" / "events.jsonl"
    items["missing"] = root / "missing"
    return items


def job_commands() -> list[list[str]]:
    """argv templates (`{}` = the evidence) for every leaf command of cli.COMMANDS."""
    root = typer.main.get_command(cli.app)
    forms: list[list[str]] = []

    def walk(cmd, path: list[str]) -> None:
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
            return
        opts = {o for p in cmd.params for o in p.opts}
        before = len(forms)
        extra = ["--once"] if "--once" in opts else []
        extra += [a for p in cmd.params if p.required and p.param_type_name == "option" for a in (p.opts[0], "0")]
        if any(type(p).__name__.endswith("Argument") for p in cmd.params):
            forms.append([*path, "{}", *extra])
        forms.extend(
            [*path, "w0", opt, "{}"] if opt == "--job" else [*path, opt, "{}"] for opt in JOB_OPTIONS if opt in opts
        )
        if len(forms) == before:  # nothing takes evidence: the job store is the input
            forms.append([*path, *extra])

    for name in cli.COMMANDS:
        if name not in STARTS_THINGS:
            walk(root.commands[name], [name])
            forms.extend(EXTRA_FORMS.get(name, []))
    return forms


def run_inprocess(argv: list[str]) -> tuple[int, str, str]:
    """`zdebug argv` in this process through cli.main (the real error boundary): (exit, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = ["zdebug", *argv]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            cli.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        sys.argv = saved
    return code, out.getvalue(), err.getvalue()


def check(argv: list[str], code: int, out: str, err: str, name: str | None = None) -> str | None:
    """What is wrong with one run, or None."""
    where = f"zdebug {' '.join(argv)} -> {code}"
    if "Traceback (most recent call last)" in err or "internal error" in err:  # stdout may show evidence tracebacks
        return f"{where}: traceback/internal error: {err[-400:]}"
    if "\x1b" in out + err or "\x9b" in out + err:
        return f"{where}: raw control sequence in the output"
    errors = [ln for ln in err.splitlines() if ln.startswith("zdebug: error:")]
    usage = code == 2 and "Usage:" in err  # click's own argument errors
    if code != 0 and not usage:
        if len(errors) != 1 or err.rstrip().splitlines()[-1] != errors[0]:
            return f"{where}: not a one-line error: {err[-400:]!r}"
        if name and name not in errors[0] and "{}" in " ".join(argv):
            return f"{where}: error does not name the input {name}: {errors[0]}"
    return None


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    return build_corpus(tmp_path_factory.mktemp("nasty"))


@pytest.fixture(scope="module")
def nasty_home(corpus, tmp_path_factory) -> Path:
    """A job store whose jobs are the corpus's job dirs (and some non-dirs)."""
    home = tmp_path_factory.mktemp("nasty-home")
    (home / "jobs").mkdir()
    for name, path in corpus.items():
        os.symlink(path, home / "jobs" / name)
    return home


FORMS = job_commands()


@pytest.mark.parametrize("form", FORMS, ids=lambda f: " ".join(f))
def test_every_command_survives_every_nasty_input(form, corpus, nasty_home, monkeypatch):
    monkeypatch.setenv("ZDEBUG_HOME", str(nasty_home))
    monkeypatch.chdir(nasty_home)  # files a command writes by default land here
    problems = []
    targets = [p for n, p in corpus.items() if form[0] == "status" or n not in LOADER_ONLY]
    for i, path in enumerate(targets if "{}" in form else [None, None]):
        argv = [str(path) if a == "{}" else a for a in form] if path else [*form, *["--json"][:i]]
        code, out, err = run_inprocess(argv)
        problems.append(check(argv, code, out, err, path.name if path else None))
    problems = [p for p in problems if p]
    assert not problems, "\n".join(problems)


def _subprocess(argv: list[str], home: Path) -> tuple[list[str], subprocess.CompletedProcess]:
    env = {**os.environ, "ZDEBUG_HOME": str(home)}
    proc = subprocess.run(
        [sys.executable, "-m", "zephyr_debug.cli", *argv],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
        env=env,
        cwd=home,
    )
    return argv, proc


def _parallel(runs: list[list[str]], home: Path, check_one: Callable) -> list[str]:
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda argv: _subprocess(argv, home), runs))
    return [p for argv, proc in results if (p := check_one(argv, proc))]


# One of each kind of nastiness, for the real-process run (a subprocess costs ~1 s of CPU).
SUBPROCESS_SAMPLE = ["binary", "nested.json", "job-events-loop", "job-escapes"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_real_processes_on_the_corpus(corpus, nasty_home):
    """As a user runs it: `python -m zephyr_debug.cli`, status (the loader every command shares)
    on one input of each kind, and every command on a job with fields of the wrong types."""
    runs = [["status", str(corpus[n])] for n in SUBPROCESS_SAMPLE]
    first_form = {f[0]: f for f in reversed(FORMS) if "{}" in f}  # one form per command
    runs += [[str(corpus["job-wrong-types"]) if a == "{}" else a for a in f] for f in first_form.values()]
    problems = _parallel(
        runs,
        nasty_home,
        lambda argv, proc: check(
            argv, proc.returncode, proc.stdout, proc.stderr, Path(argv[1]).name if argv[0] == "status" else None
        ),
    )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", ["job-truncated", "job-wrong-types", "job-nested", "job-latin1"])
def test_partial_results_and_a_warning_naming_the_file_and_lines(name, corpus):
    code, out, err = run_inprocess(["status", str(corpus[name])])
    assert code == 0, err
    assert "interrupted" in out and "1/2 complete" in out
    assert f"{corpus[name] / 'events.jsonl'}: skipped " in " ".join(err.split()) and "(line " in err
