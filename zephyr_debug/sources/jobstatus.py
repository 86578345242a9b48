"""get_status output -> JobStatus: the dataclass repr (as `iris actor call … get_status` prints it,
inside a JSON string with non-ASCII escaped), the bare repr, or a plain JSON object.

The repr is parsed by a small tokenizer over Python literals (never eval): strings, numbers,
True/False/None, dicts, lists/tuples and `Name(key=value, …)` calls (returned as dicts).
"""

from __future__ import annotations

import json
import re
from typing import Any

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
            return chr(int(esc[1:], 16))
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
            return float(text.replace("_", "")) if re.search(r"[.eEn]", text) else int(text.replace("_", ""))
        if kind == "name":
            if self.peek()[1] == "(":
                return self.call(text)
            if text in CONSTANTS:
                return CONSTANTS[text]
            raise LiteralError(f"unknown name {text!r}", pos)
        if text == "{":
            return self.items("}", dict)
        if text in "[(":
            return self.items("]" if text == "[" else ")", list)
        if text == "<":  # <PullStatus.RUN_TASK: 'run_task'> style enum reprs
            depth, out = 1, []
            while depth:
                tok = self.take()
                depth += {"<": 1, ">": -1}.get(tok[1], 0)
                out.append(tok[1])
            return "".join(out[:-1])
        raise LiteralError(f"unexpected {text!r}", pos)

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


def from_dict(data: dict) -> JobStatus | None:
    """JobStatus from get_status fields (a parsed repr or a JSON object); None if not one."""
    if not isinstance(data, dict) or not {"stage", "completed", "total"} <= set(data):
        return None
    fields = {k: data[k] for k in JobStatus.__dataclass_fields__ if k in data}
    fields["workers"] = {
        str(k): v if isinstance(v, dict) else {"state": str(v)} for k, v in (fields.get("workers") or {}).items()
    }
    return JobStatus(**fields)


def parse(text: str, source: str) -> JobStatus | None:
    """get_status text in any of its forms; None when it is not one; ZdebugError when it is one but broken."""
    body = text.strip()
    if body.startswith('"'):
        try:
            body = json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise EvidenceError(f"{source}:{getattr(exc, 'lineno', 1)}: broken JSON string ({exc})") from None
        if not isinstance(body, str):
            return None
        body = body.strip()
    elif body.startswith("{"):
        try:
            return from_dict(json.loads(body))
        except (ValueError, RecursionError):
            return None
    if not body.startswith("JobStatus("):
        return None
    try:
        return from_dict(parse_literal(body))
    except LiteralError as exc:
        line = body.count("\n", 0, exc.pos) + 1
        raise EvidenceError(f"{source}:{line}: unreadable JobStatus repr ({exc})") from None
