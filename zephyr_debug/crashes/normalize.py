"""Masks as data: replace what varies between runs (addresses, pids, temp dirs, ids, values)
with stable tokens while keeping what identifies code. The masks live in `rules.toml`."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from zephyr_debug.errors import ZdebugError

RULES_FILE = Path(__file__).with_name("rules.toml")
# A traceback's exception line: `KeyError: 'x'`, `pyarrow.lib.ArrowInvalid: ...`, `StopIteration`.
EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::(?: (.*)|$)|$)")


@dataclass(frozen=True)
class Mask:
    name: str
    regex: re.Pattern
    token: str
    scope: str  # text | message
    needs: tuple[str, ...]  # run only when the text holds one of these


@cache
def rules(path: Path = RULES_FILE) -> dict:
    """The parsed rules file (masks compiled)."""
    try:
        data = tomllib.loads(path.read_text())
        data["masks"] = [
            Mask(m["name"], re.compile(m["regex"]), m["token"], m["scope"], tuple(m["needs"])) for m in data.pop("mask")
        ]
    except (OSError, ValueError, KeyError, re.error) as exc:
        raise ZdebugError(f"{path}: bad crash rules ({exc})") from None
    return data


class Normalizer:
    """Applies the masks; `message()` is memoized (messages repeat across crashes)."""

    def __init__(self, masks: list[Mask] | None = None, cache_size: int = 200_000):
        masks = rules()["masks"] if masks is None else masks
        self.text_masks = [(m.regex, m.token, m.needs) for m in masks if m.scope == "text"]
        self.message_masks = [(m.regex, m.token, m.needs) for m in masks if m.scope == "message"]
        self._messages: dict[str, str] = {}
        self._cache_size = cache_size

    def text(self, line: str) -> str:
        return _apply(self.text_masks, line)

    def message(self, message: str) -> str:
        """Template of an exception message: text masks, then quoted values and numbers."""
        template = self._messages.get(message)
        if template is None:
            template = _apply(self.message_masks, self.text(message))
            if len(self._messages) >= self._cache_size:
                self._messages.clear()
            self._messages[message] = template
        return template

    def report(self, text: str) -> str:
        """A whole crash report normalized: every line masked, exception messages templated."""
        out = []
        for line in text.splitlines():
            match = EXCEPTION_LINE.match(line)
            if match and match.group(2) is not None and not line.startswith(("Traceback", "File ")):
                out.append(f"{match.group(1)}: {self.message(match.group(2))}")
            else:
                out.append(self.text(line))
        return "\n".join(out)


def _apply(masks: list[tuple], text: str) -> str:
    for regex, token, needs in masks:
        for need in needs:
            if need in text:
                text = regex.sub(token, text)
                break
    return text
