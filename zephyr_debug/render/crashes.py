"""Rich views of `zdebug crashes`: crash rows, groups, one group opened whole, normalized reports.
Line-oriented (not tables): crash messages are long and terminals are 80 columns. What a person
reads is real values (the latest event's message and report); the masked templates are the
grouping view and appear in `--json` only."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from rich.padding import Padding

from zephyr_debug.render.output import clean, console, err_console, when

if TYPE_CHECKING:
    from zephyr_debug.crashes.cluster import CrashGroup, Event
    from zephyr_debug.crashes.fingerprint import Fingerprinter

KIND_STYLE = {"task": "red", "infra": "yellow", "oom": "magenta", "segv": "bold red", "exit": "red"}
MAX_LISTED = 8
MAX_VARIANTS = 3  # message variants listed per group in text (JSON has them all)
MAX_SHOWN_LINES = 14  # lines of the latest report shown per group in the list
MAX_EVENTS = 200  # events listed by --group (JSON has the first MAX_MEMBERS)
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
    """Attempts as Zephyr numbers them (and JSON holds them): the first is 0."""
    return _listed(list(attempts))


def _exit(code: int | None, signal: str | None) -> str:
    if code is None:
        return signal or ""
    return f"exit code {code}" + (f" ({signal})" if signal else "")


def _where(stage: str | None, shard: int | None, attempt: int | None) -> str:
    parts = [stage or "stage unknown"]
    if shard is not None:
        parts.append(f"shard {shard}")
    if attempt is not None:
        parts.append(f"attempt {attempt}")  # as Zephyr prints it: the first is 0
    return " ".join(parts)


def _place(location: str | None) -> str:
    """A crash's FILE:LINE, inside the job store as `<job id>/FILE:LINE` (short enough to keep whole)."""
    from zephyr_debug import jobstore

    root = str(jobstore.jobs_root()) + "/"
    return location[len(root) :] if location and location.startswith(root) else location or "-"


def rows(data: dict, warnings: list[str]) -> None:
    con = console()
    crashes = data["crashes"]
    job = f" · job {clean(data['job'])}" if data.get("job") else ""
    con.print(f"[bold]{len(crashes)} crash(es)[/] in {clean(data['source'])}{job}")
    for r in crashes:
        con.print(
            f"{when(r['ts'])}  {_kind(r['kind'])}  {r['fingerprint'][:8]}  "
            f"{clean(_where(r['stage'], r['shard'], r['attempt']))}  {clean(r['worker'] or '-')}"
        )
        con.print(
            f"    [bold]{clean(r['exception'])}[/]: {clean(r['raw_message'] or r['exception'])}  "
            f"[dim]{clean(_place(r['source']))}[/]"
        )
    if crashes:
        con.print(f"  next: [bold cyan]zdebug crashes {clean(_q(data['source']))} --dedupe[/]")
    _warn(warnings)


def _q(source: str) -> str:
    return shlex.quote(source)


def _shards_by_stage(g: CrashGroup) -> str:
    """`stage0-Map: shards 1, 5 · stage1-Reduce: shard 2` (shard ids restart per stage)."""
    by: dict[str | None, list[int]] = {}
    for stage, shard, _ in g.runs:
        by.setdefault(stage, []).append(shard)
    if not by:
        return ", ".join(g.stages) if g.stages else "stage unknown"
    parts = []
    for stage, shards in by.items():
        noun = "shard" if len(shards) == 1 else "shards"
        parts.append(f"{stage or 'stage unknown'}: {noun} {_listed(shards)}")
    return " · ".join(parts)


def _variants(g: CrashGroup) -> list[str]:
    """`N variants`, each as a real message (the templates are JSON's)."""
    if len(g.variants) < 2:
        return []
    out = [f"[dim]{len(g.variants)} variants, e.g.:[/]"]
    for v in g.variants[:MAX_VARIANTS]:
        out.append(f"  {v.n}× {clean(v.example) if v.example else '[dim](no message)[/]'}")
    if len(g.variants) > MAX_VARIANTS:
        out.append(f"  [dim](+{len(g.variants) - MAX_VARIANTS} more)[/]")
    return out


def _frames(frames: tuple[str, ...]) -> str:
    """`pkg.mod:f ← g ← other:h`: a caller in the module of the frame before it shows its function."""
    out, module = [], None
    for frame in frames:
        mod, _, function = frame.rpartition(":")
        out.append(function if mod == module else frame)
        module = mod
    return " ← ".join(out)


def _headline(g: CrashGroup) -> str:
    return (
        f"[bold]{clean(g.exception)}[/]: {clean(g.raw_message)}" if g.raw_message else f"[bold]{clean(g.exception)}[/]"
    )


def _detail(g: CrashGroup, source: str) -> list[str]:
    lines = [_headline(g)]
    if g.exit_code is not None or (g.signal and g.signal != g.exception):
        lines.append(clean(_exit(g.exit_code, g.signal)))
    where = [clean(_shards_by_stage(g))]
    if g.workers:
        where.append(f"{len(g.workers)} worker(s)")
    if g.attempts:
        where.append(f"attempts {_attempts(g.attempts)}")
    if g.first_seen is not None:
        seen = when(g.first_seen)
        where.append(seen if g.last_seen == g.first_seen else f"{seen} → {when(g.last_seen)}")
    lines.append(" · ".join(where))
    if g.frames:
        lines.append(f"[dim]at[/] {clean(_frames(g.frames[:3]))}")
    lines += _variants(g)
    for d in g.deterministic:
        lines.append(
            f"[bold red]deterministic crasher:[/] {clean(d.stage or 'stage unknown')} shard {d.shard} hit this "
            f"{d.attempts} times on {len(d.workers)} worker(s): retrying will not help"
            + (" (Zephyr retries infra failures up to 20 times)" if g.kind in ("segv", "oom", "infra", "exit") else "")
        )
    if g.joined:
        lines.append(f"[dim]{g.joined} report(s) printed without frames or source lines joined this group[/]")
    lines.append(f"[dim]open:[/] zdebug crashes {clean(_q(source))} --group {g.fingerprint[:8]}")
    return lines


def groups(data: dict, warnings: list[str]) -> None:
    from zephyr_debug.crashes.cluster import readable

    con = console()
    fp: Fingerprinter = data["fingerprinter"]
    groups: list[CrashGroup] = data["groups"]
    total = sum(g.count for g in groups)
    job = f" · job {clean(data['job'])}" if data.get("job") else ""
    con.print(f"[bold]{total} crash(es) in {len(groups)} group(s)[/] in {clean(data['source'])}{job}")
    if data.get("compared_with"):
        runs = data["compared_with"]
        new = sum(g.history == "new" for g in groups)
        back = sum(g.history == "regressed" for g in groups)
        con.print(
            f"vs {len(runs)} earlier run(s) of this pipeline (last: {clean(runs[0])}): "
            f"[bold]{new} new[/], {back} regressed, {len(groups) - new - back} recurring"
        )
    for i, g in enumerate(groups, 1):
        tag = f" · {g.history.upper() if g.history == 'new' else g.history}" if g.history else ""
        con.rule(f"#{i} {g.count}× {g.kind} · {g.fingerprint[:8]}{tag}", align="left")
        if g.history == "regressed":
            con.print(
                Padding(
                    f"[bold]regressed:[/] gone from the last run, seen in {clean(g.last_seen_in)}",
                    (0, 0, 0, 2),
                    expand=False,
                )
            )
        for line in _detail(g, data["source"]):
            con.print(Padding(line, (0, 0, 0, 2), expand=False))
        if g.latest:
            con.print(Padding(f"[dim]latest{_event_place(g.latest_at)}:[/]", (0, 0, 0, 2), expand=False))
            con.print(Padding(clean(readable(g.latest, fp, MAX_SHOWN_LINES)), (0, 0, 0, 4), expand=False))
    _warn(warnings)


def _event_place(e: Event | None) -> str:
    if e is None:
        return ""
    bits = [when(e.ts) if e.ts is not None else None, _where(e.stage, e.shard, e.attempt), e.worker]
    return " (" + ", ".join(clean(b) for b in bits if b) + ")"


def group(data: dict, warnings: list[str]) -> None:
    """One group whole: its first and latest event raw, every event in time order, the verdict
    and its reason, the playbook."""
    from zephyr_debug import playbooks

    con = console()
    g: CrashGroup = data["group"]
    job = f" · job {clean(data['job'])}" if data.get("job") else ""
    con.print(f"[bold]group {g.fingerprint}[/]: {g.count}× {_kind(g.kind)} in {clean(data['source'])}{job}")
    for line in _detail(g, data["source"])[:-1]:
        con.print(Padding(line, (0, 0, 0, 2), expand=False))
    verdict, reason = g.verdict()
    style = "bold red" if verdict == "deterministic" else "bold"
    con.print(f"[{style}]verdict: {verdict}[/] — {clean(reason)}")
    events = list(g.events)
    con.rule(f"{len(events)} event(s) in time order" + (f" (of {g.count})" if g.count > len(events) else ""))
    for e in events[:MAX_EVENTS]:
        con.print(
            f"{when(e.ts)}  {clean(_where(e.stage, e.shard, e.attempt))}  {clean(e.worker or '-')}  "
            f"[dim]{clean(e.source)}[/]"
        )
    if len(events) > MAX_EVENTS:
        con.print(f"[dim]… {len(events) - MAX_EVENTS} more: --json lists them[/]")
    con.rule(f"first event{_event_place(g.first_at)}")
    con.print(clean(g.first))
    if g.count > 1:
        con.rule(f"latest event{_event_place(g.latest_at)}")
        con.print(clean(g.latest))
    name = playbooks.for_cause().get(g.playbook_cause())
    con.rule()
    if name:
        con.print(f"playbook: [bold cyan]zdebug playbook {name}[/]")
    for d in g.deterministic[:3]:
        con.print(f"  next: [bold cyan]zdebug crashes {clean(_q(data['source']))} --shard {d.shard}[/]")
    _warn(warnings)


def normalized(data: dict, warnings: list[str]) -> None:
    con = console()
    for r in data["reports"]:
        con.rule(f"{clean(r['source'])} · {r['kind']} · {r['fingerprint']}")
        con.print(clean(r["normalized"]))
    if not data["reports"]:
        con.print("no crash report found")
    _warn(warnings)
