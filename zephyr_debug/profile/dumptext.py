"""A py-spy dump as users have it: its text printout (pasted, maybe re-indented, with or without
`--locals`) or its `--json` output, read into the thread dicts `py-spy dump --json` gives."""

from __future__ import annotations

import json
import re
import sys
import sysconfig

from zephyr_debug.errors import EvidenceError

PROCESS_RE = re.compile(r"^\s*Process (\d+): ")
THREAD_RE = re.compile(r'^\s*Thread (0x[0-9A-Fa-f]+|\d+) \(([a-z+]+)\)(?:: "(.*)")?\s*$')
FRAME_RE = re.compile(r"^\s*(\S[^:]*?) \((.+?)(?::(\d+))?\)\s*$")  # `func (file.py:12)`; never `name: value`
LOCALS_RE = re.compile(r"^\s*(?:Arguments|Locals):\s*$")


def looks_like(text: str) -> bool:
    """Text that holds a py-spy dump's thread header."""
    return any(THREAD_RE.match(line) for line in text.splitlines()[:200])


def parse(text: str, source: str) -> list[dict]:
    """The threads of a py-spy dump (text or JSON); EvidenceError naming `source` when it is neither."""
    if text.lstrip()[:1] == "[":
        return _json(text, source)
    threads: list[dict] = []
    pid: int | None = None
    in_locals = False
    for line in text.splitlines():
        if m := PROCESS_RE.match(line):
            pid = int(m.group(1))
        elif m := THREAD_RE.match(line):
            ident, state, name = m.groups()
            hexed = ident.startswith("0x")
            threads.append(
                {
                    "pid": pid,
                    "thread_id": int(ident, 16) if hexed else None,
                    "os_thread_id": None if hexed else int(ident),
                    "thread_name": name or "",
                    "active": "active" in state,
                    "owns_gil": "gil" in state,
                    "frames": [],
                }
            )
            in_locals = False
        elif LOCALS_RE.match(line):
            in_locals = True
        elif threads and (m := FRAME_RE.match(line)) and not (in_locals and line.startswith(" " * 8)):
            name, filename, number = m.groups()
            threads[-1]["frames"].append(
                {"name": name, "filename": _path(filename), "line": int(number) if number else None}
            )
            in_locals = False
    if not threads:
        raise EvidenceError(f'{source}:1: not a py-spy dump (no `Thread N (idle): "name"` line)')
    return threads


def _path(short: str) -> str:
    """The text form prints short file names: a standard-library one gets the stdlib's path, so
    the frame rules read it as library code, not the application's."""
    top = short.split("/", 1)[0].removesuffix(".py")
    return f"{sysconfig.get_paths()['stdlib']}/{short}" if top in sys.stdlib_module_names else short


def _json(text: str, source: str) -> list[dict]:
    try:
        threads = json.loads(text)
    except ValueError as exc:
        raise EvidenceError(f"{source}: not a py-spy dump: invalid JSON ({exc})") from None
    except RecursionError:
        raise EvidenceError(f"{source}:1: not a py-spy dump: JSON nested too deeply") from None
    if not isinstance(threads, list) or not all(
        isinstance(t, dict) and isinstance(t.get("frames"), list) for t in threads
    ):
        raise EvidenceError(f"{source}:1: not a py-spy dump --json (a list of threads, each with frames)")
    for t in threads:
        if not all(isinstance(f, dict) and isinstance(f.get("name"), str) for f in t["frames"]):
            raise EvidenceError(f"{source}:1: not a py-spy dump --json (a frame without a name)")
    return threads
