"""Sentry-like grouping. When the root-cause exception has an in-app frame, its fingerprint is
the exception type + the innermost in-app frames (module:function, no line numbers) + the
source line there: the message is not part of it (one raise site prints many messages; the
group keeps them as variants). Without an in-app frame the message template (masked hard) is.
What is in-app is data (`rules.toml` `[[in_app]]`, plus `--in-app PKG`).

OOM kills group per stage, faulthandler dumps by the signal + the crashing thread's in-app
frames, a subprocess exit by its exit code (the runner that reports it is not the crash site),
infra losses by their reason. One code path prints the same frame lines in every crash it causes and
messages repeat, so frame regions and message templates are memoized: the fingerprint path is
two regex scans and a few dict look-ups per crash.
"""

from __future__ import annotations

import hashlib
import re
import signal as signals
import sys
from typing import NamedTuple

from zephyr_debug import zephyrlog
from zephyr_debug.crashes.normalize import EXCEPTION_LINE, Normalizer, rules

# `  File "p", line 3, in f` (traceback) and `  File "p", line 3 in f` (faulthandler), plus the
# source line under it when there is one.
FRAMES = re.compile(r'File "([^"]*)", line \d+,? in ([^\n]*)\n(?:[ \t]++(?!File ")([^\n]*)\n)?')
# One traceback: its indented frame lines, then the exception line.
BLOCK = re.compile(r"Traceback \(most recent call last\):\n((?:[ \t][^\n]*\n)*)([^\n]*)")
FATAL = "Fatal Python error: "
DUMP_STARTS = (FATAL, "Current thread 0x", "Thread 0x", "Stack (most recent call first)")
IRIS_PREFIX = re.compile(zephyrlog.IRIS_PREFIX_RE.pattern, re.M)
CHAINED = ("\nThe above exception was the direct cause", "\nDuring handling of the above exception")
GROUP_PREFIX = re.compile(r"^\s*[|+] ?")
GROUP_SEPARATOR = re.compile(r"^\s*\+-")
SITE = re.compile(r"/(?:site|dist)-packages/(.*)$")
# A zipapp, zipimport archive, egg, wheel or pex: the module path starts inside the archive.
ARCHIVE = re.compile(r"\.(?:pyz|zip|egg|whl|pex|par)/(.*)$")
STDLIB = re.compile(r"/(?:lib/python\d+(?:\.\d+)?|Lib)/(.*)$")  # `Lib`: Windows
STDLIB_NAMES = frozenset(sys.stdlib_module_names)
CARETS = re.compile(r"[\^~ \t]+")  # the 3.11+ position markers under a source line
KINDS = ("task", "infra", "oom", "segv", "exit")
MAX_SHOWN_FRAMES = 8
TRUNCATED = "TruncatedTraceback"  # a traceback cut before its exception line
LOST_TYPE = {"infra": "WorkerLost", "oom": "MemoryError"}  # crashes that are no exception
MAX_RAW = 500  # characters of a raw message kept


class Frame(NamedTuple):
    name: str  # module:function, the module named from its package root
    in_app: bool
    key: str = ""  # what the fingerprint hashes: the module's last `module_depth` parts:function


class Stack(NamedTuple):
    key: tuple[str, ...]  # the innermost in-app frames that name the crash site
    context: str | None  # the source line of the innermost one
    shown: tuple[str, ...]  # the frames shown to people
    in_app: bool = False  # whether those are in-app frames (else library ones)


EMPTY = Stack((), None, ())


class Signature(NamedTuple):
    fingerprint: str
    kind: str  # task | infra | oom | segv | exit
    exception: str  # root-cause exception type (or signal)
    message: str  # its message template
    frames: tuple[str, ...]  # in-app frames (library ones when none), innermost first
    wrapper: str | None = None  # the outermost exception of a chain, when it is not the root
    raw: str = ""  # the root exception's message as printed (this crash's, not the group's)
    exit_code: int | None = None  # a subprocess' exit code, when the crash reports one
    signal: str | None = None  # the fatal signal (SIGSEGV, SIGKILL, ...), when there is one
    # The crash site without its source line ((kind, type, in-app frames); a dump's signal): what
    # a partial report and its full twin share.
    site: tuple = ()
    # A report its full twin may hold: "bare" (no frame at all), "no-source" (in-app frames
    # without source lines), "cut" (a faulthandler dump cut before its in-app frames).
    partial: str | None = None


class Fingerprinter:
    """Computes `Signature`s with one set of rules; keeps its caches between crashes."""

    def __init__(self, in_app: tuple[str, ...] = (), config: dict | None = None):
        config = config or rules()
        settings = config["fingerprint"]
        self.depth = int(settings["frames"])
        self.context_line = bool(settings["context_line"])
        self.module_depth = int(settings["module_depth"])
        self.library_path = re.compile(settings["library_path"])
        self.signals: dict[str, str] = config["signals"]
        self.in_app_rules = [(re.compile(rf"^{re.escape(pkg)}(?:\.|$)"), True) for pkg in in_app]
        self.libraries = frozenset(config.get("libraries", {}).get("packages", ()))
        # Top-level package names a module path starts at, wherever it is installed or checked out.
        self.roots = frozenset(settings.get("roots", ())) | {pkg.split(".")[0] for pkg in in_app}
        self.in_app_rules += [(re.compile(r["module"]), bool(r["in_app"])) for r in config.get("in_app", [])]
        self.norm = Normalizer(config["masks"])
        self._frames: dict[tuple[str, str], Frame] = {}
        self._modules: dict[str, tuple[str, str]] = {}  # one file's frames share its module
        self._signatures: dict[tuple, Signature] = {}
        self._regions: dict[tuple, Stack] = {}

    # -- frames ------------------------------------------------------------------------
    def frame(self, path: str, function: str) -> Frame:
        key = (path, function)
        frame = self._frames.get(key)
        if frame is None:
            named = self._modules.get(path)
            if named is None:
                if len(self._modules) > 200_000:
                    self._modules.clear()
                named = self._modules[path] = self.module(path)
            module, origin = named
            in_app = next((flag for regex, flag in self.in_app_rules if regex.search(module)), origin == "app")
            tail = ".".join(module.split(".")[-self.module_depth :])
            frame = Frame(f"{module}:{function}", in_app, f"{tail}:{function}")
            if len(self._frames) > 500_000:
                self._frames.clear()
            self._frames[key] = frame
        return frame

    def frames(self, region: str) -> list[tuple[Frame, str | None]]:
        """(frame, source line) of every `File` line in `region`, in print order."""
        return [
            (self.frame(path, function.rstrip()), _context(context))
            for path, function, context in FRAMES.findall(region)
        ]

    def stack(self, region: str, innermost_first: bool = False) -> Stack:
        """The grouping view of a frame region. Memoized: one code path prints the same frame
        lines in every crash it causes; only messages and values change."""
        key = (region, innermost_first)
        stack = self._regions.get(key)
        if stack is None:
            frames = self.frames(region)
            stack = self._stack(frames if innermost_first else frames[::-1])
            if len(self._regions) > 100_000:
                self._regions.clear()
            self._regions[key] = stack
        return stack

    def _stack(self, innermost_first: list) -> Stack:
        chosen = _chosen(innermost_first, self.depth)
        context = chosen[0][1] if chosen and self.context_line else None
        return Stack(
            tuple(f.key for f, _ in chosen),
            context,
            tuple(f.name for f, _ in _chosen(innermost_first, MAX_SHOWN_FRAMES)),
            any(f.in_app for f, _ in chosen),
        )

    def module(self, path: str) -> tuple[str, str]:
        """(dotted module, origin) of a frame's file: origin is stdlib | library | app.

        The module is named from its package root, the same from a checkout, site-packages, a
        zipapp or another machine's paths; the origin comes from that name (the stdlib's module
        names, the `[libraries]` of the rules), never from where the file was installed."""
        if path.startswith("<"):
            if path.startswith("<frozen "):  # `<frozen runpy>` (3.11+) is `.../lib/python3.10/runpy.py`
                return path[8:].strip("<> "), "stdlib"
            return path.strip("<>"), "app"
        if "\\" in path:
            path = path.replace("\\", "/")
        if m := SITE.search(path) or ARCHIVE.search(path):
            module = _dotted(m.group(1))
        elif m := STDLIB.search(path):
            return _dotted(m.group(1)), "stdlib"
        elif self.library_path.search(path):
            return _dotted(path.rsplit(".", 1)[0]), "library"
        else:
            parts = self.norm.text(path).split("/")
            masked = [i for i, p in enumerate(parts) if p.startswith("<")]  # the module starts after it
            parts = [p for p in parts[masked[-1] + 1 if masked else 0 :] if p]
            root = next((i for i in range(len(parts) - 2, -1, -1) if parts[i] in self.roots), None)
            if root is None:  # a checkout of no known package: its last `module_depth` parts
                return _dotted("/".join(parts[-self.module_depth :])), "app"
            module = _dotted("/".join(parts[root:]))
        top = module.split(".", 1)[0]
        if top in STDLIB_NAMES:
            return module, "stdlib"
        return module, "library" if top in self.libraries else "app"

    # -- signature ---------------------------------------------------------------------
    def signature(self, text: str, kind: str | None = None, stage: str | None = None) -> Signature:
        if not text or text.isspace():
            text, kind = "worker lost", kind or "infra"
        if "] task=" in text:  # lines as Iris' `job logs` prints them
            text = IRIS_PREFIX.sub("", text)
        if FATAL in text or "(most recent call first):" in text:
            dump = min((i for i in map(text.find, DUMP_STARTS) if i >= 0), default=-1)
            traceback = text.find("Traceback (most recent call last):")
            if dump >= 0 and (traceback < 0 or dump < traceback):  # whichever comes first is the crash
                return self._fault(text[dump:])
        if "Exception Group Traceback" in text:
            return self._group(text, kind)
        blocks = _root_and_wrapper(text)
        if blocks:
            stack = self.stack(blocks[0].group(1))
            exc_type, message = _exception(blocks[0].group(2)) if blocks[0].group(2) else (TRUNCATED, "")
            if not stack.in_app and len(blocks) > 1:  # a library's own chain: the code that called it
                stack = next((st for m in BLOCK.finditer(text) if (st := self.stack(m.group(1))).in_app), stack)
        else:
            stack, (exc_type, message) = EMPTY, _exception(text.lstrip().split("\n", 1)[0])
        wrapper = None
        if len(blocks) > 1:
            wrapper_type, wrapper_message = _exception(blocks[-1].group(2))
            wrapper = f"{wrapper_type}: {self.norm.message(wrapper_message)}"
        return self._finish(exc_type, message, stack, wrapper, kind, stage)

    def _finish(
        self, exc_type: str, message: str, stack: Stack, wrapper: str | None, kind: str | None, stage: str | None
    ) -> Signature:
        template = self.norm.message(message)
        kind = _kind(exc_type, message, kind)
        exc_type = exc_type or LOST_TYPE.get(kind, "")
        code = _exit_code(message) if kind in ("exit", "oom") else None
        if kind == "oom":
            sig = self._make(kind, exc_type, template, (), wrapper, ("oom", stage or ""), code)
        elif kind == "exit":
            sig = self._make(kind, exc_type, template, (), wrapper, ("exit", code), code)
        elif stack.in_app:
            partial = "no-source" if stack.context is None and self.context_line else None
            key = (kind, exc_type, stack.context, *stack.key)
            sig = self._make(kind, exc_type, template, stack.shown, wrapper, key, None, key[:2] + key[3:], partial)
        else:
            partial = "bare" if not stack.shown and kind == "task" and exc_type else None
            key = (kind, exc_type, template, stack.context, *stack.key)
            sig = self._make(kind, exc_type, template, stack.shown, wrapper, key, None, (), partial)
        raw = message.split("\n", 1)[0][:MAX_RAW]
        return sig if sig.raw == raw else sig._replace(raw=raw)

    def _group(self, text: str, kind: str | None) -> Signature:
        """An exception group: its type with its leaves' types, its own frames (else the leaves')."""
        blocks = self._group_blocks(text)
        if not blocks:
            return self._finish("ExceptionGroup", "", EMPTY, None, kind, None)
        frames, exc_type, message = blocks[0]
        if len(blocks) > 1:
            exc_type = f"{exc_type}[{','.join(sorted({b[1] for b in blocks[1:]}))}]"
            if not any(f.in_app for f, _ in frames):
                frames = [f for b in blocks[1:] for f in b[0]] or frames
        return self._finish(exc_type, message, self._stack(frames[::-1]), None, kind, None)

    def _fault(self, text: str) -> Signature:
        """A faulthandler dump: the signal plus the crashing thread's innermost in-app frames."""
        fatal = ""
        if (at := text.find(FATAL)) >= 0:
            eol = text.find("\n", at)
            fatal = text[at + len(FATAL) : eol if eol >= 0 else None].strip()
        start = next((i for i in map(text.find, ("Current thread ", "Stack (most recent", "Thread 0x")) if i >= 0), -1)
        end = text.find("\n\n", start)
        region = (text[start:] if end < 0 else text[start : end + 1]) if start >= 0 else ""
        stack = self.stack(region, True) if start >= 0 else EMPTY
        signal = self.signals.get(fatal, fatal or "fatal error")
        raw = f"Fatal Python error: {fatal}" if fatal else "faulthandler dump"
        at = text.rfind("exited with code")  # the parent's line, joined after the dump
        code = _exit_code(text[at:]) if at >= 0 else None
        # A dump cut by another process' line before any in-app frame: its twin may hold it.
        partial = "cut" if not stack.in_app and _cut(region) else None
        return self._make(
            "segv",
            signal,
            self.norm.message(raw),
            stack.shown,
            None,
            ("segv", signal, *stack.key),
            code,
            ("segv", signal) if partial or stack.in_app else (),
            partial,
        )._replace(raw=raw)

    def _make(
        self,
        kind: str,
        exc_type: str,
        template: str,
        frames: tuple,
        wrapper: str | None,
        key: tuple,
        exit_code: int | None = None,
        site: tuple = (),
        partial: str | None = None,
    ) -> Signature:
        memo = (key, exc_type, template, frames, wrapper, exit_code, partial)
        sig = self._signatures.get(memo)
        if sig is None:
            digest = hashlib.blake2b("\x1f".join(map(str, key)).encode(), digest_size=8).hexdigest()
            if len(self._signatures) > 200_000:
                self._signatures.clear()
            signal = exc_type if kind == "segv" else _signal_name(exit_code)
            sig = self._signatures[memo] = Signature(
                digest,
                kind,
                exc_type,
                template,
                frames,
                wrapper,
                exit_code=exit_code,
                signal=signal,
                site=site,
                partial=partial,
            )
        return sig

    def _group_blocks(self, text: str) -> list:
        """An exception group, unboxed (`  | ` prefixes removed): its own block then its leaves'."""
        lines = [GROUP_PREFIX.sub("", line, count=1) for line in text.splitlines() if not GROUP_SEPARATOR.match(line)]
        flat = "\n".join(line.replace("Exception Group Traceback", "Traceback", 1) for line in lines) + "\n"
        blocks = [(self.frames(m.group(1)), *_exception(m.group(2))) for m in BLOCK.finditer(flat)]
        leaves = {b[1] for b in blocks}
        for line in lines:  # leaves raised without a traceback of their own
            match = EXCEPTION_LINE.match(line)
            if match and blocks and match.group(1) not in leaves and match.group(2) is not None:
                blocks.append(([], match.group(1), match.group(2)))
        return blocks


def _root_and_wrapper(text: str) -> list[re.Match]:
    """The first traceback (the root cause) and, for a chain, the last one (the wrapper)."""
    first = BLOCK.search(text)
    if first is None:
        return []
    if CHAINED[0] not in text and CHAINED[1] not in text:
        return [first]
    last = BLOCK.search(text, text.rfind("\nTraceback (most recent call last):") + 1)
    return [first, last] if last is not None and last.start() != first.start() else [first]


BOTTOM_FRAMES = ("<module>", "_bootstrap", "_bootstrap_inner", "_run_module_as_main", "_run_code")


def _cut(region: str) -> bool:
    """Does a dump's thread section end mid-stack (its last frame is no program or thread start)?"""
    last = region.rstrip().rsplit("\n", 1)[-1]
    match = FRAMES.search(last + "\n")
    return match is not None and match.group(2).strip() not in BOTTOM_FRAMES


def _context(line: str) -> str | None:
    """A frame's source line; a caret line (3.11+ markers, no source above it) is none."""
    line = line.rstrip()
    return None if not line or CARETS.fullmatch(line) else line


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
    return given if given in KINDS and given != "segv" else "task"  # a traceback is no native crash


def _exit_code(text: str) -> int | None:
    match = zephyrlog.RETURNCODE_RE.search(text)
    return None if match is None else int(match.group(1) or match.group(2))


def _signal_name(code: int | None) -> str | None:
    """The signal that ended a process with return code `code` (negative), if any."""
    if code is None or code >= 0:
        return None
    try:
        return signals.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _chosen(frames: list, depth: int) -> list:
    """The innermost `depth` in-app frames; library frames only when there is none in-app."""
    in_app = [f for f in frames if f[0].in_app]
    return (in_app or frames)[:depth]
