"""Bounded, restricted reading of a pickled actor reply (Iris `get_status`, `get_counters`).

`plain_data(data)` builds only dicts, lists and scalars: every class the pickle names becomes a
stand-in that keeps its state and runs none of its code (Python's "restricting globals" recipe),
and nothing is imported. Before anything is built the opcode stream is checked against
`LIMITS` (reply bytes, string bytes, memo slots, class names, declared frame sizes); after, the
object graph is walked once with a memo by object id, so a DAG (`x = [x, x]`, 40 times) costs
its distinct objects, while its expanded size (what JSON would write) and depth are bounded too.
Any reply over a limit, or malformed, is one `ZdebugError` line naming the limit.
"""

from __future__ import annotations

import builtins
import io
import pickle
import pickletools
from dataclasses import dataclass

from zephyr_debug.errors import EvidenceError, ZdebugError


@dataclass(frozen=True)
class Limits:
    reply_bytes: int = 32 << 20  # a get_status of 100k workers is a few MB
    string_bytes: int = 64 << 20  # str/bytes, counted as often as they are referenced
    objects: int = 1_000_000  # containers and scalars, counted as often as they are referenced
    depth: int = 64  # a JobStatus is 4 levels deep
    memo: int = 1_000_000  # memo slot index (CPython grows its memo table to twice the index)
    classes: int = 1_000  # GLOBAL / STACK_GLOBAL / INST opcodes


LIMITS = Limits()
_CLASS_OPS = {"GLOBAL", "STACK_GLOBAL", "INST"}
_MEMO_OPS = {"PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET"}


class _Record:
    """Stands in for any class a pickled reply names: keeps the state, runs none of its code."""

    def __init__(self, *args):
        self.__dict__["_args"] = args

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) == 2:  # (dict state, slots state)
            state = {**(state[0] or {}), **(state[1] or {})}
        self.__dict__.update(state if isinstance(state, dict) else {"_state": state})

    def __setitem__(self, key, value):
        self.__dict__[key] = value


_SAFE_BUILTINS = {name: getattr(builtins, name) for name in ("set", "frozenset", "list", "dict", "tuple")}
# bytearray(bytes) only: bytearray(10**10) from a hostile reply would allocate 10 GB.
_SAFE_BUILTINS["bytearray"] = lambda data=b"", *_: bytearray(data if isinstance(data, (bytes, bytearray)) else b"")


class _PlainUnpickler(pickle.Unpickler):
    def __init__(self, file):
        super().__init__(file)
        self._classes: dict[tuple[str, str], type] = {}

    def find_class(self, module: str, name: str):
        if module == "builtins" and name in _SAFE_BUILTINS:
            return _SAFE_BUILTINS[name]
        if (module, name) == ("copyreg", "_reconstructor"):
            return lambda cls, base, state: cls()
        return self._classes.setdefault((module, name), type(name, (_Record,), {}))

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("persistent ids are not allowed")


def plain_data(data: bytes, limits: Limits = LIMITS):
    """A pickled reply as dicts / lists / scalars; objects become the dict of their state."""
    _check_stream(data, limits)
    try:
        value = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # any malformed or unexpected pickle
        raise _unreadable(exc) from None
    _Measure(limits).walk(value, 1)
    try:
        return _Plain().convert(value)
    except Exception as exc:  # e.g. an int too long to print as a dict key
        raise _unreadable(exc) from None


def _unreadable(exc: Exception) -> ZdebugError:
    return EvidenceError(f"unreadable actor reply ({type(exc).__name__}: {' '.join(str(exc).split())[:80]})")


def _over(what: str, limit: int) -> ZdebugError:
    return EvidenceError(
        f"actor reply refused: {what} over the limit of {limit:,} (zephyr_debug.sources.unpickle.LIMITS)"
    )


def _check_stream(data: bytes, limits: Limits) -> None:
    """The opcodes' declared sizes and counts, read before CPython acts on any of them."""
    if len(data) > limits.reply_bytes:
        raise _over(f"{len(data):,} bytes", limits.reply_bytes)
    strings = classes = 0
    try:
        for op, arg, pos in pickletools.genops(data):
            name = op.name
            if isinstance(arg, (str, bytes, bytearray)):
                strings += len(arg)
                if strings > limits.string_bytes:
                    raise _over("string bytes", limits.string_bytes)
            if name in _MEMO_OPS and isinstance(arg, int) and not 0 <= arg < limits.memo:
                raise _over(f"memo index {arg:,}", limits.memo)
            if name == "FRAME" and isinstance(arg, int) and pos is not None and arg > len(data) - pos:
                raise _over(f"declared frame of {arg:,} bytes", len(data) - pos)
            if name in _CLASS_OPS:
                classes += 1
                if classes > limits.classes:
                    raise _over("class references", limits.classes)
    except ZdebugError:
        raise
    except Exception as exc:  # truncated, unknown opcode, bad argument
        raise _unreadable(exc) from None


def _children(value):
    if isinstance(value, _Record):
        return list(value.__dict__.values())
    if isinstance(value, dict):
        return [x for kv in value.items() for x in kv]
    if isinstance(value, (list, tuple, set, frozenset)):
        return value
    return ()


class _Measure:
    """Expanded size of the object graph (objects, string bytes), one visit per distinct object."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.sizes: dict[int, tuple[int, int]] = {}

    def walk(self, value, depth: int) -> tuple[int, int]:
        if isinstance(value, (str, bytes, bytearray)):
            return 1, len(value)
        known = self.sizes.get(id(value))
        if known is not None:
            return known
        if depth > self.limits.depth:  # a cycle gets here too: it is infinitely deep
            raise _over(f"nesting deeper than {depth - 1} levels", self.limits.depth)
        objects, strings = 1, 0
        for child in _children(value):
            o, s = self.walk(child, depth + 1)
            objects, strings = objects + o, strings + s
            if objects > self.limits.objects:
                raise _over("objects (shared ones counted each time)", self.limits.objects)
            if strings > self.limits.string_bytes:
                raise _over("string bytes (shared ones counted each time)", self.limits.string_bytes)
        self.sizes[id(value)] = objects, strings
        return objects, strings


class _Plain:
    """The converter: one output per distinct input object, so sharing survives."""

    def __init__(self):
        self.done: dict[int, object] = {}

    def convert(self, value):
        if isinstance(value, (str, int, float, bool)) or value is None:
            return value
        key = id(value)
        if key not in self.done:
            self.done[key] = self._convert(value)
        return self.done[key]

    def _convert(self, value):
        if isinstance(value, _Record):
            state = {k: v for k, v in value.__dict__.items() if k != "_args"}
            if not state:
                args = value.__dict__.get("_args", ())
                return self.convert(args[0]) if len(args) == 1 else [self.convert(a) for a in args]
            return {str(k): self.convert(v) for k, v in state.items()}
        if isinstance(value, dict):
            return {
                (k if isinstance(k, (str, int, float)) else str(self.convert(k))): self.convert(v)
                for k, v in value.items()
            }
        if isinstance(value, (list, tuple, set, frozenset)):
            return [self.convert(v) for v in value]
        return str(value)
