"""Fingerprints that do not move: the same crash raised for real (child processes) from a
checkout, from site-packages, from a zipapp, from another machine's paths, by another Python
minor version (3.11's caret lines vs 3.12+, ExceptionGroup) and through `runpy` / `ctypes`
frames gets one fingerprint; in-app is decided by the package root, not by the install path."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import zipapp
from pathlib import Path

import pytest

from zephyr_debug.crashes.cluster import cluster
from zephyr_debug.crashes.fingerprint import Fingerprinter
from zephyr_debug.model import Crash

REPO = Path(__file__).resolve().parent.parent
KINDS = ("key", "chain", "group", "segv")

WORK = """import ctypes
import sys


def lookup(record):
    return record["user_id"]


def wrapped(record):
    try:
        return lookup(record)
    except KeyError as exc:
        raise ValueError(f"bad record {record}") from exc


def group(n):
    raise ExceptionGroup(f"{n} rows failed", [ValueError(f"row {i}") for i in range(n)] + [TypeError("x")])


def segv():
    ctypes.string_at(0)


def main(kind):
    if kind == "key":
        lookup({"id": 1})
    elif kind == "chain":
        wrapped({"id": 2})
    elif kind == "group":
        group(3)
    elif kind == "segv":
        segv()
"""
MAIN = "import sys\nfrom mypipe.work import main\nmain(sys.argv[1])\n"


def _pythons() -> list[str]:
    """This interpreter and any other 3.11+ minor version installed here (pyenv, PATH)."""
    found = {f"{sys.version_info.major}.{sys.version_info.minor}": sys.executable}
    candidates = glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[1-9]*/bin/python"))
    candidates += [p for v in range(11, 20) if (p := shutil.which(f"python3.{v}"))]
    for exe in candidates:
        out = subprocess.run([exe, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
        if out.returncode == 0:
            found.setdefault(out.stdout.strip(), exe)
    return sorted(found.values())


def _package(root: Path) -> Path:
    (root / "mypipe").mkdir(parents=True)
    (root / "mypipe" / "__init__.py").write_text("")
    (root / "mypipe" / "work.py").write_text(WORK)
    (root / "mypipe" / "__main__.py").write_text(MAIN)
    return root


def _crash(python: str, args: list[str], cwd: Path, env: dict | None = None) -> str:
    proc = subprocess.run(
        [python, "-X", "faulthandler", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode != 0 and proc.stderr, proc
    return proc.stderr


@pytest.fixture(scope="module")
def layouts(tmp_path_factory) -> dict[str, Path]:
    """One package laid out four ways: a checkout, site-packages, a zipapp, another machine's home."""
    tmp = tmp_path_factory.mktemp("layouts")
    checkout = _package(tmp / "checkout")
    site = tmp / "venv" / "lib" / "python3.12" / "site-packages"
    shutil.copytree(checkout, site)
    other = _package(tmp / "home" / "bob" / "src" / "proj")
    (checkout / "zmain.py").write_text(MAIN)
    archive = tmp / "app.pyz"
    zipapp.create_archive(checkout, archive, main="zmain:__name__")
    return {"checkout": checkout, "site": site, "other": other, "zipapp": archive}


def _run(python: str, layout: str, path: Path, kind: str) -> str:
    if layout == "zipapp":
        return _crash(python, [str(path), kind], path.parent)
    if layout == "site":  # installed: imported from site-packages, run from elsewhere
        return _crash(python, ["-m", "mypipe", kind], path.parents[3], {"PYTHONPATH": str(path)})
    if layout == "other":  # another machine, run as a script module path (`python -m mypipe.work`-like)
        script = "import sys; from mypipe.work import main; main(sys.argv[1])"
        return _crash(python, ["-c", script, kind], path)
    return _crash(python, ["-m", "mypipe", kind], path)


@pytest.mark.parametrize("kind", KINDS)
def test_one_crash_from_a_checkout_site_packages_another_machine_and_python_versions_is_one_fingerprint(layouts, kind):
    fp = Fingerprinter()
    reports = {
        (python, layout): _run(python, layout, path, kind)
        for python in _pythons()
        for layout, path in layouts.items()
        if layout != "zipapp"
    }
    sigs = {where: fp.signature(text) for where, text in reports.items()}
    assert len({s.fingerprint for s in sigs.values()}) == 1, {w: (s.fingerprint, s.frames) for w, s in sigs.items()}
    sig = next(iter(sigs.values()))
    assert sig.frames[0] == {"key": "mypipe.work:lookup", "chain": "mypipe.work:lookup"}.get(
        kind, f"mypipe.work:{kind}"
    )
    if kind == "group":
        assert sig.exception == "ExceptionGroup[TypeError,ValueError]"


def test_several_python_minor_versions_are_installed_for_the_version_test():
    pythons = _pythons()
    if len(pythons) < 2:
        pytest.skip("only one Python minor version here: the version stability test ran on one")
    assert len(pythons) >= 2


@pytest.mark.parametrize("kind", KINDS)
def test_a_zipapp_crash_groups_with_its_checkout_twin(layouts, kind):
    """A zipapp's frames print no source line on 3.11/3.12 (3.13 prints them): the fingerprint
    is the same when they do, and the crash joins its twin's group when they do not."""
    fp = Fingerprinter()
    checkout = _run(sys.executable, "checkout", layouts["checkout"], kind)
    crashes = [Crash(text=checkout, source="checkout", ts=1.0)]
    for python in _pythons():
        zipped = _run(python, "zipapp", layouts["zipapp"], kind)
        assert "app.pyz/mypipe/work.py" in zipped
        crashes.append(Crash(text=zipped, source=python, ts=2.0))
    (group,) = cluster(crashes, fp)
    assert group.count == len(crashes) and group.fingerprint == fp.signature(checkout).fingerprint


def test_runpy_and_ctypes_frames_do_not_move_the_fingerprint(layouts):
    """`python -m` adds `<frozen runpy>` frames (3.11+; 3.10 printed `.../runpy.py`), a
    segfault in ctypes puts a stdlib frame innermost: neither is the crash site."""
    fp = Fingerprinter()
    checkout = layouts["checkout"]
    as_module = _crash(sys.executable, ["-m", "mypipe", "segv"], checkout)
    as_code = _crash(sys.executable, ["-c", MAIN, "segv"], checkout)
    assert "<frozen runpy>" in as_module and "ctypes" in as_module
    old_runpy = as_module.replace('File "<frozen runpy>"', 'File "/usr/lib/python3.10/runpy.py"')
    texts = [as_module, as_code, old_runpy]
    py310 = glob.glob(os.path.expanduser("~/.pyenv/versions/3.10*/bin/python")) or list(
        filter(None, [shutil.which("python3.10")])
    )
    if py310:  # a real 3.10: runpy frames are `.../lib/python3.10/runpy.py` there
        real = _crash(py310[0], ["-m", "mypipe", "segv"], checkout)
        assert "python3.10/runpy.py" in real
        texts.append(real)
    sigs = [fp.signature(t) for t in texts]
    assert len({s.fingerprint for s in sigs}) == 1 and sigs[0].frames[0] == "mypipe.work:segv"
    assert fp.frame("<frozen runpy>", "_run_code").in_app is False
    assert fp.frame("C:\\Python311\\Lib\\runpy.py", "_run_code").in_app is False
    assert fp.frame("/opt/py/lib/python3.12/ctypes/__init__.py", "string_at").in_app is False


def _reference_crash(tmp: Path, layout: str, call: str) -> str:
    """A real crash of the reference pipeline's user code (zephyr_debug.reference.shardwork) as
    imported from a checkout, from site-packages, or as a bare `reference` package."""
    package = REPO / "zephyr_debug"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    if layout == "site":
        root = tmp / "venv" / "lib" / "python3.11" / "site-packages"
        shutil.copytree(package, root / "zephyr_debug", ignore=ignore)
        module = "zephyr_debug.reference.shardwork"
    elif layout == "checkout":
        root = tmp / "src" / "zephyr-debug"
        shutil.copytree(package, root / "zephyr_debug", ignore=ignore)
        module = "zephyr_debug.reference.shardwork"
    else:  # the reference directory on sys.path of its own: `reference.shardwork`
        root = tmp / "bare"
        shutil.copytree(package / "reference", root / "reference", ignore=ignore)
        module = "reference.shardwork"
    script = (
        f"import sys; sys.path.insert(0, {str(root)!r}); sys.path.append({str(REPO)!r}); "
        f"import importlib; import pandas as pd; m = importlib.import_module({module!r}); {call}"
    )
    return _crash(sys.executable, ["-c", script], tmp)


@pytest.mark.slow
@pytest.mark.parametrize(
    "call",
    [
        "m._validate_records(pd.DataFrame({'row': [4], 'key': [9]}), 3)",
        "m._cast_columns(pd.DataFrame({'text': ['x']}))",
        "m._native_decode()",
    ],
    ids=["chained", "pyarrow", "segv"],
)
def test_the_reference_pipeline_from_a_checkout_or_site_packages_is_one_fingerprint(tmp_path, call):
    fp = Fingerprinter()
    texts = {}
    for layout in ("checkout", "site", "bare"):
        (tmp_path / layout).mkdir()
        texts[layout] = _reference_crash(tmp_path / layout, layout, call)
    assert "site-packages/zephyr_debug/reference/shardwork.py" in texts["site"]
    assert '/bare/reference/shardwork.py"' in texts["bare"]
    sigs = {layout: fp.signature(t) for layout, t in texts.items()}
    assert len({s.fingerprint for s in sigs.values()}) == 1, {k: (s.fingerprint, s.frames) for k, s in sigs.items()}
    assert sigs["site"].frames[0].startswith("zephyr_debug.reference.shardwork:")
    assert sigs["checkout"].frames[0] == sigs["site"].frames[0]


def test_in_app_is_decided_by_the_package_root_not_the_install_path():
    fp = Fingerprinter()
    for path in (
        "/home/ann/src/zephyr-debug/zephyr_debug/reference/shardwork.py",
        "/venv/lib/python3.12/site-packages/zephyr_debug/reference/shardwork.py",
        "/srv/app.pyz/zephyr_debug/reference/shardwork.py",
        "C:\\venv\\Lib\\site-packages\\zephyr_debug\\reference\\shardwork.py",
    ):
        assert fp.module(path) == ("zephyr_debug.reference.shardwork", "app"), path
        assert fp.frame(path, "_lookup_user").in_app
    for path in (
        "/venv/lib/python3.12/site-packages/zephyr_debug/reference/runners.py",
        "/home/ann/src/zephyr-debug/zephyr_debug/reference/runners.py",
        "/x/lib/zephyr/src/zephyr/execution.py",
    ):
        assert not fp.frame(path, "run").in_app, path
    # a library is not in-app wherever it lives; a user package is in-app even when installed
    assert not fp.frame("/opt/conda/lib/python3.11/site-packages/pandas/core/frame.py", "f").in_app
    assert not fp.frame("/srv/bundle.pyz/pandas/core/frame.py", "f").in_app
    assert fp.frame("/venv/lib/python3.12/site-packages/mypipe/work.py", "lookup").in_app
    assert Fingerprinter(in_app=("mypipe",)).module("/home/bob/code/proj/src/mypipe/stages/work.py") == (
        "mypipe.stages.work",
        "app",
    )
