"""get_status output -> JobStatus: the dataclass repr (as `iris actor call … get_status` prints it,
inside a JSON string with non-ASCII escaped), the bare repr, or a plain JSON object.

The repr is parsed by a small tokenizer over Python literals (never eval): strings, numbers,
True/False/None, dicts, lists/tuples and `Name(key=value, …)` calls (returned as dicts), nested at
most `MAX_DEPTH` deep, numbers at most `MAX_NUMBER_CHARS` long. Every field is then checked
(`check`): a count that is not a whole number within ±2^63 (`1e400`, `inf`, a 4301-digit integer),
a stage that is not a string, workers that are not an object… are one `EvidenceError` line.
"""

from __future__ import annotations

import re
from typing import Any

from zephyr_debug import jobstore
from zephyr_debug.errors import EvidenceError
from zephyr_debug.model import JobStatus

TOKEN_RE = re.compile(
    r"""\s*(?:
    (?P<str>[rbu]?(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"))
  | (?P<num>[-+]?(?:\d[\d_]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf|nan))
  | (?P<name>[A-Za-z_][\w.]*)
  | (?P<punct>[{}()\[\]:,=<>])
)""",
    re.VERBOSE,
)
CONSTANTS = {"True": True, "False": False, "None": None}
MAX_DEPTH = 64  # brackets and calls inside each other; Zephyr's own repr is 4 deep
MAX_NUMBER_CHARS = 64  # int() of a 4301-digit number is refused by CPython (and counts fit in 20)
COUNTS = ("completed", "total", "retries", "in_flight", "queue_depth")
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0"}


class LiteralError(ValueError):
    def __init__(self, message: str, pos: int):
        super().__init__(message)
        self.pos = pos


def _unquote(token: str) -> str:
    body = token.lstrip("rbu")[1:-1]
    if token[0] == "r":
        return body

    def sub(m: re.Match) -> str:
        esc = m.group(1)
        if esc[0] in "xuU":
            code = int(esc[1:], 16)
            return "\ufffd" if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF else chr(code)  # no lone surrogates
        return ESCAPES.get(esc, "\\" + esc)

    return re.sub(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", sub, body)


class _Parser:
    def __init__(self, text: str):
        self.text, self.pos = text, 0
        self.tokens = []
        for m in TOKEN_RE.finditer(text):
            if m.start() != self.pos and text[self.pos : m.start()].strip():
                raise LiteralError(f"unexpected {text[self.pos : m.start()].strip()[:20]!r}", self.pos)
            self.pos = m.end()
            kind = m.lastgroup
            assert kind is not None  # every alternative of TOKEN_RE is a named group
            self.tokens.append((kind, m.group(kind), m.start(kind)))
        if text[self.pos :].strip():
            raise LiteralError(f"unexpected {text[self.pos :].strip()[:20]!r}", self.pos)
        self.i = 0
        self.depth = 0

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else ("end", "", len(self.text))

    def take(self, value: str | None = None):
        tok = self.peek()
        if tok[0] == "end" or (value is not None and tok[1] != value):
            raise LiteralError(f"expected {value or 'a value'}, found {tok[1] or 'end of text'!r}", tok[2])
        self.i += 1
        return tok

    def value(self) -> Any:
        kind, text, pos = self.take()
        if kind == "str":
            parts = [_unquote(text)]
            while self.peek()[0] == "str":
                parts.append(_unquote(self.take()[1]))
            return "".join(parts)
        if kind == "num":
            if len(text) > MAX_NUMBER_CHARS:
                raise LiteralError(f"number of {len(text):,} characters", pos)
            return float(text.replace("_", "")) if re.search(r"[.eEn]", text) else int(text.replace("_", ""))
        if text in ("{", "[", "(") or (kind == "name" and self.peek()[1] == "("):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise LiteralError(f"nested deeper than {MAX_DEPTH}", pos)
            try:
                return self.nested(kind, text)
            finally:
                self.depth -= 1
        if kind == "name":
            if text in CONSTANTS:
                return CONSTANTS[text]
            raise LiteralError(f"unknown name {text!r}", pos)
        if text == "<":  # <PullStatus.RUN_TASK: 'run_task'> style enum reprs
            depth, out = 1, []
            while depth:
                tok = self.take()
                depth += {"<": 1, ">": -1}.get(tok[1], 0)
                out.append(tok[1])
            return "".join(out[:-1])
        raise LiteralError(f"unexpected {text!r}", pos)

    def nested(self, kind: str, text: str) -> Any:
        if kind == "name":
            return self.call(text)
        if text == "{":
            return self.items("}", dict)
        return self.items("]" if text == "[" else ")", list)

    def items(self, close: str, kind):
        out: Any = {} if kind is dict else []
        while self.peek()[1] != close:
            key = self.value()
            if kind is dict:
                self.take(":")
                out[key] = self.value()
            else:
                out.append(key)
            if self.peek()[1] != close:
                self.take(",")
        self.take(close)
        return out

    def call(self, name: str) -> dict:
        self.take("(")
        out: dict[str, Any] = {"__type__": name}
        while self.peek()[1] != ")":
            key = self.take()[1]
            self.take("=")
            out[key] = self.value()
            if self.peek()[1] != ")":
                self.take(",")
        self.take(")")
        return out


def parse_literal(text: str) -> Any:
    """A Python literal / dataclass repr as plain data. Raises LiteralError (with .pos)."""
    parser = _Parser(text)
    value = parser.value()
    if parser.peek()[0] != "end":
        raise LiteralError(f"trailing text {parser.peek()[1]!r}", parser.peek()[2])
    return value


def from_dict(data: dict, source: str = "get_status") -> JobStatus | None:
    """JobStatus from get_status fields (a parsed repr or a JSON object); None if not one;
    EvidenceError (naming `source`) when it is one with a malformed field."""
    if not isinstance(data, dict) or not {"stage", "completed", "total"} <= set(data):
        return None
    try:
        return JobStatus(**check(data))
    except ValueError as exc:
        raise EvidenceError(f"{source}: get_status {exc}") from None


def check(data: dict) -> dict[str, Any]:
    """The JobStatus fields of `data`, each of its type (None: the default); ValueError naming the first
    field that is not. A whole float counts as a count; worker ids become strings."""
    fields: dict[str, Any] = {}
    for key in JobStatus.__dataclass_fields__:
        value = data.get(key)
        if value is None:
            continue
        if key in COUNTS:
            value = _count(key, value)
        elif key in ("stage", "fatal_error"):
            _want(key, value, isinstance(value, str), "a string")
        elif key == "done":
            _want(key, value, isinstance(value, bool), "true or false")
        else:
            value = _workers(value)
        fields[key] = value
    return fields


def _count(key: str, value: Any) -> int:
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    ok = whole and not isinstance(value, bool) and jobstore.in_range(value)
    _want(key, value, ok, "a whole number below 2^63")
    return int(value)


def _workers(value: Any) -> dict[str, dict[str, Any]]:
    _want("workers", value, isinstance(value, dict), "an object of worker id -> worker")
    workers = {}
    for wid, worker in value.items():
        if isinstance(worker, str):
            worker = {"state": worker}
        where = f"workers[{str(wid)[:60]!r}]"
        _want(where, worker, isinstance(worker, dict), "an object or a state")
        state, age = worker.get("state"), worker.get("last_seen_ago")
        _want(f"{where}.state", state, state is None or isinstance(state, str), "a string")
        number = isinstance(age, (int, float)) and not isinstance(age, bool) and jobstore.in_range(age)
        _want(f"{where}.last_seen_ago", age, age is None or number, "a number of seconds")
        workers[str(wid)] = worker
    return workers


def _want(key: str, value: Any, ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"field {key} is {_shown(value)}, not {what}")


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 1 << 64:
        return f"an integer of about {int(abs(value).bit_length() * 0.30103) + 1:,} digits"
    if isinstance(value, (dict, list, tuple)):
        return f"a {type(value).__name__} of {len(value)}"
    if isinstance(value, (int, float, str)):
        return repr(value)[:60]
    return type(value).__name__


def parse(text: str, source: str) -> JobStatus | None:
    """get_status text in any of its forms; None when it is not one; ZdebugError when it is one but broken."""
    body = text.strip()
    if body.startswith('"'):
        try:
            body = jobstore.parse_json(body)
        except (ValueError, RecursionError) as exc:
            raise EvidenceError(f"{source}:{getattr(exc, 'lineno', 1)}: broken JSON string ({exc})") from None
        if not isinstance(body, str):
            return None
        body = body.strip()
    elif body.startswith("{"):
        try:
            data = jobstore.parse_json(body)
        except (ValueError, RecursionError):
            return None
        return from_dict(data, source)
    if not body.startswith("JobStatus("):
        return None
    try:
        data = parse_literal(body)
    except RecursionError:  # a backstop: MAX_DEPTH is far below Python's limit
        raise EvidenceError(f"{source}:1: unreadable JobStatus repr (nested too deeply)") from None
    except LiteralError as exc:
        line = body.count("\n", 0, exc.pos) + 1
        raise EvidenceError(f"{source}:{line}: unreadable JobStatus repr ({exc})") from None
    return from_dict(data, source)
