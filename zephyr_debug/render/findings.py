"""How a finding looks in a terminal: one headline with its cost, indented evidence, the next
commands on their own lines (so they are never cut and paste as they are)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from zephyr_debug.findings import ERROR, INFO, Finding
from zephyr_debug.render.output import clean, safe

SEVERITY_STYLE = {ERROR: "bold red", "warning": "yellow", INFO: "dim"}
KIND_STYLE = {
    "all-workers-dead": "bold red",
    "crash-loop": "red",
    "oom": "red",
    "aborted": "red",
    "dead-holder": "magenta",
    "stuck": "yellow",
    "stalled": "yellow",
    "slow-worker": "cyan",
    "data-skew": "blue",
    "undetermined": "white",
    "recovered": "green",
    "throughput-cliff": "cyan",
    "throughput-drop": "cyan",
    "counter-per-item": "blue",
    "counter-few-shards": "blue",
    "flapping-worker": "magenta",
    "requeue-burst": "magenta",
}
INDENT = "     "


def headline(f: Finding, rank: int | None = None) -> Text:
    causes = f" (+{', '.join(c for c in f.causes if c != f.kind)})" if len(f.causes) > 1 else ""
    cost = f.cost.sentence()
    text = Text.from_markup(
        (f"[bold]{rank}.[/] " if rank is not None else "")
        + f"[{SEVERITY_STYLE.get(f.severity, '')}]{f.severity}[/] "
        + f"[{KIND_STYLE.get(f.kind, '')}]{f.kind}[/]{clean(causes)}  {clean(f.title)}"
        + (f" [dim]· {clean(cost)}[/]" if cost else "")
    )
    return text


def show(con: Console, f: Finding, rank: int | None = None, evidence: int = 4) -> None:
    con.print(headline(f, rank), soft_wrap=False)
    for line in f.evidence[:evidence]:
        _hanging(con, "- ", line)
    if len(f.evidence) > evidence:
        con.print(f"{INDENT}(+{len(f.evidence) - evidence} more lines: --json shows all)", style="dim")
    for step in f.next:
        con.print(Text(INDENT + "next: ") + Text(safe(step), style="bold cyan"), soft_wrap=True)


def _hanging(con: Console, bullet: str, line: str) -> None:
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
        con.print(Text(INDENT + (bullet if i == 0 else " " * len(bullet)) + text), soft_wrap=True)
