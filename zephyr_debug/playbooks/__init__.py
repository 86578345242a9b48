"""Playbooks: the `*.md` files of this package, one per failure pattern, with TOML front matter.
They ship inside the wheel and are read through `importlib.resources`.

    +++
    title = "…"
    causes = ["data-skew"]                # the findings this playbook answers (zdebug diagnose)
    faults = ["skew-shard:3:x12"]          # the reference job the tests run it on
    job = { workers = 3, shards = 8 }     # run_reference options
    live = false                          # true: commands run while the job is running
    prometheus = false                    # true (with live): a local Prometheus scrapes it
    settle_s = 3                          # live: seconds to let held shards age before the commands
    expect = ["data-skew"]                # what the commands' output must name
    +++

Every fenced ```bash block line that starts with `zdebug ` is a command the tests run,
with `$JOB` replaced by the job dir (`$URL`: the live coordinator, `$PROM`: the Prometheus
scraping it, `$RUN`: the execution id).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from importlib.resources import files
from importlib.resources.abc import Traversable

from zephyr_debug.errors import ZdebugError

ROOT = files(__name__)
_FRONT = re.compile(r"\A\+\+\+\n(.*?)\n\+\+\+\n", re.S)
_FENCE = re.compile(r"^```(?:bash|sh|console)\n(.*?)^```", re.S | re.M)


@dataclass
class Playbook:
    name: str
    path: Traversable
    title: str
    body: str
    faults: list[str] = field(default_factory=list)
    job: dict = field(default_factory=dict)
    live: bool = False
    prometheus: bool = False
    settle_s: float = 3.0
    expect: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)

    @property
    def commands(self) -> list[str]:
        lines = (line.strip() for block in _FENCE.findall(self.body) for line in block.splitlines())
        return [line for line in lines if line.startswith("zdebug ")]


def parse(path: Traversable) -> Playbook:
    text = path.read_text(encoding="utf-8")
    match = _FRONT.match(text)
    if not match:
        raise ZdebugError(f"{path}:1: playbook lacks its +++ front matter")
    try:
        meta = tomllib.loads(match.group(1))
    except tomllib.TOMLDecodeError as exc:
        raise ZdebugError(f"{path}: bad front matter ({exc})") from None
    name = path.name.removesuffix(".md")
    return Playbook(
        name=name,
        path=path,
        title=meta.get("title", name),
        body=text[match.end() :],
        faults=meta.get("faults", []),
        job=meta.get("job", {}),
        live=meta.get("live", False),
        prometheus=meta.get("prometheus", False),
        settle_s=meta.get("settle_s", 3.0),
        expect=meta.get("expect", []),
        causes=meta.get("causes", []),
    )


def all_playbooks(root: Traversable = ROOT) -> list[Playbook]:
    return [parse(p) for p in sorted(root.iterdir(), key=lambda p: p.name) if p.name.endswith(".md")]


def for_cause(root: Traversable = ROOT) -> dict[str, str]:
    """Finding cause -> playbook name, from the playbooks' `causes` lists."""
    return {cause: book.name for book in all_playbooks(root) for cause in book.causes}


def find(name: str, root: Traversable = ROOT) -> Playbook:
    books = {b.name: b for b in all_playbooks(root)}
    if name in books:
        return books[name]
    matches = [b for n, b in books.items() if name in n]
    if len(matches) == 1:
        return matches[0]
    raise ZdebugError(f"no playbook {name!r} (have: {', '.join(books)})")
