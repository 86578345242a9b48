"""How a finding looks in a terminal: one headline with its cost, indented evidence, the next
commands on their own lines (so they are never cut and paste as they are)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from zephyr_debug.findings import ERROR, INFO, KINDS, Finding

if TYPE_CHECKING:
    from zephyr_debug.analyze.analysis import Analysis
from zephyr_debug.render.output import safe

SEVERITY_STYLE = {ERROR: "bold red", "warning": "yellow", INFO: "dim"}
INDENT = "     "


def headline(f: Finding, rank: int | None = None) -> Text:
    """`1. error crash-loop (+oom)  title · cost`, built from styled parts (never markup made from
    evidence or registry strings, which may be empty or hold brackets)."""
    causes = f" (+{', '.join(c for c in f.causes if c != f.kind)})" if len(f.causes) > 1 else ""
    cost = f.cost.sentence()
    text = Text()
    if rank is not None:
        text.append(f"{rank}.", style="bold").append(" ")
    text.append(safe(f.severity), style=SEVERITY_STYLE.get(f.severity, "")).append(" ")
    kind = KINDS.get(f.kind)
    text.append(safe(f.kind), style=kind.style if kind else "")
    text.append(f"{safe(causes)}  {safe(f.title)}")
    if cost:
        text.append(f" · {safe(cost)}", style="dim")
    return text


def show(con: Console, f: Finding, rank: int | None = None, evidence: int = 4) -> None:
    con.print(headline(f, rank), soft_wrap=False)
    for line in f.evidence[:evidence]:
        _hanging(con, "- ", line)
    if len(f.evidence) > evidence:
        con.print(f"{INDENT}(+{len(f.evidence) - evidence} more lines: --json shows all)", style="dim")
    if f.saving is not None:
        _hanging(con, "", f.saving.text(), style="green")
    for step in f.next:
        con.print(Text(INDENT + "next: ") + Text(safe(step), style="bold cyan"), soft_wrap=True)


def cannot_tell(con: Console, a: Analysis) -> None:
    """What the evidence could not show (coverage.blind), each with what to fetch."""
    for line in a.cannot_tell:
        con.print(Text("cannot tell: ", style="bold yellow") + Text(safe(line)))


def _hanging(con: Console, bullet: str, line: str, style: str = "") -> None:
    """An evidence line wrapped with a hanging indent (continuations under its first word)."""
    width = max(con.width - len(INDENT) - len(bullet), 20)
    words, rows, row = safe(line).split(" "), [], ""
    for word in words:
        if row and len(row) + 1 + len(word) > width:
            rows.append(row)
            row = word
        else:
            row = f"{row} {word}" if row else word
    rows.append(row)
    for i, text in enumerate(rows):
        con.print(Text(INDENT + (bullet if i == 0 else " " * len(bullet)) + text, style=style), soft_wrap=True)
