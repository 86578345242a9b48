"""Evidence that streams (sources/streams.py): `-` (stdin), a FIFO, and gzip / bzip2 / xz / zstd
logs (by their first bytes) read as the plain file does; a compressed log cut short reads up to
the cut with a warning; corrupt data is a one-line error with exit 3."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import zstandard

LOG = Path(__file__).parent / "data" / "realcaptures" / "crashloop" / "coordinator.log"
PACK = {
    "gz": gzip.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "zst": lambda b: zstandard.ZstdCompressor().compress(b),
}


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("ZDEBUG_HOME", str(tmp_path / "home"))


def zdebug(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zephyr_debug.cli", *args], input=stdin, capture_output=True, timeout=120, env=os.environ
    )


def _status(*args: str, stdin: bytes | None = None) -> dict:
    proc = zdebug("status", *args, "--json", stdin=stdin)
    assert proc.returncode == 0, proc.stderr.decode()
    out = json.loads(proc.stdout)
    out.pop("source", None)
    return {k: out[k] for k in ("job", "state", "headline", "findings")}


@pytest.fixture
def plain() -> dict:
    return _status(str(LOG))


def _same(a: dict, b: dict) -> bool:
    """The same outcome and findings (their next commands name where each was read from)."""
    strip = (
        [{k: v for k, v in f.items() if k != "next"} for f in a["findings"]],
        [{k: v for k, v in f.items() if k != "next"} for f in b["findings"]],
    )
    return {**a, "findings": strip[0]} == {**b, "findings": strip[1]}


def test_stdin_reads_as_the_file_and_is_kept(plain, tmp_path):
    got = _status("-", stdin=LOG.read_bytes())
    assert _same(got, plain)
    named = [Path(w) for f in got["findings"] for step in f["next"] for w in step.split() if "/pasted/" in w]
    assert named and all(p.read_bytes() == LOG.read_bytes() for p in named)  # a next command names the kept copy


def test_a_fifo_reads_as_the_file(plain, tmp_path):
    fifo = tmp_path / "coordinator.log"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(LOG.read_bytes()))
    writer.start()
    try:
        assert _same(_status(str(fifo)), plain)
    finally:
        writer.join(timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize("ext", sorted(PACK))
def test_compressed_logs_read_as_plain(ext, plain, tmp_path):
    path = tmp_path / f"coordinator.log.{ext}"
    path.write_bytes(PACK[ext](LOG.read_bytes()))
    assert _same(_status(str(path)), plain)
    (tmp_path / "dir").mkdir()
    path.rename(tmp_path / "dir" / path.name)  # inside an evidence directory too
    assert _same({**_status(str(tmp_path / "dir")), "job": plain["job"]}, plain)


def test_a_cut_gzip_reads_up_to_the_cut(tmp_path):
    path = tmp_path / "coordinator.log.gz"
    path.write_bytes(gzip.compress(LOG.read_bytes())[:3000])
    proc = zdebug("status", str(path), "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    assert any("ends early" in w for w in json.loads(proc.stdout)["warnings"])


def test_corrupt_compressed_data_is_one_line_exit_3(tmp_path):
    path = tmp_path / "coordinator.log.gz"
    data = bytearray(gzip.compress(LOG.read_bytes()))
    data[20:200] = bytes(180)
    path.write_bytes(bytes(data))
    proc = zdebug("status", str(path))
    err = proc.stderr.decode()
    assert proc.returncode == 3 and err.count("\n") == 1 and str(path) in err and "Traceback" not in err, err


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig"])
def test_a_capture_saved_as_utf16_or_with_a_bom_reads_as_the_capture(codec, tmp_path):
    """PowerShell's `kubectl logs … > log.txt` writes UTF-16LE with a BOM (once: "binary data"); some
    tools write it without one, or UTF-8 with a BOM. Each real capture reads as itself, and UTF-16 says so."""
    from test_wrapped import CAPTURES, NAMES, verdict

    from zephyr_debug.analyze.analysis import analyze
    from zephyr_debug.sources import load

    for name in NAMES:
        original = CAPTURES / name / "coordinator.log"
        saved = tmp_path / f"{name}.log"
        saved.write_bytes(original.read_text(encoding="utf-8").encode(codec))
        assert verdict(saved) == verdict(original), (name, codec)
        noted = any("UTF-16 text" in w for w in analyze(load(str(saved))).warnings)
        assert noted == codec.startswith("utf-16"), (name, codec)
