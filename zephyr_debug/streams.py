"""Evidence that is not a plain file yet. Standard input (`-`) and pipes or FIFOs (`<(zcat x.gz)`)
are saved once, as they stream, under `$ZDEBUG_HOME/pasted/` (the CLI swaps the argument for that
path, so next commands name a file that exists). Compressed logs (gzip, bzip2, xz, zstd: known by
their first bytes, not their names) are decompressed into a private scratch copy, removed at
exit. Either way the readers get a file they can seek (their bulk and parallel paths need one)."""

from __future__ import annotations

import atexit
import codecs
import hashlib
import itertools
import os
import re
import stat
import sys
from pathlib import Path

from zephyr_debug.errors import EvidenceError

STDIN = "-"
COPY_BYTES = 1 << 20
MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}
_made: list[str] = []
NOTES: list[str] = []  # warnings for the evidence being loaded (sources.load takes them)


def compression(head: bytes) -> str | None:
    """The compression a file's first bytes name, or None."""
    return next((name for magic, name in MAGIC.items() if head.startswith(magic)), None)


def _scratch() -> Path:
    import tempfile

    if not _made:
        atexit.register(_remove_scratch)
    _made.append(tempfile.mkdtemp(prefix="zdebug-stream-"))
    return Path(_made[-1])


def _remove_scratch() -> None:
    import shutil

    for d in _made:
        shutil.rmtree(d, ignore_errors=True)


def _decompressor(kind: str, name: str):
    """An incremental decompressor (`decompress(bytes)`, `eof`): it keeps what precedes a cut."""
    import bz2
    import lzma
    import zlib

    if kind == "gzip":
        return zlib.decompressobj(wbits=47)  # gzip or zlib header
    if kind == "bzip2":
        return bz2.BZ2Decompressor()
    if kind == "xz":
        return lzma.LZMADecompressor()
    try:
        import zstandard
    except ImportError:
        raise EvidenceError(f"{name}: zstd-compressed; `pip install zstandard` to read it") from None
    return zstandard.ZstdDecompressor().decompressobj()


def _errors() -> tuple[type[Exception], ...]:
    """What a decompressor raises on corrupt data."""
    import lzma
    import zlib

    try:
        import zstandard
    except ImportError:
        return (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError)
    return (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError, zstandard.ZstdError)


def is_stream(arg: str) -> bool:
    """`-`, or a path to a FIFO / character device (`<(zcat x.gz)`, `/dev/stdin`)."""
    if arg == STDIN:
        return True
    try:
        mode = os.stat(arg).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def kept(arg: str) -> str:
    """A stream's bytes saved once under `$ZDEBUG_HOME/pasted/<hash>.log` (a suggested next
    command then names a file that is still there); the path."""
    from zephyr_debug import jobstore

    root = jobstore.home() / "pasted"
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = root / f".incoming-{os.getpid()}"
    digest = hashlib.sha256()
    try:
        with open(tmp, "xb") as out, open(arg, "rb") if arg != STDIN else sys.stdin.buffer as src:
            while chunk := src.read(COPY_BYTES):
                digest.update(chunk)
                out.write(chunk)
        final = root / f"{digest.hexdigest()[:12]}.log"
        os.replace(tmp, final)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise EvidenceError(f"{'<stdin>' if arg == STDIN else arg}: cannot read ({exc.strerror or exc})") from None
    return str(final)


def plain(path: Path, name: str | None = None) -> Path:
    """A regular file, decompressed into a scratch copy when it is compressed, then `readable`
    (`name`: how errors name it)."""
    shown = name or str(path)
    try:
        with open(path, "rb") as fh:
            kind = compression(fh.read(8))
            if kind is None:
                return readable(path, shown)
            fh.seek(0)
            into = _scratch() / (path.name.rsplit(".", 1)[0] if "." in path.name else path.name)
            d = _decompressor(kind, shown)
            with open(into, "xb") as out:
                try:
                    while chunk := fh.read(COPY_BYTES):
                        out.write(d.decompress(chunk))
                except _errors() as exc:
                    raise EvidenceError(f"{shown}: {kind} data is corrupt ({exc})") from None
            if not getattr(d, "eof", True):  # cut short (a log still being written): what came before is evidence
                NOTES.append(f"{shown}: {kind} data ends early; read the {into.stat().st_size:,} bytes before the cut")
            return readable(into, shown)
    except OSError as exc:
        raise EvidenceError(f"{shown}: cannot read ({exc.strerror or exc})") from None


WRAP_SAMPLE = 4 << 20  # bytes of a file's head that say whether a terminal wrapped its lines
MIN_WRAP = 40  # no terminal is narrower
WRAPPED_SHARE = 0.02  # lines of exactly the widest length, among all: a wrap, not chance
WRAP_CONTRAST = 0.3  # how much more often a widest line than a shorter one is followed by a rest


def _starts_record(line: str) -> bool:
    """Whether `line` starts a log record (a known prefix), not the rest of a wrapped one."""
    from zephyr_debug.zephyrlog import LINE_START_RE

    return LINE_START_RE.match(("\n" + line).encode()) is not None


def wrap_width(head: bytes) -> int | None:
    """The column a terminal (or `fold`) wrapped this text at, or None: the widest line length
    (in characters) is shared by many lines, and those are followed by a line that does not start
    a record (their rest) mostly, and more often than shorter lines are."""
    lines = head.decode("utf-8", "replace").replace("\r\n", "\n").split("\n")[:-1]  # the last may be cut
    if len(lines) < 4:
        return None
    width = max(map(len, lines))
    at = [i for i, line in enumerate(lines[:-1]) if len(line) == width]
    if width < MIN_WRAP or len(at) < 3 or len(at) < WRAPPED_SHARE * len(lines):
        return None
    rest = [not _starts_record(line) for line in lines[1:]]
    after_wide = sum(rest[i] for i in at) / len(at)
    after_short = sum(r for i, r in enumerate(rest) if len(lines[i]) < width) / max(1, len(rest) - len(at))
    # Wrapped: a wide line is mostly followed by its rest, and markedly more often than a shorter
    # one is (text whose lines never start a record, bare messages, shows no wrap either way).
    return width if after_wide > 0.5 and after_wide - after_short >= WRAP_CONTRAST else None


def unwrapped(path: Path, shown: str) -> Path:
    """`path`, or a scratch copy with each wrapped line joined to its rest (a line of exactly the
    wrap width followed by one that does not start a record), noted for the reader."""
    with open(path, "rb") as fh:
        width = wrap_width(fh.read(WRAP_SAMPLE))
        if width is None:
            return path
        fh.seek(0)
        into = _scratch() / path.name
        joined = 0
        with open(into, "x", encoding="utf-8", newline="\n") as out:
            held: str | None = None
            for raw in fh:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if held and len(held) % width == 0 and not _starts_record(line):
                    held += line
                    joined += 1
                    continue
                if held is not None:
                    out.write(held + "\n")
                held = line
            if held is not None:
                out.write(held + "\n")
    NOTES.append(f"{shown}: lines wrapped at {width} columns (a terminal's copy); joined {joined:,} to the line before")
    return into


def readable(path: Path, shown: str) -> Path:
    """`path` as a log reader needs it, each rewrite in a scratch copy noted for the reader: UTF-16
    made UTF-8, its terminal colour codes removed, its wrapped lines joined, its records put oldest first."""
    return in_order(unwrapped(uncoloured(utf8(path, shown), shown), shown), shown)


def utf16(head: bytes) -> str | None:
    """The UTF-16 codec a text was saved in (Windows PowerShell's `>` writes UTF-16LE with a BOM;
    without one, a NUL in every other byte of its head), else None."""
    if head[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        return "utf-16"
    pairs = head[: len(head) // 2 * 2]
    if len(pairs) < 64:
        return None
    for codec, nul, text in (("utf-16-le", pairs[1::2], pairs[0::2]), ("utf-16-be", pairs[0::2], pairs[1::2])):
        if nul.count(0) >= 0.95 * len(nul) and text.count(0) == 0:
            return codec
    return None


def utf8(path: Path, shown: str) -> Path:
    """`path`, or a UTF-8 scratch copy of a UTF-16 text."""
    with open(path, "rb") as fh:
        codec = utf16(fh.read(4096))
        if codec is None:
            return path
        fh.seek(0)
        into = _scratch() / path.name
        decode = codecs.getincrementaldecoder(codec)("replace")
        with open(into, "xb") as out:
            while chunk := fh.read(COPY_BYTES):
                out.write(decode.decode(chunk).encode("utf-8"))
            out.write(decode.decode(b"", final=True).encode("utf-8"))
    NOTES.append(f"{shown}: UTF-16 text (e.g. PowerShell's `>`); read as UTF-8")
    return into


# A terminal escape: CSI (colours, `\x1b[32m`) or OSC (titles, links), as coloured log handlers print.
ANSI_RE = re.compile(rb"\x1b\[[0-9;:?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)")


def uncoloured(path: Path, shown: str) -> Path:
    """`path`, or a scratch copy without terminal colour codes when its head holds any."""
    with open(path, "rb") as fh:
        if ANSI_RE.search(fh.read(WRAP_SAMPLE)) is None:
            return path
        fh.seek(0)
        into = _scratch() / path.name
        removed = 0
        with open(into, "xb") as out:
            for line in fh:
                clean, n = ANSI_RE.subn(b"", line)
                out.write(clean)
                removed += n
    NOTES.append(f"{shown}: removed {removed:,} terminal colour code(s) (a coloured log handler's output)")
    return into


REVERSED_SHARE = 0.9  # of the steps between record times in a file's head, going back: newest first
MIN_STEPS = 5  # time steps it takes to tell an order
ORDER_SAMPLE = 256 << 10  # bytes of a file's head whose record times tell its order
JSON_START_RE = re.compile(rb'\s*(?:\{\s*["}]|\[\s*(?:[{\["\]]|-?\d+(?:\.\d+)?\s*[,\]]|true|false|null))')
ORDER_TIMES = 300  # record times read from it, at most (an unusual prefix's time costs ~50 us)
MAX_REORDER_BYTES = 512 << 20  # a newest-first text is reordered in memory up to this size


def _record_times(head: bytes) -> list[tuple]:
    """The times of the records that start in `head`, in file order (year, month, day, second):
    a log may mix prefixes with and without fractions (Python's `,ms` beside glog's seconds)."""
    from zephyr_debug.zephyrlog import LINE_START_RE, prefix_time

    out = []
    for m in LINE_START_RE.finditer(b"\n" + head):
        t = prefix_time(head[m.start() : m.start() + 120].split(b"\n", 1)[0])
        if t is not None:
            out.append((t.year or 0, t.month or 0, t.day or 0, int(t.clock)))  # whole seconds: forms mix
            if len(out) >= ORDER_TIMES:
                break
    return out


def _sequence_steps(head: bytes) -> tuple[int, int]:
    """(forward, backward) steps of what Zephyr's lines in `head` say happened in order: a
    stage's `k/N complete` going up or down, a shard's `Executing` above or below its `done`."""
    from zephyr_debug.zephyrlog import EXECUTING, SHARD_DONE, STATUS

    fwd = back = 0
    completed: dict[bytes, int] = {}
    for m in STATUS.regex.finditer(head):
        k, was = int(m["completed"]), completed.get(m["stage"])
        if was is not None and k != was:
            fwd, back = fwd + (k > was), back + (k < was)
        completed[m["stage"]] = k
    started: dict[tuple, int] = {}
    done: dict[tuple, int] = {}
    for rx, first in ((EXECUTING.regex, started), (SHARD_DONE.regex, done)):
        for m in rx.finditer(head):
            first.setdefault((m["worker"], m["shard"]), m.start())
    for key in started.keys() & done.keys():
        fwd, back = fwd + (started[key] < done[key]), back + (started[key] > done[key])
    return fwd, back


def newest_first(head: bytes) -> bool:
    """Whether the text runs newest first (a `gcloud logging read` or a log viewer's copy): what
    Zephyr's lines say happened runs backwards, or, where they say too little, nearly every step
    between record times does (a clock that jumps back in a log written in order is not this)."""
    if JSON_START_RE.match(head):  # JSON: its readers order records by their own times
        return False
    fwd, back = _sequence_steps(head)
    if fwd + back < MIN_STEPS:
        times = _record_times(head)
        steps = [b < a for a, b in itertools.pairwise(times) if a != b]
        fwd, back = len(steps) - sum(steps), sum(steps)
    return fwd + back >= MIN_STEPS and back >= REVERSED_SHARE * (fwd + back)


def in_order(path: Path, shown: str) -> Path:
    """`path`, or a scratch copy oldest first when its records are newest first: each record (a
    line that starts one and the traceback lines after it) moved whole, or the lines one by one
    when they were reversed one by one (a traceback's lines above its header)."""
    from zephyr_debug.zephyrlog import LINE_START_RE

    with open(path, "rb") as fh:
        if not newest_first(fh.read(ORDER_SAMPLE)):
            return path
    size = path.stat().st_size
    if size > MAX_REORDER_BYTES:
        NOTES.append(
            f"{shown}: its records are newest first, and at {size >> 20:,} MiB too large to reorder here; "
            "times are read as they are (sort it oldest first, e.g. `tac`, for a full reading)"
        )
        return path
    data = path.read_bytes()
    if not data.endswith(b"\n"):
        data += b"\n"
    header = data.find(b"Traceback (most recent call last):")
    below = data[header : header + 400].split(b"\n", 2)[1:2] if header >= 0 else []
    by_line = bool(below) and b'File "' not in below[0]  # in record order, its frames follow it
    starts = [0] + [m.start() + 1 for m in LINE_START_RE.finditer(data) if m.start() + 1 < len(data)]
    if by_line or len(starts) == 1:  # lines reversed one by one, or none starts a record (bare)
        by_line, parts = True, data.splitlines(keepends=True)
    else:
        parts = [data[a:b] for a, b in zip(starts, [*starts[1:], len(data)], strict=True) if b > a]
    into = _scratch() / path.name
    into.write_bytes(b"".join(reversed(parts)))
    unit = "line" if by_line else "record"
    NOTES.append(f"{shown}: newest first (a log viewer's order); read its {len(parts):,} {unit}s oldest first")
    return into
