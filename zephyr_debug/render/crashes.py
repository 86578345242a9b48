"""Rich views of `zdebug crashes`: crash rows, groups with examples, normalized reports.
Line-oriented (not tables): crash messages are long and terminals are 80 columns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.padding import Padding

from zephyr_debug.render.output import clean, console, err_console, when

if TYPE_CHECKING:
    from zephyr_debug.crashes.cluster import CrashGroup

KIND_STYLE = {"task": "red", "infra": "yellow", "oom": "magenta", "segv": "bold red", "exit": "red"}
MAX_EXAMPLES = 5
MAX_LISTED = 8
MAX_VARIANTS = 3  # message templates listed per group in text (JSON has them all)
INDENT = 6  # a group's detail lines hang under its headline


def _listed(values: list) -> str:
    if not values:
        return "-"
    shown = ", ".join(map(str, values[:MAX_LISTED]))
    return shown + (f" (+{len(values) - MAX_LISTED})" if len(values) > MAX_LISTED else "")


def _kind(kind: str) -> str:
    return f"[{KIND_STYLE.get(kind, 'white')}]{kind:<5}[/]"


def _warn(warnings: list[str]) -> None:
    con = err_console()
    for warning in warnings:
        con.print(f"[yellow]warning:[/] {clean(warning)}")


def _attempts(attempts) -> str:
    """Attempts as people count them: the first is 1 (Zephyr's are 0-based)."""
    return _listed([a + 1 for a in attempts])


def _exit(code: int | None, signal: str | None) -> str:
    if code is None:
        return signal or ""
    return f"exit code {code}" + (f" ({signal})" if signal else "")


def rows(data: dict, warnings: list[str]) -> None:
    con = console()
    crashes = data["crashes"]
    con.print(f"[bold]{len(crashes)} crash(es)[/] in {clean(data['source'])}")
    for r in crashes:
        where = (
            "-"
            if r["shard"] is None
            else f"shard {r['shard']}" + ("" if r["attempt"] is None else f" attempt {r['attempt'] + 1}")
        )
        con.print(
            f"{when(r['ts'])}  {_kind(r['kind'])}  {r['fingerprint'][:8]}  {clean(where)}  {clean(r['worker'] or '-')}"
        )
        con.print(
            f"    [bold]{clean(r['exception'])}[/]: {clean(r['raw_message'] or r['message'])}  "
            f"[dim]{clean(r['source'])}[/]"
        )
    if crashes:
        con.print(f"  next: [bold cyan]zdebug crashes {clean(data['source'])} --dedupe[/]")
    _warn(warnings)


def _variants(g: CrashGroup) -> str:
    shown = "; ".join(f"{n}× {t}" for t, n in g.variants[:MAX_VARIANTS])
    return shown + (f"; (+{len(g.variants) - MAX_VARIANTS} more)" if len(g.variants) > MAX_VARIANTS else "")


def groups(data: dict, warnings: list[str]) -> None:
    con = console()
    groups: list[CrashGroup] = data["groups"]
    total = sum(g.count for g in groups)
    con.print(f"[bold]{total} crash(es) in {len(groups)} group(s)[/] in {clean(data['source'])}")
    for i, g in enumerate(groups, 1):
        con.print(f"#{i:<3} {g.count:>5}×  {_kind(g.kind)}  [bold]{clean(g.exception)}[/]")
        details = [f"{clean(g.raw_message)}"]
        if g.message != g.raw_message:
            details.append(f"[dim]template:[/] {clean(g.message)}")
        if g.exit_code is not None or g.signal:
            details.append(clean(_exit(g.exit_code, g.signal)))
        if len(g.variants) > 1:
            details.append(f"[dim]{len(g.variants)} messages:[/] {clean(_variants(g))}")
        details.append(
            f"shards {clean(_listed(list(g.shards)))} · {len(g.workers)} worker(s) · attempts "
            f"{_attempts(g.attempts)} · {when(g.first_seen)} → {when(g.last_seen)} · {g.fingerprint}"
        )
        for line in details:
            con.print(Padding(line, (0, 0, 0, INDENT), expand=False))
    for i, g in enumerate(groups[:MAX_EXAMPLES], 1):
        con.rule(f"#{i} {g.fingerprint} · {g.count}× {g.kind}")
        if g.wrapper:
            con.print(f"[dim]wrapped as:[/] {clean(g.wrapper)}")
        if g.frames:
            con.print(f"[dim]frames:[/] {clean(' ← '.join(g.frames))}")
        con.print(f"[dim]members:[/] {clean(_listed(list(g.members)))}")
        con.print(clean(g.example))
        for d in g.deterministic:
            con.print(
                f"[bold red]deterministic crasher:[/] {clean(d.stage or '')} shard {d.shard} hit this "
                f"{d.attempts} times on {len(d.workers)} worker(s): retrying will not help "
                f"(Zephyr retries infra failures up to 20 times)"
            )
            con.print(f"  next: [bold cyan]zdebug crashes {clean(data['source'])} --shard {d.shard}[/]")
    if len(groups) > MAX_EXAMPLES:
        con.print(f"[dim]{len(groups) - MAX_EXAMPLES} more group(s): --json shows all[/]")
    _warn(warnings)


def normalized(data: dict, warnings: list[str]) -> None:
    con = console()
    for r in data["reports"]:
        con.rule(f"{clean(r['source'])} · {r['kind']} · {r['fingerprint']}")
        con.print(clean(r["normalized"]))
    if not data["reports"]:
        con.print("no crash report found")
    _warn(warnings)
