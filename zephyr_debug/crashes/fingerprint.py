"""Sentry-like grouping: a crash's fingerprint is its root-cause exception type + its innermost
in-app frames (module:function, no line numbers) + the source line there + the message
template. What is in-app is data (`rules.toml` `[[in_app]]`, plus `--in-app PKG`).

OOM kills group per stage, faulthandler dumps by the crashing thread's in-app frames, infra
losses by their reason. Frame lines and messages repeat across crashes, so both are memoized:
the fingerprint path stays a few dict look-ups per line.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from zephyr_debug.crashes.normalize import EXCEPTION_LINE, Normalizer, rules

# `  File "p", line 3, in f` (traceback) and `  File "p", line 3 in f` (faulthandler).
FRAME = re.compile(r'^\s*File "([^"]*)", line \d+,? in (.+?)\s*$')
GROUP_PREFIX = re.compile(r"^\s*[|+] ?")
GROUP_SEPARATOR = re.compile(r"^\s*\+-")
SITE = re.compile(r"/(?:site|dist)-packages/(.*)$")
STDLIB = re.compile(r"/lib/python\d+(?:\.\d+)?/(.*)$")
FATAL = "Fatal Python error: "
KINDS = ("task", "infra", "oom", "segv", "exit")
MAX_SHOWN_FRAMES = 8
LOST_TYPE = {"infra": "WorkerLost", "oom": "MemoryError"}  # crashes that are no exception


@dataclass(frozen=True)
class Frame:
    name: str  # module:function
    in_app: bool


@dataclass(frozen=True)
class Signature:
    fingerprint: str
    kind: str  # task | infra | oom | segv | exit
    exception: str  # root-cause exception type (or signal)
    message: str  # its message template
    frames: tuple[str, ...]  # in-app frames (library ones when none), innermost first
    wrapper: str | None = None  # the outermost exception of a chain, when it is not the root


class Fingerprinter:
    """Computes `Signature`s with one set of rules; keeps its caches between crashes."""

    def __init__(self, in_app: tuple[str, ...] = (), config: dict | None = None):
        config = config or rules()
        settings = config["fingerprint"]
        self.depth = int(settings["frames"])
        self.context_line = bool(settings["context_line"])
        self.module_depth = int(settings["module_depth"])
        self.signals: dict[str, str] = config["signals"]
        self.in_app_rules = [(re.compile(rf"^{re.escape(pkg)}(?:\.|$)"), True) for pkg in in_app]
        self.in_app_rules += [(re.compile(r["module"]), bool(r["in_app"])) for r in config.get("in_app", [])]
        self.norm = Normalizer(config["masks"])
        self._frames: dict[str, Frame | None] = {}
        self._hashes: dict[tuple, str] = {}

    # -- frames ------------------------------------------------------------------------
    def frame(self, line: str) -> Frame | None:
        frame = self._frames.get(line)
        if frame is None and line not in self._frames:
            match = FRAME.match(line)
            if match:
                module, origin = self.module(match.group(1))
                in_app = next((flag for regex, flag in self.in_app_rules if regex.search(module)), origin == "app")
                frame = Frame(f"{module}:{match.group(2)}", in_app)
            if len(self._frames) > 500_000:
                self._frames.clear()
            self._frames[line] = frame
        return frame

    def module(self, path: str) -> tuple[str, str]:
        """(dotted module, origin) of a frame's file: origin is stdlib | library | app."""
        if path.startswith("<"):
            return path.strip("<>"), "stdlib" if path.startswith("<frozen") else "app"
        if m := SITE.search(path):
            return _dotted(m.group(1)), "library"
        if m := STDLIB.search(path):
            return _dotted(m.group(1)), "stdlib"
        parts = [p for p in self.norm.text(path).split("/") if p and not p.startswith("<")]
        return _dotted("/".join(parts[-self.module_depth:])), "app"

    # -- signature ---------------------------------------------------------------------
    def signature(self, text: str, kind: str | None = None, stage: str | None = None) -> Signature:
        if not text.strip():
            text, kind = "worker lost", kind or "infra"
        if text.startswith(FATAL) or "(most recent call first):" in text:
            return self._fault(text)
        blocks, group = self._blocks(text)
        root = blocks[0] if blocks else ([], *_exception(text.lstrip().split("\n", 1)[0]))
        frames, exc_type, message = root
        if group and len(blocks) > 1:
            exc_type = f"{exc_type}[{','.join(sorted({b[1] for b in blocks[1:]}))}]"
            if not any(f.in_app for f, _ in frames):
                frames = [f for b in blocks[1:] for f in b[0]] or frames
        template = self.norm.message(message)
        kind = _kind(exc_type, message, kind)
        exc_type = exc_type or LOST_TYPE.get(kind, "")
        wrapper = None
        if len(blocks) > 1 and not group:
            wrapper = f"{blocks[-1][1]}: {self.norm.message(blocks[-1][2])}"
        if kind == "oom":
            return self._make(kind, exc_type, template, (), wrapper, ("oom", stage or ""))
        chosen = _chosen(frames[::-1], self.depth)
        context = chosen[0][1] if chosen and self.context_line else None
        shown = tuple(f.name for f, _ in _chosen(frames[::-1], MAX_SHOWN_FRAMES))
        key = (kind, exc_type, template, context, *(f.name for f, _ in chosen))
        return self._make(kind, exc_type, template, shown, wrapper, key)

    def _fault(self, text: str) -> Signature:
        """A faulthandler dump: the signal plus the crashing thread's innermost in-app frames."""
        fatal, threads = "", []  # [(is the crashing thread, frames)]
        for line in text.splitlines():
            if line.startswith(FATAL):
                fatal = fatal or line[len(FATAL):].strip()
            elif line.startswith(("Current thread", "Thread 0x", "Stack (")):
                threads.append((line.startswith(("Current", "Stack")), []))
            elif threads and 'File "' in line and (frame := self.frame(line)) is not None:
                threads[-1][1].append((frame, None))
        frames = next((f for current, f in threads if current), threads[0][1] if threads else [])
        signal = self.signals.get(fatal, fatal or "fatal error")
        chosen = _chosen(frames, self.depth)
        shown = tuple(f.name for f, _ in _chosen(frames, MAX_SHOWN_FRAMES))
        template = self.norm.message(f"Fatal Python error: {fatal}" if fatal else "faulthandler dump")
        return self._make("segv", signal, template, shown, None, ("segv", signal, *(f.name for f, _ in chosen)))

    def _make(self, kind: str, exc_type: str, template: str, frames: tuple, wrapper: str | None,
              key: tuple) -> Signature:
        digest = self._hashes.get(key)
        if digest is None:
            digest = hashlib.blake2b("\x1f".join(map(str, key)).encode(), digest_size=8).hexdigest()
            if len(self._hashes) > 500_000:
                self._hashes.clear()
            self._hashes[key] = digest
        return Signature(digest, kind, exc_type, template, frames, wrapper)

    def _blocks(self, text: str) -> tuple[list, bool]:
        """[(frames [(Frame, context line)], exception type, message)] per exception, in print
        order (the root cause first), and whether it is an exception group."""
        group = "Exception Group Traceback" in text
        blocks: list = []
        frames: list | None = None
        want_context = False
        for line in text.splitlines():
            if group:
                if GROUP_SEPARATOR.match(line):
                    continue
                line = GROUP_PREFIX.sub("", line, count=1)
            if not line:
                continue
            if line[0] in " \t":
                if frames is None:
                    continue
                if want_context:
                    want_context = False
                    stripped = line.strip()
                    if not stripped.startswith('File "'):
                        if stripped.strip("^~ ") and frames:
                            frames[-1] = (frames[-1][0], stripped)
                        continue
                frame = self.frame(line)
                if frame is not None:
                    frames.append((frame, None))
                    want_context = True
                continue
            want_context = False
            if line.startswith(("Traceback (", "Exception Group Traceback (")):
                frames = []
            elif frames is not None:
                blocks.append((frames, *_exception(line)))
                frames = None
            elif group and blocks and EXCEPTION_LINE.match(line):
                blocks.append(([], *_exception(line)))
        return blocks, group


def _dotted(path: str) -> str:
    path = path[:-3] if path.endswith(".py") else path
    return path.replace("/__init__", "").replace("/", ".")


def _exception(line: str) -> tuple[str, str]:
    match = EXCEPTION_LINE.match(line.strip())
    if match is None:
        return "", line.strip()
    return match.group(1), match.group(2) or ""


def _kind(exc_type: str, message: str, given: str | None) -> str:
    if exc_type == "MemoryError":
        return "oom"
    if "Subprocess for shard" in message and "exited with code" in message:
        return "exit"
    return given if given in KINDS else "task"


def _chosen(frames: list, depth: int) -> list:
    """The innermost `depth` in-app frames; library frames only when there is none in-app."""
    in_app = [f for f in frames if f[0].in_app]
    return (in_app or frames)[:depth]
